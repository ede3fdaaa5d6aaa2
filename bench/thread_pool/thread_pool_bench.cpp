// The cost of a parallel region (platform/thread_pool.h) against an OpenMP
// region (libgomp) of the same threads, back to back (the workers polling)
// and after a pause of 200 us (the pool's workers asleep by then), each
// region splitting `work` iterations of a dependent multiply-add chain over
// its slots. Time per region; decode runs ~190 regions per token.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "platform/thread_pool.h"

namespace {

// A chain the compiler cannot fold: ~1 ns an iteration.
std::uint64_t chain(std::uint64_t x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}

void pause_if(bool pause) {
  if (pause) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

void BM_PoolRegion(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const std::int64_t work = state.range(1);
  const bool pause = state.range(2) != 0;
  latte::ThreadPool pool(threads);
  std::atomic<std::uint64_t> sink{0};
  for (auto _ : state) {
    state.PauseTiming();
    pause_if(pause);
    state.ResumeTiming();
    pool.run(threads, [&](int s, int n) { sink.fetch_add(chain(static_cast<std::uint64_t>(s), work / n)); });
  }
  benchmark::DoNotOptimize(sink.load());
}

void BM_OmpRegion(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const std::int64_t work = state.range(1);
  const bool pause = state.range(2) != 0;
  std::atomic<std::uint64_t> sink{0};
  for (auto _ : state) {
    state.PauseTiming();
    pause_if(pause);
    state.ResumeTiming();
#pragma omp parallel num_threads(threads)
    sink.fetch_add(chain(static_cast<std::uint64_t>(omp_get_thread_num()), work / omp_get_num_threads()));
  }
  benchmark::DoNotOptimize(sink.load());
}

void args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"threads", "work", "pause"});
  for (int pause : {0, 1})
    for (int work : {0, 2000, 20000}) b->Args({2, work, pause});
  b->UseRealTime();
}

BENCHMARK(BM_PoolRegion)->Apply(args);
BENCHMARK(BM_OmpRegion)->Apply(args);

}  // namespace

BENCHMARK_MAIN();

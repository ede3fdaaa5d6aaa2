#include "tools/read_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "platform/thread_pool.h"

namespace latte {

std::uint32_t read_words(const std::uint32_t* p, std::size_t n, int threads) {
  std::atomic<std::uint32_t> total{0};
  parallel_slots(threads, [&](int s, int ns) {
    std::uint32_t sum = 0;
    for (std::size_t i = n * s / ns; i < n * (s + 1) / ns; ++i) sum += p[i];
    total.fetch_add(sum, std::memory_order_relaxed);
  });
  return total.load();
}

struct ReadProbe::State {
  ThreadPool pool;  // exactly `threads`, as a session of that many runs on
  int threads;
  std::vector<std::uint32_t> buf;
  State(std::size_t bytes, int t) : pool(std::max(t, 1), /*allow_fewer=*/true), threads(t), buf(bytes / sizeof(std::uint32_t)) {}
};

ReadProbe::ReadProbe(std::size_t bytes, int threads) : s_(new State(bytes, threads)) {
  const PoolScope scope(s_->pool);
  const std::size_t n = s_->buf.size();
  std::uint32_t* p = s_->buf.data();
  parallel_slots(threads, [&](int s, int ns) {
    for (std::size_t i = n * s / ns; i < n * (s + 1) / ns; ++i) p[i] = static_cast<std::uint32_t>(i);
  });
}

ReadProbe::~ReadProbe() { delete s_; }

double ReadProbe::measure(int passes) {
  const PoolScope scope(s_->pool);
  const std::size_t n = s_->buf.size();
  double best = 0;
  volatile std::uint32_t sink = 0;
  for (int pass = 0; pass < passes; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    sink = sink + read_words(s_->buf.data(), n, s_->threads);
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n * sizeof(std::uint32_t)) / t);
  }
  return best;
}

double measure_read_bandwidth(std::size_t bytes, int threads, int passes) {
  return ReadProbe(bytes, threads).measure(passes);
}

}  // namespace latte

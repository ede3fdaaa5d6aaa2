// The softmax's exponentials and their sum (exp(x - shift) in place), one
// thread: each ISA's kernel against the scalar std::exp loop and the double
// reference, over a block of scores as the naive prefill form makes them.
//
//   bench_softmax_f32                   elements per second (items_per_second)
#include <benchmark/benchmark.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "kernels/softmax_f32/softmax_f32.h"

namespace {

using latte::Isa;

// kind: 0 the ISA's kernel, 1 the float std::exp loop, 2 the double reference
void softmax_bench(benchmark::State& state, Isa isa, int kind) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<float> x0(n), x(n);
  for (std::size_t i = 0; i < n; ++i) x0[i] = 6.f * std::sin(0.37f * static_cast<float>(i));
  const auto& k = latte::kernels::softmax_f32_kernels(isa);
  for (auto _ : state) {
    x = x0;  // in place: a fresh copy each time
    float sum = 0.f;
    if (kind == 0) {
      sum = k.exp_shift_sum(x.data(), n, 6.f);
    } else if (kind == 1) {
      for (std::size_t i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - 6.f));
    } else {
      sum = latte::kernels::softmax_f32_exp_shift_sum_ref(x.data(), n, 6.f);
    }
    benchmark::DoNotOptimize(sum);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

const bool registered = [] {
  auto add = [](const std::string& name, Isa isa, int kind) {
    // 128: a cache tile's tokens; 512: a prefill chunk's
    benchmark::RegisterBenchmark(name.c_str(), softmax_bench, isa, kind)->Arg(128)->Arg(512);
  };
  for (Isa isa : latte::supported_isas())
    if (isa != Isa::ref) add(std::string("softmax/") + latte::isa_name(isa), isa, 0);
  add("softmax/scalar_expf", Isa::ref, 1);
  add("softmax/reference_double", Isa::ref, 2);
  return true;
}();

}  // namespace

BENCHMARK_MAIN();

// The f32 dot product, one thread: each ISA's kernel against the double
// reference, at the widths the model takes dot products of (a head's query
// and key, a latent row, a hidden state).
//
//   bench_dot_f32                       elements per second (items_per_second)
#include <benchmark/benchmark.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/dot_f32/dot_f32.h"
#include "kernels/isa.h"

namespace {

using latte::Isa;

// reference: the double loop instead of the ISA's kernel
void dot_bench(benchmark::State& state, Isa isa, bool reference) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<float> a(n), b(n);
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = std::sin(0.37f * static_cast<float>(i));
    b[i] = std::cos(0.11f * static_cast<float>(i));
  }
  const auto& k = latte::kernels::dot_f32_kernels(isa);
  for (auto _ : state) {
    float r = reference ? latte::kernels::dot_f32_ref(a.data(), b.data(), n) : k.dot(a.data(), b.data(), n);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

const bool registered = [] {
  auto add = [](const std::string& name, Isa isa, bool reference) {
    // 192: a DeepSeek head's query . key (128 + 64); 576: a latent row
    // (512 + 64); 2048: V2-Lite's hidden state
    benchmark::RegisterBenchmark(name.c_str(), dot_bench, isa, reference)->Arg(192)->Arg(576)->Arg(2048);
  };
  for (Isa isa : latte::supported_isas())
    if (isa != Isa::ref) add(std::string("dot/") + latte::isa_name(isa), isa, false);
  add("dot/reference_double", Isa::ref, true);
  return true;
}();

}  // namespace

BENCHMARK_MAIN();

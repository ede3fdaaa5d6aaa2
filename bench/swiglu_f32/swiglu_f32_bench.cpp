// SwiGLU gating, silu(a) * b over an FFN's width, one thread: each ISA's
// kernel against the scalar std::exp loop Latte ran before it and the double
// reference.
//
//   bench_swiglu_f32                    elements per second (items_per_second)
#include <benchmark/benchmark.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "kernels/swiglu_f32/swiglu_f32.h"

namespace {

using latte::Isa;

void fill(std::vector<float>& a, std::vector<float>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = 4.f * std::sin(0.37f * static_cast<float>(i));
    b[i] = std::cos(0.11f * static_cast<float>(i));
  }
}

// kind: 0 the ISA's kernel, 1 the float std::exp loop, 2 the double reference
void swiglu_bench(benchmark::State& state, Isa isa, int kind) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<float> a0(n), b(n), a(n);
  fill(a0, b);
  const auto& k = latte::kernels::swiglu_f32_kernels(isa);
  for (auto _ : state) {
    a = a0;  // in place: a fresh copy each time (the same ~0.4 us for every variant at 10944)
    if (kind == 0) {
      k.silu_mul(a.data(), b.data(), n);
    } else if (kind == 1) {
      for (std::size_t i = 0; i < n; ++i) a[i] = a[i] / (1.f + std::exp(-a[i])) * b[i];
    } else {
      latte::kernels::swiglu_f32_ref(a.data(), b.data(), n);
    }
    benchmark::DoNotOptimize(a.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

const bool registered = [] {
  auto add = [](const std::string& name, Isa isa, int kind) {
    // 1408: a V2-Lite expert's width; 10944: its dense FFN's
    benchmark::RegisterBenchmark(name.c_str(), swiglu_bench, isa, kind)->Arg(1408)->Arg(10944);
  };
  for (Isa isa : latte::supported_isas())
    if (isa != Isa::ref) add(std::string("swiglu/") + latte::isa_name(isa), isa, 0);
  add("swiglu/scalar_expf", Isa::ref, 1);
  add("swiglu/reference_double", Isa::ref, 2);
  return true;
}();

}  // namespace

BENCHMARK_MAIN();

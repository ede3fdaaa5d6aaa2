// One body for every ISA: included only by swiglu_f32__<isa>.cpp.
#pragma once

#include "kernels/exp_f32_impl.h"
#include "kernels/swiglu_f32/swiglu_f32.h"

namespace latte::kernels {

template <class Arch>
void swiglu_f32_body(float* a, const float* b, std::size_t n) {
  using V = xsimd::batch<float, Arch>;
  constexpr std::size_t W = V::size;
  // NaN stays NaN through the division and product (the clamp may drop it
  // inside the exponential); +-inf gives +-inf (the formula's -inf / inf =
  // NaN becomes -inf: either way not finite)
  auto step = [](V x, V y) { return x / (V(1.f) + exp_clamped<Arch>(-x)) * y; };
  std::size_t i = 0;
  for (; i + W <= n; i += W)
    step(V::load_unaligned(a + i), V::load_unaligned(b + i)).store_unaligned(a + i);
  if (i < n) {  // the tail through one padded batch
    alignas(64) float xa[W] = {}, xb[W] = {};
    for (std::size_t k = 0; k < n - i; ++k) {
      xa[k] = a[i + k];
      xb[k] = b[i + k];
    }
    step(V::load_aligned(xa), V::load_aligned(xb)).store_aligned(xa);
    for (std::size_t k = 0; k < n - i; ++k) a[i + k] = xa[k];
  }
}

}  // namespace latte::kernels

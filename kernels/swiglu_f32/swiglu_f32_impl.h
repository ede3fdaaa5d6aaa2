// One body for every ISA: included only by swiglu_f32__<isa>.cpp.
#pragma once

#include "kernels/exp_f32_impl.h"
#include "kernels/swiglu_f32/swiglu_f32.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

template <class Arch>
void swiglu_f32_body(float* a, const float* b, std::size_t n) {
  using V = xsimd::batch<float, Arch>;
  constexpr std::size_t W = V::size;
  // Below -88 exp(-x) is clamped (~1.65e38), so x / (1 + e) would grow with
  // |x| (-2 at -3.4e38): take x * 0 there instead, -0 for a finite gate (silu
  // is below any float), NaN for -inf as the formula gives. A NaN gate stays
  // NaN through the numerator (the compare is false for it), so the
  // exponential need not keep it; +inf gives +inf.
  auto step = [](V x, V y) {
    const V q = x / (V(1.f) + exp_clamped_nan_dropped<Arch>(-x));
    return xsimd::select(x < V(-88.f), x * V(0.f), q) * y;
  };
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

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels

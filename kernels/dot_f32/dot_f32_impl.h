// One body for every ISA: included only by dot_f32__<isa>.cpp.
#pragma once

#include "kernels/isa_body_impl.h"

#include "kernels/dot_f32/dot_f32.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

template <class Arch>
float dot_f32_body(const float* a, const float* b, std::size_t n) {
  using V = xsimd::batch<float, Arch>;
  constexpr std::size_t W = V::size;
  V acc0(0.f), acc1(0.f);
  std::size_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    acc0 = xsimd::fma(V::load_unaligned(a + i), V::load_unaligned(b + i), acc0);
    acc1 = xsimd::fma(V::load_unaligned(a + i + W), V::load_unaligned(b + i + W), acc1);
  }
  for (; i + W <= n; i += W)
    acc0 = xsimd::fma(V::load_unaligned(a + i), V::load_unaligned(b + i), acc0);
  float s = xsimd::hadd(acc0 + acc1);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels

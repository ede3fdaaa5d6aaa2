// One body for every ISA: included only by softmax_f32__<isa>.cpp.
#pragma once

#include "kernels/exp_f32_impl.h"
#include "kernels/softmax_f32/softmax_f32.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

template <class Arch>
float softmax_f32_body(float* x, std::size_t n, float shift) {
  using V = xsimd::batch<float, Arch>;
  constexpr std::size_t W = V::size;
  const V s(shift);
  V acc0(0.f), acc1(0.f);
  std::size_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {  // two sums, so the adds do not wait on each other
    const V e0 = exp_clamped<Arch>(V::load_unaligned(x + i) - s);
    const V e1 = exp_clamped<Arch>(V::load_unaligned(x + i + W) - s);
    e0.store_unaligned(x + i);
    e1.store_unaligned(x + i + W);
    acc0 += e0;
    acc1 += e1;
  }
  for (; i + W <= n; i += W) {
    const V e = exp_clamped<Arch>(V::load_unaligned(x + i) - s);
    e.store_unaligned(x + i);
    acc0 += e;
  }
  float sum = xsimd::hadd(acc0 + acc1);
  if (i < n) {  // the tail through one padded batch (padding with -inf would give 1.6e-38 each: summed apart)
    alignas(64) float t[W] = {};
    for (std::size_t k = 0; k < n - i; ++k) t[k] = x[i + k];
    exp_clamped<Arch>(V::load_aligned(t) - s).store_aligned(t);
    for (std::size_t k = 0; k < n - i; ++k) {
      x[i + k] = t[k];
      sum += t[k];
    }
  }
  return sum;
}

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels

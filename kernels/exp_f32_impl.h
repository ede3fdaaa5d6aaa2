// exp(x) in f32 over an xsimd Arch, the one exponential of the kernel
// families (softmax, SwiGLU, mla_attn's float path): included by the per-ISA
// kernel bodies (*_impl.h) that need it. xsimd, but for 2^n (pow2i: per-ISA
// intrinsics, see there). Everything here is Arch-templated or in an
// anonymous namespace (per-TU copies), as the per-ISA objects require.
#pragma once

#include "kernels/isa_body_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

// 2^n for n a float holding an integer in [-126, 127]: the exponent bits.
// Intrinsics, not xsimd integer batches: on NEON those take the addresses of
// xsimd's inline vreinterpret wrappers, which then become weak symbols of
// this per-ISA object (isa_object_hygiene).
#if defined(__AVX512F__)
inline __m512 pow2i(__m512 n) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
}
#endif
#if defined(__AVX2__)
inline __m256 pow2i(__m256 n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}
#endif
#if defined(__aarch64__)
inline float32x4_t pow2i(float32x4_t n) {
  return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23));
}
#endif

}  // namespace

// exp(z) for z clamped to [-87, 88] (so 2^k stays a normal float; below,
// ~1.6e-38 instead of 0 or a subnormal; above, 1.65e38 instead of inf): k =
// round(z / ln 2), r = z - k ln 2 in two parts (Cody and Waite), exp(r) by
// Cephes' degree-7 polynomial for expf (within ~1 ulp on |r| <= ln 2 / 2).
// A NaN argument may come out finite (the clamp can drop it): for callers
// whose result carries x's NaN on another path (swiglu's numerator).
template <class Arch>
xsimd::batch<float, Arch> exp_clamped_nan_dropped(xsimd::batch<float, Arch> x) {
  using V = xsimd::batch<float, Arch>;
  const V z = xsimd::min(xsimd::max(x, V(-87.f)), V(88.f));
  const V k = xsimd::nearbyint(z * V(1.44269504088896341f));
  const V r = xsimd::fnma(k, V(-2.12194440e-4f), xsimd::fnma(k, V(0.693359375f), z));
  V p = V(1.9875691500e-4f);
  p = xsimd::fma(p, r, V(1.3981999507e-3f));
  p = xsimd::fma(p, r, V(8.3334519073e-3f));
  p = xsimd::fma(p, r, V(4.1665795894e-2f));
  p = xsimd::fma(p, r, V(1.6666665459e-1f));
  p = xsimd::fma(p, r, V(5.0000001201e-1f));
  p = xsimd::fma(p, r * r, r + V(1.f));
  return p * V(pow2i(static_cast<typename V::register_type>(k)));
}

// exp_clamped_nan_dropped, and NaN for NaN.
template <class Arch>
xsimd::batch<float, Arch> exp_clamped(xsimd::batch<float, Arch> x) {
  // the clamp may have dropped a NaN (xsimd 8's != is ordered: false for NaN)
  return xsimd::select(xsimd::isnan(x), x, exp_clamped_nan_dropped<Arch>(x));
}

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels

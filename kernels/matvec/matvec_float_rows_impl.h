// matvec's rows for float weights (F32, F16, BF16): f32 FMAs over the
// converted weights, no activation quantization. xsimd over the Arch, but
// for the F16 and BF16 loads (intrinsics: xsimd has no half-float loads).
#pragma once

#include "kernels/matvec/matvec_gguf_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

// ------------------------------------------------------------ float weights
template <class Arch>
struct FloatLoads {
  using V = xsimd::batch<float, Arch>;
  static constexpr std::size_t W = V::size;
  static V f32(const std::uint8_t* p) { return V::load_unaligned(reinterpret_cast<const float*>(p)); }
  static V f16(const std::uint8_t* p) {
#if defined(__AVX512F__)
    if constexpr (W == 16) return V(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#endif
#if defined(__AVX2__)
    if constexpr (W == 8) return V(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#endif
#if defined(__aarch64__)
    if constexpr (W == 4) return V(vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const std::uint16_t*>(p)))));
#endif
  }
  static V bf16(const std::uint8_t* p) {
#if defined(__AVX512F__)
    if constexpr (W == 16)
      return V(_mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16)));
#endif
#if defined(__AVX2__)
    if constexpr (W == 8)
      return V(_mm256_castsi256_ps(
          _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16)));
#endif
#if defined(__aarch64__)
    if constexpr (W == 4)
      return V(vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const std::uint16_t*>(p)), 16)));
#endif
  }
};

inline float scalar_f32(const std::uint8_t* p) { float v; std::memcpy(&v, p, 4); return v; }
inline float scalar_f16(const std::uint8_t* p) { return h2f(ld_u16(p)); }
inline float scalar_bf16(const std::uint8_t* p) {
  const std::uint32_t b = static_cast<std::uint32_t>(ld_u16(p)) << 16;
  float v;
  std::memcpy(&v, &b, 4);
  return v;
}

// kT: 0 f32, 1 f16, 2 bf16
template <class Arch, int NT, int kT>
void row_float(const std::uint8_t* w, std::size_t cols, const float* const* xf, float* out) {
  using L = FloatLoads<Arch>;
  using V = typename L::V;
  constexpr std::size_t W = L::W;
  constexpr std::size_t E = kT == 0 ? 4 : 2;  // bytes per element
  // U weight vectors per step: one token gets 4 FMA chains (FMA latency, not
  // loads, would bound it otherwise), several tokens 2 each.
  constexpr int U = NT == 1 ? 4 : 2;
  V acc[U][NT];
  for (int u = 0; u < U; ++u)
    for (int t = 0; t < NT; ++t) acc[u][t] = V(0.f);
  auto load = [](const std::uint8_t* p) {
    if constexpr (kT == 0) return L::f32(p);
    else if constexpr (kT == 1) return L::f16(p);
    else return L::bf16(p);
  };
  auto step = [&](std::size_t c) {
    for (int u = 0; u < U; ++u) {
      const V wv = load(w + (c + u * W) * E);
      for (int t = 0; t < NT; ++t) acc[u][t] = xsimd::fma(wv, V::load_unaligned(xf[t] + c + u * W), acc[u][t]);
    }
  };
  std::size_t c = 0;
  if constexpr (NT == 1) {
    // One token (decode): 4 steps per loop trip, unrolled. With the trip
    // count known only at run time, a trip per step streams an F16 matrix
    // slower; unrolled this way it matches a loop over compile-time columns
    // (docs/performance-log.md, "Figures moved out of code comments").
    for (; c + 4 * U * W <= cols; c += 4 * U * W) {
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) step(c + static_cast<std::size_t>(k) * U * W);
    }
  }
  for (; c + U * W <= cols; c += U * W) step(c);
  for (; c + W <= cols; c += W) {
    const V w0 = load(w + c * E);
    for (int t = 0; t < NT; ++t) acc[0][t] = xsimd::fma(w0, V::load_unaligned(xf[t] + c), acc[0][t]);
  }
  for (int t = 0; t < NT; ++t) {
    V sum = acc[0][t];
    for (int u = 1; u < U; ++u) sum += acc[u][t];
    out[t] = xsimd::hadd(sum);
  }
  for (; c < cols; ++c) {
    const float wv = kT == 0 ? scalar_f32(w + c * E) : kT == 1 ? scalar_f16(w + c * E) : scalar_bf16(w + c * E);
    for (int t = 0; t < NT; ++t) out[t] += wv * xf[t][c];
  }
}

}  // namespace
}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels

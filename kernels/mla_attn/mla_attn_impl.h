// One body for every ISA: included only by mla_attn__<isa>.cpp. Everything
// here is a template over the xsimd Arch or sits in an anonymous namespace,
// so no ISA-compiled inline code is shared with other objects. The float
// path, the softmax and the merge are xsimd over the Arch (exponential:
// kernels/exp_f32_impl.h); the int8 path's byte work is per-ISA intrinsics
// (I8<Arch> over kernels/int8_impl.h: vpdpbusd, vpmaddubsw, sdot and byte
// shuffles have no xsimd spelling), as are the f16 conversion and
// lane_sums' AVX-512 transpose.
#pragma once

#include "kernels/exp_f32_impl.h"
#include "kernels/int8_impl.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/mla_attn/mla_attn.h"
#include "kernels/parallel_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

// ---------------------------------------------------------------- int8 ops
// The attention's own int8 layouts over the shared dot product
// (kernels/int8_impl.h): the cache's 4x4 byte transposes, the weights'
// packing for the value pass and the offset policy are this family's alone.
// vec: 16*L cache bytes (L lanes of one 16-byte block each); acc: int32 lanes.
// dot(acc, a, b): acc += sum over 4 adjacent bytes of a (cache) * b (s8).
// On x86 a is the stored u8 (q + 128), so results carry +128 * sum(b)
// (kOffset); on NEON the load removes the offset and sdot is signed.
// The value pass loads with load_v and multiplies with dot_v, whose results
// carry that offset only where kValueOffset says so (AVX2: see there).
template <class Arch>
struct I8;

#if defined(__AVX512F__)
template <>
struct I8<xsimd::avx512bw> {
  using vec = __m512i;
  using acc = __m512i;
  static constexpr int L = 4;
  static constexpr bool kOffset = true;
  static constexpr int QMAX = 127, PMAX = 127;
  static constexpr bool kValueOffset = kOffset;
  static acc zero() { return _mm512_setzero_si512(); }
  static vec load(const void* p) { return _mm512_loadu_si512(p); }
  static vec load_raw(const void* p) { return _mm512_loadu_si512(p); }
  using F = xsimd::batch<float, xsimd::avx512bw>;
  static F i2f(const std::int32_t* p) { return F(_mm512_cvtepi32_ps(_mm512_loadu_si512(p))); }
  static vec bcast(const void* p) {
    int v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
  }
  static acc dot(acc s, vec a, vec b) { return dot4(s, a, b); }
  // The value pass: cache vectors as loaded, weights as the s8 operand.
  static vec load_v(const void* p) { return load(p); }
  static acc dot_v(acc s, vec x, vec w) { return dot(s, x, w); }
  // 4 channels x 4 tokens -> 4 tokens x 4 channels in every 16-byte lane.
  static vec tshuf(vec x) {
    const __m512i idx = _mm512_broadcast_i32x4(
        _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    return _mm512_shuffle_epi8(x, idx);
  }
  static void store(acc x, std::int32_t* p) { _mm512_storeu_si512(p, x); }
  // a0..a3 -> out[16]: out[4i + d] = sum over lanes of ai dword d.
  static void lanesum4(acc a0, acc a1, acc a2, acc a3, std::int32_t* out) {
    __m512i s01 = _mm512_add_epi32(_mm512_shuffle_i32x4(a0, a1, 0x44), _mm512_shuffle_i32x4(a0, a1, 0xEE));
    __m512i s23 = _mm512_add_epi32(_mm512_shuffle_i32x4(a2, a3, 0x44), _mm512_shuffle_i32x4(a2, a3, 0xEE));
    __m512i r = _mm512_add_epi32(_mm512_shuffle_i32x4(s01, s23, 0x88), _mm512_shuffle_i32x4(s01, s23, 0xDD));
    _mm512_storeu_si512(out, r);
  }
  // Rounds x (4L weights in [0, PMAX]) to integers, adds them to qsum and
  // stores them as value-pass operands: 16-byte lane i holds the bytes of
  // tokens 4i..4i+3, repeated for the 4 channels of a cache lane (16L bytes).
  static void quant_pvec(F x, acc& qsum, std::uint8_t* dst) {
    const __m512i q = _mm512_cvtps_epi32(x);
    qsum = _mm512_add_epi32(qsum, q);
    const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    _mm512_storeu_si512(dst, _mm512_permutexvar_epi32(idx, _mm512_zextsi128_si512(_mm512_cvtepi32_epi8(q))));
  }
};
#endif

#if defined(__AVX2__)
template <>
struct I8<xsimd::fma3<xsimd::avx2>> {
  using vec = __m256i;
  using acc = __m256i;
  static constexpr int L = 2;
  static constexpr bool kOffset = true;
  // vpmaddubsw saturates at 16 bits. Scores: u8 cache bytes (q + 128) times
  // the s8 query, 2 * 255 * 64 < 32768. Values: the weights (<= 127) are
  // the unsigned operand and the cache bytes, flipped back to signed, the
  // signed one: 2 * 127 * 128 < 32768, so the weights keep 8 bits and the
  // value products carry no offset (7-bit weights lose accuracy against the
  // f32 cache; 8-bit ones cost a little time). The query keeps 7 bits:
  // giving it 8 the same way (the cache byte's magnitude unsigned, the query
  // signed by it) costs a vpsignb per product, too slow for what it gains
  // (docs/performance-log.md, "Figures moved out of code comments").
  static constexpr int QMAX = 64, PMAX = 127;
  static constexpr bool kValueOffset = false;
  static acc zero() { return _mm256_setzero_si256(); }
  static vec load(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static vec load_raw(const void* p) { return load(p); }
  using F = xsimd::batch<float, xsimd::fma3<xsimd::avx2>>;
  static F i2f(const std::int32_t* p) { return F(_mm256_cvtepi32_ps(load(p))); }
  static vec bcast(const void* p) {
    int v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
  }
  static acc dot(acc s, vec a, vec b) { return dot4(s, a, b); }
  static vec load_v(const void* p) { return _mm256_xor_si256(load(p), _mm256_set1_epi8(static_cast<char>(0x80))); }
  static acc dot_v(acc s, vec x, vec w) { return dot(s, w, x); }
  static vec tshuf(vec x) {
    const __m256i idx = _mm256_broadcastsi128_si256(
        _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    return _mm256_shuffle_epi8(x, idx);
  }
  static void store(acc x, std::int32_t* p) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), x); }
  static __m128i fold(acc x) { return _mm_add_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1)); }
  static void lanesum4(acc a0, acc a1, acc a2, acc a3, std::int32_t* out) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), fold(a0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4), fold(a1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 8), fold(a2));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 12), fold(a3));
  }
  static void quant_pvec(F x, acc& qsum, std::uint8_t* dst) {
    const __m256i q = _mm256_cvtps_epi32(x);
    qsum = _mm256_add_epi32(qsum, q);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i b = _mm_packus_epi16(w, w);  // 8 bytes, twice
    const __m256i idx = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(b), idx));
  }
};
#endif

#if defined(__ARM_NEON) && defined(__aarch64__)
template <>
struct I8<xsimd::neon64> {
  using vec = int8x16_t;
  using acc = int32x4_t;
  static constexpr int L = 1;
  static constexpr bool kOffset = false;
  static constexpr int QMAX = 127, PMAX = 127;
  static constexpr bool kValueOffset = kOffset;
  static acc zero() { return vdupq_n_s32(0); }
  static vec load(const void* p) {
    return vreinterpretq_s8_u8(veorq_u8(vld1q_u8(static_cast<const std::uint8_t*>(p)), vdupq_n_u8(0x80)));
  }
  static vec load_raw(const void* p) { return vld1q_s8(static_cast<const std::int8_t*>(p)); }
  using F = xsimd::batch<float, xsimd::neon64>;
  static F i2f(const std::int32_t* p) { return F(vcvtq_f32_s32(vld1q_s32(p))); }
  static vec bcast(const void* p) {
    std::int32_t v;
    std::memcpy(&v, p, 4);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
  }
  static acc dot(acc s, vec a, vec b) { return dot4(s, a, b); }
  static vec load_v(const void* p) { return load(p); }
  static acc dot_v(acc s, vec x, vec w) { return dot(s, x, w); }
  static vec tshuf(vec x) {
    static const std::uint8_t kIdx[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
    return vqtbl1q_s8(x, vld1q_u8(kIdx));
  }
  static void store(acc x, std::int32_t* p) { vst1q_s32(p, x); }
  static void lanesum4(acc a0, acc a1, acc a2, acc a3, std::int32_t* out) {
    vst1q_s32(out, a0);
    vst1q_s32(out + 4, a1);
    vst1q_s32(out + 8, a2);
    vst1q_s32(out + 12, a3);
  }
  static void quant_pvec(F x, acc& qsum, std::uint8_t* dst) {
    const int32x4_t q = vcvtnq_s32_f32(x);
    qsum = vaddq_s32(qsum, q);
    const int16x4_t h = vmovn_s32(q);
    const int8x8_t b = vmovn_s16(vcombine_s16(h, h));  // 4 bytes, twice
    vst1q_s8(static_cast<std::int8_t*>(static_cast<void*>(dst)),
             vreinterpretq_s8_s32(vdupq_lane_s32(vreinterpret_s32_s8(b), 0)));
  }
};
#endif

namespace {

inline float fmx(float a, float b) { return a > b ? a : b; }
// max(init, every lane of v): a shuffle tree rather than a store and a
// scalar loop (twice per head and block in the int8 path).
template <class Arch>
float hmax(xsimd::batch<float, Arch> v, float init) {
  return fmx(init, hmax_f32(static_cast<typename xsimd::batch<float, Arch>::register_type>(v)));
}
inline std::int64_t imin(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
inline std::size_t al64(std::size_t n) { return (n + 63) / 64 * 64; }

constexpr float kMasked = -1e30f;
constexpr float kLog2e = 1.44269504f;
// The int8 path's softmax / integer-accumulation block: whole tiles, this
// many tokens where the tile size divides it (one tile where a tile is
// larger). At most kMaxBlockTiles tiles (32-token tiles).
constexpr int kI8BlockTokens = 512;
constexpr int kMaxBlockTiles = kI8BlockTokens / kLatentTileQuantum;
inline int unit_tiles(int T) { return T >= kI8BlockTokens ? 1 : kI8BlockTokens / T; }
// Context chunks, taken dynamically (a thread slowed by another process on
// its core does not hold the others back), largest first: each is 1/(2 *
// threads) of what is left, in whole units of unit_tiles() tiles (one int8
// block), so the threads finish within one block of each other: with equal
// chunks a slowed thread leaves the other idle for most of its last chunk
// (docs/performance-log.md, "Figures moved out of code comments").
// Each chunk costs a partial output and its share of the merge (heads x d_c
// floats): 2 threads split 16K into 10 chunks, 32K into 13.
// Bound on the chunks (the partial buffers: 263 KB each with 128 heads):
// where the guided sizes would need more (2 threads: past 64K tokens), the
// smallest chunk doubles. One thread never splits.
inline int max_splits_for(int threads) { return threads == 1 ? 1 : 4 * threads + 8; }

// Scratch layout of one call (shared part, then one slot per thread).
struct Plan {
  int nh = 0, d_c = 0, d_R = 0, C = 0, T = 0, G = 0, Gl = 0, nt = 1;
  int UT = 1;  // tiles per int8 block and per chunk unit
  int BT = 0;  // tokens per scores block: UT tiles (int8), 1 tile (float)
  bool i8 = false;
  std::size_t off_qf = 0;    // f32 (nh, C): scaled query (float path)
  std::size_t off_q8 = 0;    // i8 (nh, C): quantized query (int8 path)
  std::size_t off_qv = 0;    // f32 (4, nh): qsl, qsr (times log2(e)), corr_l, corr_r
  std::size_t off_part = 0;  // per split: f32 o (nh, d_c), m (nh), l (nh)
  std::size_t off_bounds = 0;  // i64 (max_splits + 1): the splits' first tiles
  std::size_t part_floats = 0;
  int max_splits = 1;
  std::size_t off_thr = 0, thr_bytes = 0;
  // within a thread slot
  std::size_t t_S = 0;    // f32 (nh, BT) scores / weights
  std::size_t t_mx = 0;   // f32 (nh, 16) the block's running score max, lane-wise (16: the widest ISA's lanes)
  std::size_t t_pv = 0;   // (nh, BT/(4L), 16L) bytes: weight vectors
  std::size_t t_sc = 0;   // f32 (BT): the block's latent scales
  std::size_t t_conv = 0; // f32 (T, C): f16 tile converted
  std::size_t t_hv = 0;   // f32 (3, nh): ps, corr_p, spare
  std::size_t total = 0;
};

inline Plan make_plan(int nh, const LatentTileLayout& L, int threads) {
  Plan p;
  p.nh = nh;
  p.d_c = L.d_c;
  p.d_R = L.d_R;
  p.C = L.d_c + L.d_R;
  p.T = L.tokens;
  p.G = p.C / 4;
  p.Gl = L.d_c / 4;
  p.nt = threads;
  p.i8 = L.storage == LatentStorage::int8;
  p.UT = unit_tiles(p.T);
  p.BT = p.i8 ? p.UT * p.T : p.T;
  std::size_t o = 0;
  const std::size_t nhs = static_cast<std::size_t>(nh);
  p.off_qf = o; o += al64(4 * nhs * p.C);
  p.off_q8 = o; o += al64(nhs * p.C);
  p.off_qv = o; o += al64(4 * 4 * nhs);
  p.part_floats = nhs * p.d_c + 2 * nhs;
  p.max_splits = max_splits_for(threads);
  p.off_part = o; o += al64(4 * p.part_floats * p.max_splits);
  p.off_bounds = o; o += al64(8 * (static_cast<std::size_t>(p.max_splits) + 1));
  p.off_thr = o;
  std::size_t t = 0;
  const std::size_t bt = static_cast<std::size_t>(p.BT);
  p.t_S = t; t += al64(4 * nhs * bt);
  if (p.i8) {
    p.t_mx = t; t += al64(4 * nhs * 16);
    p.t_pv = t; t += al64(4 * nhs * bt);
    p.t_sc = t; t += al64(4 * bt);
  }
  if (L.storage == LatentStorage::f16) { p.t_conv = t; t += al64(4 * static_cast<std::size_t>(p.T) * p.C); }
  p.t_hv = t; t += al64(4 * 3 * nhs);
  p.thr_bytes = t;
  p.total = o + t * threads;
  return p;
}

// The threads a call plans for: those asked (0: the pool's). The plan (how
// the context is split, so the order of the sums) depends on them alone,
// never on how many threads run its items, so the results do not either.
inline int resolve_threads(int t) { return t > 0 ? t : ::latte::current_pool_size(); }

// The plan's offsets are 64-byte multiples from a 64-byte aligned base, and
// the kernels find that base in any buffer: the size includes the slack.
// (A std::vector's data, as the session passes, is 16 bytes past a line:
// used as is, every 64-byte vector of the scores, weights and partial
// outputs would straddle two lines and slow the attention down;
// docs/performance-log.md, "Per-layer counters; aligned scratch".)
inline std::size_t scratch_bytes_impl(int nh, const LatentTileLayout& L, int threads) {
  const int nt = resolve_threads(threads);
  const std::size_t a = make_plan(nh, L, nt).total, b = make_plan(nh, L, 1).total * nt;
  return (a > b ? a : b) + 63;
}

inline std::uint8_t* aligned_scratch(void* p) {
  const auto u = reinterpret_cast<std::uintptr_t>(p);
  return reinterpret_cast<std::uint8_t*>((u + 63) & ~std::uintptr_t{63});
}

}  // namespace

// The state one work item (heads [h0, h1), tiles [t0, t1)) needs.
template <class Arch>
struct MlaCtx {
  Plan P;
  const LatentLayerView* cache;
  std::int64_t n_ctx;
  std::uint8_t* base;  // scratch
};

namespace {  // not Arch-templated: internal, so no other ISA's object shares them

// p * 2^n for the n in r's low mantissa bits, added to p's exponent field as
// an integer (exp2_i8). Intrinsics: xsimd's integer batches would leave weak
// symbols on NEON (kernels/exp_f32_impl.h, pow2i).
#if defined(__AVX512F__)
inline __m512 add_exponent(__m512 p, __m512 r) {
  return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), _mm512_slli_epi32(_mm512_castps_si512(r), 23)));
}
#endif
#if defined(__AVX2__)
inline __m256 add_exponent(__m256 p, __m256 r) {
  return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(_mm256_castps_si256(r), 23)));
}
#endif
#if defined(__aarch64__)
inline float32x4_t add_exponent(float32x4_t p, float32x4_t r) {
  return vreinterpretq_f32_s32(vaddq_s32(vreinterpretq_s32_f32(p), vshlq_n_s32(vreinterpretq_s32_f32(r), 23)));
}
#endif

}  // namespace

// 2^t for the int8 path's softmax, t in log2 units and <= 0: not the
// float path's exponential (kernels/exp_f32_impl.h), a coarser one for a
// different budget. t is clamped
// at -64: weights below 2^-64 of the maximum vanish in every float sum
// anyway, and the clamp keeps weight * latent scale and the quantization's
// 127 / max weight normal (denormal operands cost microcode assists; an
// overflowing reciprocal would make the weights garbage). 2^f on |f| <= 1/2
// by a degree-3 minimax polynomial (relative error 7.5e-5, 50x below the
// weights' 8-bit quantization step); n = round(t) by the 1.5 * 2^23 shift,
// which leaves n in the low mantissa bits, added to the result's exponent
// field as an integer (the result stays normal: 2^-65 at least). Only the
// 3 FMAs use the multiply pipes, which the dot products need (a degree-5
// polynomial with roundscale/scalef would use 7).
template <class Arch>
xsimd::batch<float, Arch> exp2_i8(xsimd::batch<float, Arch> t) {
  using F = xsimd::batch<float, Arch>;
  const F kShift(12582912.f);  // 1.5 * 2^23
  t = xsimd::max(t, F(-64.f));
  const F r = t + kShift;
  const F f = t - (r - kShift);
  F p = F(5.51716691e-2f);
  p = xsimd::fma(p, f, F(2.42611122e-1f));
  p = xsimd::fma(p, f, F(6.93260985e-1f));
  p = xsimd::fma(p, f, F(9.99928074e-1f));
  using R = typename F::register_type;
  return F(add_exponent(static_cast<R>(p), static_cast<R>(r)));
}

// ---------------------------------------------------------------- int8 path

// The float scores' factors for HB heads (from the first) and one tile.
struct ScoreScales {
  const float *qsl, *qsr, *cl, *cr;  // (nh) query scales (times log2(e)) and corrections
  const float *tl, *tr;              // (T) the tile's latent and rope token scales
  int nvalid;                        // tokens of the tile inside the context
};

// Scores of HB heads over one tile, in log2 units (log2(e) is folded into
// the query scales, so the softmax's exponential is a bare 2^x): S (HB, stride)
// floats, tokens past the context masked; mx (HB, W) the running max of
// each head's scores, lane-wise. The integer dot products of a vector pair
// are turned into floats right away, while they are in L1, rather than in
// a pass over the block's raw scores.
// pf: the next tile to read, or null. Its bytes at the same offsets are
// prefetched as this tile's are read. Without it the scores stalled on
// DRAM (in a model the weights stream through the LLC between layers), even
// with a layer's tiles in one range: presumably because a tile is read in a
// burst and then worked on far longer, while the hardware prefetchers run
// only a short way ahead of the reads. Where the cache could not reserve one
// range, tiles are separate allocations besides.
template <class Arch, int HB>
void i8_scores(const std::uint8_t* data, int T, int Gl, int G, const std::int8_t* q8, int C, const ScoreScales& f,
               float* S, std::size_t stride, float* mx, const std::uint8_t* pf) {
  using K = I8<Arch>;
  using F = xsimd::batch<float, Arch>;
  constexpr int L = K::L;
  constexpr int W = F::size;  // == 4L
  const std::size_t TG = T / 4;
  alignas(64) std::int32_t il[HB][2 * W], ir[HB][2 * W];  // this vector pair's raw scores
  for (int c = 0; c < T / (4 * L); c += 2) {
    typename K::acc a[HB][2];
    auto run = [&](int g0, int g1, std::int32_t (*out)[2 * W]) {
      for (int h = 0; h < HB; ++h) a[h][0] = a[h][1] = K::zero();
      for (int g = g0; g < g1; ++g) {
        const std::size_t off = (g * TG + static_cast<std::size_t>(c) * L) * 16;
        const std::uint8_t* p = data + off;
        if (pf) {
          for (int k = 0; k < 32 * L; k += 64) __builtin_prefetch(pf + off + k, 0, 2);
        }
        typename K::vec x0 = K::tshuf(K::load(p)), x1 = K::tshuf(K::load(p + 16 * L));
        for (int h = 0; h < HB; ++h) {
          typename K::vec b = K::bcast(q8 + static_cast<std::size_t>(h) * C + 4 * g);
          a[h][0] = K::dot(a[h][0], x0, b);
          a[h][1] = K::dot(a[h][1], x1, b);
        }
      }
      for (int h = 0; h < HB; ++h) {
        K::store(a[h][0], out[h]);
        K::store(a[h][1], out[h] + W);
      }
    };
    run(0, Gl, il);
    run(Gl, G, ir);
    for (int h = 0; h < HB; ++h) {
      const F ql(f.qsl[h]), qr(f.qsr[h]), vcl(f.cl[h]), vcr(f.cr[h]);
      float* s = S + h * stride;
      F m = F::load_aligned(mx + h * W);
      for (int v = 0; v < 2; ++v) {
        const int j = c * 4 * L + v * W;  // the vector's first token in the tile
        F x = (K::i2f(il[h] + v * W) - vcl) * F::load_unaligned(f.tl + j) * ql +
              (K::i2f(ir[h] + v * W) - vcr) * F::load_unaligned(f.tr + j) * qr;
        x.store_unaligned(s + j);
        // Rows past the context may hold stale rows (a truncated
        // session's), even NaN scales: masked before the max.
        if (j + W > f.nvalid) {
          for (int k = j > f.nvalid ? j : f.nvalid; k < j + W; ++k) s[k] = kMasked;
          x = F::load_unaligned(s + j);
        }
        m = xsimd::max(m, x);
      }
      m.store_aligned(mx + h * W);
    }
  }
}

namespace {  // not Arch-templated: internal, so no other ISA's object shares it

// Cache lines to prefetch while a value-product call runs: lines
// [0, n) from p, one per chunk (line k at chunk k, the last one again once
// they run out: branch-free, as a conditional advance made GCC copy
// accumulators between registers every chunk), the rest at the end. n >= 1
// and p a valid address. prefetcht0, not prefetcht1: faster with the cache
// in DRAM, no different with it in L3 (docs/performance-log.md,
// "`prefetcht0` for the next block"); AMD's T1/T2 prefetches are reported
// to be dropped at times on Zen 4.
struct LinePrefetch {
  const std::uint8_t* p;
  int n;
  void at(int k) const { __builtin_prefetch(p + 64 * static_cast<std::size_t>(k < n ? k : n - 1), 0, 3); }
  void from(int k) const {
    for (; k < n; ++k) __builtin_prefetch(p + 64 * static_cast<std::size_t>(k), 0, 3);
  }
};

}  // namespace

// One chunk of value products: a[h][i] += cache vector i (at d, groups TG*16
// bytes apart) . weights of head h (at b, heads pv_stride apart).
template <class Arch, int HB, int GB>
[[gnu::always_inline]] inline void chunk_dots(typename I8<Arch>::acc (&a)[HB][4], const std::uint8_t* d,
                                              std::size_t TG, const std::uint8_t* b, std::size_t pv_stride) {
  using K = I8<Arch>;
  typename K::vec x[GB];
  for (int i = 0; i < GB; ++i) x[i] = K::load_v(d + i * TG * 16);
  for (int h = 0; h < HB; ++h) {
    const typename K::vec w = K::load_raw(b + h * pv_stride);
    for (int i = 0; i < GB; ++i) a[h][i] = K::dot_v(a[h][i], x[i], w);
  }
}

// Integer value products of HB heads x GB channel groups (from g0) over the
// first nch weight chunks of a block: out (HB, 16) int32, out[h][4i+d] =
// channel 4(g0+i)+d.
template <class Arch, int HB, int GB>
[[gnu::noinline]] void i8_values(const std::uint8_t* const* tiles, int T, int g0, int nch, const std::uint8_t* pv,
               std::size_t pv_stride, std::int32_t* out, LinePrefetch pf) {
  using K = I8<Arch>;
  constexpr int L = K::L;
  const int cpt = T / (4 * L);  // chunks per tile
  const std::size_t TG = T / 4;
  if (nch <= 0) {
    std::memset(out, 0, sizeof(std::int32_t) * 16 * HB);
    pf.from(0);
    return;
  }
  typename K::acc a[HB][4];
  for (int h = 0; h < HB; ++h)
    for (int i = 0; i < 4; ++i) a[h][i] = K::zero();
  // Tile by tile, chunk by chunk within: no division in the inner loop.
  // The loop shapes are for GCC 12 (docs/performance-log.md, "Figures
  // moved out of code comments"):
  // - AVX-512: with loops that might run zero times, it merges the paths'
  //   accumulators through a stack array (zeroed on entry, stored and
  //   reloaded at the end): do-whiles, and the prefetch one line per chunk.
  // - AVX2 (16 registers): an inner do-while, or any prefetch in the loop,
  //   makes it copy accumulators between registers every chunk: a for loop,
  //   and the prefetch after it.
  int ch0 = 0, t = 0, k = 0;
  do {
    const std::uint8_t* d = tiles[t] + static_cast<std::size_t>(g0) * TG * 16;
    const std::uint8_t* b = pv + static_cast<std::size_t>(ch0) * 16 * L;
    const int n = nch - ch0 < cpt ? nch - ch0 : cpt;  // >= 1
    int c = 0;
    if constexpr (K::L == 2) {
      for (; c < n; ++c, d += 16 * L, b += 16 * L) chunk_dots<Arch, HB, GB>(a, d, TG, b, pv_stride);
    } else {
      do {
        chunk_dots<Arch, HB, GB>(a, d, TG, b, pv_stride);
        d += 16 * L;
        b += 16 * L;
        pf.at(k++);
      } while (++c < n);
    }
    ch0 += cpt;
    ++t;
  } while (ch0 < nch);
  pf.from(k);
  for (int h = 0; h < HB; ++h) K::lanesum4(a[h][0], a[h][1], a[h][2], a[h][3], out + 16 * h);
}

template <class Arch, int HB>
void i8_scores_n(int n, const std::uint8_t* data, int T, int Gl, int G, const std::int8_t* q8, int C,
                 const ScoreScales& f, float* S, std::size_t stride, float* mx, const std::uint8_t* pf) {
  if constexpr (HB > 1) {
    if (n < HB) return i8_scores_n<Arch, HB - 1>(n, data, T, Gl, G, q8, C, f, S, stride, mx, pf);
  }
  i8_scores<Arch, HB>(data, T, Gl, G, q8, C, f, S, stride, mx, pf);
}

template <class Arch, int HB, int GB>
void i8_values_n(int nh, int ng, const std::uint8_t* const* tiles, int T, int g0, int nch,
                 const std::uint8_t* pv, std::size_t pv_stride, std::int32_t* out, LinePrefetch pf) {
  if constexpr (HB > 1) {
    if (nh < HB) return i8_values_n<Arch, HB - 1, GB>(nh, ng, tiles, T, g0, nch, pv, pv_stride, out, pf);
  }
  if constexpr (GB > 1) {
    if (ng < GB) return i8_values_n<Arch, HB, GB - 1>(nh, ng, tiles, T, g0, nch, pv, pv_stride, out, pf);
  }
  i8_values<Arch, HB, GB>(tiles, T, g0, nch, pv, pv_stride, out, pf);
}

template <class Arch>
constexpr int score_hb() {
  return I8<Arch>::L == 2 ? 4 : 8;  // 16 ymm on avx2, 32 registers elsewhere
}
// Heads per value-product call. AVX-512: 6 heads x 4 vectors (24 of the 32
// registers) read each block's cache vectors from L2 3 times for 16 heads
// instead of 4: on Zen 5, which issues two 512-bit vpdpbusd per cycle, the
// L2 reads, not the dot products, limit the value pass
// (docs/performance-log.md, "First measurements: 6 heads per value call").
// NEON keeps 4 (not measured on hardware), AVX2 (16 registers) 2.
template <class Arch>
constexpr int value_hb() {
  return I8<Arch>::L == 4 ? 6 : I8<Arch>::L == 2 ? 2 : 4;
}

// next_item(): the tile range [first, end) of the work item this thread
// takes after this one (first == end if none), asked for once, when the
// item's last block starts, so its first block is prefetched like any
// other (unprefetched it would wait on DRAM: docs/performance-log.md,
// "Figures moved out of code comments") while the choice of item stays
// dynamic but for that one block.
template <class Arch, class NextItem>
void i8_item(const MlaCtx<Arch>& X, int h0, int h1, std::int64_t t0, std::int64_t t1, float* po,
             float* pm, float* pl, std::uint8_t* thr, NextItem&& next_item) {
  using K = I8<Arch>;
  using F = xsimd::batch<float, Arch>;
  constexpr int W = F::size;  // == 4L
  static_assert(W == 4 * K::L, "int32 batch must match the token vector");
  const Plan& P = X.P;
  const int T = P.T, BT = P.BT, d_c = P.d_c;
  const auto& LY = X.cache->layout;
  const std::int8_t* q8 = reinterpret_cast<const std::int8_t*>(X.base + P.off_q8);
  const float* qv = reinterpret_cast<const float*>(X.base + P.off_qv);
  const float *qsl = qv, *qsr = qv + P.nh, *cl = qv + 2 * P.nh, *cr = qv + 3 * P.nh;
  float* S = reinterpret_cast<float*>(thr + P.t_S);
  float* mx = reinterpret_cast<float*>(thr + P.t_mx);  // (nh, W)
  std::uint8_t* pv = thr + P.t_pv;
  float* scl = reinterpret_cast<float*>(thr + P.t_sc);  // (BT) latent scales
  float* hv = reinterpret_cast<float*>(thr + P.t_hv);
  float *ps = hv, *cp = hv + P.nh;
  const std::size_t pv_stride = static_cast<std::size_t>(BT) * 4;

  // po is not zeroed here: the item's first block stores its value
  // products instead of adding them. Its lines were last touched by the
  // previous call's merge, often on the other thread's L3, and zeroing them
  // up front waits on those transfers; the first block's stores overlap
  // them with the dot products (docs/performance-log.md, "Figures moved out
  // of code comments").
  for (int h = h0; h < h1; ++h) {
    pm[h] = -INFINITY;
    pl[h] = 0.f;
    if (t0 >= t1) std::memset(po + static_cast<std::size_t>(h) * d_c, 0, sizeof(float) * d_c);
  }
  for (std::int64_t tb = t0; tb < t1; tb += P.UT) {
    const int ntile = static_cast<int>(imin(P.UT, t1 - tb));
    const std::uint8_t* tp[kMaxBlockTiles];
    for (int i = 0; i < ntile; ++i) tp[i] = static_cast<const std::uint8_t*>(X.cache->tiles[tb + i]);
    const int nvalid = static_cast<int>(imin(static_cast<std::int64_t>(ntile) * T, X.n_ctx - tb * T));
    const int ntok = (nvalid + W - 1) / W * W;  // whole vectors
    const bool first = tb == t0;  // the item's first block: po not yet written
    // The block after this one: [nb0, nb1) of this item, or of the next.
    std::int64_t nb0 = tb + P.UT, nb1 = t1;
    if (nb0 >= t1) {
      const auto r = next_item();
      nb0 = r.first;
      nb1 = r.second;
    }
    // 1. scores and their max
    for (int h = h0; h < h1; ++h) F(kMasked).store_aligned(mx + static_cast<std::size_t>(h) * W);
    for (int i = 0; i < ntile && i * T < nvalid; ++i) {
      const float* tsc = reinterpret_cast<const float*>(tp[i] + LY.scale_offset);
      // The tile after this one (in this block or the next), prefetched
      // during the first head block's pass.
      const std::uint8_t* next = i + 1 < ntile ? tp[i + 1]
                                 : nb0 < nb1   ? static_cast<const std::uint8_t*>(X.cache->tiles[nb0])
                                               : nullptr;
      for (int h = h0; h < h1; h += score_hb<Arch>()) {
        const ScoreScales f{qsl + h, qsr + h, cl + h, cr + h, tsc, tsc + T, nvalid - i * T};
        i8_scores_n<Arch, score_hb<Arch>()>(h1 - h, tp[i], T, P.Gl, P.G, q8 + static_cast<std::size_t>(h) * P.C,
                                            P.C, f, S + static_cast<std::size_t>(h) * BT + i * T, BT,
                                            mx + static_cast<std::size_t>(h) * W, h == h0 ? next : nullptr);
      }
    }
    // 2. per head: online softmax, weights quantized with the token's
    //    latent scale folded in. The block's latent scales are gathered
    //    once for all heads, so the passes read them contiguously instead of
    //    finding each vector's tile and offset (a division).
    for (int i = 0; i < ntile; ++i)
      std::memcpy(scl + static_cast<std::size_t>(i) * T, tp[i] + LY.scale_offset, sizeof(float) * T);
    // Rows past the context may hold stale rows (a truncated session's),
    // even NaN scales; their weights must come out exactly 0.
    for (int k = nvalid; k < ntok; ++k) scl[k] = 0.f;
    for (int h = h0; h < h1; ++h) {
      float* s = S + static_cast<std::size_t>(h) * BT;
      // Two passes over the block's scores: exponentials, their sum and the
      // weights' max; quantized weights laid out for the value products.
      // pm is in log2 units, like the scores, until the end of the item.
      const float mn = fmx(pm[h], hmax<Arch>(F::load_aligned(mx + static_cast<std::size_t>(h) * W), kMasked));
      const float alpha = std::exp2(pm[h] - mn);
      pm[h] = mn;
      F lsum(0.f), wmx(0.f);
      const F vmn(mn);
      for (int j = 0; j < ntok; j += W) {
        F p = exp2_i8<Arch>(F::load_unaligned(s + j) - vmn);
        lsum += p;
        F w = p * F::load_unaligned(scl + j);
        w.store_unaligned(s + j);
        wmx = xsimd::max(wmx, w);
      }
      pl[h] = pl[h] * alpha + xsimd::hadd(lsum);
      const float wm = hmax<Arch>(wmx, 0.f);
      const float inv = wm > 0.f ? K::PMAX / wm : 0.f;
      ps[h] = wm / K::PMAX;
      const F vinv(inv);
      typename K::acc qsum = K::zero();  // exact: at most 127 * BT / W per lane
      std::uint8_t* v = pv + static_cast<std::size_t>(h) * pv_stride;
      for (int j = 0; j < ntok; j += W)
        K::quant_pvec(F::load_unaligned(s + j) * vinv, qsum, v + static_cast<std::size_t>(j) * 4);
      cp[h] = K::kValueOffset ? 128.f * static_cast<float>(hsum_i32(qsum)) : 0.f;
      // Rescaled by alpha, except on an item's first block, where po is not
      // yet written (the value products store it) and alpha is 0 or, for a
      // NaN query, NaN: that NaN still spreads, through the block's scale.
      if (first) {
        if (alpha != alpha) ps[h] = alpha;
      } else if (alpha != 1.f) {
        float* o = po + static_cast<std::size_t>(h) * d_c;
        const F va(alpha);
        int c = 0;
        for (; c + W <= d_c; c += W) (F::load_unaligned(o + c) * va).store_unaligned(o + c);
        for (; c < d_c; ++c) o[c] *= alpha;
      }
    }
    // 3. integer value products, scaled into the partial output. Meanwhile
    //    the next block's tiles are prefetched (LinePrefetch says with
    //    which hint), spread evenly over the calls and one line per chunk
    //    within them: the scores of a block stream the cache from DRAM at
    //    about twice the call's average rate and the value products read
    //    none, so fetching during the values halves the demand (without it
    //    the scores stall on DRAM; in bursts it is slower than no prefetch:
    //    docs/performance-log.md, "Decode attention kernels on the Zen 4
    //    machine").
    const int nch = ntok / W;
    alignas(64) std::int32_t vo[16 * value_hb<Arch>()];
    const std::size_t tile_lines = (LY.bytes + 63) / 64;
    const std::size_t pf_lines = nb0 < nb1 ? static_cast<std::size_t>(imin(P.UT, nb1 - nb0)) * tile_lines : 0;
    const std::size_t n_calls = static_cast<std::size_t>((h1 - h0 + value_hb<Arch>() - 1) / value_hb<Arch>()) *
                                static_cast<std::size_t>((P.Gl + 3) / 4);
    std::size_t call = 0;
    for (int h = h0; h < h1; h += value_hb<Arch>()) {
      const int nhb = static_cast<int>(imin(value_hb<Arch>(), h1 - h));
      for (int g = 0; g < P.Gl; g += 4) {
        const int ng = static_cast<int>(imin(4, P.Gl - g));
        LinePrefetch pf{pv, 1};  // nothing to fetch: a line in L1
        if (pf_lines) {  // lines [a, e) of the next block
          const std::size_t a = pf_lines * call / n_calls, ti = a / tile_lines, te = (ti + 1) * tile_lines;
          std::size_t e = pf_lines * (call + 1) / n_calls;
          const auto* tile = static_cast<const std::uint8_t*>(X.cache->tiles[nb0 + static_cast<std::int64_t>(ti)]);
          for (std::size_t l = te, tj = ti + 1; l < e; l += tile_lines, ++tj)  // later tiles' part: now
            LinePrefetch{static_cast<const std::uint8_t*>(X.cache->tiles[nb0 + static_cast<std::int64_t>(tj)]),
                         static_cast<int>(e - l < tile_lines ? e - l : tile_lines)}
                .from(0);
          if (e > te) e = te;
          if (e > a) pf = LinePrefetch{tile + (a - ti * tile_lines) * 64, static_cast<int>(e - a)};
          ++call;
        }
        i8_values_n<Arch, value_hb<Arch>(), 4>(nhb, ng, tp, T, g, nch, pv + static_cast<std::size_t>(h) * pv_stride,
                                               pv_stride, vo, pf);
        for (int k = 0; k < nhb; ++k) {
          float* o = po + static_cast<std::size_t>(h + k) * d_c + 4 * g;
          const std::int32_t* r = vo + 16 * k;
          const float sc = ps[h + k], cc = cp[h + k];
          const int n = 4 * ng;
          int c = 0;
          if (n == 16) {
            const F vs(sc), vc(cc);
            for (; c + W <= 16; c += W)
              xsimd::fma(K::i2f(r + c) - vc, vs, first ? F(0.f) : F::load_unaligned(o + c)).store_unaligned(o + c);
          }
          for (; c < n; ++c) o[c] = (first ? 0.f : o[c]) + sc * (static_cast<float>(r[c]) - cc);
        }
      }
    }
  }
  for (int h = h0; h < h1; ++h) pm[h] /= kLog2e;  // natural units for the merge
}

// ---------------------------------------------------------------- float path

// Lane i of the result = the sum of a[i]'s lanes, for W vectors a. xsimd
// 8.1's AVX-512 haddp returns its sums out of order, so AVX-512 has its own:
// pairs of vectors folded within 128-bit blocks, then the blocks summed.
template <class Arch>
xsimd::batch<float, Arch> lane_sums(const xsimd::batch<float, Arch>* a) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<Arch, xsimd::avx512bw>) {
    __m512 p[8], q[4], r[2];
    for (int i = 0; i < 8; ++i)  // block: [a2i, a2i+1, a2i, a2i+1] partials
      p[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
    for (int i = 0; i < 4; ++i)  // block: [a4i .. a4i+3] partials
      q[i] = _mm512_add_ps(_mm512_shuffle_ps(p[2 * i], p[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_ps(p[2 * i], p[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int i = 0; i < 2; ++i)  // blocks: q2i (0+1), q2i (2+3), q2i+1 (0+1), q2i+1 (2+3)
      r[i] = _mm512_add_ps(_mm512_shuffle_f32x4(q[2 * i], q[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(q[2 * i], q[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(r[0], r[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(r[0], r[1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
#endif
  return xsimd::haddp(a);
}

// S (HB, stride) = rows (ntok, C) . qf (HB, C), ntok a multiple of J (the
// tile's padding rows are real memory; their scores are masked later).
// HB heads x J tokens of accumulators, reduced W at a time by a transposing
// add (lane_sums), as one hadd per accumulator is costly beside the FMAs
// (docs/performance-log.md, "Decode attention kernels on the Zen 4 machine").
// Meanwhile lines [0, pf_lines) from pf go to L2, a few per step of the
// dot products (in bursts they are slower than none).
template <class Arch, int HB, int J>
void f_scores(const float* rows, int ntok, int C, const float* qf, float* S, std::size_t stride,
              const std::uint8_t* pf, std::size_t pf_lines) {
  using F = xsimd::batch<float, Arch>;
  constexpr int W = F::size;
  constexpr int N = HB * J;
  for (int j = 0; j < ntok; j += J) {
    const float* r0 = rows + static_cast<std::size_t>(j) * C;
    F a[N];
    for (int k = 0; k < N; ++k) a[k] = F(0.f);
    std::size_t line = pf_lines * j / ntok;
    const std::size_t line_end = pf_lines * (j + J) / ntok;
    int c = 0;
    for (; c + W <= C; c += W) {
      if (line < line_end) __builtin_prefetch(pf + 64 * line++, 0, 2);
      F x[J];
      for (int t = 0; t < J; ++t) x[t] = F::load_unaligned(r0 + static_cast<std::size_t>(t) * C + c);
      for (int h = 0; h < HB; ++h) {
        const F q = F::load_unaligned(qf + static_cast<std::size_t>(h) * C + c);
        for (int t = 0; t < J; ++t) a[h * J + t] = xsimd::fma(q, x[t], a[h * J + t]);
      }
    }
    alignas(64) float sum[N];
    if constexpr (N % W == 0) {
      for (int g = 0; g < N; g += W) lane_sums<Arch>(a + g).store_aligned(sum + g);
    } else {
      for (int k = 0; k < N; ++k) sum[k] = xsimd::hadd(a[k]);
    }
    for (int h = 0; h < HB; ++h)
      for (int t = 0; t < J; ++t) {
        float v = sum[h * J + t];
        for (int k = c; k < C; ++k)
          v += qf[static_cast<std::size_t>(h) * C + k] * r0[static_cast<std::size_t>(t) * C + k];
        S[h * stride + j + t] = v;
      }
  }
}

// o (HB, d_c)[:, c0 : c0 + NV * W] += P (HB, stride) . rows (ntok, C)[:, c0 : c0 + NV * W]
template <class Arch, int HB, int NV>
void f_value_columns(const float* rows, int ntok, int C, int d_c, const float* Pw, std::size_t stride, float* o,
                     int c0) {
  using F = xsimd::batch<float, Arch>;
  constexpr int W = F::size;
  F a[HB][NV];
  for (int h = 0; h < HB; ++h)
    for (int v = 0; v < NV; ++v) a[h][v] = F::load_unaligned(o + static_cast<std::size_t>(h) * d_c + c0 + v * W);
  for (int j = 0; j < ntok; ++j) {
    const float* r = rows + static_cast<std::size_t>(j) * C + c0;
    F x[NV];
    for (int v = 0; v < NV; ++v) x[v] = F::load_unaligned(r + v * W);
    for (int h = 0; h < HB; ++h) {
      const F p(Pw[h * stride + j]);
      for (int v = 0; v < NV; ++v) a[h][v] = xsimd::fma(p, x[v], a[h][v]);
    }
  }
  for (int h = 0; h < HB; ++h)
    for (int v = 0; v < NV; ++v) a[h][v].store_unaligned(o + static_cast<std::size_t>(h) * d_c + c0 + v * W);
}

// o (HB, d_c) += P (HB, stride) . rows (ntok, C)[:, :d_c]: HB heads x NV
// vectors of columns in registers, one pass over the tokens per NV * W
// columns.
template <class Arch, int HB, int NV>
void f_values(const float* rows, int ntok, int C, int d_c, const float* Pw, std::size_t stride, float* o) {
  constexpr int W = xsimd::batch<float, Arch>::size;
  int c = 0;
  for (; c + NV * W <= d_c; c += NV * W) f_value_columns<Arch, HB, NV>(rows, ntok, C, d_c, Pw, stride, o, c);
  for (; c + W <= d_c; c += W) f_value_columns<Arch, HB, 1>(rows, ntok, C, d_c, Pw, stride, o, c);
  for (; c < d_c; ++c)
    for (int h = 0; h < HB; ++h) {
      float acc = o[static_cast<std::size_t>(h) * d_c + c];
      for (int j = 0; j < ntok; ++j) acc += Pw[h * stride + j] * rows[static_cast<std::size_t>(j) * C + c];
      o[static_cast<std::size_t>(h) * d_c + c] = acc;
    }
}

template <class Arch, int HB, int J>
void f_scores_n(int n, const float* rows, int ntok, int C, const float* qf, float* S, std::size_t stride,
                const std::uint8_t* pf, std::size_t pf_lines) {
  if constexpr (HB > 1) {
    if (n < HB) return f_scores_n<Arch, HB - 1, J>(n, rows, ntok, C, qf, S, stride, pf, pf_lines);
  }
  f_scores<Arch, HB, J>(rows, ntok, C, qf, S, stride, pf, pf_lines);
}

template <class Arch, int HB, int NV>
void f_values_n(int n, const float* rows, int ntok, int C, int d_c, const float* Pw, std::size_t stride, float* o) {
  if constexpr (HB > 1) {
    if (n < HB) return f_values_n<Arch, HB - 1, NV>(n, rows, ntok, C, d_c, Pw, stride, o);
  }
  f_values<Arch, HB, NV>(rows, ntok, C, d_c, Pw, stride, o);
}

template <class Arch>
void f16_to_f32_rows(const std::uint16_t* src, float* dst, std::size_t n) {
  std::size_t i = 0;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<Arch, xsimd::avx512bw>) {
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  }
#endif
#if defined(__F16C__) && defined(__AVX2__)
  if constexpr (std::is_same_v<Arch, xsimd::fma3<xsimd::avx2>>) {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
#endif
#if defined(__ARM_NEON) && defined(__aarch64__)
  if constexpr (std::is_same_v<Arch, xsimd::neon64>) {
    for (; i + 4 <= n; i += 4)
      vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + i))));
  }
#endif
  for (; i < n; ++i) {
    // only reached for n % W tails: the scalar conversion, bit exact
    const std::uint16_t h = src[i];
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu, bits;
    if (e == 0x1f) bits = sign | 0x7f800000u | (m << 13);
    else if (e == 0) {
      if (m == 0) bits = sign;
      else {
        int k = -1;
        do { ++k; m <<= 1; } while ((m & 0x400u) == 0);
        bits = sign | static_cast<std::uint32_t>(127 - 15 - k) << 23 | ((m & 0x3ffu) << 13);
      }
    } else bits = sign | ((e + 112) << 23) | (m << 13);
    std::memcpy(dst + i, &bits, 4);
  }
}

// next_item(): as for i8_item, asked for during the item's last tile, so
// the next item's first tile is prefetched like any other.
template <class Arch, class NextItem>
void f_item(const MlaCtx<Arch>& X, int h0, int h1, std::int64_t t0, std::int64_t t1, float* po, float* pm,
            float* pl, std::uint8_t* thr, NextItem&& next_item) {
  using F = xsimd::batch<float, Arch>;
  constexpr int W = F::size;
  // Scores: 4 heads x 4 tokens of accumulators (NEON and AVX-512: 16 of 32
  // registers; AVX2: 2 x 4 of 16). Values: 4 heads x NV vectors of columns.
  constexpr int HBs = W == 8 ? 2 : 4, Js = 4;
  constexpr int HBv = 4, NVv = W == 8 ? 2 : 4;
  const Plan& P = X.P;
  const int T = P.T, BT = P.BT, C = P.C, d_c = P.d_c;
  const bool f16 = X.cache->layout.storage == LatentStorage::f16;
  const float* qf = reinterpret_cast<const float*>(X.base + P.off_qf);
  float* S = reinterpret_cast<float*>(thr + P.t_S);
  float* conv = f16 ? reinterpret_cast<float*>(thr + P.t_conv) : nullptr;
  const std::size_t row_bytes = X.cache->layout.bytes / T;  // plain rows, f32 or f16
  for (int h = h0; h < h1; ++h) {
    pm[h] = -INFINITY;
    pl[h] = 0.f;
    std::memset(po + static_cast<std::size_t>(h) * d_c, 0, sizeof(float) * d_c);
  }
  for (std::int64_t t = t0; t < t1; ++t) {
    const int nvalid = static_cast<int>(imin(T, X.n_ctx - t * T));
    // Scores run over whole groups of Js rows (tiles hold a multiple of 32;
    // the padding rows' scores are masked), values over the valid rows only,
    // so a stale row past the end never meets a zero weight (0 x NaN).
    const int ntok = (nvalid + Js - 1) / Js * Js;
    const float* rows;
    if (f16) {
      f16_to_f32_rows<Arch>(static_cast<const std::uint16_t*>(X.cache->tiles[t]), conv,
                            static_cast<std::size_t>(ntok) * C);
      rows = conv;
    } else {
      rows = static_cast<const float*>(X.cache->tiles[t]);
    }
    // The next tile's lines go to L2 a share per head group (why: see
    // i8_scores).
    std::int64_t tn = t + 1;
    if (tn >= t1) {
      const auto r = next_item();
      tn = r.first < r.second ? r.first : -1;
    }
    const std::uint8_t* next = tn >= 0 ? static_cast<const std::uint8_t*>(X.cache->tiles[tn]) : nullptr;
    const std::size_t next_lines =
        next ? (static_cast<std::size_t>(imin(T, X.n_ctx - tn * T)) * row_bytes + 63) / 64 : 0;
    const int groups = (h1 - h0 + HBs - 1) / HBs;
    for (int h = h0, g = 0; h < h1; h += HBs, ++g) {
      const std::size_t l0 = next_lines * g / groups, l1 = next_lines * (g + 1) / groups;
      f_scores_n<Arch, HBs, Js>(h1 - h, rows, ntok, C, qf + static_cast<std::size_t>(h) * C,
                                S + static_cast<std::size_t>(h) * BT, BT, next + 64 * l0, l1 - l0);
    }
    for (int h = h0; h < h1; ++h) {
      float* s = S + static_cast<std::size_t>(h) * BT;
      float mb = kMasked;
      for (int j = 0; j < nvalid; ++j) mb = fmx(mb, s[j]);
      const float mn = fmx(pm[h], mb);
      const float alpha = std::exp(pm[h] - mn);
      pm[h] = mn;
      F lsum(0.f);
      const F vmn(mn);
      int j = 0;
      for (; j + W <= nvalid; j += W) {
        // <= 0, or NaN for a NaN query: then the block max is NaN too
        F p = exp_clamped_nan_dropped<Arch>(F::load_unaligned(s + j) - vmn);
        lsum += p;
        p.store_unaligned(s + j);
      }
      float l = xsimd::hadd(lsum);
      for (; j < nvalid; ++j) l += (s[j] = std::exp(s[j] - mn));
      for (; j < ntok; ++j) s[j] = 0.f;
      pl[h] = pl[h] * alpha + l;
      if (alpha != 1.f) {
        float* o = po + static_cast<std::size_t>(h) * d_c;
        const F va(alpha);
        int c = 0;
        for (; c + W <= d_c; c += W) (F::load_unaligned(o + c) * va).store_unaligned(o + c);
        for (; c < d_c; ++c) o[c] *= alpha;
      }
    }
    for (int h = h0; h < h1; h += HBv)
      f_values_n<Arch, HBv, NVv>(h1 - h, rows, nvalid, C, d_c, S + static_cast<std::size_t>(h) * BT, BT,
                                 po + static_cast<std::size_t>(h) * d_c);
  }
}

// ---------------------------------------------------------------- driver

template <class Arch>
void prepare_query(const Plan& P, std::uint8_t* base, const float* q_lat, const float* q_pe, float scale) {
  const int nh = P.nh, d_c = P.d_c, d_R = P.d_R, C = P.C;
  if (!P.i8) {
    float* qf = reinterpret_cast<float*>(base + P.off_qf);
    for (int h = 0; h < nh; ++h) {
      for (int c = 0; c < d_c; ++c) qf[static_cast<std::size_t>(h) * C + c] = q_lat[static_cast<std::size_t>(h) * d_c + c] * scale;
      for (int c = 0; c < d_R; ++c) qf[static_cast<std::size_t>(h) * C + d_c + c] = q_pe[static_cast<std::size_t>(h) * d_R + c] * scale;
    }
    return;
  }
  using F = xsimd::batch<float, Arch>;
  using Fi = xsimd::batch<std::int32_t, Arch>;
  constexpr int W = F::size;
  constexpr int QMAX = I8<Arch>::QMAX;
  std::int8_t* q8 = reinterpret_cast<std::int8_t*>(base + P.off_q8);
  float* qv = reinterpret_cast<float*>(base + P.off_qv);
  // Vector loops: this runs once per call before the threads start, and
  // written scalar (9216 elements for 16 heads) it would dominate a call at
  // a short context (docs/performance-log.md, "Figures moved out of code
  // comments"). Rounding as nearbyint's (to nearest even), so the result is
  // the scalar one bit for bit.
  auto quant = [&](const float* x, int n, std::int8_t* q, float& qs, float& corr) {
    alignas(64) std::int32_t ti[W];
    F amv(0.f);
    int i = 0;
    for (; i + W <= n; i += W) amv = xsimd::max(amv, xsimd::abs(F::load_unaligned(x + i)));
    float amax = hmax<Arch>(amv, 0.f);
    for (; i < n; ++i) amax = fmx(amax, std::fabs(x[i]));
    // amax so small that QMAX / amax overflows: quantized as zeros.
    const float inv = amax > 0.f && __builtin_isfinite(QMAX / amax) ? QMAX / amax : 0.f;
    const F vinv(inv);
    Fi sv(0);
    // A NaN or inf in the query (a model whose numbers overflow) makes a
    // scaled lane NaN; the others stay within [-QMAX, QMAX] (2 * QMAX: room
    // for rounding). Such a query gets a NaN scale, so the output is NaN and
    // the session's logits check reports it, instead of finite garbage (the
    // conversion's result for NaN differs by ISA) or an int overflow.
    typename F::batch_bool_type finite(true);
    i = 0;
    for (; i + W <= n; i += W) {
      const F y = F::load_unaligned(x + i) * vinv;
      finite = finite & (xsimd::abs(y) <= F(2.f * QMAX));
      const Fi v = xsimd::nearbyint_as_int(y);
      sv += v;  // vector adds: lanes wrap, exact unless not finite
      v.store_aligned(ti);
      for (int k = 0; k < W; ++k) q[i + k] = static_cast<std::int8_t>(ti[k]);
    }
    bool bad = !xsimd::all(finite);
    int sum = bad ? 0 : hsum_i32(static_cast<typename Fi::register_type>(sv));
    for (; i < n; ++i) {
      const float r = std::nearbyint(x[i] * inv);
      bad |= !(std::fabs(r) <= 2.f * QMAX);
      const int v = bad ? 0 : static_cast<int>(r);
      q[i] = static_cast<std::int8_t>(v);
      sum += v;
    }
    qs = bad ? __builtin_nanf("") : inv > 0.f ? amax / QMAX * scale : 0.f;
    corr = I8<Arch>::kOffset && !bad ? 128.f * static_cast<float>(sum) : 0.f;
  };
  for (int h = 0; h < nh; ++h) {
    quant(q_lat + static_cast<std::size_t>(h) * d_c, d_c, q8 + static_cast<std::size_t>(h) * C, qv[h], qv[2 * nh + h]);
    quant(q_pe + static_cast<std::size_t>(h) * d_R, d_R, q8 + static_cast<std::size_t>(h) * C + d_c, qv[nh + h],
          qv[3 * nh + h]);
    // The score pass works in log2 units: log2(e) goes into the scales once
    // here rather than at every vector pair.
    qv[h] *= kLog2e;
    qv[nh + h] *= kLog2e;
  }
}

// Merge split partials into out (heads [h0, h1)).
template <class Arch>
void merge_heads(const Plan& P, const std::uint8_t* base, int nsplit, int h0, int h1, float* out) {
  using F = xsimd::batch<float, Arch>;
  constexpr int W = F::size;
  const int nh = P.nh, d_c = P.d_c;
  for (int h = h0; h < h1; ++h) {
    float M = -INFINITY;
    for (int s = 0; s < nsplit; ++s) {
      const float* part = reinterpret_cast<const float*>(base + P.off_part) + s * P.part_floats;
      M = fmx(M, part[static_cast<std::size_t>(nh) * d_c + h]);
    }
    float wsum = 0.f;
    float* o = out + static_cast<std::size_t>(h) * d_c;
    for (int s = 0; s < nsplit; ++s) {
      const float* part = reinterpret_cast<const float*>(base + P.off_part) + s * P.part_floats;
      const float m = part[static_cast<std::size_t>(nh) * d_c + h];
      const float l = part[static_cast<std::size_t>(nh) * d_c + nh + h];
      const float w = l > 0.f ? std::exp(m - M) : 0.f;
      wsum += w * l;
      const float* po = part + static_cast<std::size_t>(h) * d_c;
      const F vw(w);
      int c = 0;
      if (s == 0) {
        for (; c + W <= d_c; c += W) (F::load_unaligned(po + c) * vw).store_unaligned(o + c);
        for (; c < d_c; ++c) o[c] = po[c] * w;
      } else {
        for (; c + W <= d_c; c += W) xsimd::fma(F::load_unaligned(po + c), vw, F::load_unaligned(o + c)).store_unaligned(o + c);
        for (; c < d_c; ++c) o[c] += po[c] * w;
      }
    }
    const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
    for (int c = 0; c < d_c; ++c) o[c] *= inv;
  }
}

// One decode over `base` scratch (layout P) with up to P.nt threads.
template <class Arch>
void decode_core(const Plan& P, std::uint8_t* base, const float* q_lat, const float* q_pe, float scale,
                 const LatentLayerView& cache, std::int64_t n_ctx, float* out) {
  prepare_query<Arch>(P, base, q_lat, q_pe, scale);
  MlaCtx<Arch> X{P, &cache, n_ctx, base};
  const std::int64_t n_tiles = (n_ctx + P.T - 1) / P.T;
  // Split the context first (split s: tiles [bounds[s], bounds[s + 1]));
  // leftover threads split the heads.
  std::int64_t* bounds = reinterpret_cast<std::int64_t*>(base + P.off_bounds);
  int n_cs = 0;
  bounds[0] = 0;
  if (P.nt == 1) {
    bounds[n_cs = 1] = n_tiles;
  } else if (n_tiles / P.UT < P.nt) {  // short: equal splits
    n_cs = static_cast<int>(imin(P.nt, n_tiles));
    for (int s = 1; s <= n_cs; ++s) bounds[s] = n_tiles * s / n_cs;
  } else {  // guided, see unit_tiles
    const std::int64_t div = 2 * static_cast<std::int64_t>(P.nt);
    for (std::int64_t unit = P.UT;; unit *= 2) {
      n_cs = 0;
      for (std::int64_t t = 0; t < n_tiles && n_cs < P.max_splits;) {
        std::int64_t len = ((n_tiles - t + div - 1) / div + unit - 1) / unit * unit;
        bounds[++n_cs] = t += imin(len, n_tiles - t);
      }
      if (bounds[n_cs] == n_tiles) break;
    }
  }
  int n_hs = P.nt / n_cs;
  if (n_hs > (P.nh + 3) / 4) n_hs = (P.nh + 3) / 4;
  if (n_hs < 1) n_hs = 1;
  const int items = n_cs * n_hs;
  // Item it: context split it / n_hs (tiles [t0, t1)), head split it % n_hs,
  // so items come largest first.
  auto tiles_of = [&](int it) {
    const int cs = it / n_hs;
    return std::pair<std::int64_t, std::int64_t>(bounds[cs], bounds[cs + 1]);
  };
  auto work = [&](int it, int thread, auto&& next_item) {
    const int cs = it / n_hs, hs = it % n_hs;
    const std::int64_t t0 = bounds[cs], t1 = bounds[cs + 1];
    const int h0 = P.nh * hs / n_hs, h1 = P.nh * (hs + 1) / n_hs;
    float* part = reinterpret_cast<float*>(base + P.off_part) + cs * P.part_floats;
    float* pm = part + static_cast<std::size_t>(P.nh) * P.d_c;
    float* pl = pm + P.nh;
    std::uint8_t* thr = base + P.off_thr + static_cast<std::size_t>(thread) * P.thr_bytes;
    if (P.i8)
      i8_item<Arch>(X, h0, h1, t0, t1, part, pm, pl, thr, next_item);
    else
      f_item<Arch>(X, h0, h1, t0, t1, part, pm, pl, thr, next_item);
  };
  if (items == 1) {
    work(0, 0, [] { return std::pair<std::int64_t, std::int64_t>(0, 0); });
    merge_heads<Arch>(P, base, 1, 0, P.nh, out);
    return;
  }
  std::atomic<int> next{0};
  const int n = static_cast<int>(imin(items, P.nt));
  isa_parallel(n, [&](int t, int ns) {
    // Items are taken dynamically (a thread slowed by another process does
    // not hold the others back), the next one already during the current
    // one's last block or tile when the item asks (see i8_item, f_item).
    // Each slot's first item is its own, though: taken dynamically too,
    // the thread that enters first takes item 0 and, asking for the next
    // one as soon as its last (there, only) block starts, item 1 as well,
    // so with one block per item (up to ~1K tokens with 2 threads) one
    // thread does everything while the other waits at the join
    // (docs/performance-log.md, "Figures moved out of code comments").
    // Slot ns - 1 - t takes item t: the workers usually enter before the
    // thread that quantized the query and opened the region, so the largest
    // chunk goes to one that starts first.
    int it = ns - 1 - t;  // ns <= items
    while (it < items) {
      int ahead = -1;
      work(it, t, [&] {
        ahead = ns + next.fetch_add(1, std::memory_order_relaxed);
        return ahead < items ? tiles_of(ahead) : std::pair<std::int64_t, std::int64_t>(0, 0);
      });
      it = ahead >= 0 ? ahead : ns + next.fetch_add(1, std::memory_order_relaxed);
    }
  });
  // Every item's part is written: the heads' merge, a second region.
  isa_parallel(n, [&](int t, int ns) { merge_heads<Arch>(P, base, n_cs, P.nh * t / ns, P.nh * (t + 1) / ns, out); });
}

template <class Arch>
std::size_t mla_scratch_body(int nh, const LatentTileLayout& L, int threads) {
  return scratch_bytes_impl(nh, L, threads);
}

template <class Arch>
void mla_decode_body(const MlaDecodeArgs& a) {
  if (a.n_ctx <= 0) {  // nothing to attend to
    std::memset(a.out, 0, sizeof(float) * a.n_heads * a.cache.layout.d_c);
    return;
  }
  const Plan P = make_plan(a.n_heads, a.cache.layout, resolve_threads(a.threads));
  decode_core<Arch>(P, aligned_scratch(a.scratch), a.q_lat, a.q_pe, a.scale, a.cache, a.n_ctx, a.out);
}

template <class Arch>
void mla_prefill_body(const MlaPrefillArgs& a) {
  const int nt = resolve_threads(a.threads);
  const auto& L = a.cache.layout;
  const std::size_t nl = static_cast<std::size_t>(a.n_heads) * L.d_c;
  const std::size_t nr = static_cast<std::size_t>(a.n_heads) * L.d_R;
  std::uint8_t* base = aligned_scratch(a.scratch);
  if (a.n_q >= nt && nt > 1) {
    // One query per thread at a time: no merge, all cores busy.
    const Plan P1 = make_plan(a.n_heads, L, 1);
    std::atomic<int> next{0};
    isa_parallel(nt, [&](int t, int) {
      for (int i = next.fetch_add(1, std::memory_order_relaxed); i < a.n_q; i = next.fetch_add(1, std::memory_order_relaxed))
        decode_core<Arch>(P1, base + static_cast<std::size_t>(t) * P1.total, a.q_lat + i * nl, a.q_pe + i * nr, a.scale,
                          a.cache, a.p0 + i + 1, a.out + i * nl);
    });
    return;
  }
  const Plan P = make_plan(a.n_heads, L, nt);
  for (int i = 0; i < a.n_q; ++i)
    decode_core<Arch>(P, base, a.q_lat + i * nl, a.q_pe + i * nr, a.scale, a.cache, a.p0 + i + 1, a.out + i * nl);
}

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels

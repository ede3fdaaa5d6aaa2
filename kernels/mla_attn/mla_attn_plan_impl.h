// mla_attn's plan and scratch: the split policy (unit_tiles,
// max_splits_for), the scratch layout of one call (Plan, make_plan,
// scratch_bytes_impl, aligned_scratch), the state a work item reads
// (MlaCtx), and the small helpers and constants every part shares (the f16
// conversion among them: f16 tiles, int4 tiles' channel scales). Like
// every body header: Arch-templated or in an anonymous namespace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/int8/int8_ops_impl.h"  // hmax_f32
#include "kernels/mla_attn/mla_attn.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

namespace {

// Shared by both paths and the driver.
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
  bool i8 = false;  // the int8 path: int8 and int4 caches
  bool q4 = false;  // int4
  std::size_t off_qf = 0;    // f32 (nh, C): scaled query (float path; int4's per-tile quantization)
  std::size_t off_q8 = 0;    // i8 (nh, C): quantized query (int8 path)
  std::size_t off_qv = 0;    // f32 (4, nh): qsl, qsr (times log2(e)), corr_l, corr_r
  std::size_t off_part = 0;  // per split: f32 o (nh, d_c), m (nh), l (nh)
  std::size_t off_bounds = 0;  // i64 (max_splits + 1): the splits' first tiles
  std::size_t off_state = 0;   // SplitState: the split's counts and the next item
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
  // int4 (channel scales per tile) within a thread slot:
  std::size_t t_q8t = 0;  // i8 (nh, C): the query quantized for one tile (its latent part)
  std::size_t t_qvt = 0;  // f32 (2, nh): that query's latent scale (times log2(e)) and correction
  std::size_t t_chs = 0;  // f32 (UT, d_c): the block's channel scales
  std::size_t t_cpt = 0;  // f32 (nh, UT): the value products' offset correction per tile
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
  p.i8 = L.storage == LatentStorage::int8 || L.storage == LatentStorage::int4;
  p.q4 = L.storage == LatentStorage::int4;
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
  p.off_state = o; o += 64;
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
  if (p.q4) {
    const std::size_t ut = static_cast<std::size_t>(p.UT), dc = static_cast<std::size_t>(p.d_c);
    p.t_q8t = t; t += al64(nhs * p.C);
    p.t_qvt = t; t += al64(4 * 2 * nhs);
    p.t_chs = t; t += al64(4 * ut * dc);
    p.t_cpt = t; t += al64(4 * nhs * ut);
  }
  p.thr_bytes = t;
  p.total = o + t * threads;
  return p;
}

// The threads a call plans for (at least one). The plan (how the context is
// split, so the order of the sums) depends on them alone, never on how many
// threads run its items, so the results do not either.
inline int resolve_threads(int t) { return t > 0 ? t : 1; }

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

// f16 to f32 (f16 tiles, int4 tiles' channel scales); bit exact on every ISA.
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

// The state one work item (heads [h0, h1), tiles [t0, t1)) needs.
template <class Arch>
struct MlaCtx {
  Plan P;
  const LatentLayerView* cache;
  std::int64_t n_ctx;
  std::uint8_t* base;  // scratch
};

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels

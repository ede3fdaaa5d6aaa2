// Rotary position embedding for the decoupled RoPE part of MLA (d_R dims),
// with YaRN frequency scaling (mla-spec.md section 3).
#pragma once

#include <cstdint>
#include <vector>

namespace latte {

enum class RopeStyle {
  consecutive_pairs,  // deepseek2, plm: rotates (x[2i], x[2i+1])     (ggml "NORM")
  half_split,         // minicpm3:       rotates (x[i], x[i + d/2])   (ggml "NEOX")
};

struct RopeParams {
  RopeStyle style = RopeStyle::consecutive_pairs;
  int dim = 0;                  // d_R, even
  double freq_base = 10000.0;   // theta base
  // YaRN (rope.scaling.type == yarn)
  bool yarn = false;
  double yarn_factor = 1.0;         // rope.scaling.factor
  double yarn_orig_ctx = 0.0;       // rope.scaling.original_context_length
  double yarn_beta_fast = 32.0;
  double yarn_beta_slow = 1.0;
  double yarn_log_multiplier = 0.0; // 0.1 * mscale_all_dim
  double attn_factor = 1.0;         // magnitude of cos/sin; also squared into kq_scale
  // Optional per-pair frequency divisors (minicpm3 rope_factors_long/short): (dim/2)
  std::vector<float> freq_factors;
};

// YaRN's corrected dimension range [low, high] over pair indices, clamped to
// [0, dim-1] (the clamps matter for small d_R).
struct YarnRange {
  double low, high;
};
YarnRange yarn_corr_range(const RopeParams& p);

// The rotation angle of every pair at position `pos`: theta (dim/2).
void rope_angles(const RopeParams& p, double pos, double* theta);

// Rotates x (dim) in place for position `pos`, in double precision.
void rope_apply_ref(const RopeParams& p, double pos, double* x);
void rope_apply_ref(const RopeParams& p, double pos, float* x);

// The rotation table of n positions pos0, pos0 + 1, ..., in float: per
// position (dim) the dim/2 cosines, then the dim/2 sines, of every pair's
// angle, each times `magnitude` (attn_factor for a rotation at a position,
// 1 for a turn) before rounding.
void rope_table(const RopeParams& p, double pos0, int n, double magnitude, float* cs);

// Rotates x (dim) in place by per-pair cos and sin (dim/2 each), in float.
inline void rope_rotate(RopeStyle style, int dim, const float* cos, const float* sin, float* x) {
  const int half = dim / 2;
  const bool pairs = style == RopeStyle::consecutive_pairs;
  for (int i = 0; i < half; ++i) {
    const int a = pairs ? 2 * i : i, b = pairs ? 2 * i + 1 : i + half;
    const float x0 = x[a], x1 = x[b];
    x[a] = x0 * cos[i] - x1 * sin[i];
    x[b] = x0 * sin[i] + x1 * cos[i];
  }
}

// mscale = 1 + yarn_log_multiplier * ln(factor) under YaRN, else 1.
double yarn_mscale(const RopeParams& p);

// A pure rotation by `delta` positions, what moves a key rotated at position
// p to p + delta: every angle is linear in the position (YaRN and frequency
// factors included), so R(p + delta) = R(delta) R(p). No magnitude (the
// stored key already carries attn_factor). cos and sin per pair, in float.
struct RopeTurn {
  RopeStyle style = RopeStyle::consecutive_pairs;
  int dim = 0;
  std::vector<float> cos, sin;  // (dim/2)
};
RopeTurn rope_turn(const RopeParams& p, double delta);
// Turns x (dim) in place, in float.
void rope_turn_apply(const RopeTurn& r, float* x);

}  // namespace latte

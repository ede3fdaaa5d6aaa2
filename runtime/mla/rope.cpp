#include "runtime/mla/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "runtime/error.h"

namespace latte {

namespace {

void check(const RopeParams& p) {
  if (p.dim <= 0 || p.dim % 2 != 0)
    throw Error(Status::invalid_argument,
                "rope: dimension must be even and positive, got " + std::to_string(p.dim) +
                    " (RoPE rotates pairs)");
  if (!(p.freq_base > 0)) throw Error(Status::invalid_argument, "rope: freq_base must be > 0");
  if (!p.freq_factors.empty() && static_cast<int>(p.freq_factors.size()) != p.dim / 2)
    throw Error(Status::invalid_argument, "rope: freq_factors must have dim/2 entries");
  if (p.yarn && (!(p.yarn_factor > 0) || !(p.yarn_orig_ctx > 0)))
    throw Error(Status::invalid_argument, "rope: YaRN needs factor > 0 and original context > 0");
}

// Pair index at which the wavelength equals orig_ctx / n_rot rotations.
double corr_dim(const RopeParams& p, double n_rot) {
  return p.dim * std::log(p.yarn_orig_ctx / (n_rot * 2.0 * std::numbers::pi)) /
         (2.0 * std::log(p.freq_base));
}

}  // namespace

YarnRange yarn_corr_range(const RopeParams& p) {
  double low = std::floor(corr_dim(p, p.yarn_beta_fast));
  double high = std::ceil(corr_dim(p, p.yarn_beta_slow));
  return {std::max(0.0, low), std::min(static_cast<double>(p.dim - 1), high)};
}

double yarn_mscale(const RopeParams& p) {
  if (!p.yarn || p.yarn_factor <= 1.0) return 1.0;
  return 1.0 + p.yarn_log_multiplier * std::log(p.yarn_factor);
}

void rope_angles(const RopeParams& p, double pos, double* theta) {
  check(p);
  const int half = p.dim / 2;
  YarnRange r{0, 0};
  if (p.yarn) r = yarn_corr_range(p);
  for (int i = 0; i < half; ++i) {
    double extrap = pos * std::pow(p.freq_base, -2.0 * i / p.dim);
    if (!p.freq_factors.empty()) extrap /= p.freq_factors[i];
    if (!p.yarn) {
      theta[i] = extrap;
      continue;
    }
    const double interp = extrap / p.yarn_factor;
    // ramp = 1 for fast-rotating pairs (keep extrapolation), 0 for slow ones.
    const double y = (i - r.low) / std::max(0.001, r.high - r.low);
    const double ramp = 1.0 - std::clamp(y, 0.0, 1.0);
    theta[i] = interp * (1.0 - ramp) + extrap * ramp;
  }
}

void rope_apply_ref(const RopeParams& p, double pos, double* x) {
  check(p);  // before dim sizes anything
  std::vector<double> theta(p.dim / 2);  // (d_R/2)
  rope_angles(p, pos, theta.data());
  const int half = p.dim / 2;
  for (int i = 0; i < half; ++i) {
    const double c = std::cos(theta[i]) * p.attn_factor;
    const double s = std::sin(theta[i]) * p.attn_factor;
    const int a = p.style == RopeStyle::consecutive_pairs ? 2 * i : i;
    const int b = p.style == RopeStyle::consecutive_pairs ? 2 * i + 1 : i + half;
    const double x0 = x[a], x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
  }
}

void rope_apply_ref(const RopeParams& p, double pos, float* x) {
  check(p);  // before x + dim is formed
  std::vector<double> t(x, x + p.dim);
  rope_apply_ref(p, pos, t.data());
  for (int i = 0; i < p.dim; ++i) x[i] = static_cast<float>(t[i]);
}

void rope_table(const RopeParams& p, double pos0, int n, double magnitude, float* cs) {
  check(p);  // before dim sizes anything
  const int half = p.dim / 2;
  std::vector<double> theta(half);  // (d_R/2)
  for (int t = 0; t < n; ++t) {
    rope_angles(p, pos0 + t, theta.data());
    float* c = cs + static_cast<std::size_t>(t) * p.dim;
    for (int i = 0; i < half; ++i) {
      c[i] = static_cast<float>(std::cos(theta[i]) * magnitude);
      c[half + i] = static_cast<float>(std::sin(theta[i]) * magnitude);
    }
  }
}

RopeTurn rope_turn(const RopeParams& p, double delta) {
  RopeTurn r;
  r.style = p.style;
  r.dim = p.dim;
  check(p);  // before dim sizes anything
  std::vector<float> cs(p.dim);  // (cos | sin)
  rope_table(p, delta, 1, 1.0, cs.data());
  r.cos.assign(cs.begin(), cs.begin() + p.dim / 2);
  r.sin.assign(cs.begin() + p.dim / 2, cs.end());
  return r;
}

void rope_turn_apply(const RopeTurn& r, float* x) { rope_rotate(r.style, r.dim, r.cos.data(), r.sin.data(), x); }

}  // namespace latte

// Shared helpers for kernel tests: seeded random data and error measures.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace latte::test {

inline std::vector<float> random_vector(std::size_t n, std::uint64_t seed, float lo = -1.f,
                                        float hi = 1.f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Normalized MSE: sum (got-ref)^2 / sum ref^2 (0 when both are zero).
inline double nmse(const float* got, const float* ref, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den == 0 ? num : num / den;
}

// max |got-ref| / max |ref|
inline double max_rel_error(const float* got, const float* ref, std::size_t n) {
  double err = 0, mag = 0;
  for (std::size_t i = 0; i < n; ++i) {
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - ref[i]));
    mag = std::max(mag, std::fabs(static_cast<double>(ref[i])));
  }
  return mag == 0 ? err : err / mag;
}

}  // namespace latte::test

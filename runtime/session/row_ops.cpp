// The row operations (row_ops.h; its rules apply).
#include "runtime/session/row_ops.h"

#include <cmath>

#include "runtime/session/parallel_rows.h"

namespace latte {

void rms_norm_rows(const float* x, const float* w, int n, int d, double eps, float* y, std::size_t ld_in,
                   std::size_t ld_out, int threads) {
  for_rows(n, threads, [&](int t) {
    const float* xi = x + t * ld_in;
    double ss = 0;
    for (int i = 0; i < d; ++i) ss += double(xi[i]) * xi[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / d + eps));
    float* yi = y + t * ld_out;
    for (int i = 0; i < d; ++i) yi[i] = xi[i] * inv * w[i];
  });
}

}  // namespace latte

// Row operations of the graph's per-token steps that are not kernels:
// RMSNorm over rows. Internal to runtime/session.
//
// Rules (graph_rules.h, rule 1): split by rows (for_rows, parallel_rows.h),
// each row's arithmetic the same on any number of threads; nothing throws.
#pragma once

#include <cstddef>

namespace latte {

// y (n, d; row stride ld_out) = RMSNorm of x (n, d; row stride ld_in) times
// w (d), eps inside the root; the sum of squares in double. y may be x.
void rms_norm_rows(const float* x, const float* w, int n, int d, double eps, float* y, std::size_t ld_in,
                   std::size_t ld_out, int threads);

}  // namespace latte

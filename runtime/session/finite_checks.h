// The graph's guard on NaN and inf: the first non-finite float of some
// rows (the session checks its logits with it), and refusing a layer's rows
// that hold one (latent rows and queries before the cache and the attention
// kernels see them; the attention output). Internal to runtime/session.
//
// Rules: a non-finite value is an Error(bad_file) naming the layer (or
// logit), the position and the value, and the session rolls back
// (graph_rules.h, rule 3); checking changes no value.
#pragma once

#include <cstddef>
#include <cstdint>

namespace latte {

// Index of the first NaN or inf in x[0, n), or n.
std::size_t first_non_finite(const float* x, std::size_t n);

// Refuses rows (n, width) of one layer, positions p0.., holding a NaN or
// inf: Error(bad_file) naming the first; `what` names the rows ("latent
// row", "query").
void refuse_non_finite_rows(const float* rows, int n, std::size_t width, int layer, std::int64_t p0,
                            const char* what = "latent row");

}  // namespace latte

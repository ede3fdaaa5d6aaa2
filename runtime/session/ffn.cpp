// The feed-forward products (ffn.h). Rules: graph_rules.h.
#include "runtime/session/ffn.h"


#include <algorithm>
#include <cstdint>

#include "platform/thread_pool.h"
#include "runtime/session/parallel_rows.h"

namespace latte {

void FeedForward::activation(float* a, const float* b, std::size_t n) const {
  if (swiglu_) glu_->silu_mul(a, b, n);
  else
    for (std::size_t i = 0; i < n; ++i) a[i] = b[i] > 0 ? b[i] * b[i] : 0.f;
}

std::size_t FeedForward::scratch_bytes(const WeightRef& gate, const WeightRef& up, const WeightRef& down, int n) {
  std::size_t b = std::max(WeightMultiply::scratch_bytes(up, n), WeightMultiply::scratch_bytes(down, n));
  if (!gate.empty()) b = std::max(b, WeightMultiply::scratch_bytes(gate, n));
  return b;
}

bool FeedForward::uses_gemm(const WeightRef& gate, const WeightRef& up, const WeightRef& down, int n) const {
  return wm_.use_gemm(up.type, n) || wm_.use_gemm(down.type, n) || (!gate.empty() && wm_.use_gemm(gate.type, n));
}

void FeedForward::run(const FfnWeights& w, const float* xin, int nt, int d, float* out) {
  const int ff = static_cast<int>(w.up.rows);
  float* a = a_.get(static_cast<std::size_t>(nt) * ff);  // (nt, ff)
  float* b = b_.get(static_cast<std::size_t>(nt) * ff);  // (nt, ff)
  if (swiglu_)
    wm_.linear_shared({{&w.up, b, static_cast<std::size_t>(ff)}, {&w.gate, a, static_cast<std::size_t>(ff)}}, xin, d,
                      nt);
  else
    wm_.linear(w.up, xin, d, nt, b, ff);
  for_rows(nt, wm_.threads(), [&](int t) {
    const std::size_t o = static_cast<std::size_t>(t) * ff;
    activation(a + o, b + o, static_cast<std::size_t>(ff));
  });
  wm_.linear(w.down, a, ff, nt, out, d);
}

bool FeedForward::one_token_fits(const FfnTerm* terms, int n_terms) const {
  for (int k = 0; k < n_terms; ++k)
    if (uses_gemm(*terms[k].gate, *terms[k].up, *terms[k].down, 1)) return false;
  return true;
}

// Two parallel regions: each slot takes a run of every term's ff rows
// (gate, up and the activation between them), then, once all of them are
// done, a run of every term's output rows. Called as separate products, an
// MoE layer took ~21 regions (3 per expert), and each join waits for the
// slower thread. Each output row's arithmetic is the same as the products'
// (same kernels per row, terms added in order).
void FeedForward::one_token(const FfnTerm* terms, int n_terms, const float* x, int d, float* y) {
  std::size_t ff_total = 0, per = 0;
  for (int k = 0; k < n_terms; ++k) {
    const FfnTerm& f = terms[k];
    ff_total += static_cast<std::size_t>(f.up->rows);
    per = std::max(per, scratch_bytes(*f.gate, *f.up, *f.down, 1));
  }
  std::uint8_t* base = wm_.thread_scratch(per);
  float* a = a_.get(ff_total);    // (sum of ff) each term's activation
  float* b = b_.get(ff_total);    // (sum of ff) each term's up product
  float* t_out = t_out_.get(d);   // (d) one term's output (not the caller's y)
  const int threads = wm_.threads();
  const bool swiglu = swiglu_;
  RegionError err;
  parallel_slots(threads, [&](int t, int nt) {
    void* scratch = base + per * static_cast<std::size_t>(t);
    err.run([&] {
      std::size_t off = 0;
      for (int k = 0; k < n_terms; ++k) {
        const FfnTerm& f = terms[k];
        std::int64_t r0, r1;
        WeightMultiply::row_run(f.up->rows, t, nt, r0, r1);
        float* ak = a + off;
        float* bk = b + off;
        off += static_cast<std::size_t>(f.up->rows);
        if (r1 <= r0) continue;
        const std::size_t nr = static_cast<std::size_t>(r1 - r0);
        wm_.product_rows(*f.up, r0, r1, x, f.up->cols, 1, bk, nr, scratch);
        if (swiglu) wm_.product_rows(*f.gate, r0, r1, x, f.gate->cols, 1, ak, nr, scratch);
        activation(ak + r0, bk + r0, nr);
      }
    });
  });
  err.rethrow();
  parallel_slots(threads, [&](int t, int nt) {
    void* scratch = base + per * static_cast<std::size_t>(t);
    std::int64_t r0, r1;
    WeightMultiply::row_run(d, t, nt, r0, r1);
    if (r1 > r0 && !err.failed()) err.run([&] {
      const std::size_t nr = static_cast<std::size_t>(r1 - r0);
      std::size_t off = 0;
      for (int k = 0; k < n_terms; ++k) {
        const FfnTerm& f = terms[k];
        wm_.product_rows(*f.down, r0, r1, a + off, f.down->cols, 1, t_out, nr, scratch);
        off += static_cast<std::size_t>(f.up->rows);
        const float w = f.weight;
        if (k == 0)
          for (std::int64_t i = r0; i < r1; ++i) y[i] = w * t_out[i];
        else
          for (std::int64_t i = r0; i < r1; ++i) y[i] += w * t_out[i];
      }
    });
  });
  err.rethrow();
}

void FeedForward::dense(const FfnWeights& w, const float* x, int n, int d, float* y) {
  const FfnTerm term{&w.gate, &w.up, &w.down, 1.f};
  if (n == 1 && one_token_fits(&term, 1)) one_token(&term, 1, x, d, y);
  else run(w, x, n, d, y);
}

}  // namespace latte

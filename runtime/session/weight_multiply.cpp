// The weight multiply (weight_multiply.h): which path each product takes,
// how it is split over the threads, and the f32 GEMM calls with their
// failures. Rules: graph_rules.h.
#include "runtime/session/weight_multiply.h"

#include <algorithm>
#include <limits>

#include "platform/thread_pool.h"
#include "runtime/session/gemm_f32.h"
#include "runtime/session/kernel_regions.h"
#include "runtime/session/parallel_rows.h"

namespace latte {

namespace {

// From this many tokens on, a weight product runs as f32 GEMMs (oneDNN):
// directly on F32 weights, over panels of dequantized rows for the others.
// Below, Latte's kernels, which stream the weights once from memory. The
// thresholds are the measured crossovers of prefill speed (docs/performance.md,
// "Prefill GEMMs"; the runs: docs/performance-log.md): F32 from 160 tokens,
// F16 and BF16 from 320. Never for Q8_0 with SIMD kernels, nor for the other
// packed-GEMM types with AVX-512 VNNI: their packed int8 GEMM beat the f32
// GEMM over dequantized panels at every chunk size (64 int8 products an
// instruction against 16 f32 FMAs). With AVX2 (as many products as FMAs)
// those types switch at 320 like F16; NEON, not timed on hardware, too.
int default_gemm_min_tokens(GgmlType t, Isa isa) {
  // Without oneDNN the row kernels and the packed GEMM are Latte's fastest.
  if (!gemm_f32_is_onednn()) return std::numeric_limits<int>::max();
  if (t == GgmlType::Q8_0 && isa != Isa::ref) return std::numeric_limits<int>::max();
  if (kernels::matvec_has_packed_gemm(t) && isa == Isa::avx512) return std::numeric_limits<int>::max();
  return t == GgmlType::F32 ? 160 : 320;
}
constexpr std::int64_t kGemmPanelRows = 256;

}  // namespace

WeightMultiply::WeightMultiply(Isa isa, int threads, int gemm_min_tokens)
    : mv_(&kernels::matvec_kernels(isa)), isa_(isa), threads_(threads), gemm_min_tokens_(gemm_min_tokens) {}

bool WeightMultiply::use_gemm(GgmlType t, int n) const {
  return n >= (gemm_min_tokens_ > 0 ? gemm_min_tokens_ : default_gemm_min_tokens(t, isa_));
}

void WeightMultiply::row_run(std::int64_t rows, int t, int nt, std::int64_t& r0, std::int64_t& r1) {
  const std::int64_t tiles = (rows + 15) / 16;
  r0 = std::min(rows, tiles * t / nt * 16);
  r1 = std::min(rows, tiles * (t + 1) / nt * 16);
}

std::uint8_t* WeightMultiply::thread_scratch(std::size_t& per) {
  per = (per + 63) / 64 * 64;
  if (mv_scratch_.size() < per * threads_) mv_scratch_.resize(per * threads_);
  return mv_scratch_.data();
}

void WeightMultiply::linear(const WeightRef& w, const float* x, std::size_t ldx, int n, float* y, std::size_t ldy) {
  if (use_gemm(w.type, n)) {
    if (w.type == GgmlType::F32 && w.row_bytes == static_cast<std::size_t>(w.cols) * 4) {
      sgemm(threads_, 'T', n, w.rows, w.cols, 1.f, x, static_cast<std::int64_t>(ldx),
            reinterpret_cast<const float*>(w.data), w.cols, 0.f, y, static_cast<std::int64_t>(ldy));
      return;
    }
    float* panel = gemm_panel_.get(static_cast<std::size_t>(kGemmPanelRows) * w.cols);  // (rows, cols)
    // x16: each thread takes whole tiles back to the original layout first
    const std::int64_t unit = w.x16 ? 16 : 1;
    if (w.x16 && x16_rows_.size() < threads_ * 16 * w.row_bytes) x16_rows_.resize(threads_ * 16 * w.row_bytes);
    for (std::int64_t r0 = 0; r0 < w.rows; r0 += kGemmPanelRows) {
      const std::int64_t nr = std::min(kGemmPanelRows, w.rows - r0);
      // Each thread dequantizes a run of the panel's rows: on one thread
      // the others spun meanwhile (docs/performance-log.md, "Figures moved
      // out of runtime comments").
      RegionError err;
      parallel_slots(threads_, [&](int t, int nt) {
        const std::int64_t a = nr / unit * t / nt * unit, b = nr / unit * (t + 1) / nt * unit;
        err.run([&] {
          if (b <= a) return;
          const std::uint8_t* src = w.data + static_cast<std::size_t>(r0 + a) * w.row_bytes;
          if (!w.x16) {
            mv_->dequantize(w.type, src, panel + static_cast<std::size_t>(a) * w.cols,
                            static_cast<std::size_t>(b - a) * w.cols);
            return;
          }
          std::uint8_t* plain = x16_rows_.data() + static_cast<std::size_t>(t) * 16 * w.row_bytes;  // (16, row_bytes)
          const std::size_t nb = static_cast<std::size_t>(w.cols) / ggml_block_elems(w.type);
          for (std::int64_t i = a; i < b; i += 16) {
            x16_deinterleave(w.type, w.data + static_cast<std::size_t>(r0 + i) * w.row_bytes, 0, nb,
                                             plain, w.row_bytes);
            mv_->dequantize(w.type, plain, panel + static_cast<std::size_t>(i) * w.cols,
                            16 * static_cast<std::size_t>(w.cols));
          }
        });
      });
      err.rethrow();
      sgemm(threads_, 'T', n, nr, w.cols, 1.f, x, static_cast<std::int64_t>(ldx), panel, w.cols, 0.f, y + r0,
            static_cast<std::int64_t>(ldy));
    }
    return;
  }
  // The kernels' phases (kernel_regions.h): the activations quantized once,
  // then runs of rows, one per thread.
  const kernels::MatmulPlan plan = mv_->matmul_plan(w.type, static_cast<std::size_t>(w.cols), n, w.x16);
  const std::size_t need = scratch_bytes(w, n), work = (plan.work_bytes + 63) / 64 * 64;
  if (mv_scratch_.size() < need) mv_scratch_.resize(need);
  if (work_.size() < work * threads_) work_.resize(work * threads_);
  matmul_regions(*mv_, plan, w.data, static_cast<std::size_t>(w.rows), x, ldx, y, ldy, mv_scratch_.data(), work_.data(),
                 work, threads_);
}

// Below the GEMM size: one parallel region for all of the products, each
// thread a contiguous run of every matrix's rows. Decode is bound by weight
// bandwidth and runs ~30 regions per token, so each join saved is
// measurable, with sleeping workers most of all.
void WeightMultiply::linear_shared(std::initializer_list<LinearOut> outs, const float* x, std::size_t ldx, int n) {
  bool gemm = false;  // any of them: each then takes its own path in linear()
  for (const LinearOut& o : outs) gemm = gemm || use_gemm(o.w->type, n);
  if (gemm || threads_ <= 1) {
    for (const LinearOut& o : outs) linear(*o.w, x, ldx, n, o.y, o.ldy);
    return;
  }
  std::size_t per = 0;
  for (const LinearOut& o : outs) per = std::max(per, scratch_bytes(*o.w, n));
  std::uint8_t* base = thread_scratch(per);
  const LinearOut* list = outs.begin();
  const int n_out = static_cast<int>(outs.size());
  RegionError err;
  parallel_slots(threads_, [&](int t, int nt) {
    err.run([&] {
      void* scratch = base + per * static_cast<std::size_t>(t);
      for (int k = 0; k < n_out; ++k) {
        const WeightRef& w = *list[k].w;
        std::int64_t r0, r1;
        row_run(w.rows, t, nt, r0, r1);
        if (r1 <= r0) continue;
        product_rows(w, r0, r1, x, ldx, n, list[k].y, list[k].ldy, scratch);
      }
    });
  });
  err.rethrow();
}

// Below the GEMM size, one parallel region over the heads (small matrices:
// a region per head would cost more in fork/join than the product); from
// it, each head through linear()'s GEMM path.
void WeightMultiply::linear_heads(const HeadWeights& w, int heads, const float* x, std::size_t x_step, std::size_t ldx,
                                  int n, float* y, std::size_t y_step, std::size_t ldy) {
  if (use_gemm(w.head.type, n)) {
    for (int h = 0; h < heads; ++h) linear(w[h], x + h * x_step, ldx, n, y + h * y_step, ldy);
    return;
  }
  std::size_t per = scratch_bytes(w.head, n);
  std::uint8_t* base = thread_scratch(per);
  RegionError err;
  parallel_slots(std::min(threads_, heads), [&](int t, int nt) {
    void* scratch = base + per * static_cast<std::size_t>(t);
    for (int h = heads * t / nt; h < heads * (t + 1) / nt; ++h) {
      const WeightRef wh = w[h];
      err.run([&] { product_rows(wh, 0, wh.rows, x + h * x_step, ldx, n, y + h * y_step, ldy, scratch); });
    }
  });
  err.rethrow();
}

}  // namespace latte

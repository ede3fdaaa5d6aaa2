// The naive form of attention (attention.h): a block of cached rows at a
// time, K and V of all heads decompressed by one f32 GEMM each (once for all
// the chunk's queries), then per head an online softmax over the blocks.
// Rules: graph_rules.h; the GEMMs inside the region record their failures
// (GemmStatus), thrown after it.
#include "runtime/session/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "platform/thread_pool.h"
#include "runtime/session/finite_checks.h"
#include "runtime/session/gemm_f32.h"
#include "runtime/session/parallel_rows.h"

namespace latte {

namespace {
// Cached rows per block: the decompressed K and V of one block stay small
// (256 x n_h x 256 floats = 4 MiB at 16 heads).
constexpr int kNaiveKeyBlock = 256;
}  // namespace

void NaiveAttention::run(const MlaConfig& m, const LayerWeights& L, int layer, const float* q, int n,
                         std::int64_t p0, const LatentCache& cache, float* o) {
  const int nh = m.n_heads, qh = m.q_head_dim(), dn = m.d_nope, dr = m.d_rope, dc = m.kv_lora_rank, dv = m.d_v;
  const float scale = static_cast<float>(m.kq_scale());
  const std::int64_t n_rows = p0 + n;
  const int B = kNaiveKeyBlock;
  float* blk_c = blk_c_.get(static_cast<std::size_t>(B) * dc);                // (B, d_c)
  float* blk_kpe = blk_kpe_.get(static_cast<std::size_t>(B) * dr);            // (B, d_R)
  float* blk_k = blk_k_.get(static_cast<std::size_t>(B) * nh * dn);           // (B, n_h, d_nope)
  float* blk_v = blk_v_.get(static_cast<std::size_t>(B) * nh * dv);           // (B, n_h, d_v)
  float* acc = acc_.get(static_cast<std::size_t>(n) * nh * dv);               // (n, n_h, d_v)
  float* stat = stat_.get(static_cast<std::size_t>(n) * nh * 2);              // (n, n_h, {max, sum})
  float* scores = scores_.get(static_cast<std::size_t>(threads_) * n * B);    // per thread (n, B)
  std::fill(acc, acc + static_cast<std::size_t>(n) * nh * dv, 0.f);
  for (std::size_t i = 0; i < static_cast<std::size_t>(n) * nh; ++i) {
    stat[2 * i] = -INFINITY;
    stat[2 * i + 1] = 0.f;
  }
  for (std::int64_t j0 = 0; j0 < n_rows; j0 += B) {
    const int nb = static_cast<int>(std::min<std::int64_t>(B, n_rows - j0));
    for (int j = 0; j < nb; ++j)
      cache.read_row(layer, j0 + j, blk_c + static_cast<std::size_t>(j) * dc, blk_kpe + static_cast<std::size_t>(j) * dr);
    // K_nope (nb, n_h*d_nope) = C W_UK^T ; V (nb, n_h*d_v) = C W_UV^T
    sgemm(threads_, 'T', nb, static_cast<std::int64_t>(nh) * dn, dc, 1.f, blk_c, dc, L.naive_wuk, dc, 0.f, blk_k,
          static_cast<std::int64_t>(nh) * dn);
    sgemm(threads_, 'T', nb, static_cast<std::int64_t>(nh) * dv, dc, 1.f, blk_c, dc, L.naive_wuv, dc, 0.f, blk_v,
          static_cast<std::int64_t>(nh) * dv);
    // Queries that see none of this block (j0 > p0 + i) are skipped.
    const int i0 = static_cast<int>(std::max<std::int64_t>(0, j0 - p0));
    const int nq = n - i0;
    if (nq <= 0) continue;
    GemmStatus gemm;  // what gemm_f32 returns; RegionError: what oneDNN throws (std::bad_alloc)
    RegionError err;
    std::atomic<int> next{0};  // heads taken one at a time
    parallel_slots(std::min(threads_, nh), [&](int slot, int) {
      for (int hd = next.fetch_add(1); hd < nh; hd = next.fetch_add(1))
        err.run([&] {
          if (gemm.failed() || err.failed()) return;
          float* S = scores + static_cast<std::size_t>(slot) * n * B;  // (nq, nb)
          const float* qh0 = q + (static_cast<std::size_t>(i0) * nh + hd) * qh;
          if (!gemm.gemm(1, 'T', nq, nb, dn, scale, qh0, static_cast<std::int64_t>(nh) * qh,
                         blk_k + static_cast<std::size_t>(hd) * dn, static_cast<std::int64_t>(nh) * dn, 0.f, S, nb) ||
              !gemm.gemm(1, 'T', nq, nb, dr, scale, qh0 + dn, static_cast<std::int64_t>(nh) * qh, blk_kpe, dr, 1.f, S,
                         nb))
            return;
          for (int i = 0; i < nq; ++i) {
            float* Si = S + static_cast<std::size_t>(i) * nb;
            const std::int64_t visible = std::min<std::int64_t>(nb, p0 + i0 + i + 1 - j0);  // causal
            float* st = stat + (static_cast<std::size_t>(i0 + i) * nh + hd) * 2;
            float mx = st[0];
            for (std::int64_t j = 0; j < visible; ++j) mx = std::max(mx, Si[j]);
            const float corr = std::exp(st[0] - mx);  // 0 on the first block (-inf)
            const float sum = smx_->exp_shift_sum(Si, static_cast<std::size_t>(visible), mx);
            for (std::int64_t j = visible; j < nb; ++j) Si[j] = 0.f;
            float* ai = acc + (static_cast<std::size_t>(i0 + i) * nh + hd) * dv;
            for (int k = 0; k < dv; ++k) ai[k] *= corr;
            st[0] = mx;
            st[1] = st[1] * corr + sum;
          }
          // acc (nq, d_v) += P (nq, nb) V_h (nb, d_v)
          gemm.gemm(1, 'N', nq, dv, nb, 1.f, S, nb, blk_v + static_cast<std::size_t>(hd) * dv,
                    static_cast<std::int64_t>(nh) * dv, 1.f, acc + (static_cast<std::size_t>(i0) * nh + hd) * dv,
                    static_cast<std::int64_t>(nh) * dv);
        });
    });
    err.rethrow();
    gemm.throw_if_failed();
  }
  for (std::size_t i = 0; i < static_cast<std::size_t>(n) * nh; ++i) {
    const float inv = 1.f / stat[2 * i + 1];
    for (int k = 0; k < dv; ++k) o[i * dv + k] = acc[i * dv + k] * inv;
  }
  refuse_non_finite_rows(o, n, static_cast<std::size_t>(nh) * dv, layer, p0, "attention output");
}

}  // namespace latte

// An MoE layer's feed-forward (moe.h): routing and expert scheduling.
// Rules: graph_rules.h.
#include "runtime/session/moe.h"


#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>

#include "platform/thread_pool.h"
#include "runtime/model/expert_parts.h"
#include "runtime/session/parallel_rows.h"

namespace latte {

namespace {
// The most tokens of one expert experts_parallel hands one thread where the
// packed int8 GEMM takes them; a larger expert goes in equal parts, each
// large enough for the GEMM to take it as it takes the whole.
constexpr int kExpertItemTokens = 128;
static_assert(kExpertItemTokens / 2 >= static_cast<int>(kernels::kPackedGemmAllTokens));
}  // namespace

void moe_route(const ModelParams& p, const LayerWeights& L, const float* logits, int n, ExpertTokens& by_expert) {
  const int ne = p.n_experts, k = p.n_experts_used;
  std::vector<float> prob(ne), sel(ne);
  std::vector<int> idx(ne);
  for (int t = 0; t < n; ++t) {
    const float* lg = logits + static_cast<std::size_t>(t) * ne;
    if (p.gating == GatingFunc::softmax) {
      const float mx = *std::max_element(lg, lg + ne);
      float sum = 0;
      for (int e = 0; e < ne; ++e) sum += (prob[e] = std::exp(lg[e] - mx));
      for (auto& v : prob) v /= sum;
    } else {
      for (int e = 0; e < ne; ++e) prob[e] = 1.f / (1.f + std::exp(-lg[e]));
    }
    // NaN scores (numbers that overflowed) sort as -inf: the sorts need a
    // strict weak order; the NaN still reaches the logits through prob.
    for (int e = 0; e < ne; ++e) {
      sel[e] = prob[e] + (L.exp_bias ? L.exp_bias[e] : 0.f);
      if (std::isnan(sel[e])) sel[e] = -INFINITY;
    }
    if (p.n_expert_groups > 1) {
      const int ng = p.n_expert_groups, per = ne / ng;
      std::vector<float> gs(ng);
      for (int g = 0; g < ng; ++g) {
        float a = -INFINITY, b = -INFINITY;  // top two in the group
        for (int e = g * per; e < (g + 1) * per; ++e) {
          if (sel[e] > a) { b = a; a = sel[e]; } else if (sel[e] > b) b = sel[e];
        }
        gs[g] = a + (per > 1 ? b : 0.f);
      }
      std::vector<int> order(ng);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return gs[a] > gs[b]; });
      for (int r = p.n_expert_groups_used; r < ng; ++r)
        for (int e = order[r] * per; e < (order[r] + 1) * per; ++e) sel[e] = -INFINITY;
    }
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
      return sel[a] > sel[b] || (sel[a] == sel[b] && a < b);
    });
    float wsum = 0;
    for (int j = 0; j < k; ++j) wsum += prob[idx[j]];
    for (int j = 0; j < k; ++j) {
      float w = prob[idx[j]];
      if (p.expert_weights_norm) w /= std::max(wsum, 6.103515625e-5f);
      if (p.expert_weights_scale != 0.f && p.expert_weights_scale != 1.f) w *= p.expert_weights_scale;
      by_expert[idx[j]].push_back({t, w});
    }
  }
}

void Moe::forward(const ModelParams& p, const LayerWeights& L, const float* x, int n, int d, float* y) {
  const int ne = p.n_experts, k = p.n_experts_used;
  float* logits = router_.get(static_cast<std::size_t>(n) * ne);  // (n, n_exp)
  wm_.linear(L.gate_inp, x, d, n, logits, ne);
  ExpertTokens by_expert(ne);  // expert -> (token, weight)
  moe_route(p, L, logits, n, by_expert);
  for (const auto& list : by_expert) experts_read_ += !list.empty();
  // One token: the shared FFN and the routed experts (ascending, as
  // below) as one sum, in one parallel region.
  std::vector<WeightRef> routed;  // (k, {gate, up, down}); terms point into it
  std::vector<FfnTerm> terms;
  if (n == 1) {
    routed.reserve(static_cast<std::size_t>(3 * k));  // no reallocation below
    terms.reserve(static_cast<std::size_t>(k + 1));
    if (!L.shared.up.empty()) terms.push_back({&L.shared.gate, &L.shared.up, &L.shared.down, 1.f});
    for (int e = 0; e < ne; ++e) {
      if (by_expert[e].empty()) continue;
      routed.insert(routed.end(), {L.exp_gate[e], L.exp_up[e], L.exp_down[e]});
      const WeightRef* r = &routed[routed.size() - 3];
      terms.push_back({r, r + 1, r + 2, by_expert[e][0].second});
    }
  }
  if (n == 1 && ffn_.one_token_fits(terms.data(), static_cast<int>(terms.size()))) {
    ffn_.one_token(terms.data(), static_cast<int>(terms.size()), x, d, y);
    return;
  }
  if (!L.shared.up.empty()) ffn_.run(L.shared, x, n, d, y);
  else std::fill(y, y + static_cast<std::size_t>(n) * d, 0.f);
  std::size_t max_nt = 0;
  for (const auto& list : by_expert) max_nt = std::max(max_nt, list.size());
  if (experts_parallel_fits(L, static_cast<int>(max_nt))) experts_parallel(L, by_expert, x, d, y);
  else experts_serial(L, by_expert, x, n, d, y);
}

// oneDNN's path shares one panel buffer and runs its own regions: not from
// inside experts_parallel's.
bool Moe::experts_parallel_fits(const LayerWeights& L, int max_nt) const {
  return wm_.threads() > 1 && !ffn_.uses_gemm(L.exp_gate.head, L.exp_up.head, L.exp_down.head, max_nt);
}

void Moe::experts_serial(const LayerWeights& L, const ExpertTokens& by_expert, const float* x, int n, int d,
                         float* y) {
  float* xe = xe_.get(static_cast<std::size_t>(n) * d);  // (tokens of expert e, d)
  float* ye = ye_.get(static_cast<std::size_t>(n) * d);  // (tokens of expert e, d)
  for (int e = 0; e < static_cast<int>(by_expert.size()); ++e) {
    const auto& list = by_expert[e];
    if (list.empty()) continue;
    const int nt = static_cast<int>(list.size());
    for (int j = 0; j < nt; ++j)
      std::memcpy(xe + static_cast<std::size_t>(j) * d, x + static_cast<std::size_t>(list[j].first) * d,
                  sizeof(float) * d);
    ffn_.run({L.exp_gate[e], L.exp_up[e], L.exp_down[e]}, xe, nt, d, ye);
    for (int j = 0; j < nt; ++j) {
      float* yt = y + static_cast<std::size_t>(list[j].first) * d;
      const float* src = ye + static_cast<std::size_t>(j) * d;
      for (int i = 0; i < d; ++i) yt[i] += list[j].second * src[i];
    }
  }
}

// Each thread takes whole experts (largest first, dynamically) with
// one-thread products: split by rows, each small expert cost several
// parallel regions and their joins, where the threads spun
// (docs/performance-log.md, "Figures moved out of runtime comments"). Where
// the experts' weights take the packed int8 GEMM, an expert with more than
// kExpertItemTokens tokens goes in equal parts (each >= 64 tokens, so the
// GEMM takes every part as it takes the whole, with the same bits; the float
// row kernels' results move with the token count): the threads share it,
// and their buffers stay bounded. Each expert writes its tokens' rows to
// their own slots; the slots are then added to y in the serial order
// (experts ascending), so the sums keep their bits.
void Moe::experts_parallel(const LayerWeights& L, const ExpertTokens& by_expert, const float* x, int d, float* y) {
  const int threads = wm_.threads();
  const int ne = static_cast<int>(by_expert.size());
  const int ff = static_cast<int>(L.exp_up.head.rows);
  std::vector<std::size_t> base(static_cast<std::size_t>(ne) + 1, 0);  // first slot of each expert
  struct Item {
    int e, j0, j1;  // expert e's tokens [j0, j1)
  };
  std::vector<Item> items;  // largest first
  int max_nt = 0;           // tokens of the largest item
  const bool split = WeightMultiply::has_packed_gemm(L.exp_up.head.type) &&
                     WeightMultiply::has_packed_gemm(L.exp_down.head.type) &&
                     (L.exp_gate.head.empty() || WeightMultiply::has_packed_gemm(L.exp_gate.head.type));
  for (int e = 0; e < ne; ++e) {
    const int nt = static_cast<int>(by_expert[e].size());
    base[e + 1] = base[e] + static_cast<std::size_t>(nt);
    const int parts = split ? (nt + kExpertItemTokens - 1) / kExpertItemTokens : std::min(nt, 1);
    for (int q = 0; q < parts; ++q) {
      items.push_back({e, expert_part_begin(nt, q, parts), expert_part_begin(nt, q + 1, parts)});
      max_nt = std::max(max_nt, items.back().j1 - items.back().j0);
    }
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.j1 - a.j0 > b.j1 - b.j0; });
  // Everything that can throw (allocation, argument checks) before the region.
  const std::size_t per = FeedForward::scratch_bytes(L.exp_gate.head, L.exp_up.head, L.exp_down.head, max_nt);
  if (!expert_bufs_) expert_bufs_ = std::make_unique<ExpertBuffers[]>(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    ExpertBuffers& eb = expert_bufs_[t];
    eb.xe.get(static_cast<std::size_t>(max_nt) * d);
    eb.a.get(static_cast<std::size_t>(max_nt) * ff);
    eb.b.get(static_cast<std::size_t>(max_nt) * ff);
    if (eb.scratch.size() < per) eb.scratch.resize(per);
  }
  float* out = expert_out_.get(base[ne] * static_cast<std::size_t>(d));  // (routed pairs, d)
  const bool swiglu = ffn_.swiglu();
  std::atomic<int> next{0};
  RegionError err;
  parallel_slots(threads, [&](int slot, int) {
    err.run([&] {
      ExpertBuffers& eb = expert_bufs_[slot];
      void* scratch = eb.scratch.data();
      for (int i = next.fetch_add(1); i < static_cast<int>(items.size()) && !err.failed(); i = next.fetch_add(1)) {
        const Item it = items[static_cast<std::size_t>(i)];
        const int e = it.e, nt = it.j1 - it.j0;
        const auto& list = by_expert[e];
        float* xe = eb.xe.p;  // (nt, d)
        float* a = eb.a.p;    // (nt, ff)
        float* b = eb.b.p;    // (nt, ff)
        for (int j = 0; j < nt; ++j)
          std::memcpy(xe + static_cast<std::size_t>(j) * d,
                      x + static_cast<std::size_t>(list[static_cast<std::size_t>(it.j0 + j)].first) * d,
                      sizeof(float) * d);
        const WeightRef up = L.exp_up[e], down = L.exp_down[e];
        wm_.product_rows(up, 0, up.rows, xe, d, nt, b, ff, scratch);
        if (swiglu) {
          const WeightRef gate = L.exp_gate[e];
          wm_.product_rows(gate, 0, gate.rows, xe, d, nt, a, ff, scratch);
        }
        ffn_.activation(a, b, static_cast<std::size_t>(nt) * ff);
        wm_.product_rows(down, 0, down.rows, a, ff, nt,
                         out + (base[e] + static_cast<std::size_t>(it.j0)) * static_cast<std::size_t>(d), d, scratch);
      }
    });
  });
  err.rethrow();
  // The serial order, each slot a run of the columns.
  const int col_blocks = (d + 63) / 64;
  parallel_slots(std::min(threads, col_blocks), [&](int s, int ns) {
    for (int cb = col_blocks * s / ns; cb < col_blocks * (s + 1) / ns; ++cb) {
      const int c0 = cb * 64, c1 = std::min(d, c0 + 64);
      for (int e = 0; e < ne; ++e) {
        const auto& list = by_expert[e];
        for (std::size_t j = 0; j < list.size(); ++j) {
          float* yt = y + static_cast<std::size_t>(list[j].first) * d;
          const float* src = out + (base[e] + j) * static_cast<std::size_t>(d);
          const float w = list[j].second;
          for (int c = c0; c < c1; ++c) yt[c] += w * src[c];
        }
      }
    }
  });
}

}  // namespace latte

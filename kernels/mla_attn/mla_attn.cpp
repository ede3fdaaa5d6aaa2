// mla_attn's scalar references, operation count, dispatch to the per-ISA tables
// and the convenience calls' scratch. Baseline flags: no SIMD body here.
#include "kernels/mla_attn/mla_attn.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "platform/memory.h"

namespace latte::kernels {

namespace {

// (n_ctx, d_c + d_R) dequantized rows.
std::vector<float> load_rows(const LatentLayerView& v, std::int64_t n_ctx) {
  const auto& L = v.layout;
  const int C = L.d_c + L.d_R;
  std::vector<float> rows(static_cast<std::size_t>(n_ctx) * C);
  // An int4 cache's filling tile is in int8's layout (LatentLayerView).
  const LatentTileLayout L8 =
      v.int8_tile >= 0 ? make_latent_tile_layout(LatentStorage::int8, L.d_c, L.d_R, L.tokens) : L;
  for (std::int64_t j = 0; j < n_ctx; ++j) {
    float* r = rows.data() + j * C;
    const std::int64_t t = j / L.tokens;
    if (t == v.int8_tile)
      latent_load_row(L8, v.int8_data, static_cast<int>(j % L.tokens), r, r + L.d_c);
    else
      latent_load_row(L, v.tiles[t], static_cast<int>(j % L.tokens), r, r + L.d_c);
  }
  return rows;
}

void attend_ref(int n_heads, const float* q_lat, const float* q_pe, float scale, int d_c,
                int d_R, const float* rows, std::int64_t n_ctx, float* out) {
  const int C = d_c + d_R;
  std::vector<double> s(n_ctx), o(d_c);
  for (int h = 0; h < n_heads; ++h) {
    const float* ql = q_lat + static_cast<std::size_t>(h) * d_c;
    const float* qr = q_pe + static_cast<std::size_t>(h) * d_R;
    double mx = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < n_ctx; ++j) {
      const float* r = rows + j * C;
      double acc = 0;
      for (int c = 0; c < d_c; ++c) acc += static_cast<double>(ql[c]) * r[c];
      for (int c = 0; c < d_R; ++c) acc += static_cast<double>(qr[c]) * r[d_c + c];
      s[j] = acc * scale;
      mx = std::max(mx, s[j]);
    }
    double sum = 0;
    for (std::int64_t j = 0; j < n_ctx; ++j) sum += (s[j] = std::exp(s[j] - mx));
    if (n_ctx == 0) sum = 1;  // no tokens: a zero output
    std::fill(o.begin(), o.end(), 0.0);
    for (std::int64_t j = 0; j < n_ctx; ++j) {
      const float* r = rows + j * C;
      for (int c = 0; c < d_c; ++c) o[c] += s[j] * r[c];
    }
    for (int c = 0; c < d_c; ++c) out[static_cast<std::size_t>(h) * d_c + c] = static_cast<float>(o[c] / sum);
  }
}

std::size_t ref_scratch(int, const LatentTileLayout&, int) { return 0; }

// The reference's phases: one item, the whole decode.
MlaDecodeSplit ref_begin(const MlaDecodeArgs&) { return {}; }
void ref_query(const MlaDecodeArgs&, int, int) {}
void ref_items(const MlaDecodeArgs& a, int slot, int) {
  if (slot == 0) mla_decode_ref(a);
}
void ref_item(const MlaDecodeArgs& a, int, int) { mla_decode_ref(a); }
void ref_merge(const MlaDecodeArgs&, int, int) {}
void ref_prefill_queries(const MlaPrefillArgs& a, int i0, int i1, int) {
  MlaPrefillArgs b = a;
  const std::size_t nl = static_cast<std::size_t>(a.n_heads) * a.cache.layout.d_c;
  const std::size_t nr = static_cast<std::size_t>(a.n_heads) * a.cache.layout.d_R;
  b.n_q = i1 - i0;
  b.p0 = a.p0 + i0;
  b.q_lat = a.q_lat + i0 * nl;
  b.q_pe = a.q_pe + i0 * nr;
  b.out = a.out + i0 * nl;
  mla_prefill_ref(b);
}

const MlaAttnKernels kRef{&ref_scratch, &mla_decode_ref, &mla_prefill_ref, &ref_begin,          &ref_query,
                          &ref_items,   &ref_item,       &ref_merge,       &ref_prefill_queries};

}  // namespace

void mla_decode_ref(const MlaDecodeArgs& a) {
  const auto& L = a.cache.layout;
  auto rows = load_rows(a.cache, a.n_ctx);
  attend_ref(a.n_heads, a.q_lat, a.q_pe, a.scale, L.d_c, L.d_R, rows.data(), a.n_ctx, a.out);
}

void mla_prefill_ref(const MlaPrefillArgs& a) {
  const auto& L = a.cache.layout;
  auto rows = load_rows(a.cache, a.p0 + a.n_q);
  const std::size_t nl = static_cast<std::size_t>(a.n_heads) * L.d_c;
  const std::size_t nr = static_cast<std::size_t>(a.n_heads) * L.d_R;
  for (int i = 0; i < a.n_q; ++i)
    attend_ref(a.n_heads, a.q_lat + i * nl, a.q_pe + i * nr, a.scale, L.d_c, L.d_R, rows.data(),
               a.p0 + i + 1, a.out + i * nl);
}

double mla_decode_ops(int n_heads, int d_c, int d_R, std::int64_t n_ctx) {
  return 2.0 * n_heads * (2.0 * d_c + d_R) * static_cast<double>(n_ctx);
}

LATTE_DEFINE_KERNEL_DISPATCH(mla_attn, MlaAttnKernels, kRef)

namespace {

struct FreeDeleter {
  void operator()(void* p) const { aligned_free(p); }
};

// Grows, never shrinks: the scratch does not depend on the context length.
void* thread_scratch(std::size_t bytes) {
  thread_local std::unique_ptr<void, FreeDeleter> buf;
  thread_local std::size_t cap = 0;
  if (bytes > cap) {
    buf.reset();
    cap = 0;  // a failed allocation below must not leave a capacity without a buffer
    std::size_t n = (bytes + 63) / 64 * 64;
    void* p = aligned_alloc_bytes(64, n);
    if (!p) throw std::bad_alloc();
    buf.reset(p);
    cap = n;
  }
  return buf.get();
}

}  // namespace

void mla_decode(const MlaDecodeArgs& a) {
  const auto& k = mla_attn_kernels(active_isa());
  MlaDecodeArgs b = a;
  b.scratch = thread_scratch(k.scratch_bytes(a.n_heads, a.cache.layout, a.threads));
  k.decode(b);
}

void mla_prefill(const MlaPrefillArgs& a) {
  const auto& k = mla_attn_kernels(active_isa());
  MlaPrefillArgs b = a;
  b.scratch = thread_scratch(k.scratch_bytes(a.n_heads, a.cache.layout, a.threads));
  k.prefill(b);
}

}  // namespace latte::kernels

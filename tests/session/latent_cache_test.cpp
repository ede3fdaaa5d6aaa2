#include "runtime/mla/latent_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "kernels/mla_attn/mla_attn.h"
#include "runtime/error.h"

namespace latte {
namespace {

std::vector<float> rnd(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

Status status_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.status();
  }
  return Status::ok;
}

// DeepSeek-V2-Lite: 27 layers, d_c 512, d_R 64, 163,840 tokens (issue 3 targets).
TEST(LatentCache, V2LiteMemoryAtFullContext) {
  const std::size_t i8 = LatentCache::bytes_for(27, 512, 64, 163840, LatentStorage::int8);
  const std::size_t f16 = LatentCache::bytes_for(27, 512, 64, 163840, LatentStorage::f16);
  const std::size_t f32 = LatentCache::bytes_for(27, 512, 64, 163840, LatentStorage::f32);
  std::printf("V2-Lite @163840: int8 %zu B, f16 %zu B, f32 %zu B\n", i8, f16, f32);
  EXPECT_LE(i8, 2'600'000'000u);
  EXPECT_LE(f16, 5'100'000'000u);
  // 584 B/token/layer (512 + 64 bytes, two f32 scales) plus the tile tables.
  EXPECT_EQ(i8, sizeof(LatentCache) +
                    27 * (sizeof(std::vector<void*>) + sizeof(std::int64_t) + 2 * sizeof(void*) + sizeof(std::size_t)) +
                    std::size_t{27} * 1280 * (8 + 584 * 128));  // 128-token tiles
  EXPECT_EQ(f32 - f16, std::size_t{27} * 1280 * 1152 * 128);  // f16: no per-token overhead
}

// A layer's tiles lie in one reserved range, in order (every OS: see
// platform/memory.h), so attention reads a layer as one stream.
TEST(LatentCache, LayerTilesAreContiguous) {
  LatentCacheConfig cfg{2, 512, 64, 4096, LatentStorage::int8, 64};
  LatentCache c(cfg);
  std::vector<float> ckv(200 * 512, 0.5f), kpe(200 * 64, -0.25f);
  for (int l = 0; l < 2; ++l) c.write(l, 0, 200, ckv.data(), kpe.data());
  const std::size_t stride = (c.layout().bytes + 63) / 64 * 64;
  for (int l = 0; l < 2; ++l) {
    const LatentLayerView v = c.view(l);
    for (int t = 1; t < 4; ++t)
      EXPECT_EQ(static_cast<const std::uint8_t*>(v.tiles[t]) - static_cast<const std::uint8_t*>(v.tiles[t - 1]),
                static_cast<std::ptrdiff_t>(stride));
    EXPECT_EQ(v.tiles[4], nullptr);  // not written yet
  }
  std::vector<float> c_back(512), k_back(64);
  c.read_row(1, 199, c_back.data(), k_back.data());
  EXPECT_NEAR(c_back[7], 0.5f, 0.5f / 127);
  EXPECT_NEAR(k_back[3], -0.25f, 0.25f / 127);
}

TEST(LatentCache, BytesGrowByTileAndMatchBytesFor) {
  for (LatentStorage s : {LatentStorage::f32, LatentStorage::f16, LatentStorage::int8, LatentStorage::int4}) {
    LatentCacheConfig cfg{3, 64, 16, 200, s, 64};
    LatentCache c(cfg);
    const std::size_t empty = c.bytes();
    EXPECT_EQ(empty, LatentCache::bytes_for(3, 64, 16, 200, s, 64) - 3 * 4 * c.layout().bytes);
    auto ck = rnd(200 * 64, 1), kp = rnd(200 * 16, 2);
    c.write(0, 0, 1, ck.data(), kp.data());
    EXPECT_EQ(c.bytes(), empty + c.layout().bytes);
    c.write(0, 1, 63, ck.data() + 64, kp.data() + 16);  // same tile
    EXPECT_EQ(c.bytes(), empty + c.layout().bytes);
    c.write(0, 64, 1, ck.data(), kp.data());  // next tile
    EXPECT_EQ(c.bytes(), empty + 2 * c.layout().bytes);
    for (int l = 0; l < 3; ++l) c.write(l, c.size(l), 200 - static_cast<int>(c.size(l)), ck.data(), kp.data());
    EXPECT_EQ(c.bytes(), LatentCache::bytes_for(3, 64, 16, 200, s, 64)) << latent_storage_name(s);
  }
}

TEST(LatentCache, RowsRoundTrip) {
  LatentCacheConfig cfg{2, 512, 64, 300, LatentStorage::f32, 64};
  for (LatentStorage s : {LatentStorage::f32, LatentStorage::f16, LatentStorage::int8, LatentStorage::int4}) {
    cfg.storage = s;
    LatentCache c(cfg);
    auto ck = rnd(100 * 512, 3), kp = rnd(100 * 64, 4);
    c.write(1, 0, 100, ck.data(), kp.data());
    EXPECT_EQ(c.size(1), 100);
    EXPECT_EQ(c.size(0), 0);
    std::vector<float> a(512), b(64);
    const double tol = s == LatentStorage::f32 ? 0 : s == LatentStorage::f16 ? 2e-3 : 2.0 / 127 / 2 * 1.0001;
    // int4's latents: half a step of max / 7 (k_pe stays int8), after int8's
    // in the filling tile they passed through.
    const double tol_lat = s == LatentStorage::int4 ? (2.0 / 7 / 2 + 2.0 / 127 / 2) * 1.0001 : tol;
    for (int j : {0, 63, 64, 99}) {
      c.read_row(1, j, a.data(), b.data());
      for (int i = 0; i < 512; ++i) ASSERT_NEAR(a[i], ck[j * 512 + i], tol_lat + 1e-7);
      for (int i = 0; i < 64; ++i) ASSERT_NEAR(b[i], kp[j * 64 + i], tol + 1e-7);
    }
  }
}

TEST(LatentCache, RefusesBadArguments) {
  EXPECT_EQ(status_of([] { LatentCache c({0, 512, 64, 10, LatentStorage::int8, 64}); }), Status::invalid_argument);
  EXPECT_EQ(status_of([] { LatentCache c({1, 510, 64, 10, LatentStorage::int8, 64}); }), Status::invalid_argument);
  EXPECT_EQ(status_of([] { LatentCache c({1, 512, 64, 10, LatentStorage::int8, 48}); }), Status::invalid_argument);
  EXPECT_EQ(status_of([] { LatentCache c({1, 512, 64, 0, LatentStorage::f16, 64}); }), Status::invalid_argument);
  LatentCache c({2, 32, 8, 100, LatentStorage::int8, 32});
  auto ck = rnd(101 * 32, 5), kp = rnd(101 * 8, 6);
  EXPECT_EQ(status_of([&] { c.write(2, 0, 1, ck.data(), kp.data()); }), Status::invalid_argument);
  EXPECT_EQ(status_of([&] { c.write(0, 5, 1, ck.data(), kp.data()); }), Status::invalid_argument);  // hole
  EXPECT_EQ(status_of([&] { c.write(0, 0, 101, ck.data(), kp.data()); }), Status::context_overflow);
  EXPECT_EQ(c.size(0), 0);
  c.write(0, 0, 100, ck.data(), kp.data());
  EXPECT_EQ(status_of([&] { c.write(0, 100, 1, ck.data(), kp.data()); }), Status::context_overflow);
  EXPECT_EQ(status_of([&] { c.read_row(0, 100, ck.data(), kp.data()); }), Status::invalid_argument);
  const std::size_t held = c.bytes();
  c.truncate(10);
  EXPECT_EQ(c.size(0), 10);
  EXPECT_EQ(c.bytes(), held);  // keeps its tiles
  c.write(0, 10, 1, ck.data(), kp.data());
  EXPECT_EQ(c.size(0), 11);
}

// The cache's view drives the kernels: decode over it equals the reference.
TEST(LatentCache, ViewFeedsDecodeKernel) {
  const int nh = 16, d_c = 512, d_R = 64, n = 777;
  for (LatentStorage s : {LatentStorage::f16, LatentStorage::int8, LatentStorage::int4}) {
    LatentCache c({1, d_c, d_R, 4096, s, 64});
    auto ck = rnd(n * d_c, 7), kp = rnd(n * d_R, 8);
    for (int j = 0; j < n; j += 100) c.write(0, j, std::min(100, n - j), ck.data() + j * d_c, kp.data() + j * d_R);
    auto ql = rnd(nh * d_c, 9), qp = rnd(nh * d_R, 10);
    std::vector<float> ref(nh * d_c), got(nh * d_c);
    kernels::MlaDecodeArgs a;
    a.n_heads = nh;
    a.q_lat = ql.data();
    a.q_pe = qp.data();
    a.scale = 1.f / std::sqrt(192.f);
    a.cache = c.view(0);
    a.n_ctx = c.size(0);
    a.threads = 2;
    a.out = ref.data();
    kernels::mla_decode_ref(a);
    a.out = got.data();
    kernels::mla_decode(a);
    double num = 0, den = 0;
    for (int i = 0; i < nh * d_c; ++i) {
      num += (got[i] - ref[i]) * (got[i] - ref[i]);
      den += ref[i] * ref[i];
    }
    EXPECT_LE(num / den, latent_storage_quantized(s) ? 1.5e-3 : 1e-9) << latent_storage_name(s);
  }
}

}  // namespace
// f16 rows saturate finite values past its range (they became inf, and
// latent_tile_problem then refused the tile a session had saved).
TEST(LatentCache, F16RowsSaturate) {
  const LatentTileLayout L = make_latent_tile_layout(LatentStorage::f16, 64, 16, 32);
  std::vector<std::uint8_t> tile(L.bytes, 0);
  std::vector<float> kv(64, 1.f), pe(16, -2.f);
  kv[5] = 1e6f;
  pe[3] = -7e4f;
  latent_store_row(L, tile.data(), 0, kv.data(), pe.data());
  EXPECT_EQ(latent_tile_problem(L, tile.data()), "");
  std::vector<float> kv2(64), pe2(16);
  latent_load_row(L, tile.data(), 0, kv2.data(), pe2.data());
  EXPECT_EQ(kv2[5], 65504.f);
  EXPECT_EQ(pe2[3], -65504.f);
  EXPECT_EQ(kv2[4], 1.f);
}

}  // namespace latte

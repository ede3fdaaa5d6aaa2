// The latent cache's row formats: layouts, the int8 and int4 quantizers,
// round trips, the int8 and int4 byte layouts the kernels rely on, and the
// refused cases.
#include "quant/latent_formats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <limits>
#include <vector>

#include "quant/fp16.h"
#include "tests/kernels/kernel_test_util.h"

namespace latte {
namespace {

TEST(LatentFormats, NamesRoundTrip) {
  for (LatentStorage s : {LatentStorage::f32, LatentStorage::f16, LatentStorage::int8, LatentStorage::int4})
    EXPECT_EQ(parse_latent_storage(latent_storage_name(s)), s);
  EXPECT_FALSE(parse_latent_storage("q4_0").has_value());
}

TEST(LatentFormats, TileBytes) {
  // V2-Lite rows: 576 elements.
  EXPECT_EQ(make_latent_tile_layout(LatentStorage::f32, 512, 64, 64).bytes, 576u * 4 * 64);
  EXPECT_EQ(make_latent_tile_layout(LatentStorage::f16, 512, 64, 64).bytes, 576u * 2 * 64);
  auto i8 = make_latent_tile_layout(LatentStorage::int8, 512, 64, 64);
  EXPECT_EQ(i8.bytes, 584u * 64);  // 576 bytes + two f32 scales per token
  EXPECT_EQ(i8.scale_offset, 576u * 64);
  EXPECT_EQ(i8.rope_scale_offset, 580u * 64);
  auto i4 = make_latent_tile_layout(LatentStorage::int4, 512, 64, 64);
  EXPECT_EQ(i4.bytes, 324u * 64 + 2 * 512);  // 256 + 64 bytes + an f32 rope scale per token, an f16 scale per channel
  EXPECT_EQ(i4.rope_offset, 256u * 64);
  EXPECT_EQ(i4.rope_scale_offset, 320u * 64);
  EXPECT_EQ(i4.channel_scale_offset, 324u * 64);
  EXPECT_EQ(make_latent_tile_layout(LatentStorage::int4, 512, 64, 128).bytes, 332u * 128);  // the cache's tiles
  EXPECT_THROW(make_latent_tile_layout(LatentStorage::int4, 510, 64, 64), std::invalid_argument);
  EXPECT_THROW(make_latent_tile_layout(LatentStorage::int4, 512, 62, 64), std::invalid_argument);
}

TEST(LatentFormats, InvalidLayoutsAreRefused) {
  EXPECT_THROW(make_latent_tile_layout(LatentStorage::int8, 510, 64, 64), std::invalid_argument);
  EXPECT_THROW(make_latent_tile_layout(LatentStorage::int8, 512, 62, 64), std::invalid_argument);
  EXPECT_THROW(make_latent_tile_layout(LatentStorage::f32, 512, 64, 48), std::invalid_argument);
  EXPECT_THROW(make_latent_tile_layout(LatentStorage::f32, 0, 64, 64), std::invalid_argument);
  EXPECT_NO_THROW(make_latent_tile_layout(LatentStorage::f16, 37, 6, 32));
  // int8 tiles past kLatentInt8MaxTileTokens: the kernels' int32 value sums
  // would wrap (a 70016-token tile of flat weights gave -2.8 for 1).
  EXPECT_THROW(make_latent_tile_layout(LatentStorage::int8, 16, 4, kLatentInt8MaxTileTokens + 32), std::invalid_argument);
  EXPECT_NO_THROW(make_latent_tile_layout(LatentStorage::int8, 16, 4, kLatentInt8MaxTileTokens));
  EXPECT_NO_THROW(make_latent_tile_layout(LatentStorage::f32, 16, 4, kLatentInt8MaxTileTokens + 32));
  // Likewise rows wider than kLatentInt8MaxChannels (their scores' int32
  // sums: d_c 70000 wrapped), once storable past 4096 channels.
  EXPECT_THROW(make_latent_tile_layout(LatentStorage::int8, kLatentInt8MaxChannels + 4, 4, 32), std::invalid_argument);
  EXPECT_THROW(make_latent_tile_layout(LatentStorage::int8, 16, kLatentInt8MaxChannels + 4, 32), std::invalid_argument);
  EXPECT_NO_THROW(make_latent_tile_layout(LatentStorage::int8, kLatentInt8MaxChannels, kLatentInt8MaxChannels, 32));
  EXPECT_STREQ(latent_layout_problem(LatentStorage::int8, 512, 64, 64), "");
}

TEST(LatentFormats, Int8QuantizerRoundsToNearestWithRowScale) {
  const float x[] = {0.f, 1.f, -2.54f, 2.54f, 0.01f, 0.025f, -1.26f};
  std::int8_t q[7];
  const float s = latent_quantize_int8(x, 7, q);
  EXPECT_FLOAT_EQ(s, 2.54f / 127);
  const int want[] = {0, 50, -127, 127, 0, 1, -63};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(q[i], want[i]) << i;
  std::vector<float> z(9, 0.f);
  std::int8_t qz[9];
  EXPECT_EQ(latent_quantize_int8(z.data(), 9, qz), 0.f);
  for (auto v : qz) EXPECT_EQ(v, 0);
  // A NaN or inf stays visible: NaN scale (not a finite row of garbage).
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    float xb[7];
    std::copy(x, x + 7, xb);
    xb[3] = bad;
    EXPECT_TRUE(std::isnan(latent_quantize_int8(xb, 7, q))) << bad;
    for (auto v : q) EXPECT_EQ(v, 0);
  }
}

// Row by row (int4: the tile whole, latent_store_tile): each value within
// half its scale's step: a row's (int8), a channel's over the tile (int4).
TEST(LatentFormats, RowsRoundTripEveryStorage) {
  for (LatentStorage s : {LatentStorage::f32, LatentStorage::f16, LatentStorage::int8, LatentStorage::int4}) {
    auto L = make_latent_tile_layout(s, 36, 8, 32);
    std::vector<std::uint8_t> tile(L.bytes, 0xAB);
    std::vector<std::vector<float>> c(32), r(32);
    std::vector<float> rows(32 * 44);
    for (int t = 0; t < 32; ++t) {
      c[t] = test::random_vector(36, 100 + t, -3.f, 3.f);
      for (int i = 0; i < 36; ++i) c[t][i] *= 0.05f + static_cast<float>(i) / 8;  // channels of different sizes
      r[t] = test::random_vector(8, 200 + t, -0.5f, 0.5f);
      std::copy(c[t].begin(), c[t].end(), rows.begin() + t * 44);
      std::copy(r[t].begin(), r[t].end(), rows.begin() + t * 44 + 36);
      if (s != LatentStorage::int4) latent_store_row(L, tile.data(), t, c[t].data(), r[t].data());
    }
    if (s == LatentStorage::int4) latent_store_tile(L, tile.data(), 32, rows.data());
    for (int t = 0; t < 32; ++t) {
      float a[36], b[8];
      latent_load_row(L, tile.data(), t, a, b);
      for (int i = 0; i < 36; ++i) {
        float want = c[t][i];
        if (s == LatentStorage::f16) want = fp16_to_f32(f32_to_fp16(want));
        double amax = 0;
        if (s == LatentStorage::int4)
          for (int u = 0; u < 32; ++u) amax = std::max(amax, std::fabs(static_cast<double>(c[u][i])));
        else
          for (float v : c[t]) amax = std::max(amax, std::fabs(static_cast<double>(v)));
        // int4's scale is rounded to f16 (2^-11 of itself, times 7 steps).
        const double tol = s == LatentStorage::int8   ? amax / 127 / 2 * 1.0001
                           : s == LatentStorage::int4 ? amax / 7 / 2 * 1.0001 + amax * 0x1p-11
                                                      : 0.0;
        ASSERT_NEAR(a[i], want, tol) << latent_storage_name(s) << " t=" << t << " c=" << i;
      }
      for (int i = 0; i < 8; ++i) {
        double amax = 0;
        for (float v : r[t]) amax = std::max(amax, std::fabs(static_cast<double>(v)));
        const float want = s == LatentStorage::f16 ? fp16_to_f32(f32_to_fp16(r[t][i])) : r[t][i];
        ASSERT_NEAR(b[i], want, latent_storage_quantized(s) ? amax / 127 / 2 * 1.0001 : 0.0);
      }
    }
  }
}

// d_R = 0 is a valid layout, and the rope row may then be null (nothing to
// read or write): memcpy with a null pointer is undefined even for 0 bytes
// (UBSan reported it in latent_store_row and latent_load_row).
TEST(LatentFormats, NoRopePartTakesNullRopeRows) {
  for (LatentStorage s : {LatentStorage::f32, LatentStorage::f16, LatentStorage::int8, LatentStorage::int4}) {
    auto L = make_latent_tile_layout(s, 8, 0, 32);
    std::vector<std::uint8_t> tile(L.bytes, 0);
    const float c[8] = {1, -2, 3, -4, 5, -6, 7, -8};
    if (s == LatentStorage::int4) {
      std::vector<float> rows(32 * 8, 0.f);
      std::copy(c, c + 8, rows.begin() + 31 * 8);
      latent_store_tile(L, tile.data(), 32, rows.data());
    } else {
      latent_store_row(L, tile.data(), 31, c, nullptr);
    }
    float back[8];
    latent_load_row(L, tile.data(), 31, back, nullptr);
    // int4: each channel's largest value maps to 7 steps of its f16 scale.
    for (int i = 0; i < 8; ++i) {
      const float tol = s == LatentStorage::int4 ? std::fabs(c[i]) * 0x1p-10f : 8.f / 127 / 2 * 1.0001f;
      EXPECT_NEAR(back[i], c[i], tol) << latent_storage_name(s) << " " << i;
    }
  }
}

// Rows wider than 4096 channels (kv_lora_rank is read from the model file,
// up to 2^20): the layout accepts them, so storing one must work too (it
// threw "latent row too wide" at the first token).
TEST(LatentFormats, Int8RowsWiderThan4096RoundTrip) {
  const int d_c = 4100, d_R = 4104;
  auto L = make_latent_tile_layout(LatentStorage::int8, d_c, d_R, 32);
  std::vector<std::uint8_t> tile(L.bytes, 0);
  const auto c = test::random_vector(d_c, 5, -2.f, 2.f), r = test::random_vector(d_R, 6, -0.5f, 0.5f);
  latent_store_row(L, tile.data(), 3, c.data(), r.data());
  std::vector<float> a(d_c), b(d_R);
  latent_load_row(L, tile.data(), 3, a.data(), b.data());
  const auto amax = [](const std::vector<float>& v) {
    float m = 0.f;
    for (float x : v) m = std::max(m, std::fabs(x));
    return m;
  };
  const float tc = amax(c) / 127 / 2 * 1.0001f, tr = amax(r) / 127 / 2 * 1.0001f;
  for (int i = 0; i < d_c; ++i) ASSERT_NEAR(a[i], c[i], tc) << i;
  for (int i = 0; i < d_R; ++i) ASSERT_NEAR(b[i], r[i], tr) << i;
  EXPECT_EQ(latent_tile_problem(L, tile.data()), "");
}

// The int8 byte layout the kernels rely on: block (g, k) of 16 bytes holds
// channels 4g..4g+3 (outer) x tokens 4k..4k+3 (inner), as q + 128; then the
// latent scales, then the rope scales.
TEST(LatentFormats, Int8ByteLayout) {
  auto L = make_latent_tile_layout(LatentStorage::int8, 8, 4, 32);
  std::vector<std::uint8_t> tile(L.bytes, 0);
  float c[8] = {127, -127, 0, 1, 2, 3, 4, 5};
  float r[4] = {0.5f, -0.5f, 0.25f, 0};
  latent_store_row(L, tile.data(), 5, c, r);  // token 5: token group 1, slot 1
  const std::size_t TG = 32 / 4;
  auto at = [&](int ch, int tok) { return tile[((ch / 4) * TG + tok / 4) * 16 + (ch % 4) * 4 + tok % 4]; };
  EXPECT_EQ(at(0, 5), 255);
  EXPECT_EQ(at(1, 5), 1);
  EXPECT_EQ(at(2, 5), 128);
  EXPECT_EQ(at(3, 5), 129);
  EXPECT_EQ(at(8, 5), 255);   // rope channel 0: 0.5 / (0.5/127)
  EXPECT_EQ(at(9, 5), 1);
  EXPECT_EQ(at(10, 5), 128 + 64);  // 63.5 rounds to even
  const float* sc = reinterpret_cast<const float*>(tile.data() + L.scale_offset);
  EXPECT_FLOAT_EQ(sc[5], 1.f);
  EXPECT_FLOAT_EQ(sc[32 + 5], 0.5f / 127);
  EXPECT_EQ(at(0, 4), 0);  // other tokens untouched
}

// The int4 byte layout the kernels rely on (quant/latent_formats.h): latent
// unit (g, u) of 64 bytes packs int8's 8 blocks of channels 4g..4g+3 x
// tokens 32u..32u+31 as nibbles q + 8, blocks 0-3 low, 4-7 high; the rope
// part is int8's layout from rope_offset; each latent channel's scale is its
// largest value over the tile / 7, as f16.
TEST(LatentFormats, Int4ByteLayout) {
  auto L = make_latent_tile_layout(LatentStorage::int4, 8, 4, 64);
  std::vector<std::uint8_t> tile(L.bytes, 0xEE);
  const float c[8] = {7, -7, 0, 1, 2, 3, 4, -5};
  const float r[4] = {0.5f, -0.5f, 0.25f, 0};
  auto nib = [&](int ch, int tok) {
    const int blk = (tok % 32) / 4;
    const std::uint8_t b = tile[((ch / 4) * (64 / 32) + tok / 32) * 64 + (blk % 4) * 16 + (ch % 4) * 4 + tok % 4];
    return blk >= 4 ? b >> 4 : b & 15;
  };
  auto rope = [&](int ch, int tok) { return tile[L.rope_offset + (tok / 4) * 16 + ch * 4 + tok % 4]; };
  std::vector<float> rows(64 * 12, 0.f);
  for (int tok : {5, 21, 40}) {  // unit 0 block 1 (low nibbles), unit 0 block 5 (high, same bytes), unit 1 block 2
    std::copy(c, c + 8, rows.begin() + tok * 12);
    std::copy(r, r + 4, rows.begin() + tok * 12 + 8);
  }
  rows[21 * 12 + 3] = 0.5f;  // half channel 3's largest value
  latent_store_tile(L, tile.data(), 50, rows.data());
  for (int tok : {5, 21, 40}) {
    EXPECT_EQ(nib(0, tok), 15) << tok;  // 7 / 1
    EXPECT_EQ(nib(1, tok), 1) << tok;   // -7 / 1
    EXPECT_EQ(nib(2, tok), 8) << tok;   // a zero channel
    EXPECT_EQ(nib(7, tok), 1) << tok;   // -5 / (5 / 7): channel group 1
    EXPECT_EQ(rope(0, tok), 255) << tok;
    EXPECT_EQ(rope(1, tok), 1) << tok;
    EXPECT_EQ(rope(2, tok), 128 + 64) << tok;
  }
  EXPECT_EQ(nib(3, 5), 15);
  EXPECT_EQ(nib(3, 21), 8 + 4);  // 0.5 / f16(1 / 7) = 3.5008 steps
  EXPECT_EQ(nib(0, 4), 8);       // zero rows, also beside a written one, and past the 50
  EXPECT_EQ(nib(0, 20), 8);
  EXPECT_EQ(nib(0, 60), 8);
  const auto* cs = reinterpret_cast<const std::uint16_t*>(tile.data() + L.channel_scale_offset);
  EXPECT_EQ(fp16_to_f32(cs[0]), 1.f);
  EXPECT_EQ(cs[3], f32_to_fp16(1.f / 7));
  EXPECT_EQ(fp16_to_f32(cs[2]), 0.f);
  const float* rs = reinterpret_cast<const float*>(tile.data() + L.rope_scale_offset);
  EXPECT_FLOAT_EQ(rs[5], 0.5f / 127);
  EXPECT_EQ(rs[60], 0.f);
  EXPECT_EQ(latent_tile_problem(L, tile.data()), "");
  float kv[8], pe[4];
  latent_load_row(L, tile.data(), 21, kv, pe);
  EXPECT_EQ(kv[7], -7.f * fp16_to_f32(f32_to_fp16(5.f / 7)));
  // A row of an int4 tile is its tile's: written or copied alone, refused.
  EXPECT_THROW(latent_store_row(L, tile.data(), 3, c, r), std::invalid_argument);
  EXPECT_THROW(latent_copy_row(L, tile.data(), 21, tile.data(), 20), std::invalid_argument);
  EXPECT_THROW(latent_store_tile(L, tile.data(), 65, rows.data()), std::invalid_argument);
}

// A channel holding a NaN or inf gets a NaN scale and zeros (visible
// downstream, as int8's rows), which latent_tile_problem names; a channel
// past f16's range saturates its scale at 65504 and clamps its values.
TEST(LatentFormats, Int4ChannelScalesOfBadAndHugeValues) {
  auto L = make_latent_tile_layout(LatentStorage::int4, 8, 4, 32);
  std::vector<float> rows(32 * 12, 1.f);
  rows[7 * 12 + 2] = std::numeric_limits<float>::quiet_NaN();
  rows[9 * 12 + 5] = 1e7f;
  std::vector<std::uint8_t> tile(L.bytes, 0);
  latent_store_tile(L, tile.data(), 32, rows.data());
  const auto* cs = reinterpret_cast<const std::uint16_t*>(tile.data() + L.channel_scale_offset);
  EXPECT_TRUE(std::isnan(fp16_to_f32(cs[2])));
  // Its values are zeros (nibble 8: channel 2 of group 0, tokens 0 and 7).
  EXPECT_EQ(tile[0 * 16 + 2 * 4 + 0] & 15, 8);
  EXPECT_EQ(tile[1 * 16 + 2 * 4 + 3] & 15, 8);
  EXPECT_EQ(fp16_to_f32(cs[5]), 65504.f);
  float kv[8], pe[4];
  latent_load_row(L, tile.data(), 9, kv, pe);
  EXPECT_EQ(kv[5], 7 * 65504.f);
  EXPECT_EQ(kv[0], 7 * fp16_to_f32(f32_to_fp16(1.f / 7)));
  EXPECT_NE(latent_tile_problem(L, tile.data()).find("latent channel 2: its scale is nan"), std::string::npos)
      << latent_tile_problem(L, tile.data());
}

}  // namespace
}  // namespace latte

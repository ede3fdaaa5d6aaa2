// Context shift (issue 42): LatentCache::shift and Session::shift /
// make_room. Moved rows' k_pe against the scalar RoPE at their new position,
// the model's own RoPE through a session (layer 0's rows depend on the token
// alone), decode after a shift against the reference over the same cache,
// shifts that add up, the edge cases, automatic shifts and session files.
// CMake runs these once per ISA (context_shift_<isa>, LATTE_ISA capped).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/isa.h"
#include "reference/model_reference.h"
#include "runtime/error.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/mla/latent_cache.h"
#include "runtime/mla/rope.h"
#include "runtime/model/model.h"
#include "runtime/session/session.h"
#include "tools/random_model.h"

namespace latte {
namespace {

// ---- the cache alone, against rope_apply_ref

struct RopeCase {
  const char* name;
  RopeParams rope;
};

std::vector<RopeCase> rope_cases() {
  std::vector<RopeCase> v;
  RopeParams r;  // DeepSeek-V2-Lite's: pairs, YaRN factor 40 from 4096
  r.style = RopeStyle::consecutive_pairs;
  r.dim = 64;
  r.freq_base = 10000;
  r.yarn = true;
  r.yarn_factor = 40;
  r.yarn_orig_ctx = 4096;
  r.yarn_log_multiplier = 0.0707;
  v.push_back({"deepseek2_yarn", r});
  RopeParams m;  // MiniCPM3's: half-split, per-pair factors, a magnitude in cos and sin
  m.style = RopeStyle::half_split;
  m.dim = 32;
  m.freq_base = 10000;
  m.attn_factor = 1.2;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> shortf(1.0f, 1.2f), longf(1.0f, 60.f);
  for (int i = 0; i < 16; ++i) m.freq_factors.push_back(shortf(rng));
  v.push_back({"minicpm3_short_factors", m});
  for (auto& f : m.freq_factors) f = longf(rng);
  v.push_back({"minicpm3_long_factors", m});
  m.yarn = true;  // and YaRN on top (its magnitude already in attn_factor)
  m.yarn_factor = 8;
  m.yarn_orig_ctx = 4096;
  v.push_back({"minicpm3_long_factors_yarn", m});
  return v;
}

// The per-element bound on a moved k_pe's error against the exact rotation,
// for a row whose stored values before the shift had max |.| = amax_old and
// whose exact values after it have magnitude |exact|:
//   f32: float rounding, 1e-5 of the row's largest value;
//   f16: the old rounding (<= 2^-11 |x| per value) turned (a pair's two
//        errors mix: sqrt(2) of it), plus the new one (<= 2^-11 |exact|);
//   int8: the same with the old step s_old = amax_old / 127 (error <= s/2)
//        and a fresh scale: sqrt(2)/2 s_old + s_new/2.
double kpe_bound(LatentStorage st, double amax_old, double amax_new, double exact) {
  switch (st) {
    case LatentStorage::f32: return 1e-5 * std::max(amax_old, 1e-3);
    case LatentStorage::f16: return std::ldexp(1.0, -11) * (std::sqrt(2.0) * amax_old + std::fabs(exact)) * 1.01 + 1e-6;
    case LatentStorage::int8:  // int4 keeps k_pe at int8 too
    case LatentStorage::int4: return (std::sqrt(2.0) / 2 * amax_old / 127 + 0.5 * amax_new / 127) * 1.01 + 1e-6;
  }
  return 0;
}

class CacheShift : public ::testing::TestWithParam<LatentStorage> {};

// A cache of the storage's own tile size (512 tokens for int4).
LatentCacheConfig cache_config(LatentStorage st, int n_layers, int d_c, int d_R, std::int64_t max_tokens) {
  LatentCacheConfig cc;
  cc.n_layers = n_layers;
  cc.d_c = d_c;
  cc.d_R = d_R;
  cc.max_tokens = max_tokens;
  cc.storage = st;
  return cc;
}

TEST_P(CacheShift, MovedRowsAreRopeAtTheirNewPosition) {
  const LatentStorage st = GetParam();
  for (const RopeCase& rc : rope_cases()) {
    SCOPED_TRACE(rc.name);
    const int dR = rc.rope.dim, dc = 32, n = 5000;  // past both original contexts (4096)
    LatentCache cache(cache_config(st, 2, dc, dR, n));
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.f, 1.f);
    // The unrotated keys, and each row as a prefill stores it: RoPE at its position.
    std::vector<float> raw(static_cast<std::size_t>(n) * dR), ckv(static_cast<std::size_t>(n) * dc);
    for (float& x : raw) x = nd(rng);
    for (float& x : ckv) x = nd(rng);
    for (int l = 0; l < 2; ++l)
      for (int p = 0; p < n; ++p) {
        std::vector<float> k(raw.begin() + p * dR, raw.begin() + (p + 1) * dR);
        rope_apply_ref(rc.rope, p, k.data());
        cache.write(l, p, 1, ckv.data() + static_cast<std::size_t>(p) * dc, k.data());
      }
    // What the rows hold before (dequantized): c_KV must move unchanged.
    std::vector<float> before(static_cast<std::size_t>(n) * (dc + dR));
    for (int p = 0; p < n; ++p) cache.read_row(1, p, &before[p * (dc + dR)], &before[p * (dc + dR) + dc]);
    // int4: each channel's largest value, which bounds its scale in any tile.
    std::vector<double> chmax(dc, 0.0);
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < dc; ++i) chmax[i] = std::max(chmax[i], std::fabs(double(before[p * (dc + dR) + i])));

    const int keep = 3, drop = 700;
    cache.shift(keep, drop, rope_turn(rc.rope, -drop), 2);
    ASSERT_EQ(cache.size(0), n - drop);
    ASSERT_EQ(cache.size(1), n - drop);
    double worst = 0, sum2 = 0, norm2 = 0, fresh2 = 0;
    std::vector<float> c(dc), k(dR);
    // What a fresh prefill would store at the new position: the exact row in
    // one store, the baseline the shift's error adds to.
    // (int4's k_pe is int8's: a row alone is stored in int8's layout.)
    const LatentTileLayout one =
        make_latent_tile_layout(st == LatentStorage::int4 ? LatentStorage::int8 : st, dc, dR, kLatentTileQuantum);
    std::vector<std::uint8_t> tile(one.bytes);
    std::vector<float> fresh(dR), fresh_c(dc);
    for (int l = 0; l < 2; ++l)
      for (int q = 0; q < n - drop; ++q) {
        const int p = q < keep ? q : q + drop;  // where the row came from
        cache.read_row(l, q, c.data(), k.data());
        const float* old = &before[p * (dc + dR)];
        if (st == LatentStorage::int4) {
          // int4 rows move through f32 into the tile they land in, which is
          // quantized again with its new rows' channel scales (latent_cache.h):
          // the old rounding and the new one, half a step each, a step at
          // most its channel's largest value / 7 (int8's, in the filling tile,
          // smaller).
          double amax_c = 0;
          for (int i = 0; i < dc; ++i) amax_c = std::max(amax_c, std::fabs(double(old[i])));
          for (int i = 0; i < dc; ++i)
            ASSERT_NEAR(c[i], old[i], chmax[i] / 7 * 1.01 + amax_c / 127 + 1e-6) << "c_KV of row " << q << " ch " << i;
        } else {
          ASSERT_EQ(0, std::memcmp(c.data(), old, sizeof(float) * dc)) << "c_KV of row " << q;
        }
        std::vector<double> exact(raw.begin() + p * dR, raw.begin() + (p + 1) * dR);
        rope_apply_ref(rc.rope, q, exact.data());
        double amax_old = 0, amax_new = 0;
        for (int i = 0; i < dR; ++i) {
          amax_old = std::max(amax_old, std::fabs(double(old[dc + i])));
          amax_new = std::max(amax_new, std::fabs(double(k[i])));
        }
        std::vector<float> exact_f(exact.begin(), exact.end());
        latent_store_row(one, tile.data(), 0, c.data(), exact_f.data());
        latent_load_row(one, tile.data(), 0, fresh_c.data(), fresh.data());
        for (int i = 0; i < dR; ++i) {
          if (q < keep) {  // kept rows are not touched
            ASSERT_EQ(k[i], old[dc + i]);
            continue;
          }
          const double err = std::fabs(k[i] - exact[i]);
          ASSERT_LE(err, kpe_bound(st, amax_old, amax_new, exact[i]))
              << "row " << q << " (from " << p << ") dim " << i << ": " << k[i] << " against " << exact[i];
          worst = std::max(worst, err / amax_old);
          sum2 += err * err;
          norm2 += exact[i] * exact[i];
          fresh2 += (fresh[i] - exact[i]) * (fresh[i] - exact[i]);
        }
      }
    // The shifted rows' error, and a fresh store's, relative to the rows' size.
    const auto sci = [](double x) {
      char b[32];
      std::snprintf(b, sizeof b, "%.3g", x);
      return std::string(b);
    };
    RecordProperty(std::string(rc.name) + "_max_err_over_row_max", sci(worst));
    RecordProperty(std::string(rc.name) + "_rms_err_rel", sci(std::sqrt(sum2 / norm2)));
    RecordProperty(std::string(rc.name) + "_fresh_store_rms_err_rel", sci(std::sqrt(fresh2 / norm2)));
  }
}

// Two shifts turn a row by the sum of their angles: the same as one shift by
// the sum, up to the rounding of the second store.
TEST_P(CacheShift, TwiceEqualsOnceByTheSum) {
  const LatentStorage st = GetParam();
  const RopeParams r = rope_cases()[0].rope;
  const LatentCacheConfig cc = cache_config(st, 1, 32, r.dim, 1000);
  LatentCache a(cc), b(cc);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> ckv(32), k(r.dim), all(1000 * 32);
  for (int p = 0; p < 1000; ++p) {
    for (float& x : ckv) x = nd(rng);
    for (float& x : k) x = nd(rng);
    rope_apply_ref(r, p, k.data());
    a.write(0, p, 1, ckv.data(), k.data());
    b.write(0, p, 1, ckv.data(), k.data());
    std::copy(ckv.begin(), ckv.end(), all.begin() + p * 32);
  }
  std::vector<double> chmax(32, 0.0);  // int4: bounds each channel's scale (/ 7)
  for (int p = 0; p < 1000; ++p)
    for (int i = 0; i < 32; ++i) chmax[i] = std::max(chmax[i], std::fabs(double(all[p * 32 + i])));
  double err2 = 0, step2 = 0;
  a.shift(5, 100, rope_turn(r, -100));
  a.shift(5, 250, rope_turn(r, -250));
  b.shift(5, 350, rope_turn(r, -350));
  ASSERT_EQ(a.size(0), b.size(0));
  std::vector<float> ca(32), ka(r.dim), cb(32), kb(r.dim);
  for (int q = 0; q < a.size(0); ++q) {
    a.read_row(0, q, ca.data(), ka.data());
    b.read_row(0, q, cb.data(), kb.data());
    if (st == LatentStorage::int4) {
      // A shift that moves rows across tiles quantizes each full tile again
      // (latent_cache.h): a row shifted twice is rounded three times, once
      // more than b's, each within half a step of at most its channel's
      // largest value / 7. The steps' RMS error stays that of independent
      // roundings (a row from the wrong place would be off by ~3 steps).
      const float* x = all.data() + (q < 5 ? q : q + 350) * 32;
      for (int i = 0; i < 32; ++i) {
        const double step = chmax[i] / 7 * 1.01;
        ASSERT_NEAR(ca[i], x[i], 1.5 * step + 1e-6) << "row " << q << " ch " << i;
        ASSERT_NEAR(cb[i], x[i], 1.0 * step + 1e-6) << "row " << q << " ch " << i;
        err2 += (ca[i] - x[i]) * (ca[i] - x[i]);
        step2 += step * step;
      }
    } else {
      ASSERT_EQ(0, std::memcmp(ca.data(), cb.data(), sizeof(float) * 32));
    }
    double amax = 0;
    for (float x : kb) amax = std::max(amax, std::fabs(double(x)));
    for (int i = 0; i < r.dim; ++i) {
      // One more rotation and store: f32 rounding, one f16 step, one int8 step.
      const double bound = st == LatentStorage::f32   ? 1e-5 * amax
                           : st == LatentStorage::f16 ? 3 * std::ldexp(1.0, -11) * amax
                                                      : 1.5 * amax / 127;
      ASSERT_NEAR(ka[i], kb[i], bound) << "row " << q << " dim " << i;
    }
  }
  // Three uniform roundings of at most a step: an RMS of at most half a step.
  if (st == LatentStorage::int4) {
    EXPECT_LE(std::sqrt(err2 / step2), 0.5);
  }
}

// A shift by whole tiles moves int4 tiles' rows together, so their channel
// scales come back the same and so do their values, bit for bit (as every
// storage's c_KV does).
TEST_P(CacheShift, WholeTilesMoveTheirLatentsExactly) {
  const LatentStorage st = GetParam();
  const RopeParams r = rope_cases()[0].rope;
  const int T = latent_cache_tile_tokens(st), n = 5 * T + 40;  // 5 full tiles and a filling one
  LatentCache c(cache_config(st, 1, 32, r.dim, n));
  ASSERT_EQ(c.config().tile_tokens, T);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> ckv(32), k(r.dim);
  for (int p = 0; p < n; ++p) {
    for (float& x : ckv) x = nd(rng) * (1 + p % 3);
    for (float& x : k) x = nd(rng);
    c.write(0, p, 1, ckv.data(), k.data());
  }
  std::vector<float> before(static_cast<std::size_t>(n) * 32), kb(r.dim);
  for (int p = 0; p < n; ++p) c.read_row(0, p, &before[p * 32], kb.data());
  c.shift(T, 2 * T, rope_turn(r, -2 * T));
  ASSERT_EQ(c.size(0), n - 2 * T);
  std::vector<float> got(32);
  for (int q = 0; q < c.size(0); ++q) {
    c.read_row(0, q, got.data(), kb.data());
    const int p = q < T ? q : q + 2 * T;
    ASSERT_EQ(0, std::memcmp(got.data(), &before[p * 32], sizeof(float) * 32)) << "row " << q;
  }
}

TEST_P(CacheShift, RefusesWhatItCannotDoAndChangesNothing) {
  LatentCache c(cache_config(GetParam(), 2, 32, 8, 64));
  std::vector<float> ckv(32 * 40, 0.5f), kpe(8 * 40, 0.25f);
  c.write(0, 0, 40, ckv.data(), kpe.data());
  c.write(1, 0, 39, ckv.data(), kpe.data());  // the shorter layer bounds the shift
  RopeParams r;
  r.dim = 8;
  const RopeTurn t = rope_turn(r, -3);
  const std::vector<std::pair<int, int>> refused = {{-1, 3}, {3, -1}, {37, 3}, {0, 40}};
  for (auto [keep, drop] : refused) {
    try {
      c.shift(keep, drop, t);
      ADD_FAILURE() << keep << ", " << drop << " was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::invalid_argument) << e.what();
    }
    EXPECT_EQ(c.size(0), 40);
    EXPECT_EQ(c.size(1), 39);
  }
  RopeParams r2;
  r2.dim = 16;
  EXPECT_THROW(c.shift(1, 3, rope_turn(r2, -3)), Error);  // a turn of other width
  c.shift(36, 3, t);  // the most the shorter layer allows
  EXPECT_EQ(c.size(0), 37);
  EXPECT_EQ(c.size(1), 36);
}

INSTANTIATE_TEST_SUITE_P(Storage, CacheShift,
                         ::testing::Values(LatentStorage::f32, LatentStorage::f16, LatentStorage::int8, LatentStorage::int4),
                         [](const auto& i) { return std::string(latent_storage_name(i.param)); });

// ---- sessions of random-weight models

struct ModelCase {
  const char* name;
  RandomModelSpec spec;
};

std::vector<ModelCase> model_cases() {
  std::vector<ModelCase> v;
  RandomModelSpec s;
  s.n_layers = 2;
  s.d_rope = 16;
  s.q_lora_rank = 24;
  v.push_back({"deepseek2_yarn", s});  // YaRN from 128 tokens: the tests run to 300
  RandomModelSpec m = s;
  m.arch = ModelArch::minicpm3;
  m.layout = KvLayout::legacy;
  m.yarn = false;
  m.rope_factors = true;
  v.push_back({"minicpm3_short_factors", m});
  m.context_length = 48;  // a context of 400 is long for it
  v.push_back({"minicpm3_long_factors", m});
  m.context_length = 4096;
  m.yarn = true;  // YaRN's magnitude in cos and sin, long factors past 128
  m.yarn_log_multiplier = 0;  // deepseek2's alone (refused elsewhere)
  v.push_back({"minicpm3_yarn_long_factors", m});
  RandomModelSpec p = s;
  p.arch = ModelArch::plm;
  p.layout = KvLayout::legacy;
  p.q_lora_rank = 0;
  p.tied_output = true;
  p.yarn_log_multiplier = 0;
  v.push_back({"plm_yarn", p});
  return v;
}

std::vector<std::int32_t> some_tokens(int n, int n_vocab, int seed) {
  std::vector<std::int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 37 + seed * 11 + 5) % n_vocab);
  return t;
}

struct ShiftParam {
  ModelCase model;
  LatentStorage cache;
};

void PrintTo(const ShiftParam& p, std::ostream* os) { *os << p.model.name << ", " << latent_storage_name(p.cache); }

class SessionShift : public ::testing::TestWithParam<ShiftParam> {
 protected:
  SessionOptions options() const {
    SessionOptions o;
    o.cache = GetParam().cache;
    o.n_ctx = 400;
    o.prefill_chunk = 64;
    o.threads = 2;
    return o;
  }
};

// Layer 0's rows depend on their token alone (c_KV) and its position (k_pe):
// after a shift they must be what a fresh prefill of the kept tokens writes,
// the model's own RoPE (YaRN, factor sets, magnitude) at the new positions.
TEST_P(SessionShift, LayerZeroRowsAreAFreshPrefills) {
  const ShiftParam& c = GetParam();
  auto model = Model::from_file(GgufFile::from_bytes(random_model_bytes(c.model.spec)));
  Session a(model, options()), b(model, options());
  a.prefill(some_tokens(300, c.model.spec.n_vocab, 1));
  a.shift(7, 150);
  ASSERT_EQ(a.n_past(), 150);
  EXPECT_EQ(a.n_unshifted(), 7);
  const std::vector<std::int32_t> kept(a.tokens().begin(), a.tokens().end());
  b.prefill(kept);
  const int dc = a.cache().config().d_c, dR = a.cache().config().d_R;
  std::vector<float> ca(dc), ka(dR), cb(dc), kb(dR);
  // int4: each channel's largest value in b, which bounds its scale (/ 7).
  std::vector<double> chmax(dc, 0.0);
  for (std::int64_t q = 0; q < b.n_past(); ++q) {
    b.cache().read_row(0, q, cb.data(), kb.data());
    for (int i = 0; i < dc; ++i) chmax[i] = std::max(chmax[i], std::fabs(double(cb[i])));
  }
  for (std::int64_t q = 0; q < a.n_past(); ++q) {
    a.cache().read_row(0, q, ca.data(), ka.data());
    b.cache().read_row(0, q, cb.data(), kb.data());
    double amax = 0;
    for (int i = 0; i < dR; ++i) amax = std::max(amax, std::fabs(double(kb[i])));
    // int4: a's rows were rounded in the tiles they were written to and
    // again in those the shift moved them to (latent_cache.h), b's once:
    // half a step each, a step at most the channel's largest value / 7
    // (int8's, in the filling tile, smaller).
    double amax_c = 0;
    for (int i = 0; i < dc; ++i) amax_c = std::max(amax_c, std::fabs(double(cb[i])));
    for (int i = 0; i < dc; ++i)
      ASSERT_NEAR(ca[i], cb[i],
                  c.cache == LatentStorage::int4 ? 1.5 * chmax[i] / 7 * 1.02 + amax_c * 2.0 / 254 + 1e-6
                                                 : 1e-5 * (1 + std::fabs(cb[i])))
          << "c_KV, row " << q << " ch " << i;
    // b's rows are one store of the exact value, a's two (kpe_bound's terms).
    const double bound = c.cache == LatentStorage::f32   ? 1e-5 * amax
                         : c.cache == LatentStorage::f16 ? 4 * std::ldexp(1.0, -11) * amax
                                                         : 2.0 * amax / 127;
    for (int i = 0; i < dR; ++i) ASSERT_NEAR(ka[i], kb[i], bound) << "k_pe, row " << q << " dim " << i;
  }
}

double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return num / den;
}

// Decode after a shift: the kernels (this ISA's) over the shifted cache
// against the scalar reference over the same cache, read back.
TEST_P(SessionShift, DecodeAfterShiftMatchesTheReferenceOverTheSameCache) {
  const ShiftParam& c = GetParam();
  const auto bytes = random_model_bytes(c.model.spec);
  auto model = Model::from_file(GgufFile::from_bytes(bytes));
  const auto file = GgufFile::from_bytes(bytes);
  ModelReference ref(file, options().n_ctx);
  Session s(model, options());
  s.prefill(some_tokens(300, c.model.spec.n_vocab, 2));
  s.shift(4, 170);
  for (int step = 0; step < 3; ++step) {
    ref.load_cache(s.cache());
    const std::int32_t t = (step * 53 + 9) % c.model.spec.n_vocab;
    s.decode(t);
    const std::vector<float> want = ref.forward(std::span(&t, 1), MlaForm::absorbed);
    const std::vector<float> got(s.logits().begin(), s.logits().end());
    // f32 and f16 caches: the kernels' f32 sums against double (measured
    // up to 7e-12). int8: the kernel quantizes the query too, as without a
    // shift (measured up to 9.4e-7).
    const double bound = latent_storage_quantized(c.cache) ? 1e-5 : 1e-10;
    EXPECT_LT(nmse(got, want), bound) << isa_name(active_isa()) << ", step " << step;
    char b[32];
    std::snprintf(b, sizeof b, "%.3g", nmse(got, want));
    RecordProperty("nmse_step" + std::to_string(step), b);
  }
  if (s.cache().config().storage == LatentStorage::f32) {
    // More tokens at once after a shift (a prefill chunk), same comparison.
    ref.load_cache(s.cache());
    const auto more = some_tokens(20, c.model.spec.n_vocab, 3);
    std::vector<float> got;
    s.prefill(more, &got);
    EXPECT_LT(nmse(got, ref.forward(more, MlaForm::absorbed)), 1e-8);
  }
}

// Two shifts and one by their sum leave the same session: tokens, positions,
// and logits of the next decode within the cache type's rounding.
TEST_P(SessionShift, TwiceEqualsOnceByTheSum) {
  const ShiftParam& c = GetParam();
  auto model = Model::from_file(GgufFile::from_bytes(random_model_bytes(c.model.spec)));
  Session a(model, options()), b(model, options());
  const auto toks = some_tokens(320, c.model.spec.n_vocab, 4);
  a.prefill(toks);
  b.prefill(toks);
  a.shift(10, 60);
  a.shift(10, 90);
  b.shift(10, 150);
  ASSERT_EQ(std::vector<std::int32_t>(a.tokens().begin(), a.tokens().end()),
            std::vector<std::int32_t>(b.tokens().begin(), b.tokens().end()));
  a.decode(17);
  b.decode(17);
  const std::vector<float> la(a.logits().begin(), a.logits().end()), lb(b.logits().begin(), b.logits().end());
  EXPECT_LT(nmse(la, lb), c.cache == LatentStorage::f32 ? 1e-10 : 1e-4);
}

std::vector<ShiftParam> shift_params() {
  std::vector<ShiftParam> v;
  for (const ModelCase& m : model_cases())
    for (LatentStorage st : {LatentStorage::f32, LatentStorage::f16, LatentStorage::int8, LatentStorage::int4}) v.push_back({m, st});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Models, SessionShift, ::testing::ValuesIn(shift_params()), [](const auto& i) {
  return std::string(i.param.model.name) + "_" + latent_storage_name(i.param.cache);
});

// ---- edge cases, automatic shifts, files

std::shared_ptr<const Model> small_model() {
  RandomModelSpec s;
  s.n_layers = 2;
  return Model::from_file(GgufFile::from_bytes(random_model_bytes(s)));
}

TEST(SessionShiftEdges, RefusedOrHandledAsDocumented) {
  auto model = small_model();
  SessionOptions o;
  o.n_ctx = 64;
  o.threads = 1;
  Session s(model, o);
  s.shift(0, 0);  // an empty session: nothing to do, not an error
  const auto toks = some_tokens(40, 300, 5);
  s.prefill(toks);
  const std::vector<float> logits(s.logits().begin(), s.logits().end());
  auto same = [&] {
    EXPECT_EQ(s.n_past(), 40);
    EXPECT_EQ(std::vector<std::int32_t>(s.tokens().begin(), s.tokens().end()), toks);
    EXPECT_TRUE(s.has_logits());
    EXPECT_EQ(std::vector<float>(s.logits().begin(), s.logits().end()), logits);
    EXPECT_EQ(s.n_unshifted(), 40);
  };
  const std::vector<std::pair<std::int64_t, std::int64_t>> refused = {{-1, 5}, {5, -1}, {30, 11}, {41, 0}, {0, 41}};
  for (auto [keep, drop] : refused) {
    try {
      s.shift(keep, drop);
      ADD_FAILURE() << keep << ", " << drop << " was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::invalid_argument) << e.what();
    }
    same();
  }
  s.shift(12, 0);  // nothing dropped: nothing changes
  s.shift(40, 0);
  same();
  // The last token stays, so do its logits.
  s.shift(0, 10);
  EXPECT_EQ(s.n_past(), 30);
  EXPECT_TRUE(s.has_logits());
  EXPECT_EQ(std::vector<float>(s.logits().begin(), s.logits().end()), logits);
  EXPECT_EQ(s.n_unshifted(), 0);
  EXPECT_EQ(std::vector<std::int32_t>(s.tokens().begin(), s.tokens().end()),
            std::vector<std::int32_t>(toks.begin() + 10, toks.end()));
  // Dropping everything after n_keep is truncate(n_keep): nothing moves.
  Session t(model, o);
  t.prefill(toks);
  t.shift(15, 25);
  EXPECT_EQ(t.n_past(), 15);
  EXPECT_FALSE(t.has_logits());
  EXPECT_EQ(t.n_unshifted(), 15);
  t.shift(0, 15);  // all of it
  EXPECT_EQ(t.n_past(), 0);
  // After a shift, truncating to its kept prefix makes the cache fresh again.
  Session u(model, o);
  u.prefill(toks);
  u.shift(8, 4);
  EXPECT_EQ(u.n_unshifted(), 8);
  u.truncate(20);
  EXPECT_EQ(u.n_unshifted(), 8);
  u.truncate(8);
  EXPECT_EQ(u.n_unshifted(), 8);
  u.prefill(toks);
  EXPECT_EQ(u.n_unshifted(), 48);
  u.shift(2, 1);
  u.reset();
  u.prefill(toks);
  EXPECT_EQ(u.n_unshifted(), 40);
}

TEST(SessionShiftEdges, AutomaticShiftKeepsTheStartAndDropsHalfTheRest) {
  auto model = small_model();
  SessionOptions o;
  o.n_ctx = 64;
  o.threads = 1;
  o.context_shift = true;
  o.shift_keep = 4;
  Session s(model, o);
  const auto toks = some_tokens(60, 300, 6);
  s.prefill(toks);
  s.prefill(some_tokens(10, 300, 7));  // 70 > 64: drop max((60 - 4) / 2, 6) = 28
  EXPECT_EQ(s.n_past(), 42);
  EXPECT_EQ(s.n_unshifted(), 4);
  EXPECT_EQ(std::vector<std::int32_t>(s.tokens().begin(), s.tokens().begin() + 4),
            std::vector<std::int32_t>(toks.begin(), toks.begin() + 4));
  EXPECT_EQ(s.tokens()[4], toks[32]);
  // More than fits beside the kept 4: refused, nothing changed.
  const std::vector<std::int32_t> before(s.tokens().begin(), s.tokens().end());
  try {
    s.prefill(some_tokens(61, 300, 8));
    ADD_FAILURE() << "61 tokens beside 4 kept in 64 were taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::context_overflow) << e.what();
  }
  EXPECT_EQ(std::vector<std::int32_t>(s.tokens().begin(), s.tokens().end()), before);
  // Decode across the boundary many times: the context never overflows.
  for (int i = 0; i < 200; ++i) s.decode(i % 300);
  EXPECT_LE(s.n_past(), 64);
  // Off: the overflow as before.
  o.context_shift = false;
  Session off(model, o);
  off.prefill(toks);
  EXPECT_THROW(off.prefill(some_tokens(10, 300, 7)), Error);
  EXPECT_EQ(off.make_room(4, 0), 0);
  EXPECT_EQ(off.make_room(10, 0), 30);  // half of 60
  EXPECT_EQ(off.n_past(), 30);
}

// A saved shifted session resumes exactly (its unshifted prefix kept); a
// version 2 file (before shifts) is refused, as every file before version 4.
TEST(SessionShiftEdges, SessionFilesKeepTheShift) {
  auto model = small_model();
  SessionOptions o;
  o.n_ctx = 64;
  o.threads = 1;
  o.cache = LatentStorage::int8;
  Session s(model, o);
  s.prefill(some_tokens(50, 300, 9));
  s.shift(3, 20);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("latte_shift_" + std::to_string(::getpid()) + ".session")).string();
  s.save_state(path);
  Session r(model, o);
  r.load_state(path);
  EXPECT_EQ(r.n_past(), 30);
  EXPECT_EQ(r.n_unshifted(), 3);
  s.decode(42);
  r.decode(42);
  EXPECT_EQ(std::vector<float>(s.logits().begin(), s.logits().end()),
            std::vector<float>(r.logits().begin(), r.logits().end()));
  // The same file as version 2 wrote it: field 68 was 0.
  std::vector<std::uint8_t> b;
  {
    std::ifstream in(path, std::ios::binary);
    b.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::uint32_t v2 = 2, zero = 0;
  std::memcpy(b.data() + 8, &v2, 4);
  std::memcpy(b.data() + 68, &zero, 4);
  const std::uint64_t sum = Session::state_checksum(b.data(), b.size() - 8);
  std::memcpy(b.data() + b.size() - 8, &sum, 8);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  // Refused since version 4 (its model fingerprint hashes the whole file):
  // no earlier file can be matched to its model.
  Session old(model, o);
  try {
    old.load_state(path);
    ADD_FAILURE() << "a version 2 file was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("format version 2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(old.n_past(), 0);
  // An unshifted prefix longer than the tokens: refused as malformed.
  const std::uint32_t v4 = 4, too_long = 31;
  std::memcpy(b.data() + 8, &v4, 4);
  std::memcpy(b.data() + 68, &too_long, 4);
  const std::uint64_t sum2 = Session::state_checksum(b.data(), b.size() - 8);
  std::memcpy(b.data() + b.size() - 8, &sum2, 8);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  Session bad(model, o);
  try {
    bad.load_state(path);
    ADD_FAILURE() << "an unshifted prefix past n_past was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::bad_file) << e.what();
    EXPECT_NE(std::string(e.what()).find("unshifted prefix 31 is longer than its 30 tokens"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace latte

// The MLA scalar reference: its two forms agree, RoPE/YaRN are pinned, and
// seed 000's worked example holds with corrected arithmetic.
#include "reference/mla_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "runtime/error.h"
#include "runtime/mla/rope.h"

namespace latte {
namespace {

RopeParams deepseek_yarn_rope(int d_rope) {
  RopeParams r;
  r.style = RopeStyle::consecutive_pairs;
  r.dim = d_rope;
  r.freq_base = 10000;
  r.yarn = true;
  r.yarn_factor = 40;
  r.yarn_orig_ctx = 4096;
  r.yarn_log_multiplier = 0.0707;  // 0.1 * mscale_all_dim (V2: 0.707)
  return r;
}

MlaConfig v2_lite_config(int q_lora) {
  MlaConfig c;
  c.d_model = 2048;
  c.n_heads = 16;
  c.q_lora_rank = q_lora;
  c.kv_lora_rank = 512;
  c.d_nope = 128;
  c.d_rope = 64;
  c.d_v = 128;
  c.rope = deepseek_yarn_rope(64);
  return c;
}

MlaConfig odd_config(int q_lora) {
  MlaConfig c;
  c.d_model = 29;
  c.n_heads = 3;
  c.q_lora_rank = q_lora;
  c.kv_lora_rank = 37;
  c.d_nope = 5;
  c.d_rope = 6;
  c.d_v = 7;
  c.rope = deepseek_yarn_rope(6);
  return c;
}

std::vector<float> random_rows(int n, int d, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(static_cast<std::size_t>(n) * d);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Prefill `n_prefill` tokens in one call, then `n_decode` single-token steps.
// Returns the outputs of all tokens (n_prefill + n_decode, d).
std::vector<float> run_layer(const MlaConfig& cfg, const MlaLayerWeights& w, MlaForm form,
                             const std::vector<float>& x, int n_prefill, int n_decode,
                             std::int64_t pos0) {
  const int n = n_prefill + n_decode, d = cfg.d_model;
  std::vector<std::int64_t> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = pos0 + i;
  std::vector<float> out(static_cast<std::size_t>(n) * d);
  MlaReferenceCache cache;
  mla_reference_forward(cfg, w, form, x.data(), n_prefill, pos.data(), cache, out.data());
  for (int t = n_prefill; t < n; ++t)
    mla_reference_forward(cfg, w, form, x.data() + static_cast<std::size_t>(t) * d, 1, &pos[t], cache,
                          out.data() + static_cast<std::size_t>(t) * d);
  EXPECT_EQ(cache.n_tokens(), n);
  return out;
}

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, mag = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::fabs(double(a[i]) - b[i]));
    mag = std::max(mag, std::fabs(double(b[i])));
  }
  return err / mag;
}

struct FormCase {
  const char* name;
  MlaConfig cfg;
};

class MlaForms : public ::testing::TestWithParam<FormCase> {};

// 7 prefill tokens, then 5 decode steps at positions 4100..4111 (past the
// original context of 4096, so YaRN's interpolation is in play).
TEST_P(MlaForms, NaiveAndAbsorbedAgree) {
  const MlaConfig& cfg = GetParam().cfg;
  const auto w = MlaLayerWeights::random(cfg, 42);
  const auto x = random_rows(12, cfg.d_model, 7);
  const auto naive = run_layer(cfg, w, MlaForm::naive, x, 7, 5, 4100);
  const auto absorbed = run_layer(cfg, w, MlaForm::absorbed, x, 7, 5, 4100);
  const double err = max_rel(absorbed, naive);
  EXPECT_LT(err, 1e-5) << GetParam().name;
  // The outputs are real: not all zero, and different per token.
  double mag = 0;
  for (float v : naive) mag = std::max(mag, std::fabs(double(v)));
  EXPECT_GT(mag, 1e-3);
  EXPECT_NE(naive[0], naive[static_cast<std::size_t>(cfg.d_model) * 11]);
}

// Prefill in one chunk equals the same tokens fed one by one.
TEST_P(MlaForms, PrefillEqualsStepByStep) {
  const MlaConfig& cfg = GetParam().cfg;
  const auto w = MlaLayerWeights::random(cfg, 43);
  const auto x = random_rows(12, cfg.d_model, 8);
  const auto chunked = run_layer(cfg, w, MlaForm::absorbed, x, 7, 5, 4100);
  const auto stepped = run_layer(cfg, w, MlaForm::absorbed, x, 1, 11, 4100);
  EXPECT_LT(max_rel(chunked, stepped), 1e-6);
}

// At these positions YaRN changes the result (so the agreement above covers it).
TEST_P(MlaForms, YarnMattersPast4096) {
  MlaConfig cfg = GetParam().cfg;
  const auto w = MlaLayerWeights::random(cfg, 44);
  const auto x = random_rows(12, cfg.d_model, 9);
  const auto with_yarn = run_layer(cfg, w, MlaForm::absorbed, x, 7, 5, 4100);
  cfg.rope.yarn = false;
  const auto without = run_layer(cfg, w, MlaForm::absorbed, x, 7, 5, 4100);
  EXPECT_GT(max_rel(with_yarn, without), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MlaForms,
    ::testing::Values(FormCase{"v2_lite", v2_lite_config(0)},
                      FormCase{"v2_lite_q_lora", v2_lite_config(1536)},
                      FormCase{"odd", odd_config(0)}, FormCase{"odd_q_lora", odd_config(11)}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(MlaReference, HalfSplitRopeFormsAgree) {
  MlaConfig cfg = odd_config(11);
  cfg.rope.style = RopeStyle::half_split;
  const auto w = MlaLayerWeights::random(cfg, 45);
  const auto x = random_rows(6, cfg.d_model, 10);
  const auto naive = run_layer(cfg, w, MlaForm::naive, x, 3, 3, 5000);
  const auto absorbed = run_layer(cfg, w, MlaForm::absorbed, x, 3, 3, 5000);
  EXPECT_LT(max_rel(absorbed, naive), 1e-5);
}

TEST(MlaReference, CausalMaskIgnoresLaterTokens) {
  const MlaConfig cfg = odd_config(0);
  const auto w = MlaLayerWeights::random(cfg, 46);
  auto x = random_rows(5, cfg.d_model, 11);
  const auto a = run_layer(cfg, w, MlaForm::absorbed, x, 5, 0, 10);
  for (int i = 0; i < cfg.d_model; ++i) x[4 * cfg.d_model + i] += 1.0f;  // change the last token
  const auto b = run_layer(cfg, w, MlaForm::absorbed, x, 5, 0, 10);
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < cfg.d_model; ++i)
      EXPECT_EQ(a[t * cfg.d_model + i], b[t * cfg.d_model + i]) << "token " << t;
  EXPECT_NE(a[4 * cfg.d_model], b[4 * cfg.d_model]);
}

TEST(MlaReference, RejectsBadShapes) {
  MlaConfig cfg = odd_config(0);
  cfg.d_rope = 5;
  cfg.rope.dim = 5;
  EXPECT_THROW(cfg.validate(), Error);
  MlaConfig ok = odd_config(0);
  auto w = MlaLayerWeights::random(ok, 1);
  w.wkv_a.pop_back();
  try {
    w.validate(ok);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("wkv_a"), std::string::npos);
  }
}

// ---------------------------------------------------------------- RoPE / YaRN

TEST(Rope, PairConventionsPinned) {
  // dim 4, base 10000, position 1: angles 1 and 0.01 rad.
  RopeParams p;
  p.dim = 4;
  double x[4] = {1, 2, 3, 4};
  p.style = RopeStyle::consecutive_pairs;  // (x0,x1) by 1 rad, (x2,x3) by 0.01
  rope_apply_ref(p, 1.0, x);
  EXPECT_NEAR(x[0], -1.1426396637476532, 1e-12);
  EXPECT_NEAR(x[1], 1.922075596544176, 1e-12);
  EXPECT_NEAR(x[2], 2.9598506679133294, 1e-12);
  EXPECT_NEAR(x[3], 4.029799501669161, 1e-12);
  double y[4] = {1, 2, 3, 4};
  p.style = RopeStyle::half_split;  // (x0,x2) by 1 rad, (x1,x3) by 0.01
  rope_apply_ref(p, 1.0, y);
  EXPECT_NEAR(y[0], -1.9841106485555495, 1e-12);
  EXPECT_NEAR(y[1], 1.959900667496664, 1e-12);
  EXPECT_NEAR(y[2], 2.4623779024123156, 1e-12);
  EXPECT_NEAR(y[3], 4.019799668334994, 1e-12);
}

TEST(Rope, YarnRangeAndScale) {
  RopeParams v2 = deepseek_yarn_rope(64);
  auto r = yarn_corr_range(v2);
  EXPECT_EQ(r.low, 10);  // mla-spec.md: V2 low 10, high 23
  EXPECT_EQ(r.high, 23);
  // Small model (testdata): d_R 16, original context 128 -> low clamps to 0.
  RopeParams tiny = v2;
  tiny.dim = 16;
  tiny.yarn_orig_ctx = 128;
  tiny.yarn_factor = 4;
  r = yarn_corr_range(tiny);
  EXPECT_EQ(r.low, 0);
  EXPECT_EQ(r.high, 3);

  MlaConfig c = v2_lite_config(0);
  EXPECT_NEAR(c.kq_scale(), 0.114721, 1e-6);  // V2 / V2-Lite
  c.rope.yarn_log_multiplier = 0.1;            // V3: mscale_all_dim 1.0
  EXPECT_NEAR(c.kq_scale(), 0.135234, 1e-6);
  c.rope.yarn = false;
  EXPECT_NEAR(c.kq_scale(), 1 / std::sqrt(192.0), 1e-12);
}

TEST(Rope, YarnKeepsFastPairsAndInterpolatesSlowOnes) {
  RopeParams p = deepseek_yarn_rope(64);
  RopeParams plain = p;
  plain.yarn = false;
  std::vector<double> a(32), b(32);
  rope_angles(p, 10000, a.data());
  rope_angles(plain, 10000, b.data());
  for (int i = 0; i <= 10; ++i) EXPECT_DOUBLE_EQ(a[i], b[i]) << i;            // below low: extrapolate
  for (int i = 23; i < 32; ++i) EXPECT_NEAR(a[i], b[i] / 40, 1e-12) << i;     // above high: interpolate
  EXPECT_LT(a[16], b[16]);
  EXPECT_GT(a[16], b[16] / 40);
}

TEST(Rope, OddDimensionRefused) {
  RopeParams p;
  p.dim = 1;  // seed 000 uses d_R = 1: RoPE cannot rotate a single value
  double x[1] = {0.14};
  EXPECT_THROW(rope_apply_ref(p, 0.0, x), Error);
}

// A negative dimension is refused as an invalid argument before anything is
// sized from it (it had made a vector of dim/2 or [x, x + dim): a
// std::length_error, and a pointer before x).
TEST(Rope, NegativeDimensionRefused) {
  RopeParams p;
  p.dim = -2;
  double xd[2] = {0.5, 0.25};
  float xf[2] = {0.5f, 0.25f};
  EXPECT_THROW(rope_apply_ref(p, 3.0, xd), Error);
  EXPECT_THROW(rope_apply_ref(p, 3.0, xf), Error);
  EXPECT_EQ(xd[0], 0.5);
  EXPECT_EQ(xf[1], 0.25f);
}

// ---------------------------------------------------------------- seed 000

// Seed 000's worked example (d 4, 2 heads, d_h 2, d_c 2, d_c' 2, no RMSNorm,
// position 0). Its matrices are fine but its arithmetic is wrong: it gives
// c_KV = [0.01, 0.15], c_Q = [0.08, 0.02], k_R = [0.03] and k_C, v_C, q_C
// built on those; the true values are mla-spec.md section 1's, pinned here.
// Its d_R = 1 cannot rotate, so the RoPE key gets a zero partner (d_R 2);
// at position 0 RoPE is the identity anyway.
TEST(Seed000, CorrectedWorkedExample) {
  MlaConfig cfg;
  cfg.d_model = 4;
  cfg.n_heads = 2;
  cfg.q_lora_rank = 2;
  cfg.kv_lora_rank = 2;
  cfg.d_nope = 2;
  cfg.d_rope = 2;
  cfg.d_v = 2;
  cfg.latent_norm = false;
  cfg.rope.dim = 2;

  const float W_DKV[2][4] = {{0.1f, -0.2f, 0.3f, -0.4f}, {0.2f, 0.1f, -0.3f, 0.4f}};
  const float W_DQ[2][4] = {{0.2f, -0.1f, 0.3f, -0.2f}, {0.1f, 0.2f, -0.1f, 0.3f}};
  const float W_KR[4] = {0.1f, -0.1f, 0.2f, -0.2f};
  const float W_UK[4][2] = {{0.2f, -0.1f}, {-0.3f, 0.2f}, {0.1f, -0.2f}, {-0.2f, 0.3f}};
  const float W_UV[4][2] = {{0.1f, -0.2f}, {-0.2f, 0.1f}, {0.2f, -0.1f}, {-0.1f, 0.2f}};
  const float W_UQ[4][2] = {{0.2f, -0.1f}, {-0.1f, 0.2f}, {0.1f, -0.2f}, {-0.2f, 0.1f}};

  MlaLayerWeights w;
  w.wq_a.assign(&W_DQ[0][0], &W_DQ[0][0] + 8);
  w.wq_b.assign(8 * 2, 0.f);  // (2 heads * (2 nope + 2 rope), 2): rope rows stay 0
  for (int h = 0; h < 2; ++h)
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 2; ++c) w.wq_b[(h * 4 + r) * 2 + c] = W_UQ[h * 2 + r][c];
  w.wkv_a.assign(4 * 4, 0.f);  // rows: c_KV (2), k_R, zero partner
  for (int c = 0; c < 4; ++c) {
    w.wkv_a[0 * 4 + c] = W_DKV[0][c];
    w.wkv_a[1 * 4 + c] = W_DKV[1][c];
    w.wkv_a[2 * 4 + c] = W_KR[c];
  }
  w.wk_b.assign(&W_UK[0][0], &W_UK[0][0] + 8);  // (2 heads, 2 nope, 2 d_c)
  w.wv_b.assign(&W_UV[0][0], &W_UV[0][0] + 8);
  w.wo.assign(16, 0.f);
  for (int i = 0; i < 4; ++i) w.wo[i * 4 + i] = 1.f;  // identity: u = [o_1 ; o_2]

  const float h[4] = {0.5f, -0.3f, 0.2f, -0.1f};
  const double tol = 1e-7;
  MlaProjection p = mla_reference_project(cfg, w, h, 0);
  EXPECT_NEAR(p.kv_raw[0], 0.21, tol);  // c_KV (seed: 0.01)
  EXPECT_NEAR(p.kv_raw[1], -0.03, tol);  //      (seed: 0.15)
  EXPECT_NEAR(p.kv_raw[2], 0.14, tol);  // k_R  (seed: 0.03)
  EXPECT_NEAR(p.c_q_raw[0], 0.21, tol);  // c_Q (seed: 0.08)
  EXPECT_NEAR(p.c_q_raw[1], -0.06, tol);  //     (seed: 0.02)
  const double q_C[4] = {0.048, -0.033, 0.033, -0.048};
  for (int hd = 0; hd < 2; ++hd)
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(p.q[hd * 4 + i], q_C[hd * 2 + i], tol);

  double k_C[4], v_C[4];
  mla_reference_decompress(cfg, w, p.kv.data(), k_C, v_C);
  const double k_expect[4] = {0.045, -0.069, 0.027, -0.051};
  const double v_expect[4] = {0.027, -0.045, 0.045, -0.027};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(k_C[i], k_expect[i], tol);
    EXPECT_NEAR(v_C[i], v_expect[i], tol);
  }

  // One token: softmax weight 1, so u = [v_1 ; v_2] in both forms.
  for (MlaForm form : {MlaForm::naive, MlaForm::absorbed}) {
    MlaReferenceCache cache;
    float u[4];
    const std::int64_t pos = 0;
    mla_reference_forward(cfg, w, form, h, 1, &pos, cache, u);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(u[i], v_expect[i], 1e-7) << mla_form_name(form);
    EXPECT_EQ(cache.n_tokens(), 1);
  }
}

}  // namespace
}  // namespace latte

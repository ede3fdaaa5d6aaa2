// `latte make-model`'s presets of the MiniCPM3 and PLM architectures: their
// shapes against the real models' (the model catalog, mla-spec section 2),
// and a small file of each, written by the CLI with --layers, --vocab and
// --type, read back by Latte and decoded over a long run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "quant/ggml_types.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/model/model.h"
#include "runtime/session/session.h"
#include "tools/model_catalog.h"
#include "tools/model_presets.h"
#if LATTE_TEST_POSIX  // the CLI is run through a POSIX shell
#include "tests/cli/cli_run.h"
#endif

namespace {

// What a preset must read back as, beside its name in the catalog.
struct Expected {
  const char* preset;
  const char* catalog_name;
  latte::ModelArch arch;
  int d_model, n_heads, q_lora, kv_lora, d_nope, d_rope, d_v, ff;
  latte::FfnKind ffn;
  std::int64_t context;
  double freq_base;
  float rms_eps;
  int real_layers, real_vocab;
};

const Expected kExpected[] = {
    {"minicpm3-4b", "MiniCPM3-4B", latte::ModelArch::minicpm3, 2560, 40, 768, 256, 64, 32, 64, 6400,
     latte::FfnKind::swiglu, 32768, 10000.0, 1e-5f, 62, 73448},
    {"plm-1.8b", "PLM-1.8B", latte::ModelArch::plm, 2048, 16, 0, 512, 128, 64, 128, 8192, latte::FfnKind::relu2, 4096,
     100000.0, 1e-6f, 32, 151936},
};

const latte::KnownMlaModel& catalog(const char* name) {
  for (const latte::KnownMlaModel& m : latte::known_mla_models())
    if (std::string(m.name) == name) return m;
  throw std::logic_error(std::string("no catalog entry ") + name);
}

// The presets at full size carry the real models' shapes, the same the
// catalog (mla-spec.md section 2) lists, from the Hugging Face configs.
TEST(MakeModelPresets, FullSizeMatchesTheRealModels) {
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.preset);
    const auto spec = latte::model_preset_spec(e.preset);
    ASSERT_TRUE(spec.has_value());
    const latte::KnownMlaModel& m = catalog(e.catalog_name);
    EXPECT_EQ(spec->n_layers, m.n_layers);
    EXPECT_EQ(spec->d_model, m.d_model);
    EXPECT_EQ(spec->n_heads, m.n_heads);
    EXPECT_EQ(spec->q_lora_rank, m.q_lora_rank);
    EXPECT_EQ(spec->kv_lora_rank, m.kv_lora_rank);
    EXPECT_EQ(spec->d_nope, m.d_nope);
    EXPECT_EQ(spec->d_rope, m.d_rope);
    EXPECT_EQ(spec->d_v, m.d_v);
    EXPECT_EQ(spec->n_layers, e.real_layers);
    EXPECT_EQ(spec->n_vocab, e.real_vocab);
  }
  EXPECT_FALSE(latte::model_preset_spec("minicpm3").has_value());
  EXPECT_EQ(latte::model_preset_names(), "v2-lite, v2-lite-moe, minicpm3-4b, plm-1.8b, tiny");
}

#if LATTE_TEST_POSIX
using latte::test::Result;
using latte::test::run;

// Each written small (2 layers, vocab 600, Q8_0): Latte reads the
// architecture, the overrides and the real head shapes back, and 96 decode
// steps after a prompt keep every logit finite and within a few units.
TEST(MakeModelPresets, SmallCopiesLoadAndDecode) {
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.preset);
    const std::string out = ::testing::TempDir() + "/preset-" + e.preset + ".gguf";
    const Result r =
        run(std::string("make-model --preset ") + e.preset + " --layers 2 --vocab 600 --type q8_0 -o " + out);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find(std::string(e.preset) + " preset, 2 layers, vocab 600, Q8_0 weights"), std::string::npos)
        << r.output;

    const auto model = latte::Model::load(out);
    const latte::ModelParams& p = model->params();
    EXPECT_EQ(p.arch, e.arch);
    EXPECT_EQ(p.n_layers, 2);
    EXPECT_EQ(p.n_vocab, 600);
    EXPECT_EQ(p.mla.d_model, e.d_model);
    EXPECT_EQ(p.mla.n_heads, e.n_heads);
    EXPECT_EQ(p.mla.q_lora_rank, e.q_lora);
    EXPECT_EQ(p.mla.kv_lora_rank, e.kv_lora);
    EXPECT_EQ(p.mla.d_nope, e.d_nope);
    EXPECT_EQ(p.mla.d_rope, e.d_rope);
    EXPECT_EQ(p.mla.d_v, e.d_v);
    EXPECT_EQ(p.ff_dense, e.ff);
    EXPECT_EQ(p.ffn_kind, e.ffn);
    EXPECT_EQ(p.n_experts, 0);
    EXPECT_EQ(p.kv_layout, latte::KvLayout::legacy);  // attn_kv_b, as llama.cpp converts both
    EXPECT_EQ(p.context_length, e.context);
    EXPECT_DOUBLE_EQ(p.mla.rope.freq_base, e.freq_base);
    EXPECT_FALSE(p.mla.rope.yarn);
    EXPECT_FLOAT_EQ(static_cast<float>(p.mla.rms_eps), e.rms_eps);
    // Both score by 1/sqrt(nope + rope) alone.
    EXPECT_NEAR(p.mla.kq_scale(), 1 / std::sqrt(double(e.d_nope + e.d_rope)), 1e-9);
    // Tied embeddings: no `output` tensor.
    EXPECT_EQ(model->file().find_tensor("output.weight"), nullptr);
    const latte::GgufTensor* q = model->file().find_tensor(e.q_lora ? "blk.1.attn_q_b.weight" : "blk.1.attn_q.weight");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->type, latte::GgmlType::Q8_0);
    EXPECT_EQ(model->file().find_tensor("blk.1.ffn_gate.weight") != nullptr, e.ffn == latte::FfnKind::swiglu);
    if (e.arch == latte::ModelArch::minicpm3) {
      // MiniCPM3-4B's LongRoPE factors, its long and short lists the same,
      // switched at its 32768 positions; its muP scales at 2 layers.
      for (bool long_ctx : {false, true}) {
        const std::vector<float>& f = model->rope_factors(long_ctx);
        ASSERT_EQ(f.size(), 16u);
        EXPECT_FLOAT_EQ(f[0], 1.0591234137867171f);
        EXPECT_FLOAT_EQ(f[8], 10.475458000005451f);
        EXPECT_FLOAT_EQ(f[15], 16.940876586213285f);
      }
      EXPECT_EQ(p.rope_factor_switch(), 32768);
      EXPECT_FLOAT_EQ(p.embed_scale, 12.f);
      EXPECT_FLOAT_EQ(p.residual_scale, 1.4f / std::sqrt(2.f));
      EXPECT_FLOAT_EQ(p.logit_scale, 256.f / 2560.f);
    } else {
      EXPECT_TRUE(model->rope_factors(false).empty());
    }

    latte::SessionOptions so;
    so.n_ctx = 256;
    so.threads = 2;
    latte::Session s(model, so);
    std::vector<std::int32_t> prompt{model->tokenizer()->bos_id()};
    for (int i = 0; i < 31; ++i) prompt.push_back((i * 37 + 11) % 590);
    s.prefill(prompt);
    float lo = 0, hi = 0;
    const std::vector<float> first(s.logits().begin(), s.logits().end());
    float moved = 0;  // the most any logit moved from the prompt's
    for (int step = 0; step < 96; ++step) {
      const auto logits = s.logits();
      ASSERT_EQ(logits.size(), 600u);
      for (float v : logits) ASSERT_TRUE(std::isfinite(v)) << "step " << step;
      const auto [mn, mx] = std::minmax_element(logits.begin(), logits.end());
      lo = std::min(lo, *mn), hi = std::max(hi, *mx);
      EXPECT_GT(*mx - *mn, 1e-2f) << "step " << step;  // not flat
      for (std::size_t i = 0; i < logits.size(); ++i) moved = std::max(moved, std::fabs(logits[i] - first[i]));
      s.decode(static_cast<std::int32_t>(mx - logits.begin()));
    }
    // Random weights sized as trained ones give logits of a few units (the
    // tied rows scaled down as random_model.h says; unit-size rows reached
    // 147 here for MiniCPM3 and 1011 for PLM).
    EXPECT_GT(lo, -50.f);
    EXPECT_LT(hi, 50.f);
    EXPECT_GT(moved, 1e-2f);  // the tokens decoded move them
    char range[64];
    std::snprintf(range, sizeof range, "[%.2f, %.2f]", lo, hi);
    RecordProperty(std::string(e.preset) + "_logit_range", range);
  }
}
#endif  // LATTE_TEST_POSIX

}  // namespace

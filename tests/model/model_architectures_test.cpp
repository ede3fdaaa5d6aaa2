// Every architecture and layout, on random-weight files made with the writer:
// the optimized path (Session) against the scalar reference (ModelReference).
//   F32 weights, f32 cache: logits NMSE < 1e-9 and identical greedy tokens.
//   Q8_0 weights: the kernels quantize activations to int8 blocks (relative
//   error ~1/254 each), so NMSE < 1e-4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/isa.h"
#include "runtime/error.h"
#include "runtime/gguf/gguf_file.h"
#include "tools/gguf_writer.h"
#include "reference/model_reference.h"
#include "runtime/model/model.h"
#include "tools/random_model.h"
#include "runtime/session/session.h"
#include "tests/common/architecture_cases.h"

namespace latte {
namespace {

using test::ArchCase;
using test::base;

class Architectures : public ::testing::TestWithParam<ArchCase> {};

TEST_P(Architectures, SessionMatchesReference) {
  const ArchCase& c = GetParam();
  auto file = GgufFile::from_bytes(random_model_bytes(c.spec));
  auto model = Model::from_file(GgufFile::from_bytes(random_model_bytes(c.spec)));
  SessionOptions o;
  o.cache = LatentStorage::f32;
  o.prefill_chunk = 7;  // several chunks, each in the form the cost model picks
  o.n_ctx = 64;
  ModelReference ref(file, o.n_ctx);
  Session s(model, o);

  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 25; ++i) prompt.push_back((i * 37 + 11) % c.spec.n_vocab);
  std::vector<float> got;
  s.prefill(prompt, &got);
  const auto want = ref.forward(prompt, MlaForm::absorbed);
  auto nmse = [&](const std::vector<float>& x) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      num += (double(x[i]) - want[i]) * (double(x[i]) - want[i]);
      den += double(want[i]) * want[i];
    }
    return num / den;
  };
  EXPECT_LT(nmse(got), c.nmse_bound) << c.name;
  RecordProperty("prefill_nmse", std::to_string(nmse(got)));
  {
    // The prompt as one chunk of 25 tokens with the GEMM size lowered to 16:
    // the weight products as oneDNN GEMMs (over dequantized panels for
    // quantized weights), the path of long chunks, which these never reach.
    SessionOptions og = o;
    og.prefill_chunk = 32;
    og.gemm_min_tokens = 16;
    Session sg(model, og);
    std::vector<float> g;
    sg.prefill(prompt, &g);
    EXPECT_LT(nmse(g), c.nmse_bound) << c.name << ", one GEMM-sized chunk";
  }

  // Greedy continuation: identical tokens (F32 weights), decoded one by one.
  auto argmax = [](std::span<const float> v) {
    return static_cast<std::int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
  };
  const int V = c.spec.n_vocab;
  std::int32_t a = argmax(s.logits());
  std::int32_t b = argmax(std::span<const float>(want).subspan(want.size() - V));
  int same = 0;
  for (int step = 0; step < 15; ++step) {
    same += a == b;
    s.decode(a);
    const auto rl = ref.forward(std::span<const std::int32_t>(&b, 1), MlaForm::naive);
    a = argmax(s.logits());
    b = argmax(rl);
  }
  if (c.spec.weight_type == GgmlType::F32) EXPECT_EQ(same, 15) << c.name;
  else EXPECT_GE(same, 12) << c.name;
}

INSTANTIATE_TEST_SUITE_P(RandomModels, Architectures, ::testing::ValuesIn(test::architecture_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(RandomModel, ParamsRoundTrip) {
  RandomModelSpec s = base();
  s.arch = ModelArch::minicpm3;
  s.layout = KvLayout::legacy;
  s.q_lora_rank = 24;
  s.yarn_log_multiplier = 0.f;  // deepseek2's alone (YarnMagnitudeOnMinicpm3AndPlm)
  auto f = GgufFile::from_bytes(random_model_bytes(s));
  const ModelParams p = ModelParams::from_gguf(f);
  EXPECT_EQ(p.arch, ModelArch::minicpm3);
  EXPECT_EQ(p.kv_layout, KvLayout::legacy);
  EXPECT_EQ(p.mla.rope.style, RopeStyle::half_split);
  EXPECT_FLOAT_EQ(p.embed_scale, 12.f);
  EXPECT_FLOAT_EQ(p.residual_scale, 1.4f / std::sqrt(3.f));
  EXPECT_FLOAT_EQ(p.logit_scale, 256.f / 64.f);
  EXPECT_NEAR(p.mla.kq_scale(), 1 / std::sqrt(24.0), 1e-9);
}

// The bytes `latte bench` divides by: every matrix decode reads (both KV
// layouts; for F32 weights the legacy W_UK^T packed copy is exactly as large
// as the attn_kv_b rows it replaces), routed experts n_experts_used times,
// one embedding row, no norm vectors.
TEST(RandomModel, DecodeWeightBytesCountWhatDecodeReads) {
  for (KvLayout layout : {KvLayout::split, KvLayout::legacy}) {
    RandomModelSpec s = base();
    s.layout = layout;
    s.q_lora_rank = 24;
    s.n_experts = 8, s.n_experts_used = 2, s.n_experts_shared = 1, s.ff_expert = 32, s.n_leading_dense = 1;
    const GgufFile f = GgufFile::from_bytes(random_model_bytes(s));
    std::size_t expected = 0;
    for (const GgufTensor& t : f.tensors()) {
      if (t.n_dims < 2) continue;
      if (t.name == "token_embd.weight") expected += t.row_bytes;
      else if (t.name.find("_exps.") != std::string_view::npos) expected += t.n_bytes / s.n_experts * s.n_experts_used;
      else expected += t.n_bytes;
    }
    auto model = Model::from_file(GgufFile::from_bytes(random_model_bytes(s)));
    EXPECT_EQ(model->decode_weight_bytes(), expected) << (layout == KvLayout::split ? "split" : "legacy");
  }
}

// K-quant and IQ4_XS weights, as such files hold them (rows of 256 columns
// and more in that type, the rest in llama.cpp's fallback, IQ4_NL for IQ4_XS): decode's row
// kernels and prefill's GEMMs over dequantized panels against the reference
// on the same weights. The row kernels quantize the activations per 256
// (per 32 for Q8_0), so their bound is looser.
TEST(RandomModel, KQuantWeightsMatchReference) {
  for (GgmlType type : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::IQ4_XS}) {
    RandomModelSpec spec = base();
    spec.weight_type = type;
    spec.d_model = 256;
    spec.ff = 512;
    auto file = GgufFile::from_bytes(random_model_bytes(spec));
    std::size_t in_type = 0;
    for (const GgufTensor& t : file.tensors()) in_type += t.type == type;
    EXPECT_GE(in_type, 3u * 4) << ggml_type_name(type);  // q, kv_a, gate, up per layer at least
    auto model = Model::from_file(GgufFile::from_bytes(random_model_bytes(spec)));
    ModelReference ref(file, 64);
    std::vector<std::int32_t> prompt;
    for (int i = 0; i < 40; ++i) prompt.push_back((i * 37 + 11) % spec.n_vocab);
    const auto want = ref.forward(prompt, MlaForm::absorbed);
    // row kernels (one token a chunk); the packed int8 GEMM (40-token
    // chunks, oneDNN never); oneDNN's GEMMs from 16 tokens on
    for (int mode : {0, 1, 2}) {
      const bool gemm = mode == 2;
      SessionOptions o;
      o.cache = LatentStorage::f32;
      o.n_ctx = 64;
      o.prefill_chunk = mode ? 40 : 1;
      o.gemm_min_tokens = gemm ? 16 : 1000;
      Session sess(model, o);
      std::vector<float> got;
      sess.prefill(prompt, &got);
      double num = 0, den = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
        den += double(want[i]) * want[i];
      }
      // Bounds (NMSE): row kernels 1e-4; the packed GEMM (activations
      // quantized per 32) errs less than the row kernels, so 5.5e-5 also
      // shows that it ran; oneDNN's GEMMs multiply dequantized f32 panels by
      // f32 activations, ~0, so 1e-6 shows that they ran (docs/performance-log.md, "Figures moved out of runtime comments").
      const char* name = mode == 0 ? "rows" : mode == 1 ? "packed" : "gemm";
      EXPECT_LT(num / den, gemm ? 1e-6 : mode == 1 ? 5.5e-5 : 1e-4) << ggml_type_name(type) << ", " << name;
      // (The ref ISA's row kernels multiply f32 activations: no trace there.)
      if (!gemm && active_isa() != Isa::ref) {
        EXPECT_GT(num / den, 1e-8) << ggml_type_name(type) << ", " << name << ": the int8 activations left no trace";
      }
      RecordProperty(std::string(ggml_type_name(type)) + "_" + name, std::to_string(num / den));
    }
  }
}

// README: make-model writes the rows a 256-element block does not divide in
// llama.cpp's fallback types (Q2_K and Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K ->
// Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL), and F16 where 32 does not divide
// either (V2-Lite's 1408-column expert rows; 1400 here).
TEST(RandomModel, RowsABlockDoesNotDivideTakeLlamaCppsFallback) {
  const std::pair<GgmlType, GgmlType> fallback[] = {
      {GgmlType::Q2_K, GgmlType::Q4_0}, {GgmlType::Q3_K, GgmlType::Q4_0}, {GgmlType::Q4_K, GgmlType::Q5_0},
      {GgmlType::Q5_K, GgmlType::Q5_1}, {GgmlType::Q6_K, GgmlType::Q8_0}, {GgmlType::IQ4_XS, GgmlType::IQ4_NL}};
  for (const auto& [want, fb] : fallback) {
    EXPECT_EQ(row_type_for(want, 2048), want) << ggml_type_name(want);
    EXPECT_EQ(row_type_for(want, 1408), fb) << ggml_type_name(want);
    EXPECT_EQ(row_type_for(want, 1400), GgmlType::F16) << ggml_type_name(want);
  }
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0}) {
    EXPECT_EQ(row_type_for(t, 1408), t) << ggml_type_name(t);
  }
  EXPECT_EQ(row_type_for(GgmlType::Q8_0, 1400), GgmlType::F16);
}

// general.alignment 1 or 2 is valid GGUF// general.alignment 1 or 2 is valid GGUF, and places tensors at any byte:
// those a kernel would read through misaligned float or 16-bit pointers are
// copied at load (UBSan in scripts/test.sh flags such a read). The logits
// are those of the same weights at the default alignment.
TEST(RandomModel, TensorsOffTheirTypeAlignmentAreCopiedAtLoad) {
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0}) {
    RandomModelSpec s = base();
    s.weight_type = type;
    auto logits_of = [&](const RandomModelSpec& spec, bool expect_misaligned) {
      auto file = GgufFile::from_bytes(random_model_bytes(spec));
      bool misaligned = false;
      for (const GgufTensor& t : file.tensors())
        misaligned |= reinterpret_cast<std::uintptr_t>(t.data) % (t.type == GgmlType::F32 ? 4 : 2) != 0;
      EXPECT_EQ(misaligned, expect_misaligned) << ggml_type_name(type) << ", alignment " << spec.alignment;
      auto model = Model::from_file(std::move(file));
      SessionOptions o;
      o.threads = 1;
      o.cache = LatentStorage::f32;
      o.n_ctx = 16;
      Session sess(model, o);
      const std::int32_t toks[] = {3, 141, 59, 26};
      std::vector<float> all;
      sess.prefill(toks, &all);
      return all;
    };
    const auto want = logits_of(s, false);
    for (std::uint32_t a : {1u, 2u}) {
      RandomModelSpec sa = s;
      sa.alignment = a;
      EXPECT_EQ(logits_of(sa, true), want) << ggml_type_name(type) << ", alignment " << a;
    }
  }
}

// What a model file lacks, or has in the wrong shape, is named by the model
// loader too (the reader's own checks have their tests in gguf_test).
TEST(RandomModel, MissingOrMisshapenTensorIsNamed) {
  const std::vector<std::uint8_t> good = random_model_bytes(base());
  auto refusal = [](const std::vector<std::uint8_t>& bytes) {
    try {
      Model::from_file(GgufFile::from_bytes(bytes));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(loaded)");
  };
  auto find = [&](const std::string& name) {
    auto it = std::search(good.begin(), good.end(), name.begin(), name.end());
    EXPECT_NE(it, good.end()) << name;
    return static_cast<std::size_t>(it - good.begin());
  };
  {
    std::vector<std::uint8_t> b = good;
    b[find("blk.1.attn_k_b.weight") + 11] = 'z';  // now blk.1.attn_z_b.weight
    EXPECT_NE(refusal(b).find("blk.1.attn_k_b.weight"), std::string::npos) << refusal(b);
  }
  {
    // Tensor info: name, u32 n_dims, u64 ne[0], u64 ne[1]. Swapping the two
    // dimensions of (ff 96, d 64) keeps the byte count, so only the shape is wrong.
    std::vector<std::uint8_t> b = good;
    const std::string name = "blk.0.ffn_down.weight";
    const std::size_t ne0 = find(name) + name.size() + 4;
    std::swap_ranges(b.begin() + ne0, b.begin() + ne0 + 8, b.begin() + ne0 + 8);
    const std::string why = refusal(b);
    EXPECT_NE(why.find(name), std::string::npos) << why;
    EXPECT_NE(why.find("96"), std::string::npos) << why;
  }
}

// Metadata as other converters write it (llama.cpp's defaults), found by
// review: each file either runs as llama.cpp runs it or is refused by name,
// never run with a setting silently dropped.
std::vector<float> logits_of(const std::vector<std::uint8_t>& bytes) {
  SessionOptions o;
  o.threads = 1;
  o.n_ctx = 16;
  Session s(Model::from_file(GgufFile::from_bytes(bytes)), o);
  s.prefill(std::vector<std::int32_t>{1, 5, 9, 3});
  return {s.logits().begin(), s.logits().end()};
}

std::string refusal(const std::vector<std::uint8_t>& bytes, Status want) {
  try {
    Model::from_file(GgufFile::from_bytes(bytes));
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), want) << e.what();
    return e.what();
  }
  return "(loaded)";
}

RandomModelSpec edited(RandomModelSpec s, std::function<void(GgufWriter&)> edit) {
  s.edit_metadata = std::move(edit);
  return s;
}

TEST(ModelMetadata, AbsentKeysTakeLlamaCppsDefaults) {
  // llama.cpp's MiniCPM3 converter writes key_length but not value_length:
  // d_model / n_heads (64 / 4 = 16 = d_v here). It was refused as missing.
  RandomModelSpec mc = test::architecture_cases()[3].spec;
  ASSERT_EQ(mc.arch, ModelArch::minicpm3);
  ASSERT_EQ(mc.d_model / mc.n_heads, mc.d_v);
  EXPECT_EQ(logits_of(random_model_bytes(edited(mc, [](GgufWriter& w) {
              ASSERT_TRUE(w.remove("minicpm3.attention.value_length"));
            }))),
            logits_of(random_model_bytes(mc)));
  // YaRN without its original context: the trained one.
  RandomModelSpec y = base();
  y.context_length = y.yarn_orig_ctx;
  EXPECT_EQ(logits_of(random_model_bytes(edited(y, [](GgufWriter& w) {
              ASSERT_TRUE(w.remove("deepseek2.rope.scaling.original_context_length"));
            }))),
            logits_of(random_model_bytes(y)));
  // expert_gating_func 0 (none) is softmax, as V2 / V2.5 files carry it.
  RandomModelSpec moe = test::architecture_cases()[0].spec;
  ASSERT_GT(moe.n_experts, 0);
  EXPECT_EQ(logits_of(random_model_bytes(edited(moe, [](GgufWriter& w) {
              w.remove("deepseek2.expert_gating_func");
              w.add_u32("deepseek2.expert_gating_func", 0);
            }))),
            logits_of(random_model_bytes(moe)));
}

// A minicpm3 file without a trained context: a session with n_ctx 0 gets
// 4096 tokens, past the RoPE factor switch (0 then), so the long factors;
// the reference took the short ones for the same n_ctx 0.
TEST(ModelMetadata, NoTrainedContextTheReferencePicksTheSessionsRopeFactors) {
  RandomModelSpec mc = test::architecture_cases()[3].spec;
  ASSERT_EQ(mc.arch, ModelArch::minicpm3);
  ASSERT_TRUE(mc.rope_factors);
  const auto bytes = random_model_bytes(edited(mc, [](GgufWriter& w) {
    ASSERT_TRUE(w.remove("minicpm3.context_length"));
  }));
  auto model = Model::from_file(GgufFile::from_bytes(std::vector<std::uint8_t>(bytes)));
  ASSERT_NE(model->rope_factors(true), model->rope_factors(false));
  SessionOptions o;
  o.cache = LatentStorage::f32;
  o.n_ctx = 0;
  o.threads = 1;
  Session s(model, o);
  EXPECT_EQ(s.n_ctx(), 4096);
  ModelReference ref(GgufFile::from_bytes(std::vector<std::uint8_t>(bytes)), 0);
  const std::vector<std::int32_t> prompt = {3, 17, 5, 40, 9, 21};
  std::vector<float> got;
  s.prefill(prompt, &got);
  const auto want = ref.forward(prompt, MlaForm::absorbed);
  ASSERT_EQ(got.size(), want.size());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  EXPECT_LT(num / den, 1e-10);
}

// YaRN on minicpm3 and plm, as llama.cpp's graphs run it: cos and sin
// scaled by 1 + 0.1 ln(factor) times rope.scaling.attn_factor, the score
// scale 1/sqrt(head dim) whatever the scaling; on deepseek2 the file's
// attn_factor alone (its mscale goes into the score scale instead). A log
// multiplier there is refused by name.
TEST(ModelMetadata, YarnMagnitudeOnMinicpm3AndPlm) {
  for (ModelArch arch : {ModelArch::minicpm3, ModelArch::plm, ModelArch::deepseek2}) {
    RandomModelSpec s = base();
    s.arch = arch;
    if (arch != ModelArch::deepseek2) s.layout = KvLayout::legacy;
    s.yarn = true;
    s.yarn_factor = 4.f;
    s.yarn_log_multiplier = 0.f;
    const std::string k = arch == ModelArch::minicpm3 ? "minicpm3." : arch == ModelArch::plm ? "plm." : "deepseek2.";
    const auto bytes = random_model_bytes(edited(s, [k](GgufWriter& w) { w.add_f32(k + "rope.scaling.attn_factor", 1.5f); }));
    const ModelParams p = ModelParams::from_gguf(GgufFile::from_bytes(std::vector<std::uint8_t>(bytes)));
    const double head = p.mla.d_nope + p.mla.d_rope;
    if (arch == ModelArch::deepseek2) {
      EXPECT_DOUBLE_EQ(p.mla.rope.attn_factor, 1.5);
      EXPECT_NEAR(p.mla.kq_scale(), 1.5 * 1.5 / std::sqrt(head), 1e-12);
    } else {
      EXPECT_NEAR(p.mla.rope.attn_factor, 1.5 * (1.0 + 0.1 * std::log(4.0)), 1e-7) << k;
      EXPECT_NEAR(p.mla.kq_scale(), 1.0 / std::sqrt(head), 1e-12) << k;
      s.yarn_log_multiplier = 0.0707f;
      const std::string why = refusal(random_model_bytes(s), Status::unsupported);
      EXPECT_NE(why.find(k + "rope.scaling.yarn_log_multiplier = 0.0707"), std::string::npos) << why;
    }
  }
}

TEST(ModelMetadata, SettingsLatteDoesNotRunAreRefusedByName) {
  RandomModelSpec plain = base();
  plain.yarn = false;
  // No scaling type with a factor: llama.cpp scales linearly. It ran unscaled.
  for (const char* key : {"deepseek2.rope.scaling.factor", "deepseek2.rope.scale_linear"}) {
    const std::string why = refusal(random_model_bytes(edited(plain, [key](GgufWriter& w) { w.add_f32(key, 4.f); })),
                                    Status::unsupported);
    EXPECT_NE(why.find(std::string(key) + " = 4.0"), std::string::npos) << why;
    EXPECT_NE(why.find("linear RoPE scaling"), std::string::npos) << why;
  }
  EXPECT_EQ(refusal(random_model_bytes(edited(plain, [](GgufWriter& w) {
              w.add_f32("deepseek2.rope.scaling.factor", 1.f);
            })), Status::ok),
            "(loaded)");
  // Position-dependent query scaling (llama.cpp's deepseek2 graph applies
  // it): it was ignored.
  const std::string why = refusal(random_model_bytes(edited(plain, [](GgufWriter& w) {
                                    w.add_f32("deepseek2.attention.temperature_scale", 0.5f);
                                    w.add_u32("deepseek2.attention.temperature_length", 1);
                                  })),
                                  Status::unsupported);
  EXPECT_NE(why.find("deepseek2.attention.temperature_scale = 0.5"), std::string::npos) << why;
  EXPECT_EQ(refusal(random_model_bytes(edited(plain, [](GgufWriter& w) {
              w.add_f32("deepseek2.attention.temperature_scale", 0.f);
            })), Status::ok),
            "(loaded)");
  // Expert groups too few to hold the experts used (top-k then took masked
  // experts by index).
  RandomModelSpec v3 = test::architecture_cases()[2].spec;  // 16 experts, 4 groups, 2 used, top-4
  ASSERT_EQ(v3.n_expert_groups, 4);
  v3.n_expert_groups_used = 1;
  v3.n_experts_used = 5;
  const std::string groups = refusal(random_model_bytes(v3), Status::bad_file);
  EXPECT_NE(groups.find("= 4 experts, fewer than expert_used_count 5"), std::string::npos) << groups;
}

// ggml's writer drops trailing 1s: a one-head attn_k_b [16, 32, 1] is stored
// [16, 32]. Shapes compare as 4 dims padded with 1s.
TEST(ModelMetadata, TrailingUnitDimsMayBeLeftOut) {
  GgufWriter w;
  w.add_tensor_f32("t2", {16, 32}, std::vector<float>(512, 1.f));
  const std::vector<std::uint8_t> b = w.to_bytes();
  const GgufFile f = GgufFile::from_memory(b.data(), b.size());
  EXPECT_NO_THROW(f.require_tensor("t2", std::vector<std::uint64_t>{16, 32, 1}));
  EXPECT_NO_THROW(f.require_tensor("t2", std::vector<std::uint64_t>{16, 32}));
  EXPECT_THROW(f.require_tensor("t2", std::vector<std::uint64_t>{16, 32, 2}), Error);
  EXPECT_THROW(f.require_tensor("t2", std::vector<std::uint64_t>{16}), Error);
  EXPECT_THROW(f.require_tensor("t2", std::vector<std::uint64_t>{32, 16}), Error);
}

// A fine-tune of some experts only (ESFT) changes their slices of the
// stacked expert tensors and nothing at the tensors' ends: it had the
// original's fingerprint, so a session of one loaded into the other.
TEST(ModelMetadata, FingerprintSeesEveryExpert) {
  RandomModelSpec moe = test::architecture_cases()[0].spec;  // 8 experts
  const std::vector<std::uint8_t> good = random_model_bytes(moe);
  const std::uint64_t fp = Model::from_file(GgufFile::from_bytes(good))->fingerprint();
  const GgufFile f = GgufFile::from_memory(good.data(), good.size());
  const GgufTensor* up = nullptr;
  for (const GgufTensor& t : f.tensors())
    if (t.name == "blk.1.ffn_up_exps.weight") up = &t;
  ASSERT_NE(up, nullptr);
  ASSERT_EQ(up->ne[2], 8u);
  const std::size_t slice = up->n_bytes / 8;
  const std::size_t at = static_cast<std::size_t>(up->data - good.data());
  // Expert 3's first byte, two in its middle and its last byte (the
  // fingerprint hashes every byte of the file).
  for (std::size_t within : {std::size_t{0}, slice * 2 / 5 / 64 * 64 + 10, slice / 2 + 3, slice - 1}) {
    std::vector<std::uint8_t> b = good;
    b[at + 3 * slice + within] ^= 0x40;
    EXPECT_NE(Model::from_file(GgufFile::from_bytes(b))->fingerprint(), fp) << within;
  }
}

}  // namespace
}  // namespace latte

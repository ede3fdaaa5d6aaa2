// Cost model of the two MLA forms, and the latent-vs-MHA cache accounting.
#include "runtime/mla/cost_model.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/error.h"
#include "tools/model_catalog.h"

namespace latte {
namespace {

MlaConfig deepseek_shape(int n_heads) {
  MlaConfig c;
  c.d_model = n_heads == 16 ? 2048 : 7168;
  c.n_heads = n_heads;
  c.kv_lora_rank = 512;
  c.d_nope = 128;
  c.d_rope = 64;
  c.d_v = 128;
  c.rope.dim = 64;
  return c;
}

TEST(CostModel, PinnedV2LiteCounts) {
  const MlaConfig c = deepseek_shape(16);
  // Decode: 1 query token over 4096 cached tokens.
  MlaCost d = mla_attention_cost(c, 1, 4096);
  EXPECT_EQ(d.absorbed, 73417728);    // 16*256*512 + 4097*16*(2*512+64)
  EXPECT_EQ(d.naive, 8613008384);     // 4097*16*256*512 + 4097*16*320
  // A 2048-token prefill chunk on an empty cache.
  MlaCost p = mla_attention_cost(c, 2048, 0);
  EXPECT_EQ(p.absorbed, 40820015104);
  EXPECT_EQ(p.naive, 15037628416);
}

TEST(CostModel, PinnedV3Counts) {
  const MlaConfig c = deepseek_shape(128);
  MlaCost d = mla_attention_cost(c, 1, 4096);
  EXPECT_EQ(d.absorbed, 587341824);
  EXPECT_EQ(d.naive, 68904067072);
  MlaCost p = mla_attention_cost(c, 2048, 0);
  EXPECT_EQ(p.absorbed, 326560120832);
  EXPECT_EQ(p.naive, 120301027328);
}

TEST(CostModel, PicksAbsorbedForDecodeAndNaiveForLongChunks) {
  for (int nh : {16, 128}) {
    const MlaConfig c = deepseek_shape(nh);
    EXPECT_EQ(mla_pick_form(c, 1, 4096), MlaForm::absorbed) << nh;
    EXPECT_EQ(mla_pick_form(c, 1, 163839), MlaForm::absorbed) << nh;
    EXPECT_EQ(mla_pick_form(c, 2048, 0), MlaForm::naive) << nh;
    EXPECT_EQ(mla_pick_form(c, 2048, 16384), MlaForm::naive) << nh;
    // Without oneDNN the naive form's GEMMs are Latte's own, slower ones.
    EXPECT_EQ(mla_pick_form(c, 2048, 0, 1.0, kOwnGemmCost), MlaForm::absorbed) << nh;
    // Behind 16K cached tokens the crossover is at 170 query tokens.
    EXPECT_EQ(mla_pick_form(c, 169, 16384), MlaForm::absorbed) << nh;
    EXPECT_EQ(mla_pick_form(c, 170, 16384), MlaForm::naive) << nh;
  }
}

// With an int8 cache the absorbed kernel's integer dot products make its
// multiply-adds cheaper: behind 4,096 cached tokens a 512-token chunk then runs
// absorbed (the faster form there), an f32 cache still naive.
TEST(CostModel, Int8CacheShiftsTheChoice) {
  const MlaConfig c = deepseek_shape(16);
  const double int8 = mla_absorbed_pair_cost(true, true);
  EXPECT_DOUBLE_EQ(int8, 0.3);
  EXPECT_DOUBLE_EQ(mla_absorbed_pair_cost(true, false), 0.6);
  EXPECT_DOUBLE_EQ(mla_absorbed_pair_cost(false, true), 1.0);
  EXPECT_EQ(mla_pick_form(c, 512, 4096, 1.0), MlaForm::naive);
  EXPECT_EQ(mla_pick_form(c, 512, 4096, int8), MlaForm::absorbed);
  EXPECT_EQ(mla_pick_form(c, 512, 16384, int8), MlaForm::absorbed);
  EXPECT_EQ(mla_pick_form(c, 512, 0, int8), MlaForm::naive);    // empty cache: naive the faster
  EXPECT_EQ(mla_pick_form(c, 2048, 0, int8), MlaForm::naive);   // long chunk, empty cache
  EXPECT_EQ(mla_pick_form(c, 1, 100, int8), MlaForm::absorbed);
}

// A long chunk behind the longest context a cache holds (2^31 - 1 tokens):
// V3 shapes count ~2e19 multiply-adds absorbed against ~6e18 naive, past
// int64, where the wrapped counts picked absorbed.
TEST(CostModel, PicksWithoutOverflowAtTheLongestContext) {
  const MlaConfig c = deepseek_shape(128);
  const std::int64_t n_query = 65536, n_cached = 2147483647 - n_query;
  EXPECT_EQ(mla_pick_form(c, n_query, n_cached), MlaForm::naive);
  EXPECT_EQ(mla_pick_form(c, 1, 2147483646), MlaForm::absorbed);
  // The counts themselves do not fit int64 there: refused, not wrapped.
  try {
    mla_attention_cost(c, n_query, n_cached);
    ADD_FAILURE() << "counts past int64 were returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("65536 query tokens over 2147418111 cached"), std::string::npos) << e.what();
  }
  // Decode at that depth fits: 128*256*512 + 2147483647*128*1088.
  EXPECT_EQ(mla_attention_cost(c, 1, 2147483646).absorbed, 299067179393024LL);
}

TEST(CostModel, RejectsNegativeCounts) {
  EXPECT_THROW(mla_attention_cost(deepseek_shape(16), -1, 0), Error);
}

// ---------------------------------------------------------------- accounting

const KnownMlaModel& model(const std::string& name) {
  for (const auto& m : known_mla_models())
    if (name == m.name) return m;
  throw std::runtime_error("no model " + name);
}

TEST(CacheAccounting, ElementsPerTokenPerLayer) {
  // mla-spec.md section 2: latent d_c + d_R versus MHA n_h*(d_nope + d_R + d_v).
  struct Row { const char* name; std::int64_t latent, mha; };
  const Row rows[] = {{"DeepSeek-V2-Lite", 576, 5120}, {"DeepSeek-V2", 576, 40960},
                      {"DeepSeek-V3", 576, 40960},     {"MiniCPM3-4B", 288, 6400},
                      {"PLM-1.8B", 576, 5120}};
  ASSERT_EQ(known_mla_models().size(), 5u);
  for (const auto& r : rows) {
    const auto& m = model(r.name);
    EXPECT_EQ(m.latent_elems(), r.latent) << r.name;
    EXPECT_EQ(m.mha_elems(), r.mha) << r.name;
  }
}

TEST(CacheAccounting, V2LiteAllLayers) {
  const auto& m = model("DeepSeek-V2-Lite");
  EXPECT_EQ(m.latent_elems() * m.n_layers, 15552);   // per token over 27 layers
  EXPECT_EQ(m.mha_elems() * m.n_layers, 138240);
  EXPECT_NEAR(double(m.mha_elems()) / m.latent_elems(), 8.889, 1e-3);
  // f16 bytes for 32K tokens, all layers: 576 * 2 * 27 * 32768.
  EXPECT_EQ(m.latent_elems() * 2 * m.n_layers * 32768, 1019215872);
  EXPECT_EQ(m.max_context, 163840);
}

}  // namespace
}  // namespace latte

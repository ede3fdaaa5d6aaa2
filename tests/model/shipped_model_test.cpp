// The model shipped in models/ (scripts/train_tiny_mla.py): Latte reads it as
// the PyTorch training code computed it. Expected values come from
// models/latte-tiny-mla.eval.json, which the training code wrote.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/session/session.h"

namespace latte {
namespace {

const std::string kModel = std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.gguf";

std::shared_ptr<const Model> shipped() {
  static const auto m = Model::load(kModel);
  return m;
}

TEST(ShippedModel, Shape) {
  const ModelParams& p = shipped()->params();
  EXPECT_EQ(p.arch, ModelArch::deepseek2);
  EXPECT_EQ(p.n_layers, 4);
  EXPECT_EQ(p.mla.q_lora_rank, 128);
  EXPECT_EQ(p.n_experts, 8);
  EXPECT_EQ(p.context_length, 256);
  EXPECT_TRUE(p.mla.rope.yarn);
  ASSERT_NE(shipped()->tokenizer(), nullptr);
  EXPECT_EQ(shipped()->tokenizer()->n_vocab(), 2048);
}

// Latte's tokenizer gives the training code's ids (its own BPE and
// deepseek-llm pre-split, written in Python).
TEST(ShippedModel, TokenizerMatchesTheTrainingCode) {
  const Tokenizer& tok = *shipped()->tokenizer();
  const std::pair<std::string, std::vector<std::int32_t>> cases[] = {
      {"Hello world", {72, 573, 111, 1164}},
      {"The quick brown fox jumps over the lazy dog.",
       {451, 1153, 1387, 582, 515, 742, 120, 529, 625, 1261, 563, 258, 636, 122, 121, 458, 103, 46}},
      {"  two  spaces\tand a tab\n\nnewlines", {32, 696, 32, 419, 1275, 9, 375, 259, 874, 10, 10, 790, 119, 108, 1146}},
      {"caf\xC3\xA9 na\xC3\xAFve \xC3\x89" "cole",
       {99, 97, 102, 195, 169, 292, 97, 195, 175, 316, 32, 195, 137, 99, 111, 327}},
      {"\xE4\xB8\x96\xE7\x95\x8C\xE4\xBD\xA0\xE5\xA5\xBD CJK",
       {228, 184, 150, 231, 149, 140, 228, 189, 160, 229, 165, 189, 527, 74, 75}},
      {"emoji \xF0\x9F\x98\x80\xF0\x9F\x9A\x80!", {478, 111, 106, 105, 32, 240, 159, 152, 128, 240, 159, 154, 128, 33}},
      {"digits 1234567890 3.14159",
       {100, 664, 1100, 32, 49, 50, 51, 52, 53, 54, 55, 56, 57, 48, 32, 51, 46, 49, 52, 49, 53, 57}},
      {"Don't panic!!! ...", {68, 283, 39, 116, 287, 298, 683, 33, 33, 33, 32, 46, 46, 46}},
      {"end with spaces   ", {1116, 338, 419, 1275, 32, 32, 32}},
  };
  for (const auto& [text, ids] : cases) {
    EXPECT_EQ(tok.encode(text, false, false), ids) << text;
    EXPECT_EQ(tok.decode(ids), text);
  }
}

// A short greedy continuation, pinned: the training code's (PyTorch), which
// Latte reproduces with an f32 cache and (for this prompt) with int8 too.
TEST(ShippedModel, GreedyContinuationPinned) {
  const std::vector<std::int32_t> prompt = {2046, 295, 386, 387, 320, 332, 286, 259, 1962, 44, 32, 89, 291};
  const std::vector<std::int32_t> want = {44, 267, 303, 391, 342, 294, 259, 401, 296, 335, 286, 258, 493, 268, 729,
                                          44, 267, 258, 341, 460, 839, 44, 267, 258, 341, 366, 386, 44, 267, 258, 341,
                                          366};
  const Tokenizer& tok = *shipped()->tokenizer();
  EXPECT_EQ(tok.decode(std::span(prompt).subspan(1)), "And God said unto him in a dream, Yea");
  EXPECT_EQ(tok.decode(want),
            ", and I will not be a man that is in the land of Egypt,"
            " and the LORD hath done, and the LORD thy God, and the LORD thy");
  for (LatentStorage cache : {LatentStorage::f32, LatentStorage::int8}) {
    SessionOptions o;
    o.cache = cache;
    o.n_ctx = 64;
    Session s(shipped(), o);
    s.prefill(prompt);
    std::vector<std::int32_t> got;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const auto l = s.logits();
      got.push_back(static_cast<std::int32_t>(std::max_element(l.begin(), l.end()) - l.begin()));
      s.decode(got.back());
    }
    EXPECT_EQ(got, want) << latent_storage_name(cache);
  }
}

// The first two held-out windows: mean NLL 3.345988 in PyTorch (train.log).
TEST(ShippedModel, HeldOutPerplexityMatchesPyTorch) {
  std::ifstream in(std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.heldout.windows");
  double nll = 0;
  std::int64_t n = 0;
  SessionOptions o;
  o.cache = LatentStorage::f32;
  o.n_ctx = 256;
  Session s(shipped(), o);
  std::string line;
  for (int w = 0; w < 2 && std::getline(in, line); ++w) {
    std::vector<std::int32_t> ids;
    std::stringstream ss(line);
    std::string item;
    while (std::getline(ss, item, ',')) ids.push_back(std::stoi(item));
    s.reset();
    std::vector<float> logits;
    s.prefill(ids, &logits);
    const int V = 2048;
    for (std::size_t t = 0; t + 1 < ids.size(); ++t) {
      const float* lg = logits.data() + t * V;
      const double mx = *std::max_element(lg, lg + V);
      double sum = 0;
      for (int i = 0; i < V; ++i) sum += std::exp(lg[i] - mx);
      nll += mx + std::log(sum) - lg[ids[t + 1]];
      ++n;
    }
  }
  ASSERT_GT(n, 100);
  EXPECT_NEAR(nll / n, 3.345988, 3.3e-04);  // within 0.01%
}

}  // namespace
}  // namespace latte

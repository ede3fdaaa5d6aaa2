// The public C API and its C++ wrapper: results equal the internal Session,
// every failure is a status with a message naming what is wrong.
#include "latte/latte.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "latte/latte.hpp"
#include "runtime/model/session.h"

namespace {

const std::string kDense = std::string(LATTE_TESTDATA_DIR) + "/tiny-dense.gguf";

TEST(CApi, LoadPrefillDecodeLogits) {
  latte_model* m = nullptr;
  ASSERT_EQ(latte_model_load(kDense.c_str(), &m), LATTE_OK) << latte_last_error();
  EXPECT_EQ(latte_model_n_vocab(m), 512);
  EXPECT_EQ(latte_model_n_ctx_train(m), 4096);
  EXPECT_STREQ(latte_model_architecture(m), "deepseek2");
  latte_session_options o = latte_session_default_options();
  o.cache_type = LATTE_CACHE_F32;
  o.n_ctx = 64;
  latte_session* s = nullptr;
  ASSERT_EQ(latte_session_create(m, &o, &s), LATTE_OK) << latte_last_error();
  EXPECT_EQ(latte_session_logits(s), nullptr);
  const int32_t toks[] = {510, 327, 57, 12, 379};
  ASSERT_EQ(latte_session_prefill(s, toks, 4), LATTE_OK);
  ASSERT_EQ(latte_session_decode(s, toks[4]), LATTE_OK);
  EXPECT_EQ(latte_session_n_past(s), 5);
  EXPECT_EQ(latte_session_n_ctx(s), 64);
  const std::vector<float> c_logits(latte_session_logits(s), latte_session_logits(s) + 512);

  // Same as the internal session, and the model freed first is kept alive by the session.
  latte_model_free(m);
  latte::SessionOptions so;
  so.cache = latte::LatentStorage::f32;
  so.n_ctx = 64;
  latte::Session ref(latte::Model::load(kDense), so);
  ref.prefill(std::span(toks).first(4));  // same chunks, so the same kernels run
  ref.decode(toks[4]);
  EXPECT_EQ(c_logits, std::vector<float>(ref.logits().begin(), ref.logits().end()));

  ASSERT_EQ(latte_session_reset(s), LATTE_OK);
  EXPECT_EQ(latte_session_n_past(s), 0);
  EXPECT_EQ(latte_session_logits(s), nullptr);
  latte_session_free(s);
}

// A model read into memory (use_mmap 0) computes what the mapped one does.
TEST(CApi, ModelReadIntoMemoryGivesTheSameLogits) {
  const int32_t toks[] = {510, 327, 57, 12, 379};
  std::vector<float> logits[2];
  for (int use_mmap : {1, 0}) {
    latte_model_options mo = latte_model_default_options();
    EXPECT_EQ(mo.use_mmap, 1);
    mo.use_mmap = use_mmap;
    latte_model* m = nullptr;
    ASSERT_EQ(latte_model_load_with_options(kDense.c_str(), &mo, &m), LATTE_OK) << latte_last_error();
    latte_session_options o = latte_session_default_options();
    o.n_ctx = 64;
    latte_session* s = nullptr;
    ASSERT_EQ(latte_session_create(m, &o, &s), LATTE_OK) << latte_last_error();
    ASSERT_EQ(latte_session_prefill(s, toks, 5), LATTE_OK);
    logits[use_mmap].assign(latte_session_logits(s), latte_session_logits(s) + 512);
    latte_session_free(s);
    latte_model_free(m);
  }
  EXPECT_EQ(logits[0], logits[1]);
  latte_model* m = nullptr;
  latte_model_options bad = latte_model_default_options();
  bad.use_mmap = 2;
  EXPECT_EQ(latte_model_load_with_options(kDense.c_str(), &bad, &m), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(latte_last_error()).find("use_mmap"), std::string::npos);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(latte_model_load_with_options("/nonexistent/model.gguf", nullptr, &m), LATTE_ERR_IO);
  EXPECT_NE(std::string(latte_last_error()).find("/nonexistent/model.gguf"), std::string::npos);
  latte::api::Model wrapped(kDense, latte_model_options{0});
  EXPECT_EQ(wrapped.n_vocab(), 512);
}

TEST(CApi, ErrorsNameWhatIsWrong) {
  latte_model* m = nullptr;
  EXPECT_EQ(latte_model_load("/nonexistent/model.gguf", &m), LATTE_ERR_IO);
  EXPECT_NE(std::string(latte_last_error()).find("/nonexistent/model.gguf"), std::string::npos);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(latte_model_load(nullptr, &m), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(latte_status_string(LATTE_ERR_CONTEXT_OVERFLOW), "context overflow");

  // A file that is not GGUF.
  const std::string junk = ::testing::TempDir() + "/junk.gguf";
  { std::ofstream(junk) << "this is not a model"; }
  EXPECT_EQ(latte_model_load(junk.c_str(), &m), LATTE_ERR_BAD_FILE);
  EXPECT_NE(std::string(latte_last_error()), "");

  ASSERT_EQ(latte_model_load(kDense.c_str(), &m), LATTE_OK);
  latte_session_options o = latte_session_default_options();
  o.n_ctx = 3;
  latte_session* s = nullptr;
  o.cache_type = 9;
  EXPECT_EQ(latte_session_create(m, &o, &s), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(latte_last_error()).find("cache_type"), std::string::npos);
  o.cache_type = LATTE_CACHE_INT8;
  // Settings past what a session can run are refused by name.
  o.threads = 100000;
  EXPECT_EQ(latte_session_create(m, &o, &s), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(latte_last_error()).find("threads 100000"), std::string::npos) << latte_last_error();
  o.threads = 0;
  o.n_ctx = std::int64_t{1} << 31;
  EXPECT_EQ(latte_session_create(m, &o, &s), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(latte_last_error()).find("n_ctx 2147483648"), std::string::npos) << latte_last_error();
  EXPECT_EQ(s, nullptr);
  o.n_ctx = 3;
  ASSERT_EQ(latte_session_create(m, &o, &s), LATTE_OK);
  float out[4];
  EXPECT_EQ(latte_session_eval_all(s, nullptr, 0, out), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(latte_last_error()).find("no tokens"), std::string::npos) << latte_last_error();
  const int32_t toks[] = {1, 2, 3, 4};
  EXPECT_EQ(latte_session_prefill(s, toks, 4), LATTE_ERR_CONTEXT_OVERFLOW);
  EXPECT_NE(std::string(latte_last_error()).find("context"), std::string::npos);
  EXPECT_EQ(latte_session_n_past(s), 0);
  EXPECT_EQ(latte_session_decode(s, 100000), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(latte_last_error()).find("100000"), std::string::npos);
  EXPECT_EQ(latte_session_prefill(nullptr, toks, 1), LATTE_ERR_INVALID_ARGUMENT);
  latte_session_free(s);
  latte_model_free(m);
}

TEST(CppWrapper, ThrowsWithStatus) {
  try {
    latte::api::Model bad("/nonexistent.gguf");
    FAIL();
  } catch (const latte::api::Exception& e) {
    EXPECT_EQ(e.status(), LATTE_ERR_IO);
  }
  latte::api::Model model(kDense);
  latte_session_options o = latte_session_default_options();
  o.cache_type = LATTE_CACHE_F16;
  latte::api::Session s(model, o);
  const int32_t toks[] = {510, 327, 57};
  auto all = s.eval_all(toks);
  ASSERT_EQ(all.size(), 3u * 512);
  auto last = s.logits();
  EXPECT_EQ(std::vector<float>(all.end() - 512, all.end()), std::vector<float>(last.begin(), last.end()));
}

}  // namespace

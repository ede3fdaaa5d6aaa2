// Structured output through the C API and latte.hpp on the shipped model:
// errors naming what is wrong (the sampler then unchanged), generation that
// follows the grammar and ends only where it may, latte_sampler_accept not
// advancing it, reset restarting it, NULL clearing it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "latte/latte.h"
#include "latte/latte.hpp"

namespace {

const std::string kShipped = std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.gguf";

// Up to n tokens under the sampler's grammar; the text, and whether an
// end-of-generation token ended it.
std::string generate(const latte::api::Model& m, latte::api::Sampler& s, const std::string& prompt, int n, bool* ended) {
  latte::api::Session session(m);
  const std::vector<int32_t> ids = m.tokenize(prompt);
  session.prefill(latte::api::Span<const int32_t>(ids.data(), ids.size()));
  for (int32_t t : ids) s.accept(t);  // the prompt: does not advance the grammar
  std::string out;
  *ended = false;
  for (int i = 0; i < n; ++i) {
    const int32_t t = s.sample(session.logits());
    if (m.is_end_of_generation(t)) {
      *ended = true;
      break;
    }
    out += m.token_to_piece(t);
    session.decode(t);
  }
  return out;
}

TEST(CApiGrammar, ErrorsNameWhatIsWrongAndKeepTheSampler) {
  latte_model* model = nullptr;
  ASSERT_EQ(latte_model_load(kShipped.c_str(), &model), LATTE_OK) << latte_last_error();
  latte_sampler* s = nullptr;
  ASSERT_EQ(latte_sampler_create(nullptr, &s), LATTE_OK);
  EXPECT_EQ(latte_sampler_set_grammar(s, model, "root ::= \"a\" (", nullptr), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(latte_last_error(), "grammar:1:15: expected ')' to close the group opened at 1:14, found the end of the grammar");
  EXPECT_EQ(latte_sampler_set_grammar(s, model, "start ::= \"a\"", nullptr), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(latte_last_error(), "grammar: no rule 'root' (the root, where the output starts) is defined");
  EXPECT_EQ(latte_sampler_set_grammar(s, model, "start ::= \"yes\"", "start"), LATTE_OK) << latte_last_error();
  EXPECT_EQ(latte_sampler_set_json_schema(s, model, "{\"type\":\"string\",\"pattern\":\"a*\"}"), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(latte_last_error(), "json schema: at #: 'pattern' is not supported");
  EXPECT_EQ(latte_sampler_set_grammar(nullptr, model, "root ::= \"a\"", nullptr), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(latte_sampler_set_grammar(s, nullptr, "root ::= \"a\"", nullptr), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(latte_last_error(), "latte_sampler_set_grammar: model must not be NULL");
  // A grammar that admits nothing: refused when set.
  EXPECT_EQ(latte_sampler_set_grammar(s, model, "root ::= \"a\" root", nullptr), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(latte_last_error(), "grammar: the grammar admits no string (rule 'root' can never be completed)");
  // The failures kept "start ::= \"yes\"": greedy output is "yes" whatever the logits say.
  latte_session* session = nullptr;
  ASSERT_EQ(latte_session_create(model, nullptr, &session), LATTE_OK);
  const int32_t bos = latte_token_bos(model);
  ASSERT_EQ(latte_session_prefill(session, &bos, 1), LATTE_OK);
  std::string text;
  for (int i = 0; i < 8; ++i) {
    int32_t t = -1;
    ASSERT_EQ(latte_sampler_sample(s, latte_session_logits(session), static_cast<size_t>(latte_model_n_vocab(model)), &t), LATTE_OK)
        << latte_last_error();
    if (latte_token_is_end_of_generation(model, t)) break;
    char buf[64];
    size_t n = 0;
    ASSERT_EQ(latte_token_to_piece(model, t, 0, buf, sizeof buf, &n), LATTE_OK);
    text.append(buf, n);
    ASSERT_EQ(latte_session_decode(session, t), LATTE_OK);
  }
  EXPECT_EQ(text, "yes");
  // NULL clears (model may be NULL then).
  EXPECT_EQ(latte_sampler_set_grammar(s, nullptr, nullptr, nullptr), LATTE_OK);
  EXPECT_EQ(latte_sampler_set_json_schema(s, nullptr, nullptr), LATTE_OK);
  latte_session_free(session);
  latte_sampler_free(s);
  latte_model_free(model);
}

TEST(CApiGrammar, GenerationFollowsTheGrammarWhateverTheSettings) {
  const latte::api::Model m(kShipped);
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    latte_sampler_options o = latte_sampler_default_options();
    o.seed = seed;
    o.top_k = seed % 2 ? 1 : 0;
    o.temperature = seed % 3 ? 1.5f : 0.0f;
    o.repeat_penalty = 1.3f;
    latte::api::Sampler s(o);
    s.set_grammar(m, "root ::= \"The answer: \" (\"yes\" | \"no\") \".\"");
    bool ended = false;
    const std::string out = generate(m, s, "And he said unto them,", 20, &ended);
    EXPECT_TRUE(out == "The answer: yes." || out == "The answer: no.") << out;
    EXPECT_TRUE(ended);  // the grammar is complete: only an end-of-generation token could follow
    // reset restarts the grammar: the same seed, the same output.
    s.reset(seed);
    bool again = false;
    EXPECT_EQ(generate(m, s, "And he said unto them,", 20, &again), out);
  }
  latte::api::Sampler s;
  s.set_json_schema(m, R"({"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":3},
                          "w":{"enum":["the","LORD"]}},"required":["n","w"],"additionalProperties":false})");
  bool ended = false;
  const std::string out = generate(m, s, "JSON:", 200, &ended);
  EXPECT_TRUE(ended) << out;
  EXPECT_NE(out.find("\"n\""), std::string::npos) << out;
  s.clear_grammar();
}

}  // namespace

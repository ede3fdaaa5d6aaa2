// A conversation's turns through the C API, in every chat format: the first
// turn from latte_chat_tokenize, each later one from latte_chat_tokenize_turn
// after the reply as the session holds it, closed by its end token or cut
// short. Each turn computes exactly its own tokens (the reply's end where it
// is missing, the user's turn, the assistant's opening), and the session
// holds the conversation token for token, the replies as generated.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "latte/latte.h"
#include "tools/random_model.h"

namespace latte {
namespace {

using Ids = std::vector<std::int32_t>;

Ids tokenize(latte_model* m, const std::string& text, bool parse_special) {
  std::size_t n = 0;
  EXPECT_EQ(latte_tokenize(m, text.data(), text.size(), 0, parse_special ? 1 : 0, nullptr, 0, &n), LATTE_OK);
  Ids ids(n);
  EXPECT_EQ(latte_tokenize(m, text.data(), text.size(), 0, parse_special ? 1 : 0, ids.data(), n, &n), LATTE_OK);
  return ids;
}

Ids chat_tokenize(latte_model* m, const char* format, const std::vector<latte_chat_message>& msgs, int add_bos) {
  std::size_t n = 0;
  EXPECT_EQ(latte_chat_tokenize(m, format, msgs.data(), msgs.size(), 1, add_bos, nullptr, 0, &n), LATTE_OK)
      << latte_last_error();
  Ids ids(n);
  EXPECT_EQ(latte_chat_tokenize(m, format, msgs.data(), msgs.size(), 1, add_bos, ids.data(), n, &n), LATTE_OK);
  return ids;
}

Ids next_turn(latte_model* m, const char* format, std::int32_t last, const std::vector<latte_chat_message>& msgs) {
  std::size_t n = 0;
  EXPECT_EQ(latte_chat_tokenize_turn(m, format, last, msgs.data(), msgs.size(), 1, nullptr, 0, &n), LATTE_OK)
      << latte_last_error();
  Ids ids(n);
  EXPECT_EQ(latte_chat_tokenize_turn(m, format, last, msgs.data(), msgs.size(), 1, ids.data(), n, &n), LATTE_OK);
  return ids;
}

Ids session_tokens(latte_session* s) {
  std::size_t n = 0;
  EXPECT_EQ(latte_session_tokens(s, nullptr, 0, &n), LATTE_OK);
  Ids ids(n);
  if (n) {
    EXPECT_EQ(latte_session_tokens(s, ids.data(), n, &n), LATTE_OK);
  }
  return ids;
}

Ids concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

class ChatTurns : public ::testing::TestWithParam<const char*> {};

TEST_P(ChatTurns, EachTurnComputesOnlyItsOwnTokens) {
  const std::string format = GetParam();
  RandomModelSpec spec;
  spec.control_tokens = {"<|im_start|>", "<|im_end|>", "<\xEF\xBD\x9C" "User\xEF\xBD\x9C>",
                         "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>"};
  spec.seed = 7;
  const std::string path = ::testing::TempDir() + "/chat_turns_" + format + ".gguf";
  write_random_model(spec, path);
  latte_model* m = nullptr;
  ASSERT_EQ(latte_model_load(path.c_str(), &m), LATTE_OK) << latte_last_error();
  latte_session_options o = latte_session_default_options();
  o.threads = 2;
  o.n_ctx = 512;
  latte_session* s = nullptr;
  ASSERT_EQ(latte_session_create(m, &o, &s), LATTE_OK) << latte_last_error();
  const char* f = format.c_str();
  const bool chatml = format == "chatml";
  // The token that closes a reply in this format, as the model would write it.
  const std::int32_t end = chatml ? tokenize(m, "<|im_end|>", true).at(0) : latte_token_eos(m);
  ASSERT_EQ(latte_token_is_end_of_generation(m, end), 1);

  // Turn 1: the conversation's start (system turn, BOS as the format says).
  const Ids t1 = chat_tokenize(m, f, {{"system", "Be brief."}, {"user", "Hello"}}, -1);
  ASSERT_EQ(latte_session_prefill(s, t1.data(), t1.size()), LATTE_OK) << latte_last_error();
  ASSERT_EQ(latte_session_n_past(s), static_cast<std::int64_t>(t1.size()));

  // The reply: greedy tokens decoded one by one, then the end token, fed
  // as a model's own would be.
  Ids reply;
  for (int i = 0; i < 5; ++i) {
    const float* lg = latte_session_logits(s);
    std::int32_t best = 0;
    for (std::int32_t v = 1; v < latte_model_n_vocab(m); ++v)
      if (lg[v] > lg[best] && !latte_token_is_end_of_generation(m, v)) best = v;
    reply.push_back(best);
    ASSERT_EQ(latte_session_decode(s, best), LATTE_OK);
  }
  reply.push_back(end);
  ASSERT_EQ(latte_session_decode(s, end), LATTE_OK);

  // Turn 2, after a closed reply: the rest of the reply's end (chatml's
  // "\n"; nothing after DeepSeek's EOS), the user turn, the opening.
  const std::int64_t before2 = latte_session_n_past(s);
  const Ids t2 = next_turn(m, f, end, {{"user", "How are you?"}});
  const Ids want2 = concat({chatml ? tokenize(m, "\n", false) : Ids{}, chat_tokenize(m, f, {{"user", "How are you?"}}, 0)});
  EXPECT_EQ(t2, want2) << format;
  ASSERT_EQ(latte_session_prefill(s, t2.data(), t2.size()), LATTE_OK);
  EXPECT_EQ(latte_session_n_past(s) - before2, static_cast<std::int64_t>(t2.size())) << "turn 2 computed more";
  EXPECT_EQ(session_tokens(s), concat({t1, reply, t2})) << "the session holds the conversation as generated";

  // Turn 3, after a reply cut short (by a length limit: no end token): the
  // whole end of a reply first.
  const Ids cut = tokenize(m, "ok", false);
  ASSERT_EQ(latte_session_prefill(s, cut.data(), cut.size()), LATTE_OK);
  const std::int64_t before3 = latte_session_n_past(s);
  const Ids t3 = next_turn(m, f, cut.back(), {{"user", "Bye"}});
  std::string eos_text(64, '\0');
  std::size_t eos_len = 0;
  ASSERT_EQ(latte_token_to_piece(m, latte_token_eos(m), 0, eos_text.data(), eos_text.size(), &eos_len), LATTE_OK);
  eos_text.resize(eos_len);
  const std::string reply_end = chatml ? "<|im_end|>\n" : eos_text;
  const Ids want3 = concat({tokenize(m, reply_end, true), chat_tokenize(m, f, {{"user", "Bye"}}, 0)});
  EXPECT_EQ(t3, want3) << format;
  EXPECT_EQ(t3.front(), end) << "the cut reply is closed by the format's end token";
  ASSERT_EQ(latte_session_prefill(s, t3.data(), t3.size()), LATTE_OK);
  EXPECT_EQ(latte_session_n_past(s) - before3, static_cast<std::int64_t>(t3.size()));
  EXPECT_EQ(session_tokens(s), concat({t1, reply, t2, cut, t3}));

  // A last token outside the vocabulary is refused, naming it.
  std::size_t n = 0;
  const latte_chat_message bye = {"user", "Bye"};
  EXPECT_EQ(latte_chat_tokenize_turn(m, f, latte_model_n_vocab(m), &bye, 1, 1, nullptr, 0, &n),
            LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(latte_last_error()).find("last_token"), std::string::npos) << latte_last_error();
  latte_session_free(s);
  latte_model_free(m);
}

INSTANTIATE_TEST_SUITE_P(Formats, ChatTurns, ::testing::Values("deepseek2", "deepseek3", "chatml"));

// On the shipped model (deepseek2), the whole conversation rendered again
// as text starts with other tokens than the session holds (the reply begins
// with " and" where the template writes "Assistant: " + "and..."): why
// latte_chat_tokenize_turn exists. The next turn from it continues the
// session's own tokens.
TEST(ChatTurnsShipped, RenderingTheHistoryAgainDiffersTheTurnDoesNot) {
  latte_model* m = nullptr;
  ASSERT_EQ(latte_model_load(LATTE_SOURCE_DIR "/models/latte-tiny-mla.gguf", &m), LATTE_OK) << latte_last_error();
  latte_session* s = nullptr;
  ASSERT_EQ(latte_session_create(m, nullptr, &s), LATTE_OK);
  const Ids t1 = chat_tokenize(m, nullptr, {{"user", "And it came to pass"}}, -1);
  ASSERT_EQ(latte_session_prefill(s, t1.data(), t1.size()), LATTE_OK);
  Ids reply;
  for (int i = 0; i < 12; ++i) {
    const float* lg = latte_session_logits(s);
    std::int32_t best = 0;
    for (std::int32_t v = 1; v < latte_model_n_vocab(m); ++v)
      if (lg[v] > lg[best]) best = v;
    reply.push_back(best);
    ASSERT_EQ(latte_session_decode(s, best), LATTE_OK);
    if (latte_token_is_end_of_generation(m, best)) break;
  }
  std::size_t n = 0;
  ASSERT_EQ(latte_detokenize(m, reply.data(), reply.size(), 1, nullptr, 0, &n), LATTE_OK);
  std::string text(n + 1, '\0');
  ASSERT_EQ(latte_detokenize(m, reply.data(), reply.size(), 1, text.data(), text.size(), &n), LATTE_OK);
  text.resize(n);
  const Ids held = session_tokens(s);
  const Ids rendered =
      chat_tokenize(m, nullptr, {{"user", "And it came to pass"}, {"assistant", text.c_str()}, {"user", "Why?"}}, -1);
  EXPECT_NE(Ids(rendered.begin(), rendered.begin() + static_cast<std::ptrdiff_t>(std::min(rendered.size(), held.size()))),
            held)
      << "rendered again, the history is the session's own tokens: the reuse problem is gone?";
  const Ids t2 = next_turn(m, nullptr, held.back(), {{"user", "Why?"}});
  ASSERT_EQ(latte_session_prefill(s, t2.data(), t2.size()), LATTE_OK);
  EXPECT_EQ(session_tokens(s), concat({held, t2}));
  latte_session_free(s);
  latte_model_free(m);
}

}  // namespace
}  // namespace latte

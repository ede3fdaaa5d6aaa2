// tools/tokenizer_json: a Hugging Face tokenizer.json read as a VocabSpec
// (what `latte make-model --tokenizer-json` writes into a random model).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "runtime/error.h"
#include "tools/tokenizer_json.h"

namespace latte {
namespace {

TEST(TokenizerJson, ReadsVocabMergesAndAddedTokens) {
  const std::string path = testing::TempDir() + "tokenizer_json_test.json";
  std::ofstream(path) << R"({"added_tokens":[{"id":4,"content":"<｜begin▁of▁sentence｜>","special":true},
    {"id":5,"content":"<｜end▁of▁sentence｜>","special":true},{"id":7,"content":"<tool>","special":false}],
    "model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2,"Ġ":3},"merges":["a b",["Ġ","a"]]}})";
  const VocabSpec s = read_tokenizer_json(path, "deepseek-v3", 10);
  ASSERT_EQ(s.tokens.size(), 10u);
  EXPECT_EQ(s.tokens[2], "ab");
  EXPECT_EQ(s.tokens[6], "<unused_6>");
  EXPECT_EQ(s.tokens[7], "<tool>");
  EXPECT_EQ(s.token_types[0], 1);
  EXPECT_EQ(s.token_types[4], 3);
  EXPECT_EQ(s.token_types[6], 5);
  EXPECT_EQ(s.token_types[7], 4);
  EXPECT_EQ(s.merges, (std::vector<std::string>{"a b", "Ġ a"}));
  EXPECT_EQ(s.bos_id, 4);
  EXPECT_EQ(s.eos_id, 5);
  EXPECT_EQ(s.pre, "deepseek-v3");
  std::ofstream(path) << R"({"model":{"type":"Unigram","vocab":[]}})";
  try {
    read_tokenizer_json(path, "deepseek-v3");
    FAIL() << "read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.type is not \"BPE\""), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace latte

// GBNF grammars: parse errors naming line and column, grammars that admit
// nothing, the matcher over code points and UTF-8 bytes, and the token
// constraint (masks against a token-by-token check, tokens spanning
// symbols, UTF-8 split across tokens, end of generation only where the
// grammar ends) and the sampler obeying it whatever its settings.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/grammar/gbnf.h"
#include "runtime/grammar/parse_automaton.h"
#include "runtime/grammar/token_constraint.h"
#include "runtime/grammar/vocab_index.h"
#include "runtime/sampler/sampler.h"

namespace latte::grammar {
namespace {

std::string parse_error(const std::string& gbnf) {
  try {
    parse_gbnf(gbnf);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    return e.what();
  }
  return "(parsed)";
}

// Whether the grammar admits `text` whole.
bool matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  ParseAutomaton a(g);
  ParseAutomaton::State s = a.initial();
  for (unsigned char b : text) {
    s = a.next(s, b);
    if (s == ParseAutomaton::kDead) return false;
  }
  return a.can_end(s);
}
bool matches(const std::string& gbnf, const std::string& text) {
  return matches(std::make_shared<const Grammar>(parse_gbnf(gbnf)), text);
}

TEST(GbnfParse, ErrorsNameLineAndColumn) {
  EXPECT_EQ(parse_error("root ::= \"a\" foo"), "grammar:1:14: rule 'foo' is not defined");
  EXPECT_EQ(parse_error("root ::= a\n\na ::= \"x\" )"), "grammar:3:11: expected the end of the line after rule 'a', found ')'");
  EXPECT_EQ(parse_error("root ::= [a-"), "grammar:1:10: unterminated character class");
  EXPECT_EQ(parse_error("root ::= \"abc"), "grammar:1:10: unterminated string literal");
  EXPECT_EQ(parse_error("root ::= \"\\q\""), "grammar:1:11: unknown escape '\\q'");
  EXPECT_EQ(parse_error("root ::= \"a\"{3,1}"), "grammar:1:13: repetition {3,1}: the maximum is below the minimum");
  EXPECT_EQ(parse_error("root ::= (\"a\" | \"b\""), "grammar:1:20: expected ')' to close the group opened at 1:10, found the end of the grammar");
  EXPECT_EQ(parse_error("root = \"a\""), "grammar:1:6: expected '::=' after rule name 'root', found '='");
  EXPECT_EQ(parse_error("root ::= \"a\"\nroot ::= \"b\""), "grammar:2:1: rule 'root' is defined twice");
  EXPECT_EQ(parse_error("root ::= * \"a\""), "grammar:1:10: '*' follows nothing to repeat");
  EXPECT_EQ(parse_error("a ::= \"x\""), "grammar: no rule 'root' (the root, where the output starts) is defined");
  // The column counts code points: "é" is one.
  EXPECT_EQ(parse_error("root ::= \"é\" @"),
            "grammar:1:14: expected a rule name, a \"literal\", a [class], '.', '(' or the end of the rule, found '@'");
  EXPECT_EQ(parse_error("root ::= \"a\"{20000}"), "grammar:1:14: a repetition count above 10000 is refused");
  EXPECT_EQ(parse_error("root ::= [\\U00110000]"), "grammar:1:11: code point beyond U+10FFFF in an escape");
}

TEST(GbnfParse, LeftRecursionIsRefusedByName) {
  EXPECT_EQ(parse_error("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]"),
            "grammar: rule 'expr' is left-recursive (expr -> expr before reading anything; a repetition of something "
            "that can match nothing counts too): rewrite it with a repetition");
  // Through a nullable rule.
  EXPECT_NE(parse_error("root ::= a\na ::= b a \"x\" | \"y\"\nb ::= \"z\"?").find("rule 'a' is left-recursive"),
            std::string::npos);
  // A repetition of something that matches nothing would loop forever.
  EXPECT_NE(parse_error("root ::= (\"a\"?)*").find("left-recursive"), std::string::npos);
}

TEST(GbnfParse, GrammarsThatAdmitNothing) {
  EXPECT_EQ(parse_error("root ::= [^\\x00-\\U0010FFFF]"),
            "grammar: the grammar admits no string (rule 'root' can never be completed)");
  EXPECT_EQ(parse_error("root ::= a\na ::= \"x\" a"),
            "grammar: the grammar admits no string (rule 'root' can never be completed)");
  // An alternative that can never complete is dropped, the rest stays.
  EXPECT_TRUE(matches("root ::= \"a\" never | \"b\"\nnever ::= \"x\" never", "b"));
  EXPECT_FALSE(matches("root ::= \"a\" never | \"b\"\nnever ::= \"x\" never", "ax"));
}

TEST(GbnfParse, Syntax) {
  const std::string g = R"(# a comment line
root ::= greeting (" " name)+ "!"?   # trailing comment
greeting ::= "hi" | "hello"
  | "hey"
name ::= [A-Z] [a-z]{1,3} | "\x41\u00e9\U0001F600"
)";
  EXPECT_TRUE(matches(g, "hi Bob"));
  EXPECT_TRUE(matches(g, "hey Al Bea!"));
  EXPECT_TRUE(matches(g, "hello Aé😀"));
  EXPECT_FALSE(matches(g, "hi B"));       // {1,3}: one letter at least
  EXPECT_FALSE(matches(g, "hi Bobby"));   // at most three
  EXPECT_FALSE(matches(g, "hi"));         // + needs one
  EXPECT_FALSE(matches(g, "hi bob"));
  EXPECT_TRUE(matches("root ::= [^a-c\\n]* \".\"", "xyz."));
  EXPECT_FALSE(matches("root ::= [^a-c\\n]* \".\"", "xaz."));
  EXPECT_TRUE(matches("root ::= . . .", "a€😀"));
  EXPECT_FALSE(matches("root ::= . . .", "ab"));
  EXPECT_TRUE(matches("root ::= \"ab\"{2} \"c\"{2,} \"d\"{0,1}", "ababccc"));
  EXPECT_FALSE(matches("root ::= \"ab\"{2} \"c\"{2,} \"d\"{0,1}", "abcc"));
  EXPECT_TRUE(matches("root ::= (\n  \"a\" |\n  \"b\"\n)+", "abba"));
  // Nested parentheses: a recursive (not left-recursive) rule.
  const std::string paren = "root ::= p\np ::= \"(\" p* \")\"";
  EXPECT_TRUE(matches(paren, "(()(()))"));
  EXPECT_FALSE(matches(paren, "(()"));
}

// A small vocabulary: single characters, some multi-character tokens, the
// two halves of "é" (C3 A9) as byte tokens, a control token and EOS.
struct Vocab {
  std::vector<std::string> pieces;
  std::int32_t eos = 0;
  std::shared_ptr<const VocabIndex> index;
  std::int32_t id(const std::string& p) const {
    for (std::size_t i = 0; i < pieces.size(); ++i)
      if (pieces[i] == p && static_cast<std::int32_t>(i) != eos) return static_cast<std::int32_t>(i);
    return -1;
  }
};
Vocab small_vocab() {
  Vocab v;
  v.pieces.push_back("");  // 0: a control token (never under a grammar)
  for (char c = ' '; c <= '~'; ++c) v.pieces.push_back(std::string(1, c));
  for (const char* p : {"\n", "ab", "abc", "the", " quick", "brown", " fox", "\"}", "{\"", "\":", "é", "\xC3", "\xA9",
                        "\xC3\xA9\xC3", "ox", "er ", "lazy dog", "123"})
    v.pieces.push_back(p);
  v.pieces.push_back("</s>");
  v.eos = static_cast<std::int32_t>(v.pieces.size() - 1);
  std::vector<std::string> pieces = v.pieces;
  pieces[static_cast<std::size_t>(v.eos)] = "";
  v.index = VocabIndex::build(pieces, std::vector<std::int32_t>{v.eos});
  return v;
}

TokenConstraint constraint(const std::string& gbnf, const Vocab& v) {
  return TokenConstraint(std::make_shared<const Grammar>(parse_gbnf(gbnf)), v.index);
}

// mask() allows exactly the tokens allows() does.
void expect_mask_matches_allows(TokenConstraint& c, std::int32_t n_vocab) {
  std::vector<float> logits(static_cast<std::size_t>(n_vocab) + 3, 1.0f);
  c.mask(logits);
  for (std::int32_t t = 0; t < n_vocab; ++t)
    EXPECT_EQ(std::isfinite(logits[static_cast<std::size_t>(t)]), c.allows(t)) << "token " << t;
  for (std::size_t t = static_cast<std::size_t>(n_vocab); t < logits.size(); ++t) EXPECT_TRUE(std::isinf(logits[t]));
}

TEST(TokenConstraint, EndOfGenerationOnlyWhereTheGrammarEnds) {
  const Vocab v = small_vocab();
  TokenConstraint c = constraint("root ::= \"ab\" \"c\"?", v);
  EXPECT_FALSE(c.allows(v.eos));
  EXPECT_TRUE(c.allows(v.id("ab")));
  EXPECT_TRUE(c.allows(v.id("abc")));  // one token spanning two symbols
  EXPECT_TRUE(c.allows(v.id("a")));
  EXPECT_FALSE(c.allows(v.id("b")));
  EXPECT_FALSE(c.allows(0));  // the control token
  expect_mask_matches_allows(c, v.index->n_vocab());
  c.accept(v.id("a"));
  EXPECT_FALSE(c.allows(v.eos));
  c.accept(v.id("b"));
  EXPECT_TRUE(c.allows(v.eos));  // may end, or go on with "c"
  EXPECT_TRUE(c.allows(v.id("c")));
  expect_mask_matches_allows(c, v.index->n_vocab());
  c.accept(v.id("c"));
  // Complete and nothing can follow: end of generation alone.
  std::vector<float> logits(static_cast<std::size_t>(v.index->n_vocab()), 0.5f);
  c.mask(logits);
  for (std::int32_t t = 0; t < v.index->n_vocab(); ++t)
    EXPECT_EQ(std::isfinite(logits[static_cast<std::size_t>(t)]), t == v.eos) << t;
  EXPECT_THROW(c.accept(v.id("c")), Error);
  c.reset();
  EXPECT_FALSE(c.allows(v.eos));
}

TEST(TokenConstraint, Utf8SplitAcrossTokens) {
  const Vocab v = small_vocab();
  TokenConstraint c = constraint("root ::= \"é\"+ \"!\"", v);
  const std::int32_t lead = v.id("\xC3"), tail = v.id("\xA9"), both = v.id("é"), odd = v.id("\xC3\xA9\xC3");
  EXPECT_TRUE(c.allows(lead));
  EXPECT_FALSE(c.allows(tail));  // a continuation byte cannot start
  EXPECT_TRUE(c.allows(both));
  EXPECT_TRUE(c.allows(odd));    // é and the first half of the next
  c.accept(lead);
  EXPECT_FALSE(c.allows(v.eos));
  EXPECT_FALSE(c.allows(v.id("!")));
  EXPECT_FALSE(c.allows(both));
  EXPECT_TRUE(c.allows(tail));
  expect_mask_matches_allows(c, v.index->n_vocab());
  c.accept(tail);
  c.accept(odd);
  EXPECT_FALSE(c.allows(v.id("!")));  // a character is still cut
  c.accept(tail);
  c.accept(v.id("!"));
  EXPECT_TRUE(c.allows(v.eos));
  // A lead byte whose characters the grammar has none of is refused at once.
  TokenConstraint ascii = constraint("root ::= [a-z]+", v);
  EXPECT_FALSE(ascii.allows(lead));
  EXPECT_FALSE(ascii.allows(both));
}

TEST(TokenConstraint, NoTokenCanStart) {
  const Vocab v = small_vocab();
  try {
    constraint("root ::= \"\\u4e2d\"", v);  // no token has 中
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "grammar: no token of the vocabulary can start the output the grammar admits");
  }
}

TEST(TokenConstraint, DeadEndMidOutputIsAClearError) {
  const Vocab v = small_vocab();
  TokenConstraint c = constraint("root ::= \"a\" \"\\u4e2d\"", v);
  c.accept(v.id("a"));
  std::vector<float> logits(static_cast<std::size_t>(v.index->n_vocab()), 0.0f);
  try {
    c.mask(logits);
    FAIL() << "masked";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "grammar: no token of the vocabulary continues the output here");
  }
}

// The sampler under a grammar: random logits, any settings, the output is
// always the grammar's.
std::string generate(Sampler& s, const Vocab& v, std::mt19937& rng, int max_tokens, bool* ended) {
  std::normal_distribution<float> nd(0.f, 3.f);
  std::string out;
  *ended = false;
  for (int i = 0; i < max_tokens; ++i) {
    std::vector<float> logits(static_cast<std::size_t>(v.index->n_vocab()));
    for (float& l : logits) l = nd(rng);
    const std::int32_t t = s.sample(logits);
    if (t == v.eos) {
      *ended = true;
      break;
    }
    out += v.pieces[static_cast<std::size_t>(t)];
  }
  return out;
}

TEST(SamplerGrammar, ForcesALongLiteralWhateverTheSettings) {
  const Vocab v = small_vocab();
  const std::string text = "the quick brown fox jumps over the lazy dog, the quick brown fox jumps over the lazy dog";
  const auto g = std::make_shared<const Grammar>(parse_gbnf("root ::= \"" + text + "\""));
  std::vector<SamplerConfig> configs(4);
  configs[0] = SamplerConfig::greedy();
  configs[1].top_k = 1;
  configs[2].top_p = 0.05f, configs[2].min_p = 0.9f, configs[2].temperature = 2.0f;
  configs[3].repeat_penalty = 5.0f, configs[3].top_k = 3;
  for (std::size_t k = 0; k < configs.size(); ++k)
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
      configs[k].seed = seed;
      Sampler s(configs[k]);
      // A bias that bans the literal's own first token choice is overridden
      // only as far as the grammar allows: "t" stays possible via "the".
      const LogitBias ban{v.id("t"), -std::numeric_limits<float>::infinity()};
      s.set_logit_bias(std::span(&ban, 1));
      s.set_constraint(std::make_unique<TokenConstraint>(g, v.index));
      s.accept(v.id("x"));  // a prompt token: does not advance the grammar
      std::mt19937 rng(static_cast<unsigned>(seed * 7 + k));
      bool ended = false;
      EXPECT_EQ(generate(s, v, rng, 200, &ended), text) << "config " << k << " seed " << seed;
      EXPECT_TRUE(ended);
    }
}

TEST(SamplerGrammar, EveryOutputIsTheGrammars) {
  const Vocab v = small_vocab();
  const std::string gbnf = R"(root ::= "{\"" key "\":" ws value ("," ws "\"" key "\":" ws value)* "}"
key ::= [a-z]{1,8}
value ::= [0-9]{1,4} | "\"" [a-zé ]{0,10} "\""
ws ::= " "?)";
  const auto g = std::make_shared<const Grammar>(parse_gbnf(gbnf));
  int ended_count = 0;
  for (std::uint64_t seed = 1; seed <= 50; ++seed) {
    SamplerConfig cfg;
    cfg.seed = seed;
    Sampler s(cfg);
    s.set_constraint(std::make_unique<TokenConstraint>(g, v.index));
    std::mt19937 rng(static_cast<unsigned>(seed));
    bool ended = false;
    const std::string out = generate(s, v, rng, 400, &ended);
    if (ended) {
      ++ended_count;
      EXPECT_TRUE(matches(g, out)) << out;
    }
    // reset() puts the grammar back at the start: the same seed, the same output.
    s.reset(seed);
    std::mt19937 rng2(static_cast<unsigned>(seed));
    bool ended2 = false;
    EXPECT_EQ(generate(s, v, rng2, 400, &ended2), out);
  }
  EXPECT_GT(ended_count, 25);
}

TEST(SamplerGrammar, CopiesAreIndependent) {
  const Vocab v = small_vocab();
  const auto g = std::make_shared<const Grammar>(parse_gbnf("root ::= \"ab\" | \"ba\""));
  Sampler a(SamplerConfig::greedy());
  a.set_constraint(std::make_unique<TokenConstraint>(g, v.index));
  std::vector<float> logits(static_cast<std::size_t>(v.index->n_vocab()), 0.f);
  logits[static_cast<std::size_t>(v.id("a"))] = 5.f;
  Sampler b = a;
  EXPECT_EQ(a.sample(logits), v.id("a"));
  // b is still at the start: "a" is allowed there too, and then only "b".
  EXPECT_EQ(b.sample(logits), v.id("a"));
  EXPECT_EQ(a.sample(logits), v.id("b"));
}

}  // namespace
}  // namespace latte::grammar

namespace latte::grammar {
namespace {

// A hostile grammar or output meets a limit with a clear error: no crash,
// no hang, no memory blown.
TEST(GbnfParse, HostileGrammarsMeetLimits) {
  EXPECT_EQ(parse_error("root ::= " + std::string(200, '(') + "\"a\"" + std::string(200, ')')),
            "grammar:1:138: groups nested deeper than 128");
  // Repetitions share rules where they can ("ab"{3000} once, then referenced twice)...
  EXPECT_TRUE(matches("root ::= (\"ab\"{3000}){2}", [] {
    std::string t;
    for (int i = 0; i < 6000; ++i) t += "ab";
    return t;
  }()));
  // ...and a literal repeated is copied: too many copies are refused.
  EXPECT_EQ(parse_error("root ::= \"" + std::string(200, 'x') + "\"{10000}"),
            "grammar:1:212: the repetitions expand to more than 1048576 elements: refused");
  // A long chain of rules (no recursion limit in the checks: they iterate).
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 20000; ++i) {
    chain += 'r';
    chain += std::to_string(i);
    chain += " ::= r";
    chain += std::to_string(i + 1);
    chain += '\n';
  }
  chain += "r20000 ::= \"z\"\n";
  EXPECT_TRUE(matches(chain, "z"));
  // Output nesting deeper than the stack limit.
  const auto g = std::make_shared<const Grammar>(parse_gbnf("root ::= \"(\" root \")\" | \"x\""));
  ParseAutomaton a(g);
  ParseAutomaton::State s = a.initial();
  try {
    for (int i = 0; i < 5000; ++i) s = a.next(s, '(');
    FAIL() << "5000 levels accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "grammar: the parse nests deeper than 4096 rules: refused");
  }
}

}  // namespace
}  // namespace latte::grammar

namespace latte::grammar {
namespace {

// compact() keeps the state it is given (its stacks and a cut UTF-8
// character) and the initial one; everything after goes on as before.
TEST(ParseAutomaton, CompactKeepsTheState) {
  const auto g = std::make_shared<const Grammar>(parse_gbnf("root ::= \"(\" root \")\" | [a-zé]+"));
  ParseAutomaton a(g);
  ParseAutomaton::State s = a.initial();
  for (unsigned char b : std::string("(((ab\xC3")) s = a.next(s, b);
  ASSERT_NE(s, ParseAutomaton::kDead);
  s = a.compact(s);
  EXPECT_EQ(a.n_states(), 2u);  // the initial state and this one
  for (unsigned char b : std::string("\xA9)))")) {
    s = a.next(s, b);
    ASSERT_NE(s, ParseAutomaton::kDead);
  }
  EXPECT_TRUE(a.can_end(s));
  EXPECT_EQ(a.next(s, ')'), ParseAutomaton::kDead);
  ParseAutomaton::State t = a.initial();
  for (unsigned char b : std::string("(x)")) t = a.next(t, b);
  EXPECT_TRUE(a.can_end(t));
}

}  // namespace
}  // namespace latte::grammar

// `latte run`'s structured-output flags (--grammar, --grammar-file,
// --json-schema, --json) on the shipped model: the output follows them, and
// bad grammars, schemas and combinations are refused naming what is wrong.
#if LATTE_TEST_POSIX
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "tests/cli/cli_run.h"

namespace {

using latte::test::run;

const std::string kModel = std::string("-m ") + LATTE_SOURCE_DIR + "/models/latte-tiny-mla.gguf";

TEST(CliGrammar, OutputFollowsTheGrammar) {
  for (int seed = 1; seed <= 4; ++seed) {
    const auto r = run("run " + kModel + " -p 'And he said' --seed " + std::to_string(seed) +
                           " --grammar 'root ::= (\"yes\" | \"no\") \".\"'",
                       true);
    EXPECT_EQ(r.code, 0);
    EXPECT_TRUE(r.output == "yes.\n" || r.output == "no.\n") << r.output;
  }
  const std::string file = testing::TempDir() + "cli_grammar.gbnf";
  std::ofstream(file) << "root ::= [0-9]{3} \"-\" [0-9]{2}\n";
  const auto f = run("run " + kModel + " -p x --seed 3 --grammar-file " + file, true);
  EXPECT_EQ(f.code, 0);
  ASSERT_EQ(f.output.size(), 7u) << f.output;
  EXPECT_EQ(f.output[3], '-');
  std::remove(file.c_str());
  const auto j = run("run " + kModel + " -p x --seed 5 --json-schema '{\"type\":\"integer\",\"minimum\":10,\"maximum\":12}'", true);
  // The grammar of a JSON value allows whitespace after it.
  const std::string number = j.output.substr(0, j.output.find_first_of(" \t\n"));
  EXPECT_TRUE(number == "10" || number == "11" || number == "12") << j.output;
}

TEST(CliGrammar, BadInputIsRefusedByName) {
  auto r = run("run " + kModel + " -p x --grammar 'root ::= (\"a\"'");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("grammar:1:14: expected ')' to close the group opened at 1:10, found the end of the grammar"),
            std::string::npos)
      << r.output;
  r = run("run " + kModel + " -p x --json-schema '{\"type\":\"string\",\"pattern\":\"a+\"}'");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("json schema: at #: 'pattern' is not supported"), std::string::npos) << r.output;
  r = run("run " + kModel + " -p x --json-schema /nonexistent/schema.json");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("/nonexistent/schema.json"), std::string::npos) << r.output;
  r = run("run " + kModel + " -p x --json --grammar 'root ::= \"a\"'");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("excludes"), std::string::npos) << r.output;
}

}  // namespace
#endif

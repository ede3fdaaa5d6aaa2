// Unit tests of the server's pure parts: stop strings and UTF-8 hold-back
// in streamed text (text_stream.h), UTF-8 validation, the API key's
// constant-time comparison (http.h).
#include <gtest/gtest.h>

#include <string>

#include "tools/server/http.h"
#include "tools/server/text_stream.h"

namespace latte::server {
namespace {

// Feeds pieces, collecting what is released after each; returns all of it.
std::string feed(TextStream& t, std::initializer_list<const char*> pieces, bool* stopped = nullptr) {
  std::string out;
  bool stop = false;
  for (const char* p : pieces) {
    stop = t.add(p);
    out += stop ? t.flush() : t.release();
    if (stop) break;
  }
  if (!stop) out += t.flush();
  if (stopped) *stopped = stop;
  return out;
}

TEST(ServerTextStream, StopStringAcrossPiecesIsCutAndNeverSent) {
  TextStream t({"END"});
  EXPECT_EQ(t.add("hello E"), false);
  EXPECT_EQ(t.release(), "hello ");  // "E" may begin the stop string: held
  EXPECT_EQ(t.add("N"), false);
  EXPECT_EQ(t.release(), "");
  EXPECT_EQ(t.add("D and more"), true);
  EXPECT_EQ(t.flush(), "");
  EXPECT_EQ(t.text(), "hello ");
}

TEST(ServerTextStream, HeldPrefixIsReleasedWhenItTurnsOutNotToBeAStop) {
  TextStream t({"END"});
  bool stopped = true;
  EXPECT_EQ(feed(t, {"a E", "N", "x"}, &stopped), "a ENx");
  EXPECT_FALSE(stopped);
}

TEST(ServerTextStream, EarliestOfSeveralStopsWins) {
  TextStream t({"zz", "b"});
  bool stopped = false;
  EXPECT_EQ(feed(t, {"aazz", "b"}, &stopped), "aa");
  EXPECT_TRUE(stopped);
  TextStream u({"zz", "b"});
  EXPECT_EQ(feed(u, {"abzz"}, &stopped), "a");
}

TEST(ServerTextStream, CutUtf8CharacterWaitsForItsRest) {
  TextStream t({});
  EXPECT_FALSE(t.add("caf\xC3"));
  EXPECT_EQ(t.release(), "caf");
  EXPECT_FALSE(t.add("\xA9!"));
  EXPECT_EQ(t.release(), "\xC3\xA9!");
  TextStream e({});
  EXPECT_FALSE(e.add("\xF0\x9F"));
  EXPECT_EQ(e.release(), "");
  EXPECT_FALSE(e.add("\x98"));
  EXPECT_EQ(e.release(), "");
  EXPECT_FALSE(e.add("\x80"));
  EXPECT_EQ(e.release(), "\xF0\x9F\x98\x80");
}

TEST(ServerUtf8, Validation) {
  EXPECT_TRUE(valid_utf8(""));
  EXPECT_TRUE(valid_utf8("plain \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_FALSE(valid_utf8("\xFF"));
  EXPECT_FALSE(valid_utf8("\xC3"));               // cut
  EXPECT_FALSE(valid_utf8("\xC0\xAF"));           // overlong
  EXPECT_FALSE(valid_utf8("\xE0\x80\xAF"));       // overlong
  EXPECT_FALSE(valid_utf8("\xED\xA0\x80"));       // surrogate
  EXPECT_FALSE(valid_utf8("\xF4\x90\x80\x80"));   // past U+10FFFF
  EXPECT_EQ(complete_utf8_prefix("ab\xE2\x82"), 2u);
  EXPECT_EQ(complete_utf8_prefix("ab\xE2\x82\xAC"), 5u);
}

TEST(ServerAuth, ConstantTimeEquality) {
  EXPECT_TRUE(equal_constant_time("secret", "secret"));
  EXPECT_FALSE(equal_constant_time("secret", "secreT"));
  EXPECT_FALSE(equal_constant_time("secret", "secret2"));
  EXPECT_FALSE(equal_constant_time("", "x"));
  EXPECT_TRUE(equal_constant_time("", ""));
}

}  // namespace
}  // namespace latte::server

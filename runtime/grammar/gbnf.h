// GBNF text (llama.cpp's grammar syntax) to a compiled Grammar. Owns the
// syntax only; the checks every grammar passes are compile()'s (grammar.h).
//
//   rule   ::= name "::=" alternatives        one rule per line; newlines are
//   alternatives: seq ("|" seq)*              allowed inside ( ), after ::= and
//   seq: item*  item: primary postfix*        after |, and a line starting
//   primary: name | "literal" | [class] | . | ( alternatives )    with | goes on
//   postfix: * + ? {m} {m,} {m,n}             the rule before it
//
// Literals and classes take \n \t \r \\ \" \' \[ \] \- \^ \/ \xHH \uHHHH
// \UHHHHHHHH; `.` is any code point; `#` starts a comment. A postfix applies
// to the item before it (a whole literal). Errors: Error(invalid_argument)
// "grammar:LINE:COL: ..." (1-based; the column counts code points).
#pragma once

#include <string>
#include <string_view>

#include "runtime/grammar/grammar.h"

namespace latte::grammar {

// Limits on hostile text: nesting of ( ), and a repetition's count.
inline constexpr int kMaxGbnfNesting = 128;
inline constexpr std::uint32_t kMaxRepetition = 10000;

Grammar parse_gbnf(std::string_view text, const std::string& root = "root");

}  // namespace latte::grammar

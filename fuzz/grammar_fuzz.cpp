// libFuzzer target: GBNF text or a JSON Schema (the first byte chooses),
// then the bytes after the first NUL walked through the grammar's matcher.
// Anything but a latte::Error with a message is a finding: a crash, a
// sanitizer report, a hang or memory blown past the limits. Built and run by
// scripts/fuzz.sh (runtime/grammar/ minus token_constraint and vocab_index,
// runtime/error.cpp, and the pre-tokenizer for its UTF-8 encoder), from the
// seed inputs in fuzz/seeds/grammar/.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "runtime/error.h"
#include "runtime/grammar/gbnf.h"
#include "runtime/grammar/json_schema.h"
#include "runtime/grammar/parse_automaton.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const bool schema = data[0] & 1;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::size_t nul = rest.find('\0');
  const std::string_view text = rest.substr(0, nul);
  const std::string_view input = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  try {
    auto g = std::make_shared<const latte::grammar::Grammar>(schema ? latte::grammar::json_schema_grammar(text)
                                                                     : latte::grammar::parse_gbnf(text));
    latte::grammar::ParseAutomaton a(g);
    auto s = a.initial();
    for (unsigned char b : input) {
      s = a.next(s, b);
      if (s == latte::grammar::ParseAutomaton::kDead) break;
    }
  } catch (const latte::Error& e) {
    if (std::string_view(e.what()).empty()) __builtin_trap();
  }
  return 0;
}

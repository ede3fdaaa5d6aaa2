// A compiled grammar: rules of alternatives over code-point sets and rule
// references, the form the matcher (parse_automaton.h) runs. Owns the checks
// every grammar passes whatever its source (GBNF text, a JSON Schema):
// undefined rules, a missing root, left recursion, and a root that admits
// no string. Rules: alternatives are flat runs of elements in one pool, each
// ended by an `end` element; groups and repetitions are already rules.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace latte::grammar {

inline constexpr std::uint32_t kMaxCodePoint = 0x10FFFF;

// A set of code points: sorted, disjoint, inclusive ranges.
struct CharSet {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> ranges;
  std::uint64_t ascii[2] = {0, 0};  // bit c set: c (< 128) is in the set (the common case, without a search)

  bool contains(std::uint32_t c) const {
    if (c < 128) return (ascii[c >> 6] >> (c & 63)) & 1;
    for (const auto& r : ranges) {
      if (c < r.first) return false;
      if (c <= r.second) return true;
    }
    return false;
  }
  // Whether any code point in [lo, hi] is in the set.
  bool intersects(std::uint32_t lo, std::uint32_t hi) const {
    for (const auto& r : ranges)
      if (r.first <= hi && lo <= r.second) return true;
    return false;
  }
  bool empty() const { return ranges.empty(); }
  // Sorts, merges and (negate) complements over [0, kMaxCodePoint]; fills ascii.
  void normalize(bool negate);
};

enum class ElementKind : std::uint8_t { end, chars, rule };

struct Element {
  ElementKind kind = ElementKind::end;
  std::uint32_t arg = 0;  // chars: index into charsets; rule: rule id
};

// A grammar as written, before compile(): each rule a list of alternatives,
// each a sequence of elements (no end elements).
struct RuleSet {
  std::vector<std::string> names;                       // rule id -> name
  std::vector<std::vector<std::vector<Element>>> rules;  // rule id -> alternatives
  std::vector<CharSet> charsets;
  std::vector<bool> defined;                            // rule id -> has a definition
  std::vector<std::string> first_use;                   // rule id -> "line:col" of its first reference ("" none)
  std::unordered_map<std::string, std::uint32_t> ids;   // name -> rule id

  // The id of a rule by name, created (undefined) when new.
  std::uint32_t rule_id(const std::string& name);
  std::uint32_t add_charset(CharSet cs);
};

struct Grammar {
  std::vector<Element> elements;                  // every alternative, each ended by an end element
  std::vector<CharSet> charsets;
  std::vector<std::vector<std::uint32_t>> rules;  // rule id -> start positions of its alternatives
  std::vector<std::string> names;
  std::uint32_t root = 0;
};

// Limits a hostile grammar meets with a clear error rather than memory or time.
inline constexpr std::size_t kMaxGrammarElements = 1u << 20;

// Checks and flattens: every referenced rule defined, `root` present, no left
// recursion (named with its cycle), alternatives that can never match (an
// empty character class, a rule that admits nothing) dropped, and the root
// admitting at least one string. Error(invalid_argument) "grammar: ..." otherwise.
Grammar compile(RuleSet rs, const std::string& root);

}  // namespace latte::grammar

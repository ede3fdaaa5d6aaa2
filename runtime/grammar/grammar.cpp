#include "runtime/grammar/grammar.h"

#include <algorithm>

#include "runtime/error.h"

namespace latte::grammar {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw Error(Status::invalid_argument, "grammar: " + msg); }

}  // namespace

void CharSet::normalize(bool negate) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<std::uint32_t, std::uint32_t>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  if (negate) {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> comp;
    std::uint32_t next = 0;
    for (const auto& r : merged) {
      if (r.first > next) comp.push_back({next, r.first - 1});
      next = r.second + 1;
    }
    if (next <= kMaxCodePoint) comp.push_back({next, kMaxCodePoint});
    merged.swap(comp);
  }
  ranges.swap(merged);
  ascii[0] = ascii[1] = 0;
  for (const auto& r : ranges)
    for (std::uint32_t c = r.first; c <= std::min<std::uint32_t>(r.second, 127); ++c) ascii[c >> 6] |= 1ull << (c & 63);
}

std::uint32_t RuleSet::rule_id(const std::string& name) {
  if (auto it = ids.find(name); it != ids.end()) return it->second;
  ids.emplace(name, static_cast<std::uint32_t>(names.size()));
  names.push_back(name);
  rules.emplace_back();
  defined.push_back(false);
  first_use.emplace_back();
  return static_cast<std::uint32_t>(names.size() - 1);
}

std::uint32_t RuleSet::add_charset(CharSet cs) {
  charsets.push_back(std::move(cs));
  return static_cast<std::uint32_t>(charsets.size() - 1);
}

Grammar compile(RuleSet rs, const std::string& root) {
  const std::size_t n = rs.rules.size();
  for (std::size_t r = 0; r < n; ++r)
    if (!rs.defined[r])
      throw Error(Status::invalid_argument, "grammar" + (rs.first_use[r].empty() ? ": " : ":" + rs.first_use[r] + ": ") +
                                                "rule '" + rs.names[r] + "' is not defined");
  std::uint32_t root_id = 0;
  {
    auto it = std::find(rs.names.begin(), rs.names.end(), root);
    if (it == rs.names.end()) fail("no rule '" + root + "' (the root, where the output starts) is defined");
    root_id = static_cast<std::uint32_t>(it - rs.names.begin());
  }

  // Productive rules (those that admit some string), to a fixpoint.
  std::vector<bool> productive(n, false);
  auto element_productive = [&](const Element& e) {
    return e.kind == ElementKind::chars ? !rs.charsets[e.arg].empty() : productive[e.arg];
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t r = 0; r < n; ++r) {
      if (productive[r]) continue;
      for (const auto& alt : rs.rules[r])
        if (std::all_of(alt.begin(), alt.end(), element_productive)) {
          productive[r] = changed = true;
          break;
        }
    }
  }
  if (!productive[root_id]) fail("the grammar admits no string (rule '" + root + "' can never be completed)");
  // Alternatives that can never match are dropped: the matcher then never
  // enters a dead end that only later input would reveal.
  for (std::size_t r = 0; r < n; ++r)
    std::erase_if(rs.rules[r], [&](const std::vector<Element>& alt) {
      return !std::all_of(alt.begin(), alt.end(), element_productive);
    });

  // Nullable rules (those that admit the empty string).
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : rs.rules[r])
        if (std::all_of(alt.begin(), alt.end(),
                        [&](const Element& e) { return e.kind == ElementKind::rule && nullable[e.arg]; })) {
          nullable[r] = changed = true;
          break;
        }
    }
  }
  // Left recursion: a rule reaching itself before any code point is read.
  // The matcher expands rules without reading, so it would never stop.
  std::vector<std::vector<std::uint32_t>> first(n);
  for (std::size_t r = 0; r < n; ++r)
    for (const auto& alt : rs.rules[r])
      for (const Element& e : alt) {
        if (e.kind != ElementKind::rule) break;
        first[r].push_back(e.arg);
        if (!nullable[e.arg]) break;
      }
  std::vector<std::uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  for (std::size_t start = 0; start < n; ++start) {
    if (color[start]) continue;
    // Iterative depth-first search (a chain of rules may be long).
    std::vector<std::pair<std::uint32_t, std::size_t>> path{{static_cast<std::uint32_t>(start), 0}};
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i == first[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const std::uint32_t next = first[r][i++];
      if (color[next] == 1) {
        std::string cycle;
        bool on = false;
        for (const auto& p : path) {
          on = on || p.first == next;
          if (on) cycle += rs.names[p.first] + " -> ";
        }
        fail("rule '" + rs.names[next] + "' is left-recursive (" + cycle + rs.names[next] +
             " before reading anything; a repetition of something that can match nothing counts too): rewrite it "
             "with a repetition");
      }
      if (color[next] == 0) {
        color[next] = 1;
        path.push_back({next, 0});
      }
    }
  }

  Grammar g;
  g.charsets = std::move(rs.charsets);
  g.names = std::move(rs.names);
  g.root = root_id;
  g.rules.resize(n);
  for (std::size_t r = 0; r < n; ++r)
    for (const auto& alt : rs.rules[r]) {
      g.rules[r].push_back(static_cast<std::uint32_t>(g.elements.size()));
      g.elements.insert(g.elements.end(), alt.begin(), alt.end());
      g.elements.push_back(Element{});
      if (g.elements.size() > kMaxGrammarElements)
        fail("more than " + std::to_string(kMaxGrammarElements) + " elements once repetitions are expanded: refused");
    }
  return g;
}

}  // namespace latte::grammar

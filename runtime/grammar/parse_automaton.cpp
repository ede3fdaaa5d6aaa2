#include "runtime/grammar/parse_automaton.h"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "runtime/error.h"

namespace latte::grammar {

namespace {

[[noreturn]] void limit(const std::string& msg) { throw Error(Status::invalid_argument, "grammar: " + msg); }

constexpr std::uint32_t kMinOfLength[5] = {0, 0, 0x80, 0x800, 0x10000};  // below: an overlong encoding

}  // namespace

void ParseAutomaton::clear() {
  nodes_.clear();
  node_ids_.clear();
  norm_of_.clear();
  norms_.clear();
  sets_.clear();
  set_ids_.clear();
  states_.clear();
  state_ids_.clear();
  trans_.clear();
  nodes_.push_back({kUnknown, 0, 0});  // node 0: the empty stack (the parse is complete)
  norm_of_.push_back(kUnknown);
}

ParseAutomaton::State ParseAutomaton::compact(State s) {
  // The state's stacks as chains of positions, bottom first, then interned afresh.
  const StateInfo info = states_[s];
  std::vector<std::vector<std::uint32_t>> chains;
  for (std::uint32_t n : sets_[info.set]) {
    std::vector<std::uint32_t> chain;
    for (std::uint32_t k = n; k != 0; k = nodes_[k].parent) chain.push_back(nodes_[k].pos);
    std::reverse(chain.begin(), chain.end());
    chains.push_back(std::move(chain));
  }
  const std::vector<std::uint32_t> initial_set = sets_[states_[initial_].set];
  std::vector<std::vector<std::uint32_t>> initial_chains;
  for (std::uint32_t n : initial_set) {
    std::vector<std::uint32_t> chain;
    for (std::uint32_t k = n; k != 0; k = nodes_[k].parent) chain.push_back(nodes_[k].pos);
    std::reverse(chain.begin(), chain.end());
    initial_chains.push_back(std::move(chain));
  }
  clear();
  auto intern_chains = [&](const std::vector<std::vector<std::uint32_t>>& cs) {
    std::vector<std::uint32_t> set;
    for (const auto& chain : cs) {
      std::uint32_t node = 0;
      for (std::uint32_t pos : chain) node = intern_node(pos, node);
      set.push_back(node);
    }
    return intern_set(std::move(set));
  };
  initial_ = intern_state(intern_chains(initial_chains), 0, 0, 0);
  return intern_state(intern_chains(chains), info.partial, info.remaining, info.length);
}

ParseAutomaton::ParseAutomaton(std::shared_ptr<const Grammar> grammar) : g_(std::move(grammar)) {
  clear();
  std::vector<std::uint32_t> start;
  for (std::uint32_t alt : g_->rules[g_->root]) {
    if (g_->elements[alt].kind == ElementKind::end) {
      start.push_back(0);
    } else {
      const auto& n = normalize(intern_node(alt, 0));
      start.insert(start.end(), n.begin(), n.end());
    }
  }
  initial_ = intern_state(intern_set(std::move(start)), 0, 0, 0);
}

std::uint32_t ParseAutomaton::intern_node(std::uint32_t pos, std::uint32_t parent) {
  const std::uint64_t key = (static_cast<std::uint64_t>(pos) << 32) | parent;
  if (auto it = node_ids_.find(key); it != node_ids_.end()) return it->second;
  const std::uint32_t depth = nodes_[parent].depth + 1;
  if (depth > kMaxStackDepth)
    limit("the parse nests deeper than " + std::to_string(kMaxStackDepth) + " rules: refused");
  if (nodes_.size() >= kMaxStackNodes)
    limit("more than " + std::to_string(kMaxStackNodes) + " parse stack entries: the grammar is too ambiguous (refused)");
  const auto id = static_cast<std::uint32_t>(nodes_.size());
  nodes_.push_back({pos, parent, depth});
  norm_of_.push_back(kUnknown);
  node_ids_.emplace(key, id);
  return id;
}

// The stacks a node stands for once every rule reference on top is expanded
// into its alternatives (and finished rules return to their parent): each
// result's top is a character set, or the result is the empty stack.
const std::vector<std::uint32_t>& ParseAutomaton::normalize(std::uint32_t node) {
  if (norm_of_[node] != kUnknown) return norms_[norm_of_[node]];
  std::vector<std::uint32_t> out, work{node};
  std::unordered_set<std::uint32_t> seen;
  while (!work.empty()) {
    const std::uint32_t n = work.back();
    work.pop_back();
    if (!seen.insert(n).second) continue;
    if (n == 0) {
      out.push_back(0);
      continue;
    }
    const Node nd = nodes_[n];
    const Element& e = g_->elements[nd.pos];
    if (e.kind == ElementKind::chars) {
      out.push_back(n);
      continue;
    }
    // A rule reference: continue after it (the parent when it ends the
    // alternative: a tail call keeps the stack flat), entering each alternative.
    const std::uint32_t cont =
        g_->elements[nd.pos + 1].kind == ElementKind::end ? nd.parent : intern_node(nd.pos + 1, nd.parent);
    for (std::uint32_t alt : g_->rules[e.arg])
      work.push_back(g_->elements[alt].kind == ElementKind::end ? cont : intern_node(alt, cont));
    if (out.size() > kMaxStacksPerState)
      limit("a rule expands into more than " + std::to_string(kMaxStacksPerState) + " parses at once: the grammar is too ambiguous (refused)");
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  norm_of_[node] = static_cast<std::uint32_t>(norms_.size());
  norms_.push_back(std::move(out));
  return norms_.back();
}

std::uint32_t ParseAutomaton::intern_set(std::vector<std::uint32_t> stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.size() > kMaxStacksPerState)
    limit("more than " + std::to_string(kMaxStacksPerState) + " parses alive at once: the grammar is too ambiguous (refused)");
  if (auto it = set_ids_.find(stacks); it != set_ids_.end()) return it->second;
  const auto id = static_cast<std::uint32_t>(sets_.size());
  sets_.push_back(stacks);
  set_ids_.emplace(std::move(stacks), id);
  return id;
}

ParseAutomaton::State ParseAutomaton::intern_state(std::uint32_t set, std::uint32_t partial, std::uint8_t remaining,
                                                   std::uint8_t length) {
  const std::uint64_t key = static_cast<std::uint64_t>(set) | (static_cast<std::uint64_t>(partial) << 32) |
                            (static_cast<std::uint64_t>(remaining) << 53) | (static_cast<std::uint64_t>(length) << 56);
  if (auto it = state_ids_.find(key); it != state_ids_.end()) return it->second;
  if (states_.size() >= kMaxStates)
    limit("more than " + std::to_string(kMaxStates) + " parse states: the grammar (or the output) is too complex (refused)");
  const auto id = static_cast<State>(states_.size());
  states_.push_back({set, partial, remaining, length});
  trans_.resize(trans_.size() + 256, kUnknown);
  state_ids_.emplace(key, id);
  return id;
}

bool ParseAutomaton::any_accepts(std::uint32_t set, std::uint32_t lo, std::uint32_t hi) const {
  for (std::uint32_t n : sets_[set])
    if (n != 0 && g_->charsets[g_->elements[nodes_[n].pos].arg].intersects(lo, hi)) return true;
  return false;
}

std::uint32_t ParseAutomaton::advance(std::uint32_t set, std::uint32_t cp) {
  std::vector<std::uint32_t> out;
  const std::vector<std::uint32_t> stacks = sets_[set];  // a copy: interning may grow sets_
  for (std::uint32_t n : stacks) {
    if (n == 0) continue;
    const Node nd = nodes_[n];
    if (!g_->charsets[g_->elements[nd.pos].arg].contains(cp)) continue;
    const std::uint32_t cont =
        g_->elements[nd.pos + 1].kind == ElementKind::end ? nd.parent : intern_node(nd.pos + 1, nd.parent);
    const auto& norm = normalize(cont);
    out.insert(out.end(), norm.begin(), norm.end());
  }
  if (out.empty()) return kDead;
  return intern_set(std::move(out));
}

ParseAutomaton::State ParseAutomaton::compute(State s, unsigned char b) {
  const StateInfo st = states_[s];
  std::uint32_t v = 0;
  std::uint8_t remaining = 0, length = st.length;
  if (st.remaining == 0) {
    if (b < 0x80) {
      const std::uint32_t set = advance(st.set, b);
      return set == kDead ? kDead : intern_state(set, 0, 0, 0);
    }
    if (b >= 0xC2 && b <= 0xDF) length = 2, v = b & 0x1Fu;
    else if (b >= 0xE0 && b <= 0xEF) length = 3, v = b & 0x0Fu;
    else if (b >= 0xF0 && b <= 0xF4) length = 4, v = b & 0x07u;
    else return kDead;  // a continuation byte, or one no UTF-8 has
    remaining = static_cast<std::uint8_t>(length - 1);
  } else {
    if ((b & 0xC0) != 0x80) return kDead;
    v = (st.partial << 6) | (b & 0x3Fu);
    remaining = static_cast<std::uint8_t>(st.remaining - 1);
    if (remaining == 0) {
      if (v < kMinOfLength[length] || v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) return kDead;
      const std::uint32_t set = advance(st.set, v);
      return set == kDead ? kDead : intern_state(set, 0, 0, 0);
    }
  }
  // A cut character: alive while some stack accepts one of the code points it may become.
  const unsigned shift = 6u * remaining;
  const std::uint32_t lo = std::max(v << shift, kMinOfLength[length]);
  const std::uint32_t hi = std::min((v << shift) | ((1u << shift) - 1), kMaxCodePoint);
  if (lo > hi || !any_accepts(st.set, lo, hi)) return kDead;
  return intern_state(st.set, v, remaining, length);
}

}  // namespace latte::grammar

// The matcher: a grammar's parse stacks run over UTF-8 bytes, built lazily
// into a deterministic automaton. Owns stacks, stack sets, UTF-8 decoding and
// the byte transitions; knows nothing of tokens.
//
// A stack is a chain of positions in Grammar::elements (top: the next
// character set to match; below: where each enclosing rule resumes), interned
// as a node (position, parent) so equal stacks are one id. A parse state is
// the sorted set of stacks the input so far leaves alive (all parses of an
// ambiguous grammar at once) plus any partial UTF-8 character; each (state,
// byte) transition is computed once and kept, so walking the same bytes again
// is a table lookup. The empty stack (node 0) in a set means the grammar may
// end there. Limits (stack depth, stacks per set, states) stop a hostile
// grammar with Error(invalid_argument) "grammar: ..." instead of exhausting
// memory or time.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "runtime/grammar/grammar.h"

namespace latte::grammar {

inline constexpr std::uint32_t kMaxStackDepth = 4096;
inline constexpr std::size_t kMaxStacksPerState = 4096;
inline constexpr std::size_t kMaxStates = 1u << 16;  // each keeps 1 KiB of transitions
inline constexpr std::size_t kMaxStackNodes = 1u << 22;

class ParseAutomaton {
 public:
  using State = std::uint32_t;
  static constexpr State kDead = 0xFFFFFFFFu;

  explicit ParseAutomaton(std::shared_ptr<const Grammar> grammar);

  State initial() const { return initial_; }
  // The state after one more byte of output; kDead when no parse survives it.
  State next(State s, unsigned char byte) {
    const std::uint32_t t = trans_[(static_cast<std::size_t>(s) << 8) | byte];
    if (t != kUnknown) return t;
    const State r = compute(s, byte);
    trans_[(static_cast<std::size_t>(s) << 8) | byte] = r;
    return r;
  }
  // The output may end here: a parse is complete and no UTF-8 character is cut.
  bool can_end(State s) const { return states_[s].remaining == 0 && sets_[states_[s].set].front() == 0; }
  // Some parse can read more.
  bool can_continue(State s) const { return sets_[states_[s].set].back() != 0; }
  std::size_t n_states() const { return states_.size(); }
  // Whether the tables have grown past half their limits (a long-lived
  // constraint meets many states): time to compact().
  bool crowded() const { return states_.size() > kMaxStates / 2 || nodes_.size() > kMaxStackNodes / 2; }
  // Forgets every state but `s` and returns its new id (all other ids become
  // invalid): the tables start again from the grammar.
  State compact(State s);

 private:
  static constexpr std::uint32_t kUnknown = 0xFFFFFFFEu;
  struct Node {
    std::uint32_t pos, parent, depth;
  };
  struct StateInfo {
    std::uint32_t set;      // index into sets_
    std::uint32_t partial;  // the bits of a cut UTF-8 character so far
    std::uint8_t remaining; // its continuation bytes still to come (0: none cut)
    std::uint8_t length;    // its length in bytes
  };
  struct VecHash {
    std::size_t operator()(const std::vector<std::uint32_t>& v) const {
      std::uint64_t h = 1469598103934665603ull;
      for (std::uint32_t x : v) h = (h ^ x) * 1099511628211ull;
      return static_cast<std::size_t>(h);
    }
  };

  void clear();
  State compute(State s, unsigned char byte);
  std::uint32_t intern_node(std::uint32_t pos, std::uint32_t parent);
  const std::vector<std::uint32_t>& normalize(std::uint32_t node);
  std::uint32_t intern_set(std::vector<std::uint32_t> stacks);
  State intern_state(std::uint32_t set, std::uint32_t partial, std::uint8_t remaining, std::uint8_t length);
  // The set after one code point; kDead if none survives.
  std::uint32_t advance(std::uint32_t set, std::uint32_t cp);
  // Whether some stack of `set` accepts a code point in [lo, hi].
  bool any_accepts(std::uint32_t set, std::uint32_t lo, std::uint32_t hi) const;

  std::shared_ptr<const Grammar> g_;
  std::vector<Node> nodes_;
  std::unordered_map<std::uint64_t, std::uint32_t> node_ids_;
  std::vector<std::uint32_t> norm_of_;  // node -> index into norms_ (kUnknown: not yet)
  std::vector<std::vector<std::uint32_t>> norms_;
  std::vector<std::vector<std::uint32_t>> sets_;  // sorted node ids
  std::unordered_map<std::vector<std::uint32_t>, std::uint32_t, VecHash> set_ids_;
  std::vector<StateInfo> states_;
  std::unordered_map<std::uint64_t, State> state_ids_;
  std::vector<std::uint32_t> trans_;  // state * 256 + byte -> state, kUnknown or kDead
  State initial_ = 0;
};

}  // namespace latte::grammar

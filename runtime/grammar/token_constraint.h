// A grammar applied to one sequence's tokens: which tokens may come next,
// masking the logits of the others, and advancing over the token chosen.
// Owns the per-step work and its caches; the sampler decides when to call.
//
// Speed: the sampler first checks only the token it drew (a walk of that
// token's bytes, a few table lookups); the full mask is computed only when
// that token is refused, by one pass over the vocabulary trie (dead prefixes
// skip whole subtrees), and kept per parse state, so a state met again (the
// inside of a string, a repeated structure) costs a copy. A cached mask keeps
// the smaller of the allowed and the refused list.
//
// End of generation: end-of-generation tokens are allowed exactly where the
// grammar may end; where it is complete and cannot go on they are all that
// is allowed. Control tokens are never allowed under a grammar.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/grammar/parse_automaton.h"
#include "runtime/grammar/vocab_index.h"

namespace latte::grammar {

class TokenConstraint {
 public:
  // Error(invalid_argument) when no token of the vocabulary can start the
  // output (and the grammar cannot end at once, or the vocabulary has no
  // end-of-generation token).
  TokenConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const VocabIndex> vocab);

  // Whether `token` may come next (ids outside the vocabulary: no).
  bool allows(std::int32_t token);
  // Sets every logit of a token that may not come next to -inf (logits past
  // the vocabulary too). Error(invalid_argument) where no token may come
  // next, or logits fewer than the vocabulary.
  void mask(std::span<float> logits);
  // Advances over `token`; Error(invalid_argument) if it may not come next.
  void accept(std::int32_t token);
  // Back to the start of the output.
  void reset() { state_ = automaton_.initial(); }

  bool can_end() const { return automaton_.can_end(state_); }
  const VocabIndex& vocab() const { return *vocab_; }

 private:
  struct Mask {
    bool allowed_listed = true;       // ids: the allowed tokens, else the refused ones
    std::vector<std::int32_t> ids;    // never end-of-generation tokens (decided by can_end)
  };
  const Mask& mask_of(ParseAutomaton::State s);
  // Token ids all cached masks may hold together (4 bytes each); past it the
  // cache starts again.
  static constexpr std::size_t kMaxCachedIds = std::size_t{16} << 20;
  std::string describe(std::int32_t token) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const VocabIndex> vocab_;
  // A copy copies the automaton and masks too: nothing mutable is shared, so
  // copies may run on different threads.
  ParseAutomaton automaton_;
  std::unordered_map<ParseAutomaton::State, Mask> masks_;
  std::size_t cached_ids_ = 0;
  ParseAutomaton::State state_ = 0;
  std::vector<ParseAutomaton::State> walk_;  // the trie walk's state per depth
  std::vector<float> saved_;
};

}  // namespace latte::grammar

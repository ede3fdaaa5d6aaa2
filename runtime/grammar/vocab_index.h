// A vocabulary as a grammar sees it: each token's bytes, which tokens end
// generation, and a byte trie of the tokens laid out in preorder so one
// linear pass walks every token against a parse state, skipping a whole
// subtree (every token sharing a dead prefix) at once. Built once per model
// and shared read-only by every constraint on it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace latte {
class Tokenizer;
}

namespace latte::grammar {

struct VocabIndex {
  // A token's bytes; empty for tokens a grammar never emits (control and
  // unknown tokens, empty pieces). End-of-generation tokens are separate.
  std::vector<std::string> pieces;
  std::vector<std::uint8_t> is_eog;   // one per token
  std::vector<std::int32_t> eog_ids;  // sorted

  // The trie, preorder: node i's byte, its depth (1: a first byte), the node
  // after its subtree, and its tokens [tok_begin[i], tok_begin[i + 1]) in `tokens`.
  std::vector<std::uint8_t> byte;
  std::vector<std::uint32_t> depth;
  std::vector<std::uint32_t> skip;
  std::vector<std::uint32_t> tok_begin;  // size: nodes + 1
  std::vector<std::int32_t> tokens;
  std::uint32_t max_depth = 0;

  std::int32_t n_vocab() const { return static_cast<std::int32_t>(pieces.size()); }

  // pieces[i] empty: never emitted; eog: the end-of-generation ids.
  static std::shared_ptr<const VocabIndex> build(std::vector<std::string> pieces, std::span<const std::int32_t> eog);
  // From a tokenizer: normal, user-defined and byte tokens by their bytes.
  static std::shared_ptr<const VocabIndex> from_tokenizer(const Tokenizer& tok);
};

}  // namespace latte::grammar

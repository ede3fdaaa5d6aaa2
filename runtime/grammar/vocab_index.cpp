#include "runtime/grammar/vocab_index.h"

#include <algorithm>
#include <numeric>

#include "runtime/tokenizer/tokenizer.h"

namespace latte::grammar {

std::shared_ptr<const VocabIndex> VocabIndex::build(std::vector<std::string> pieces, std::span<const std::int32_t> eog) {
  auto v = std::make_shared<VocabIndex>();
  v->pieces = std::move(pieces);
  v->is_eog.assign(v->pieces.size(), 0);
  for (std::int32_t id : eog)
    if (id >= 0 && static_cast<std::size_t>(id) < v->pieces.size() && !v->is_eog[id]) {
      v->is_eog[id] = 1;
      v->eog_ids.push_back(id);
    }
  std::sort(v->eog_ids.begin(), v->eog_ids.end());

  std::vector<std::int32_t> order;
  for (std::size_t i = 0; i < v->pieces.size(); ++i)
    if (!v->pieces[i].empty() && !v->is_eog[i]) order.push_back(static_cast<std::int32_t>(i));
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int32_t a, std::int32_t b) { return v->pieces[a] < v->pieces[b]; });
  // Sorted strings give the preorder directly: each string adds the nodes
  // past its common prefix with the one before.
  std::vector<std::uint32_t> path;  // node per depth - 1
  const std::string* prev = nullptr;
  for (std::int32_t id : order) {
    const std::string& s = v->pieces[id];
    std::size_t common = 0;
    if (prev) {
      const std::size_t m = std::min(prev->size(), s.size());
      while (common < m && (*prev)[common] == s[common]) ++common;
    }
    while (path.size() > common) {
      v->skip[path.back()] = static_cast<std::uint32_t>(v->byte.size());
      path.pop_back();
    }
    for (std::size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<std::uint32_t>(v->byte.size()));
      v->byte.push_back(static_cast<std::uint8_t>(s[d]));
      v->depth.push_back(static_cast<std::uint32_t>(d + 1));
      v->skip.push_back(0);
      v->tok_begin.push_back(static_cast<std::uint32_t>(v->tokens.size()));
    }
    v->tokens.push_back(id);  // the last node made is s's own (equal strings are adjacent)
    v->max_depth = std::max<std::uint32_t>(v->max_depth, static_cast<std::uint32_t>(s.size()));
    prev = &s;
  }
  for (std::uint32_t n : path) v->skip[n] = static_cast<std::uint32_t>(v->byte.size());
  v->tok_begin.push_back(static_cast<std::uint32_t>(v->tokens.size()));
  return v;
}

std::shared_ptr<const VocabIndex> VocabIndex::from_tokenizer(const Tokenizer& tok) {
  std::vector<std::string> pieces(static_cast<std::size_t>(tok.n_vocab()));
  for (std::int32_t id = 0; id < tok.n_vocab(); ++id) {
    const TokenType t = tok.token_type(id);
    if (t == TokenType::control || t == TokenType::unknown || t == TokenType::unused) continue;
    pieces[id] = tok.token_to_piece(id);
  }
  const auto eog = tok.end_of_generation_ids();
  return build(std::move(pieces), eog);
}

}  // namespace latte::grammar

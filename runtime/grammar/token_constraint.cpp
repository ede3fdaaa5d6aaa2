#include "runtime/grammar/token_constraint.h"

#include <algorithm>
#include <limits>

#include "runtime/error.h"

namespace latte::grammar {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw Error(Status::invalid_argument, "grammar: " + msg); }

}  // namespace

TokenConstraint::TokenConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const VocabIndex> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), automaton_(grammar_) {
  state_ = automaton_.initial();
  walk_.resize(vocab_->max_depth + 1);
  // Refused now rather than at the first sample: a grammar no token can start.
  const Mask& m = mask_of(state_);
  const bool some = m.allowed_listed ? !m.ids.empty() : m.ids.size() < static_cast<std::size_t>(vocab_->n_vocab());
  if (!some && !(automaton_.can_end(state_) && !vocab_->eog_ids.empty()))
    fail("no token of the vocabulary can start the output the grammar admits");
}

std::string TokenConstraint::describe(std::int32_t token) const {
  std::string piece = vocab_->pieces[token];
  std::string shown;
  for (unsigned char c : piece) {
    if (c == '\n') shown += "\\n";
    else if (c < 0x20) shown += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
    else shown += static_cast<char>(c);
  }
  return "token " + std::to_string(token) + " ('" + shown + "')";
}

bool TokenConstraint::allows(std::int32_t token) {
  if (token < 0 || token >= vocab_->n_vocab()) return false;
  if (vocab_->is_eog[token]) return automaton_.can_end(state_);
  const std::string& p = vocab_->pieces[token];
  if (p.empty()) return false;
  ParseAutomaton::State s = state_;
  for (unsigned char b : p) {
    s = automaton_.next(s, b);
    if (s == ParseAutomaton::kDead) return false;
  }
  return true;
}

void TokenConstraint::accept(std::int32_t token) {
  if (token >= 0 && token < vocab_->n_vocab() && vocab_->is_eog[token]) {
    if (!automaton_.can_end(state_)) fail("end-of-generation token " + std::to_string(token) + " where the grammar cannot end");
    return;  // the output is over; the state stays where it ended
  }
  if (!allows(token))
    fail((token < 0 || token >= vocab_->n_vocab() ? "token " + std::to_string(token) + ", outside the vocabulary,"
                                                   : describe(token)) +
         " does not continue the output the grammar admits");
  for (unsigned char b : vocab_->pieces[token]) state_ = automaton_.next(state_, b);
  // A long-lived constraint meets ever more states: past half the limits the
  // tables (and the masks, keyed by state) start again from where it is.
  if (automaton_.crowded()) {
    state_ = automaton_.compact(state_);
    masks_.clear();
    cached_ids_ = 0;
  }
}

const TokenConstraint::Mask& TokenConstraint::mask_of(ParseAutomaton::State s) {
  if (auto it = masks_.find(s); it != masks_.end()) return it->second;
  const VocabIndex& v = *vocab_;
  std::vector<std::int32_t> allowed;
  walk_[0] = s;
  const std::size_t n = v.byte.size();
  for (std::size_t i = 0; i < n;) {
    const std::uint32_t d = v.depth[i];
    const ParseAutomaton::State t = automaton_.next(walk_[d - 1], v.byte[i]);
    if (t == ParseAutomaton::kDead) {
      i = v.skip[i];  // no token with this prefix continues the output
      continue;
    }
    walk_[d] = t;
    for (std::uint32_t k = v.tok_begin[i]; k < v.tok_begin[i + 1]; ++k) allowed.push_back(v.tokens[k]);
    ++i;
  }
  Mask m;
  const auto n_vocab = static_cast<std::size_t>(v.n_vocab());
  if (allowed.size() * 2 > n_vocab) {
    // Most tokens allowed (inside a string): keep the refused ones instead.
    std::vector<std::uint8_t> ok(n_vocab, 0);
    for (std::int32_t id : allowed) ok[id] = 1;
    m.allowed_listed = false;
    for (std::size_t id = 0; id < n_vocab; ++id)
      if (!ok[id] && !v.is_eog[id]) m.ids.push_back(static_cast<std::int32_t>(id));
  } else {
    std::sort(allowed.begin(), allowed.end());
    m.ids = std::move(allowed);
  }
  if (cached_ids_ + m.ids.size() > kMaxCachedIds) {
    masks_.clear();
    cached_ids_ = 0;
  }
  cached_ids_ += m.ids.size();
  return masks_.emplace(s, std::move(m)).first->second;
}

void TokenConstraint::mask(std::span<float> logits) {
  const VocabIndex& v = *vocab_;
  const auto n_vocab = static_cast<std::size_t>(v.n_vocab());
  if (logits.size() < n_vocab)
    fail(std::to_string(logits.size()) + " logits for a vocabulary of " + std::to_string(n_vocab) + " tokens");
  const Mask& m = mask_of(state_);
  const bool end = automaton_.can_end(state_);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (m.allowed_listed) {
    if (m.ids.empty() && !(end && !v.eog_ids.empty()))
      fail(end ? "the output is complete, but the vocabulary has no end-of-generation token to end it"
               : "no token of the vocabulary continues the output here");
    saved_.resize(m.ids.size());
    for (std::size_t i = 0; i < m.ids.size(); ++i) saved_[i] = logits[static_cast<std::size_t>(m.ids[i])];
    std::vector<float> eog;
    if (end)
      for (std::int32_t id : v.eog_ids) eog.push_back(logits[static_cast<std::size_t>(id)]);
    std::fill(logits.begin(), logits.end(), kNegInf);
    for (std::size_t i = 0; i < m.ids.size(); ++i) logits[static_cast<std::size_t>(m.ids[i])] = saved_[i];
    if (end)
      for (std::size_t i = 0; i < v.eog_ids.size(); ++i) logits[static_cast<std::size_t>(v.eog_ids[i])] = eog[i];
  } else {
    for (std::int32_t id : m.ids) logits[static_cast<std::size_t>(id)] = kNegInf;
    if (!end)
      for (std::int32_t id : v.eog_ids) logits[static_cast<std::size_t>(id)] = kNegInf;
    std::fill(logits.begin() + static_cast<std::ptrdiff_t>(n_vocab), logits.end(), kNegInf);
  }
}

}  // namespace latte::grammar

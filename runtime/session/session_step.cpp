// Session::step (session.h): several sessions of one model advanced in one
// step, each by its own tokens (continuous batching: some decoding while
// another prefills a chunk of its prompt). Checks every item (and every
// session's abort callback) before any session changes, makes each one's context room, runs forward_step on the
// first session's threads, refuses non-finite logits, and on any error puts
// every session back as it was (cache truncated, logits restored; context
// shifts made stay, as in prefill). Rules: graph_rules.h.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "platform/thread_pool.h"
#include "runtime/error.h"
#include "runtime/session/finite_checks.h"
#include "runtime/session/session.h"
#include "runtime/session/session_graph.h"

namespace latte {

void Session::step(std::span<const StepItem> items) {
  if (items.empty()) throw Error(Status::invalid_argument, "step: no sessions");
  const auto name = [&](std::size_t i) { return "step item " + std::to_string(i) + ": "; };
  std::vector<StepPart> parts(items.size());
  // The tokens each item brings, copied where they are a session's own
  // tokens() (whose storage moves as the session grows).
  std::vector<std::vector<std::int32_t>> copies;
  copies.reserve(items.size());  // spans into them must not move
  std::vector<bool> shift(items.size(), false);
  for (std::size_t i = 0; i < items.size(); ++i) {
    Session* s = items[i].session;
    if (!s) throw Error(Status::invalid_argument, name(i) + "no session");
    for (std::size_t j = 0; j < i; ++j)
      if (items[j].session == s)
        throw Error(Status::invalid_argument, name(i) + "the session of item " + std::to_string(j) + " again");
    if (&s->model() != &items[0].session->model())
      throw Error(Status::invalid_argument, name(i) + "a session of another model than item 0's");
    std::span<const std::int32_t> tokens = items[i].tokens;
    s->check_tokens(tokens, name(i));
    if (tokens.size() > static_cast<std::size_t>(s->opts_.prefill_chunk))
      throw Error(Status::invalid_argument, name(i) + std::to_string(tokens.size()) +
                                                " tokens: more than the session's prefill chunk of " +
                                                std::to_string(s->opts_.prefill_chunk) + " (step a prompt in chunks)");
    for (const StepItem& other : items) {
      if (other.session && other.session->holds(tokens)) {
        copies.emplace_back(tokens.begin(), tokens.end());
        tokens = copies.back();
        break;
      }
    }
    shift[i] = s->needs_shift(static_cast<std::int64_t>(tokens.size()));
    parts[i].s = s;
    parts[i].tokens = tokens;
  }
  // Asked once before anything changes (as prefill does), then at every layer.
  for (const StepPart& pt : parts) pt.s->check_abort();
  // Room first, so the appends after the forward pass cannot throw.
  for (StepPart& pt : parts) {
    std::vector<std::int32_t>& t = pt.s->tokens_;
    if (const std::size_t need = t.size() + pt.tokens.size(); t.capacity() < need)
      t.reserve(std::max(need, 2 * t.capacity()));
  }
  // The last step that can refuse the call: the shifts stay if it fails.
  for (std::size_t i = 0; i < parts.size(); ++i)
    if (shift[i]) parts[i].s->make_room(static_cast<std::int64_t>(parts[i].tokens.size()), parts[i].s->opts_.shift_keep);

  Session& lead = *parts[0].s;
  const int V = lead.model().params().n_vocab;
  std::vector<std::int64_t> p0(parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    p0[i] = parts[i].s->n_past_;
    parts[i].s->last_logits_.swap(parts[i].s->prev_logits_);  // the old logits stay, to restore on error
  }
  const PoolScope team(*lead.pool_);
  try {
    // A step of decoded tokens alone is the step the pool's governor compares.
    const bool decode_only = std::all_of(parts.begin(), parts.end(), [](const StepPart& pt) { return pt.tokens.size() == 1; });
    {
      const PoolStep pool_step(decode_only ? lead.pool_.get() : nullptr);
      forward_step(parts);
    }
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const float* lg = parts[i].s->last_logits_.data();
      if (const std::size_t k = first_non_finite(lg, static_cast<std::size_t>(V)); k < static_cast<std::size_t>(V))
        throw Error(Status::bad_file, name(i) + "logit " + std::to_string(k) + " at position " +
                                          std::to_string(parts[i].s->n_past_ - 1) + " is " + std::to_string(lg[k]) +
                                          ": the model's weights or hyperparameters overflow float32 (every "
                                          "session is back where it was)");
    }
  } catch (...) {
    for (std::size_t i = 0; i < parts.size(); ++i) {
      Session& s = *parts[i].s;
      s.cache_.truncate(p0[i]);
      s.n_past_ = p0[i];
      s.last_logits_.swap(s.prev_logits_);
    }
    throw;
  }
  for (StepPart& pt : parts) {
    pt.s->tokens_.insert(pt.s->tokens_.end(), pt.tokens.begin(), pt.tokens.end());
    pt.s->has_logits_ = true;
  }
}

}  // namespace latte

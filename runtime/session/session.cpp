// Session (session.h): its lifecycle and the error/rollback contract.
// Creation checks the options and builds the graph's engines; prefill
// checks its tokens, shifts the context where allowed, runs the chunks
// (session_forward.cpp) and on any error puts the session back as it was
// before the call: the cache truncated to its old length, the old logits
// restored (also when the abort hook stops it between layers). reset,
// truncate, shift and make_room edit the cache and the tokens; set_threads
// rebuilds the pool and the graph; save_state, load_state and copy are
// session_state.cpp's.
// The rules every part of the graph keeps: graph_rules.h.
#include "runtime/session/session.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <new>
#include <string>

#include "kernels/isa.h"
#include "platform/thread_pool.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/session/finite_checks.h"
#include "runtime/session/gemm_f32.h"
#include "runtime/session/session_graph.h"
#include "runtime/session/weight_multiply.h"

namespace latte {

namespace {

// The session's pool: threads asked for must all start; with 0, as many of
// one per CPU as the OS gives.
std::unique_ptr<ThreadPool> start_pool(int threads) {
  const bool asked = threads > 0;
  try {
    return std::make_unique<ThreadPool>(asked ? threads : std::min(available_cpus(), kMaxThreads), !asked);
  } catch (const ThreadStartError& e) {
    throw Error(Status::out_of_memory, std::string(e.what()) + " (ask for fewer threads)");
  } catch (const std::bad_alloc&) {
    throw Error(Status::out_of_memory, "the session's thread pool: out of memory");
  }
}

void check_threads(int threads) {
  if (threads < 0 || threads > kMaxThreads)
    throw Error(Status::invalid_argument, "threads " + std::to_string(threads) + " is outside [0, " +
                                              std::to_string(kMaxThreads) + "]");
}

}  // namespace

int Session::threads() const { return graph_->threads(); }

std::int64_t Session::last_experts_read() const { return graph_->moe.experts_read(); }

std::unique_ptr<Session::Graph> Session::make_graph(int threads) const {
  const ModelParams& p = model_->params();
  auto g = std::make_unique<Graph>(p, active_isa(), threads, opts_.gemm_min_tokens, cache_.layout());
  g->rope = p.mla.rope;
  g->rope.freq_factors = model_->rope_factors(p.rope_long_factors(opts_.n_ctx));
  g->reserve_chunk(p, static_cast<int>(std::min<std::int64_t>(opts_.prefill_chunk, opts_.n_ctx)));
  return g;
}

void Session::set_threads(int threads) {
  check_threads(threads);
  // Both built before either replaces the session's: a failure changes nothing.
  std::unique_ptr<ThreadPool> pool = start_pool(threads);
  if (!pool->start_error().empty())
    log_message(LogLevel::warn, "session: " + std::to_string(pool->threads()) + " threads, fewer than one per CPU: " +
                                    pool->start_error());
  std::unique_ptr<Graph> graph;
  try {
    graph = make_graph(pool->threads());
  } catch (const std::bad_alloc&) {
    throw Error(Status::out_of_memory, "set_threads: the session's buffers for " +
                                           std::to_string(pool->threads()) + " threads: out of memory");
  }
  graph_.swap(graph);
  pool_.swap(pool);
  opts_.threads = threads;
}

void Session::check_abort() const {
  if (abort_fn_ != nullptr && abort_fn_(abort_data_))
    throw Error(Status::aborted, "the call was stopped by the session's abort callback");
}

Session::Session(std::shared_ptr<const Model> model, const SessionOptions& opts)
    : model_(std::move(model)),
      opts_(opts),
      cache_([&] {
        const ModelParams& p = model_->params();
        opts_.n_ctx = p.resolve_n_ctx(opts_.n_ctx);
        if (opts_.prefill_chunk <= 0)
          throw Error(Status::invalid_argument, "prefill_chunk must be > 0");
        check_threads(opts_.threads);
        if (opts_.gemm_min_tokens < 0) throw Error(Status::invalid_argument, "gemm_min_tokens must be >= 0");
        if (opts_.n_ctx > kMaxContextTokens)
          throw Error(Status::invalid_argument, "n_ctx " + std::to_string(opts_.n_ctx) + " is above the limit of " +
                                                    std::to_string(kMaxContextTokens) + " tokens");
        LatentCacheConfig c;
        c.n_layers = p.n_layers;
        c.d_c = p.mla.kv_lora_rank;
        c.d_R = p.mla.d_rope;
        c.max_tokens = opts_.n_ctx;
        c.storage = opts_.cache;
        return c;
      }()) {
  const ModelParams& p = model_->params();
  pool_ = start_pool(opts_.threads);
  prepare_gemm_f32();
  graph_ = make_graph(pool_->threads());
  last_logits_.assign(p.n_vocab, 0.f);
  prev_logits_.assign(p.n_vocab, 0.f);
  // What the caller may want to know, through the log (runtime/log.h).
  if (!pool_->start_error().empty())
    log_message(LogLevel::warn, "session: " + std::to_string(pool_->threads()) +
                                    " threads, fewer than one per CPU: " + pool_->start_error());
  if (p.context_length > 0 && opts_.n_ctx > p.context_length)
    log_message(LogLevel::warn, "session: a context of " + std::to_string(opts_.n_ctx) +
                                    " tokens, beyond the model's trained context of " +
                                    std::to_string(p.context_length) + ": its output past that is unreliable");
  if (log_enabled(LogLevel::debug))
    log_message(LogLevel::debug, "session: " + std::to_string(pool_->threads()) + " threads, context " +
                                     std::to_string(opts_.n_ctx) + ", " + latent_storage_name(opts_.cache) +
                                     " cache, chunks of " + std::to_string(opts_.prefill_chunk) + " tokens, " +
                                     isa_name(active_isa()) + " kernels");
}

Session::~Session() = default;

void Session::reset() {
  cache_.truncate(0);
  n_past_ = 0;
  unshifted_limit_ = kMaxContextTokens;
  tokens_.clear();
  has_logits_ = false;
  std::fill(last_logits_.begin(), last_logits_.end(), 0.f);
}

void Session::truncate(std::int64_t n_tokens) {
  if (n_tokens < 0 || n_tokens > n_past_)
    throw Error(Status::invalid_argument, "truncate: " + std::to_string(n_tokens) + " is outside [0, " +
                                              std::to_string(n_past_) + "]");
  cache_.truncate(n_tokens);
  if (n_tokens < n_past_) has_logits_ = false;
  n_past_ = n_tokens;
  tokens_.resize(static_cast<std::size_t>(n_tokens));
  // Rows written from here on see only rows a fresh prefill gives.
  if (n_tokens <= unshifted_limit_) unshifted_limit_ = kMaxContextTokens;
}

void Session::shift(std::int64_t n_keep, std::int64_t n_discard) {
  if (n_keep < 0 || n_discard < 0 || n_keep > n_past_ - n_discard)
    throw Error(Status::invalid_argument, "shift: keeping " + std::to_string(n_keep) + " and dropping " +
                                              std::to_string(n_discard) + " tokens: both must be >= 0 and their sum " +
                                              "at most the " + std::to_string(n_past_) + " tokens held");
  if (n_discard == 0) return;
  if (n_keep + n_discard == n_past_) return truncate(n_keep);  // nothing moves
  // Every RoPE angle is linear in the position: turning a row by
  // -n_discard positions is what rotating it at its new position gives.
  const RopeTurn turn = rope_turn(graph_->rope, -static_cast<double>(n_discard));
  const PoolScope team(*pool_);
  cache_.shift(n_keep, n_discard, turn, graph_->threads());
  tokens_.erase(tokens_.begin() + n_keep, tokens_.begin() + n_keep + n_discard);
  n_past_ -= n_discard;
  unshifted_limit_ = std::min(unshifted_limit_, n_keep);
}

std::int64_t Session::make_room(std::int64_t n_new, std::int64_t n_keep) {
  const std::int64_t need = n_past_ + n_new - opts_.n_ctx;
  if (need <= 0) return 0;
  const std::int64_t keep = std::clamp<std::int64_t>(n_keep, 0, n_past_);
  const std::int64_t left = n_past_ - keep;
  if (need > left)
    throw Error(Status::context_overflow,
                std::to_string(n_new) + " new tokens do not fit the context of " + std::to_string(opts_.n_ctx) +
                    " even with only the first " + std::to_string(keep) + " of the " + std::to_string(n_past_) +
                    " tokens in the cache kept");
  const std::int64_t drop = std::max(left / 2, need);
  shift(keep, drop);
  return drop;
}

void Session::check_tokens(std::span<const std::int32_t> tokens, const std::string& item) const {
  const int V = model_->params().n_vocab;
  if (tokens.empty()) throw Error(Status::invalid_argument, item + "no tokens to evaluate");
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= V)
      throw Error(Status::invalid_argument,
                  item + "token " +
                      (tokens.size() == 1 ? std::to_string(tokens[i])
                                          : std::to_string(i + 1) + " of " + std::to_string(tokens.size()) + " (" +
                                                std::to_string(tokens[i]) + ")") +
                      " is outside the vocabulary [0, " + std::to_string(V) + ")");
}

bool Session::holds(std::span<const std::int32_t> tokens) const {
  const std::less<const std::int32_t*> before;  // a total order, unlike < on unrelated pointers
  return !tokens_.empty() && !before(tokens.data(), tokens_.data()) &&
         before(tokens.data(), tokens_.data() + tokens_.size());
}

bool Session::needs_shift(std::int64_t n_new) const {
  const bool shift_first = opts_.context_shift && n_past_ + n_new > opts_.n_ctx &&
                           n_new <= opts_.n_ctx - std::clamp<std::int64_t>(opts_.shift_keep, 0, n_past_);
  if (n_past_ + n_new > opts_.n_ctx && !shift_first)
    throw Error(Status::context_overflow,
                std::to_string(n_past_) + " tokens in the cache + " + std::to_string(n_new) +
                    " new would exceed the context of " + std::to_string(opts_.n_ctx));
  return shift_first;
}

void Session::decode(std::int32_t token) { prefill(std::span<const std::int32_t>(&token, 1)); }

void Session::prefill(std::span<const std::int32_t> tokens, std::vector<float>* all_logits) {
  const ModelParams& p = model_->params();
  // The session's own tokens() (say, to compute them again elsewhere): its
  // storage may move when it grows below, so read a copy.
  if (holds(tokens)) {
    const std::vector<std::int32_t> copy(tokens.begin(), tokens.end());
    return prefill(copy, all_logits);
  }
  check_tokens(tokens, "");
  // Asked once before anything changes: an abort set before the call stops
  // it before a context shift.
  check_abort();
  const std::int64_t n_new = static_cast<std::int64_t>(tokens.size());
  const bool shift_first = needs_shift(n_new);
  if (all_logits) {
    const std::size_t count = tokens.size() * static_cast<std::size_t>(p.n_vocab);
    try {
      all_logits->resize(count);
    } catch (const std::bad_alloc&) {
      throw Error(Status::out_of_memory, "the logits of " + std::to_string(tokens.size()) +
                                             " tokens: cannot allocate " + std::to_string(count * sizeof(float)) +
                                             " bytes");
    }
  }
  // The shift is the last step that can refuse the call; it stays if the
  // evaluation below then fails (out of memory, a non-finite logit).
  if (shift_first) make_room(n_new, opts_.shift_keep);
  const std::int64_t p0 = n_past_;
  // Room first, so the append after the forward pass cannot throw; grown
  // geometrically, or a decode step would copy the whole history.
  if (const std::size_t need = static_cast<std::size_t>(p0) + tokens.size(); tokens_.capacity() < need)
    tokens_.reserve(std::max(need, 2 * tokens_.capacity()));
  const PoolScope team(*pool_);
  // The new logits go to the other buffer, so that on any error (below, or
  // out of memory in a later chunk) the session is back where it was,
  // logits included.
  last_logits_.swap(prev_logits_);
  try {
    for (std::size_t at = 0; at < tokens.size(); at += opts_.prefill_chunk) {
      const std::size_t n = std::min<std::size_t>(opts_.prefill_chunk, tokens.size() - at);
      float* out = all_logits ? all_logits->data() + at * p.n_vocab : nullptr;
      {
        // A decoded token is the step the pool's governor compares: each is
        // the same work as the one before (prefill chunks run in parallel).
        const PoolStep step(n == 1 ? pool_.get() : nullptr);
        forward_chunk(tokens.subspan(at, n), out, all_logits != nullptr);
      }
      // A NaN or inf anywhere upstream (a weight in the file, an overflow)
      // reaches the logits: refuse them rather than hand garbage to a sampler.
      const float* lg = all_logits ? out : last_logits_.data();
      const std::size_t count = all_logits ? n * p.n_vocab : p.n_vocab;
      if (const std::size_t i = first_non_finite(lg, count); i < count) {
        const std::int64_t pos = n_past_ - static_cast<std::int64_t>(all_logits ? n - i / p.n_vocab : 1);
        throw Error(Status::bad_file, "logit " + std::to_string(i % p.n_vocab) + " at position " +
                                          std::to_string(pos) + " is " + std::to_string(lg[i]) +
                                          ": the model's weights or hyperparameters overflow float32 "
                                          "(the session is back at " + std::to_string(p0) + " tokens)");
      }
    }
  } catch (const Error& e) {
    cache_.truncate(p0);
    n_past_ = p0;
    last_logits_.swap(prev_logits_);
    if (e.status() == Status::aborted)
      throw Error(Status::aborted, std::string(e.what()) + " (the session is back at " + std::to_string(p0) + " tokens)");
    throw;
  } catch (...) {
    cache_.truncate(p0);
    n_past_ = p0;
    last_logits_.swap(prev_logits_);
    throw;
  }
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  has_logits_ = true;
}

}  // namespace latte

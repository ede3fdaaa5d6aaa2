// A session: one sequence's latent cache and scratch over a shared Model.
// Prefill runs in chunks, each in the form the cost model picks (or a forced
// one); decode runs the absorbed kernel over the cache. Not thread-safe
// itself: one session per thread, any number of sessions per Model.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "quant/latent_formats.h"
#include "runtime/mla/latent_cache.h"
#include "runtime/mla/mla_form.h"
#include "runtime/model/model.h"

namespace latte {

class ThreadPool;   // platform/thread_pool.h
class StateSource;  // session_state.cpp: a saved session's bytes, from a file or memory

// The most threads a session takes.
inline constexpr int kMaxThreads = 1024;

struct SessionOptions {
  int threads = 0;                  // 0: one per available CPU (as many as start); at most kMaxThreads
  std::int64_t n_ctx = 4096;        // context capacity (tokens); <= 0: the model's maximum
  LatentStorage cache = LatentStorage::int8;
  int prefill_chunk = 512;          // tokens per prefill chunk
  std::optional<MlaForm> prefill_form;  // a forced prefill form; none: the cost model picks
  // Chunks of at least this many tokens run their weight products as oneDNN
  // GEMMs; 0: the crossover measured per weight type (weight_multiply.cpp).
  int gemm_min_tokens = 0;
  // A prefill that would overflow the context first shifts it (Session::
  // make_room): keeps the first shift_keep tokens and drops half of the
  // rest, or more where the new tokens need it. Off: Error(context_overflow).
  bool context_shift = false;
  std::int64_t shift_keep = 0;
};

class Session {
 public:
  Session(std::shared_ptr<const Model> model, const SessionOptions& opts);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Feeds tokens at the next positions. If all_logits is non-null it receives
  // the logits of every token (n_tokens, n_vocab); logits() always holds the
  // last token's. Error(context_overflow) if they do not fit,
  // Error(invalid_argument) for an id outside the vocabulary, Error(bad_file)
  // if a logit comes out NaN or inf (the model's numbers overflow),
  // Error(out_of_memory): on any error the session is as before the call
  // (tokens, cache and logits()).
  void prefill(std::span<const std::int32_t> tokens, std::vector<float>* all_logits = nullptr);
  // One token (the absorbed kernel).
  void decode(std::int32_t token);

  // One session's part of a step: tokens at its next positions.
  struct StepItem {
    Session* session = nullptr;
    std::span<const std::int32_t> tokens;
  };
  // Advances several sessions of one model in one step (session_step.cpp),
  // each by its own tokens: a decoded token, or a chunk of a prompt of at
  // most its prefill_chunk tokens. Every weight is read once for all of
  // them; each attends over its own cache; each one's logits() become its
  // last token's. Runs on the first session's threads. Each session's
  // context shift applies as in prefill. Error(invalid_argument) for no
  // items, a session given twice, sessions of different models, no tokens,
  // a chunk longer than the session's prefill_chunk or an id outside the
  // vocabulary (naming the item), Error(context_overflow); Error(aborted)
  // where any session's abort callback asks (before the step and at every
  // layer). On any error (out of memory, a non-finite logit, ...) every
  // session is as before the call, except the context shifts already made.
  static void step(std::span<const StepItem> items);

  std::span<const float> logits() const { return last_logits_; }  // (n_vocab)
  // Whether logits() are the last cached token's: false after reset(), and
  // after a truncate() that cut tokens, until the next token is fed.
  bool has_logits() const { return has_logits_; }
  // The tokens in the cache, in order (n_past() of them).
  std::span<const std::int32_t> tokens() const { return tokens_; }
  std::int64_t n_past() const { return n_past_; }
  std::int64_t n_ctx() const { return opts_.n_ctx; }
  // The threads the session runs with: SessionOptions::threads, or with 0
  // one per CPU the process may use (fewer where the OS refused some).
  int threads() const;
  // Runs the session on `threads` threads from now on (0: one per CPU, as
  // many as start): a new pool, and the engines sized by the thread count
  // built again. Results stay bit-identical (graph_rules.h, rule 1).
  // Error(invalid_argument) outside [0, kMaxThreads], Error(out_of_memory)
  // where the threads or buffers cannot be had; the session is then as it was.
  void set_threads(int threads);
  // An abort hook: fn(data) is asked on the calling thread before a call's
  // tokens are fed and at the start of every layer of every chunk; true
  // stops the call with Error(aborted), the session as it was before the
  // call (prefill's rollback; a context shift the call made stays). Null fn:
  // none. Not carried by copy().
  void set_abort(bool (*fn)(void*), void* data) {
    abort_fn_ = fn;
    abort_data_ = data;
  }
  void reset();  // forget every token
  // Forget the tokens at positions >= n_tokens (n_tokens <= n_past()).
  void truncate(std::int64_t n_tokens);
  // Forget the n_discard tokens after the first n_keep: the later rows move
  // down by n_discard, their k_pe turned back by n_discard positions
  // (latent c_KV untouched). n_keep, n_discard >= 0 and n_keep + n_discard
  // <= n_past(), else Error(invalid_argument) and nothing changes.
  // n_discard 0 changes nothing; n_keep + n_discard == n_past() is
  // truncate(n_keep). logits() stay the last token's (computed before the
  // shift, with the dropped tokens in view) while that token stays.
  void shift(std::int64_t n_keep, std::int64_t n_discard);
  // Makes room for n_new more tokens: nothing where they fit, else shift(
  // k, max((n_past - k) / 2, what they need)) with k = min(n_keep, n_past).
  // Returns the tokens dropped; Error(context_overflow), nothing changed,
  // where they do not fit even with only the first k kept.
  std::int64_t make_room(std::int64_t n_new, std::int64_t n_keep);
  // SessionOptions::context_shift and shift_keep, after creation.
  void set_context_shift(bool on, std::int64_t n_keep) {
    opts_.context_shift = on;
    opts_.shift_keep = n_keep;
  }
  // How many leading tokens hold what a fresh prefill of them would give:
  // n_past() until a shift; then at most the shift's n_keep (the rows after
  // it were computed with context that is gone). A cache to reuse for a new
  // prompt only up to here.
  std::int64_t n_unshifted() const { return std::min(unshifted_limit_, n_past_); }

  // Saved sessions (runtime/session/session_state.cpp): the tokens, the latent
  // cache as stored (int8 tiles stay int8: 584 bytes per token and layer for
  // DeepSeek shapes) and the last logits, so a long context is resumed
  // without being computed again. save_state: Error(io_error) naming the
  // file. load_state replaces this session's state with a file's, which must
  // come from the same model (Model::fingerprint), cache type and RoPE factor
  // set (minicpm3 picks one by the context): Error(invalid_argument)
  // otherwise, Error(context_overflow) if it holds more tokens than this
  // session's context, Error(unsupported) for another format version,
  // Error(bad_file) for a file that is not one, truncated, corrupt (the
  // checksum, verified before any field is judged) or holding values its
  // model cannot write (non-finite ones among them: session_state.cpp),
  // Error(invalid_argument) for an empty path; on any error the session is
  // unchanged.
  void save_state(const std::string& path) const;
  void load_state(const std::string& path);
  // The same format in memory: state_size() bytes written to `out` (at
  // least that long, else Error(invalid_argument) naming both sizes), and
  // read back from `bytes` with every check of load_state.
  std::size_t state_size() const;
  void save_state_to(std::span<std::uint8_t> out) const;
  void load_state_from(std::span<const std::uint8_t> bytes);
  // A new session of the same model and options (threads, context, cache,
  // chunk, context shift; not the abort hook) holding this one's tokens,
  // cache rows and logits: a fork of the conversation, which then computes
  // exactly what this one would. Error(out_of_memory) naming what.
  std::unique_ptr<Session> copy() const;
  // The checksum a session file ends with, over its other bytes (for tests
  // and tools that write or alter such files).
  static std::uint64_t state_checksum(const void* data, std::size_t n);

  const Model& model() const { return *model_; }
  const SessionOptions& options() const { return opts_; }
  const LatentCache& cache() const { return cache_; }
  // The form the last chunk of each call ran in (for tests and reports).
  MlaForm last_form() const { return last_form_; }
  // Routed experts read by the last chunk or step this session ran (a
  // step's first session), summed over the layers: with
  // Model::expert_bytes, the expert bytes it streamed (benchmarks).
  std::int64_t last_experts_read() const;

 private:
  struct Graph;     // session_graph.h
  struct StepPart;  // one session's rows in forward_step (session_graph.h)
  // Checks a call's tokens: Error(invalid_argument) for none or an id
  // outside the vocabulary (`item` prefixes the message where not empty).
  void check_tokens(std::span<const std::int32_t> tokens, const std::string& item) const;
  // Whether tokens point into this session's own tokens() (whose storage
  // moves as the session grows: callers read a copy).
  bool holds(std::span<const std::int32_t> tokens) const;
  // Whether n_new tokens first need a context shift (context_shift on and
  // the shift can make room); Error(context_overflow) where they cannot fit.
  bool needs_shift(std::int64_t n_new) const;
  // One step through the model (session_forward.cpp): each part's tokens at
  // its session's positions, rows written to its cache, its n_past_
  // advanced, logits to its logits_out or last_logits_. Runs on the first
  // part's graph and threads. On an error the callers roll back.
  static void forward_step(std::span<StepPart> parts);
  // One chunk through the model (session_forward.cpp): its rows written to
  // the cache, n_past_ advanced, the logits to logits_out (every token's,
  // (n, n_vocab)) or last_logits_. On an error prefill() rolls back.
  void forward_chunk(std::span<const std::int32_t> tokens, float* logits_out, bool all_logits);
  // Error(aborted) where the abort hook says to stop (set_abort).
  void check_abort() const;
  // The graph for `threads` threads: engines, RoPE of this context, chunk
  // buffers reserved (session.cpp).
  std::unique_ptr<Graph> make_graph(int threads) const;
  // A saved session's bytes (session_state.cpp): written through `write`
  // with the model's fingerprint, or read from `in` (named `what` in
  // messages) into this session, all or nothing.
  void write_state(const std::function<void(const void*, std::size_t)>& write, std::uint64_t fingerprint) const;
  void read_state(StateSource& in, const std::string& what);

  std::shared_ptr<const Model> model_;
  SessionOptions opts_;
  LatentCache cache_;
  std::unique_ptr<ThreadPool> pool_;  // the session's threads: every region of its calls
  std::unique_ptr<Graph> graph_;
  std::vector<float> last_logits_;
  std::vector<float> prev_logits_;  // prefill's other buffer: the logits to restore on error
  std::vector<std::int32_t> tokens_;  // (n_past)
  bool has_logits_ = false;
  std::int64_t n_past_ = 0;
  // Rows before this position are what a fresh prefill gives (shift()).
  std::int64_t unshifted_limit_ = kMaxContextTokens;
  MlaForm last_form_ = MlaForm::absorbed;
  bool (*abort_fn_)(void*) = nullptr;
  void* abort_data_ = nullptr;
};

}  // namespace latte

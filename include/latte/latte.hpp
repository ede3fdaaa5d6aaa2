// Latte: a thin C++ wrapper over the C API (latte.h), header-only, for
// C++17 and later. Errors throw latte::api::Exception carrying the status and
// the message. Spans of tokens and logits are std::span from C++20 on, and a
// minimal stand-in (latte::api::Span: data, size, iteration) before it; the
// calls that take a span also take a braced list (`s.prefill({1, 2, 3})`).
// Callbacks are std::functions, run as latte.h says (which thread, what they
// may call); one that throws stops what it watches (an abort or a load) and,
// where the wrapper can, the exception is rethrown from the call.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "latte/latte.h"

#if __cplusplus >= 202002L && __has_include(<span>)
#include <span>
#endif

namespace latte::api {

#if __cplusplus >= 202002L && __has_include(<span>)
template <class T>
using Span = std::span<T>;
#else
// A view of count elements at data (C++17 has no std::span).
template <class T>
class Span {
 public:
  using element_type = T;
  constexpr Span() noexcept = default;
  constexpr Span(T* data, std::size_t count) noexcept : p_(data), n_(count) {}
  template <class U, class A>
  Span(const std::vector<U, A>& v) noexcept : p_(v.data()), n_(v.size()) {}
  template <class U, class A>
  Span(std::vector<U, A>& v) noexcept : p_(v.data()), n_(v.size()) {}
  template <class U, std::size_t N>
  constexpr Span(const std::array<U, N>& a) noexcept : p_(a.data()), n_(N) {}
  template <std::size_t N>
  constexpr Span(T (&a)[N]) noexcept : p_(a), n_(N) {}
  constexpr T* data() const noexcept { return p_; }
  constexpr std::size_t size() const noexcept { return n_; }
  constexpr bool empty() const noexcept { return n_ == 0; }
  constexpr T& operator[](std::size_t i) const noexcept { return p_[i]; }
  constexpr T* begin() const noexcept { return p_; }
  constexpr T* end() const noexcept { return p_ + n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};
#endif

class Exception : public std::runtime_error {
 public:
  Exception(latte_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  latte_status status() const { return status_; }

 private:
  latte_status status_;
};

inline void check(latte_status s) {
  if (s != LATTE_OK) throw Exception(s, latte_last_error());
}

// The C API's buffer rule, once: fill(nullptr, 0, &n) asks the size, then
// fill(buf, capacity, &n) writes it (text with its NUL, not kept).
template <class Fill>
std::string fetch_text(Fill fill) {
  std::size_t n = 0;
  check(fill(nullptr, 0, &n));
  std::string s(n + 1, '\0');
  check(fill(s.data(), s.size(), &n));
  s.resize(n);
  return s;
}
template <class Fill>
std::vector<int32_t> fetch_tokens(Fill fill) {
  std::size_t n = 0;
  check(fill(nullptr, 0, &n));
  std::vector<int32_t> t(n);
  check(fill(t.data(), t.size(), &n));
  return t;
}

// The library's version and kernels ("0.2.0 (avx512)").
inline std::string version() { return latte_version(); }
// The kernels the library runs on this CPU ("avx512"); throws where
// LATTE_ISA names none.
inline std::string kernels() {
  const char* k = latte_kernels();
  if (k == nullptr) throw Exception(LATTE_ERR_UNSUPPORTED, latte_last_error());
  return k;
}

// A latent cache's bytes for a shape, without a model (latte_cache_bytes).
inline int64_t cache_bytes(int32_t n_layers, int32_t kv_lora_rank, int32_t d_rope, latte_cache_type cache_type,
                           int64_t n_tokens) {
  int64_t bytes = 0;
  check(latte_cache_bytes(n_layers, kv_lora_rank, d_rope, cache_type, n_tokens, &bytes));
  return bytes;
}

// Sets the process's log (latte_log_set): fn(level, message) on whichever
// thread logs; an empty fn silences it. Returns once the previous one is
// no longer running. fn must not throw (what it throws is dropped).
inline void set_log(std::function<void(latte_log_level, const char*)> fn) {
  using Fn = std::function<void(latte_log_level, const char*)>;
  static std::mutex m;
  static Fn* current = nullptr;  // never freed at exit: a thread may still log then
  const std::lock_guard<std::mutex> lock(m);
  std::unique_ptr<Fn> next = fn ? std::make_unique<Fn>(std::move(fn)) : nullptr;
  const latte_log_callback call = [](latte_log_level level, const char* message, void* data) {
    try {
      (*static_cast<Fn*>(data))(level, message);
    } catch (...) {
    }
  };
  check(latte_log_set(next ? call : nullptr, next.get()));
  delete current;  // no longer called once latte_log_set returned
  current = next.release();
}

class Model {
 public:
  // Load progress (latte_progress_callback): return false to cancel (the
  // constructor then throws Exception LATTE_ERR_ABORTED, or what progress threw).
  using Progress = std::function<bool(std::uint64_t bytes_done, std::uint64_t bytes_total)>;

  explicit Model(const std::string& path) { check(latte_model_load(path.c_str(), &m_)); }
  Model(const std::string& path, const latte_model_options& options) {
    check(latte_model_load_with_options(path.c_str(), &options, &m_));
  }
  Model(const std::string& path, latte_model_options options, Progress progress) {
    struct Ctx {
      Progress* fn;
      std::exception_ptr error;
    } ctx{&progress, nullptr};
    options.progress = [](std::uint64_t done, std::uint64_t total, void* data) -> int32_t {
      Ctx& c = *static_cast<Ctx*>(data);
      try {
        return (*c.fn)(done, total) ? 1 : 0;
      } catch (...) {
        c.error = std::current_exception();
        return 0;
      }
    };
    options.progress_user_data = &ctx;
    const latte_status st = latte_model_load_with_options(path.c_str(), &options, &m_);
    if (ctx.error) std::rethrow_exception(ctx.error);
    check(st);
  }
  ~Model() { latte_model_free(m_); }
  Model(Model&& o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
  Model& operator=(Model&& o) noexcept {
    if (this != &o) {
      latte_model_free(m_);
      m_ = std::exchange(o.m_, nullptr);
    }
    return *this;
  }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  int32_t n_vocab() const { return latte_model_n_vocab(m_); }
  int64_t n_ctx_train() const { return latte_model_n_ctx_train(m_); }
  std::string architecture() const { return latte_model_architecture(m_); }
  bool is_mapped() const { return latte_model_is_mapped(m_) != 0; }
  latte_model* handle() const { return m_; }
  int32_t n_layers() const { return latte_model_n_layers(m_); }
  int32_t n_embd() const { return latte_model_n_embd(m_); }
  int64_t n_params() const { return latte_model_n_params(m_); }
  int64_t file_size() const { return latte_model_file_size(m_); }
  std::string name() const { return latte_model_name(m_); }
  // Sizes for benchmarks and memory planning (latte.h).
  int64_t decode_bytes() const { return latte_model_decode_bytes(m_); }
  int64_t expert_bytes() const { return latte_model_expert_bytes(m_); }
  int64_t interleaved_bytes() const { return latte_model_interleaved_bytes(m_); }
  int64_t cache_bytes(latte_cache_type cache_type, int64_t n_tokens) const {
    int64_t bytes = 0;
    check(latte_model_cache_bytes(m_, cache_type, n_tokens, &bytes));
    return bytes;
  }

  // What the model is (latte_model_describe) and its file's tensors.
  latte_model_desc describe() const {
    latte_model_desc d{};
    d.size = sizeof d;
    check(latte_model_describe(m_, &d));
    return d;
  }
  std::vector<latte_tensor_info> tensors() const {
    std::vector<latte_tensor_info> v(static_cast<std::size_t>(latte_model_tensor_count(m_)));
    for (std::size_t i = 0; i < v.size(); ++i) check(latte_model_tensor(m_, static_cast<int64_t>(i), &v[i]));
    return v;
  }

  // GGUF metadata as text (latte_model_meta_value's rendering); meta_value
  // throws for a key the file does not have.
  int64_t meta_count() const { return latte_model_meta_count(m_); }
  std::string meta_key(int64_t index) const {
    return fetch_text([&](char* buf, std::size_t cap, std::size_t* n) {
      return latte_model_meta_key(m_, index, buf, cap, n);
    });
  }
  std::string meta_value(const std::string& key) const {
    return fetch_text([&](char* buf, std::size_t cap, std::size_t* n) {
      return latte_model_meta_value(m_, key.c_str(), buf, cap, n);
    });
  }

  // Text (the model's tokenizer; Exception LATTE_ERR_UNSUPPORTED without one).
  bool has_tokenizer() const { return latte_model_has_tokenizer(m_) == 1; }
  // add_bos: 1, 0, or -1 for the file's default.
  std::vector<int32_t> tokenize(std::string_view text, int add_bos = -1, bool parse_special = false) const {
    return fetch_tokens([&](int32_t* buf, std::size_t cap, std::size_t* n) {
      return latte_tokenize(m_, text.data(), text.size(), add_bos, parse_special, buf, cap, n);
    });
  }
  std::string detokenize(Span<const int32_t> tokens, bool hide_control = false) const {
    return fetch_text([&](char* buf, std::size_t cap, std::size_t* n) {
      return latte_detokenize(m_, tokens.data(), tokens.size(), hide_control, buf, cap, n);
    });
  }
  std::string detokenize(std::initializer_list<int32_t> tokens, bool hide_control = false) const {
    return detokenize(Span<const int32_t>(tokens.begin(), tokens.size()), hide_control);
  }
  std::string token_to_piece(int32_t token, bool hide_control = false) const {
    return fetch_text([&](char* buf, std::size_t cap, std::size_t* n) {
      return latte_token_to_piece(m_, token, hide_control, buf, cap, n);
    });
  }
  int32_t bos() const { return latte_token_bos(m_); }
  int32_t eos() const { return latte_token_eos(m_); }
  bool is_end_of_generation(int32_t token) const { return latte_token_is_end_of_generation(m_, token) == 1; }

  // Chat: the format the model's template writes (Exception when none).
  std::string chat_format() const {
    const char* f = latte_chat_format(m_);
    if (f == nullptr) throw Exception(LATTE_ERR_UNSUPPORTED, latte_last_error());
    return f;
  }
  struct ChatText {
    std::string text;  // tokenize with parse_special (content can then forge control tokens: see chat_tokenize)
    bool add_bos;      // at the start of a conversation
  };
  struct ChatMessage {
    std::string role, content;
  };
  // format: empty for the model's own.
  ChatText chat_apply(Span<const ChatMessage> messages, bool add_generation_prompt,
                      const std::string& format = "") const {
    const std::vector<latte_chat_message> m = c_messages(messages);
    int32_t bos = 0;
    std::string s = fetch_text([&](char* buf, std::size_t cap, std::size_t* n) {
      return latte_chat_apply(m_, c_format(format), m.data(), m.size(), add_generation_prompt, buf, cap, n, &bos);
    });
    return {std::move(s), bos == 1};
  }
  ChatText chat_apply(std::initializer_list<ChatMessage> messages, bool add_generation_prompt,
                      const std::string& format = "") const {
    return chat_apply(Span<const ChatMessage>(messages.begin(), messages.size()), add_generation_prompt, format);
  }
  // The messages' tokens, control tokens only from the format's markers
  // (content stays text). add_bos: -1 as the format starts a conversation.
  std::vector<int32_t> chat_tokenize(Span<const ChatMessage> messages, bool add_generation_prompt,
                                     int add_bos = -1, const std::string& format = "") const {
    const std::vector<latte_chat_message> m = c_messages(messages);
    return fetch_tokens([&](int32_t* buf, std::size_t cap, std::size_t* n) {
      return latte_chat_tokenize(m_, c_format(format), m.data(), m.size(), add_generation_prompt, add_bos, buf, cap,
                                 n);
    });
  }
  std::vector<int32_t> chat_tokenize(std::initializer_list<ChatMessage> messages, bool add_generation_prompt,
                                     int add_bos = -1, const std::string& format = "") const {
    return chat_tokenize(Span<const ChatMessage>(messages.begin(), messages.size()), add_generation_prompt, add_bos,
                         format);
  }
  // The next turn's tokens after a reply whose last token in the session is
  // last_token (latte_chat_tokenize_turn): only the new turn is computed.
  std::vector<int32_t> chat_tokenize_turn(int32_t last_token, Span<const ChatMessage> messages,
                                          bool add_generation_prompt = true, const std::string& format = "") const {
    const std::vector<latte_chat_message> m = c_messages(messages);
    return fetch_tokens([&](int32_t* buf, std::size_t cap, std::size_t* n) {
      return latte_chat_tokenize_turn(m_, c_format(format), last_token, m.data(), m.size(), add_generation_prompt,
                                      buf, cap, n);
    });
  }
  std::vector<int32_t> chat_tokenize_turn(int32_t last_token, std::initializer_list<ChatMessage> messages,
                                          bool add_generation_prompt = true, const std::string& format = "") const {
    return chat_tokenize_turn(last_token, Span<const ChatMessage>(messages.begin(), messages.size()),
                              add_generation_prompt, format);
  }

 private:
  static std::vector<latte_chat_message> c_messages(Span<const ChatMessage> messages) {
    std::vector<latte_chat_message> m;
    m.reserve(messages.size());
    for (const ChatMessage& x : messages) m.push_back({x.role.c_str(), x.content.c_str()});
    return m;
  }
  static const char* c_format(const std::string& format) { return format.empty() ? nullptr : format.c_str(); }

  latte_model* m_ = nullptr;
};

class Session {
 public:
  explicit Session(const Model& model, const latte_session_options& options = latte_session_default_options()) {
    check(latte_session_create(model.handle(), &options, &s_));
    n_vocab_ = model.n_vocab();
  }
  ~Session() { latte_session_free(s_); }
  Session(Session&& o) noexcept
      : s_(std::exchange(o.s_, nullptr)), n_vocab_(std::exchange(o.n_vocab_, 0)), abort_(std::move(o.abort_)) {}
  Session& operator=(Session&& o) noexcept {
    if (this != &o) {
      latte_session_free(s_);
      s_ = std::exchange(o.s_, nullptr);
      n_vocab_ = std::exchange(o.n_vocab_, 0);
      abort_ = std::move(o.abort_);
    }
    return *this;
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // A fork: a new session with this one's options, tokens, cache and logits
  // (latte_session_copy; not the abort callback).
  Session copy() const {
    Session c;
    check(latte_session_copy(s_, &c.s_));
    c.n_vocab_ = n_vocab_;
    return c;
  }
  void set_threads(int32_t threads) { check(latte_session_set_threads(s_, threads)); }
  int32_t threads() const { return latte_session_threads(s_); }
  // Stops prefill, decode and eval_all between layers when it returns true
  // (or throws): they then throw Exception LATTE_ERR_ABORTED, the session as
  // before the call. An empty fn removes it.
  void set_abort(std::function<bool()> fn) {
    std::unique_ptr<std::function<bool()>> next =
        fn ? std::make_unique<std::function<bool()>>(std::move(fn)) : nullptr;
    const latte_abort_callback call = [](void* data) -> int32_t {
      try {
        return (*static_cast<std::function<bool()>*>(data))() ? 1 : 0;
      } catch (...) {
        return 1;
      }
    };
    check(latte_session_set_abort_callback(s_, next ? call : nullptr, next.get()));
    abort_ = std::move(next);
  }

  void prefill(Span<const int32_t> tokens) { check(latte_session_prefill(s_, tokens.data(), tokens.size())); }
  void prefill(std::initializer_list<int32_t> tokens) { prefill(Span<const int32_t>(tokens.begin(), tokens.size())); }
  void decode(int32_t token) { check(latte_session_decode(s_, token)); }
  // Logits of every token (n_tokens x n_vocab, the model's vocabulary).
  std::vector<float> eval_all(Span<const int32_t> tokens) {
    std::vector<float> out(tokens.size() * static_cast<std::size_t>(n_vocab_));
    check(latte_session_eval_all(s_, tokens.data(), tokens.size(), out.data()));
    return out;
  }
  std::vector<float> eval_all(std::initializer_list<int32_t> tokens) {
    return eval_all(Span<const int32_t>(tokens.begin(), tokens.size()));
  }
  // The last token's logits (n_vocab); empty before the first token.
  Span<const float> logits() const {
    const float* p = latte_session_logits(s_);
    return p ? Span<const float>(p, static_cast<std::size_t>(n_vocab_)) : Span<const float>();
  }
  int64_t n_past() const { return latte_session_n_past(s_); }
  int64_t n_ctx() const { return latte_session_n_ctx(s_); }
  void reset() { check(latte_session_reset(s_)); }
  // Forgets the tokens at positions >= n_tokens; logits() is empty until the next token.
  void truncate(int64_t n_tokens) { check(latte_session_truncate(s_, n_tokens)); }
  // latte_session_shift, latte_session_set_context_shift, latte_session_n_unshifted.
  void shift(int64_t n_keep, int64_t n_discard) { check(latte_session_shift(s_, n_keep, n_discard)); }
  void set_context_shift(bool enable, int64_t n_keep) {
    check(latte_session_set_context_shift(s_, enable ? 1 : 0, n_keep));
  }
  int64_t n_unshifted() const { return latte_session_n_unshifted(s_); }
  // What the last call did (latte.h): the form of its last chunk, the
  // routed experts it read.
  latte_prefill_form last_form() const { return static_cast<latte_prefill_form>(latte_session_last_form(s_)); }
  int64_t last_experts_read() const { return latte_session_last_experts_read(s_); }
  std::vector<int32_t> tokens() const {
    return fetch_tokens([&](int32_t* buf, std::size_t cap, std::size_t* n) {
      return latte_session_tokens(s_, buf, cap, n);
    });
  }
  void save(const std::string& path) const { check(latte_session_save(s_, path.c_str())); }
  void load(const std::string& path) { check(latte_session_load(s_, path.c_str())); }
  // The same state in memory (a session file's bytes).
  std::vector<uint8_t> save_state() const {
    std::size_t n = 0;
    check(latte_session_state_save_to(s_, nullptr, 0, &n));
    std::vector<uint8_t> b(n);
    check(latte_session_state_save_to(s_, b.data(), b.size(), &n));
    return b;
  }
  void load_state(Span<const uint8_t> bytes) { check(latte_session_state_load_from(s_, bytes.data(), bytes.size())); }

  latte_session* handle() const { return s_; }

 private:
  Session() = default;  // copy()'s
  latte_session* s_ = nullptr;
  int32_t n_vocab_ = 0;  // the model's, so the spans above are always its size
  std::unique_ptr<std::function<bool()>> abort_;  // set_abort's, at a stable address
};

// One session's tokens in a step.
struct StepItem {
  Session* session;
  Span<const int32_t> tokens;
};
// Advances several sessions of one model in one step (latte_session_step:
// each by its own tokens, every weight read once for all of them).
inline void step(Span<const StepItem> items) {
  std::vector<latte_step_item> c(items.size());
  for (std::size_t i = 0; i < items.size(); ++i)
    c[i] = {items[i].session ? items[i].session->handle() : nullptr, items[i].tokens.data(), items[i].tokens.size()};
  check(latte_session_step(c.data(), c.size()));
}
inline void step(std::initializer_list<StepItem> items) { step(Span<const StepItem>(items.begin(), items.size())); }

class Sampler {
 public:
  explicit Sampler(const latte_sampler_options& options = latte_sampler_default_options()) {
    check(latte_sampler_create(&options, &s_));
  }
  ~Sampler() { latte_sampler_free(s_); }
  Sampler(Sampler&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Sampler& operator=(Sampler&& o) noexcept {
    if (this != &o) {
      latte_sampler_free(s_);
      s_ = std::exchange(o.s_, nullptr);
    }
    return *this;
  }
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  int32_t sample(Span<const float> logits) {
    int32_t t = -1;
    check(latte_sampler_sample(s_, logits.data(), logits.size(), &t));
    return t;
  }
  void accept(int32_t token) { check(latte_sampler_accept(s_, token)); }
  void reset(uint64_t seed) { check(latte_sampler_reset(s_, seed)); }
  // latte_sampler_set_logit_bias: {token, bias} pairs, -INFINITY bans.
  void set_logit_bias(Span<const latte_logit_bias> biases) {
    check(latte_sampler_set_logit_bias(s_, biases.data(), biases.size()));
  }
  void set_logit_bias(std::initializer_list<latte_logit_bias> biases) {
    set_logit_bias(Span<const latte_logit_bias>(biases.begin(), biases.size()));
  }
  // latte_sampler_set_grammar: a GBNF grammar the output follows, from rule `root`.
  void set_grammar(const Model& model, const std::string& gbnf, const std::string& root = "root") {
    check(latte_sampler_set_grammar(s_, model.handle(), gbnf.c_str(), root.c_str()));
  }
  // latte_sampler_set_json_schema: a JSON Schema the output validates against
  // ("{\"type\":\"object\"}": any JSON object).
  void set_json_schema(const Model& model, const std::string& schema_json) {
    check(latte_sampler_set_json_schema(s_, model.handle(), schema_json.c_str()));
  }
  // No grammar or schema any more.
  void clear_grammar() { check(latte_sampler_set_grammar(s_, nullptr, nullptr, nullptr)); }

 private:
  latte_sampler* s_ = nullptr;
};

}  // namespace latte::api

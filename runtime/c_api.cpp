// The C API (include/latte/latte.h) over Model and Session: every entry point
// catches everything and turns it into a status plus a thread-local message.
#include "latte/latte.h"

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/session/session.h"
#include "runtime/sampler/sampler.h"
#include "runtime/tokenizer/chat.h"
#include "runtime/tokenizer/tokenizer.h"

struct latte_model {
  std::shared_ptr<const latte::Model> model;
};

struct latte_sampler {
  latte::Sampler sampler;
};

struct latte_session {
  std::shared_ptr<const latte::Model> model;  // keeps the model alive
  std::unique_ptr<latte::Session> session;
};

static_assert(LATTE_ERR_CONTEXT_OVERFLOW == static_cast<int>(latte::Status::context_overflow) &&
              LATTE_ERR_INTERNAL == static_cast<int>(latte::Status::internal) &&
              LATTE_ERR_BAD_FILE == static_cast<int>(latte::Status::bad_file),
              "C status codes mirror latte::Status");
static_assert(LATTE_CACHE_INT8 == static_cast<int>(latte::LatentStorage::int8) &&
              LATTE_CACHE_F16 == static_cast<int>(latte::LatentStorage::f16));

namespace {

thread_local std::string g_last_error;
// Set instead where a message could not be stored (no memory for it).
thread_local const char* g_last_error_fixed = nullptr;

latte_status fail(latte_status s, std::string msg) noexcept {
  g_last_error = std::move(msg);  // a move: allocates nothing
  g_last_error_fixed = nullptr;
  return s;
}

// The same from a C string (an exception's what()), without throwing.
latte_status fail_with(latte_status s, const char* msg) noexcept {
  try {
    g_last_error.assign(msg);
    g_last_error_fixed = nullptr;
  } catch (...) {
    g_last_error_fixed = "out of memory (and none left for this error's message)";
  }
  return s;
}

// Runs f, mapping every exception to a status and message.
template <class F>
latte_status guarded(F&& f) {
  try {
    f();
    return LATTE_OK;
  } catch (const latte::Error& e) {
    return fail_with(static_cast<latte_status>(e.status()), e.what());
  } catch (const std::bad_alloc&) {
    return fail_with(LATTE_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail_with(LATTE_ERR_INTERNAL, e.what());
  } catch (...) {
    return fail_with(LATTE_ERR_INTERNAL, "unknown error");
  }
}

// The model's tokenizer, or Error(unsupported) naming the calling function.
const latte::Tokenizer& tokenizer_of(const latte_model* model, const char* fn) {
  if (model == nullptr) throw latte::Error(latte::Status::invalid_argument, std::string(fn) + ": model must not be NULL");
  const latte::Tokenizer* t = model->model->tokenizer();
  if (t == nullptr)
    throw latte::Error(latte::Status::unsupported,
                       std::string(fn) + ": the model file has no tokenizer (tokenizer.ggml.*): it runs on token ids");
  return *t;
}

// Hands `n` items at `src` to a caller's buffer under the header's size
// rules: *n_out = n always; buf NULL with capacity 0 asks the size; a buffer
// needs n items, plus a NUL for text.
template <class T>
void give(const char* fn, const T* src, std::size_t n, bool nul, T* buf, std::size_t capacity, std::size_t* n_out) {
  if (n_out == nullptr) throw latte::Error(latte::Status::invalid_argument, std::string(fn) + ": n_out must not be NULL");
  *n_out = n;
  if (buf == nullptr && capacity == 0) return;
  if (buf == nullptr) throw latte::Error(latte::Status::invalid_argument, std::string(fn) + ": buffer is NULL with capacity > 0");
  const std::size_t need = n + (nul ? 1 : 0);
  if (capacity < need)
    throw latte::Error(latte::Status::invalid_argument, std::string(fn) + ": the buffer holds " + std::to_string(capacity) +
                                                            (nul ? " bytes; the text needs " : " tokens; the result needs ") +
                                                            std::to_string(need) + (nul ? " with its NUL" : ""));
  if (n > 0) std::memcpy(buf, src, n * sizeof(T));
  if (nul) buf[n] = T{};
}

latte_status bool_flag(const char* fn, const char* name, int32_t v) {
  if (v == 0 || v == 1) return LATTE_OK;
  return fail(LATTE_ERR_INVALID_ARGUMENT,
              std::string(fn) + ": " + name + " must be 0 or 1, got " + std::to_string(v));
}

}  // namespace

extern "C" {

const char* latte_status_string(latte_status status) {
  if (status < LATTE_OK || status > LATTE_ERR_INTERNAL) return "unknown status";
  return latte::status_name(static_cast<latte::Status>(status));
}

const char* latte_last_error(void) { return g_last_error_fixed ? g_last_error_fixed : g_last_error.c_str(); }

latte_model_options latte_model_default_options(void) {
  latte_model_options o;
  o.use_mmap = -1;
  return o;
}

latte_status latte_model_load_with_options(const char* path, const latte_model_options* options,
                                           latte_model** out) {
  if (path == nullptr || out == nullptr)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_model_load: path and out must not be NULL");
  if (*path == '\0') return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_model_load: path must not be empty");
  const latte_model_options o = options ? *options : latte_model_default_options();
  if (o.use_mmap < -1 || o.use_mmap > 1)
    return fail(LATTE_ERR_INVALID_ARGUMENT,
                "latte_model_load: use_mmap must be -1 (automatic), 0 (read) or 1 (map), got " +
                    std::to_string(o.use_mmap));
  return guarded([&] {
    auto m = std::make_unique<latte_model>();
    latte::LoadOptions lo;
    lo.file = o.use_mmap < 0 ? latte::GgufLoad::automatic : o.use_mmap ? latte::GgufLoad::map : latte::GgufLoad::read;
    m->model = latte::Model::load(path, lo);
    *out = m.release();
  });
}

latte_status latte_model_load(const char* path, latte_model** out) {
  return latte_model_load_with_options(path, nullptr, out);
}

void latte_model_free(latte_model* model) { delete model; }

int32_t latte_model_n_vocab(const latte_model* model) { return model ? model->model->params().n_vocab : 0; }

int64_t latte_model_n_ctx_train(const latte_model* model) {
  return model ? model->model->params().context_length : 0;
}

const char* latte_model_architecture(const latte_model* model) {
  return model ? latte::model_arch_name(model->model->params().arch) : "";
}

int32_t latte_model_is_mapped(const latte_model* model) {
  return model && model->model->file().private_data() == nullptr ? 1 : 0;
}

latte_session_options latte_session_default_options(void) {
  latte_session_options o;
  o.threads = 0;
  o.n_ctx = 4096;
  o.cache_type = LATTE_CACHE_INT8;
  o.prefill_chunk = 512;
  return o;
}

latte_status latte_session_create(latte_model* model, const latte_session_options* options, latte_session** out) {
  if (model == nullptr || out == nullptr)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_create: model and out must not be NULL");
  const latte_session_options o = options ? *options : latte_session_default_options();
  if (o.cache_type < LATTE_CACHE_F32 || o.cache_type > LATTE_CACHE_INT8)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_create: unknown cache_type " + std::to_string(o.cache_type));
  if (o.n_ctx < 0) return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_create: n_ctx must be >= 0");
  return guarded([&] {
    latte::SessionOptions so;
    so.threads = o.threads;
    so.n_ctx = o.n_ctx;
    so.cache = static_cast<latte::LatentStorage>(o.cache_type);
    so.prefill_chunk = o.prefill_chunk;
    auto s = std::make_unique<latte_session>();
    s->model = model->model;
    s->session = std::make_unique<latte::Session>(model->model, so);
    *out = s.release();
  });
}

void latte_session_free(latte_session* session) { delete session; }

latte_status latte_session_prefill(latte_session* session, const int32_t* tokens, size_t n_tokens) {
  if (session == nullptr || (tokens == nullptr && n_tokens > 0))
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_prefill: session and tokens must not be NULL");
  return guarded([&] {
    session->session->prefill(std::span<const int32_t>(tokens, n_tokens));
  });
}

latte_status latte_session_decode(latte_session* session, int32_t token) {
  return latte_session_prefill(session, &token, 1);
}

latte_status latte_session_eval_all(latte_session* session, const int32_t* tokens, size_t n_tokens,
                                    float* logits_out) {
  if (session != nullptr && n_tokens == 0)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_eval_all: no tokens to evaluate");
  if (session == nullptr || logits_out == nullptr || tokens == nullptr)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_eval_all: session, tokens and logits_out must not be NULL");
  return guarded([&] {
    std::vector<float> all;
    session->session->prefill(std::span<const int32_t>(tokens, n_tokens), &all);
    std::memcpy(logits_out, all.data(), all.size() * sizeof(float));
  });
}

const float* latte_session_logits(const latte_session* session) {
  if (session == nullptr || !session->session->has_logits()) return nullptr;
  return session->session->logits().data();
}

int64_t latte_session_n_past(const latte_session* session) { return session ? session->session->n_past() : 0; }

int64_t latte_session_n_ctx(const latte_session* session) { return session ? session->session->n_ctx() : 0; }

latte_status latte_session_reset(latte_session* session) {
  if (session == nullptr) return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_reset: session must not be NULL");
  return guarded([&] { session->session->reset(); });
}

latte_status latte_session_truncate(latte_session* session, int64_t n_tokens) {
  if (session == nullptr) return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_truncate: session must not be NULL");
  return guarded([&] { session->session->truncate(n_tokens); });
}

latte_status latte_session_shift(latte_session* session, int64_t n_keep, int64_t n_discard) {
  if (session == nullptr) return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_shift: session must not be NULL");
  return guarded([&] { session->session->shift(n_keep, n_discard); });
}

latte_status latte_session_set_context_shift(latte_session* session, int32_t enable, int64_t n_keep) {
  if (session == nullptr)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_set_context_shift: session must not be NULL");
  if (enable != 0 && enable != 1)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_set_context_shift: enable must be 0 or 1, not " +
                                                std::to_string(enable));
  if (n_keep < 0) return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_set_context_shift: n_keep must be >= 0");
  return guarded([&] { session->session->set_context_shift(enable == 1, n_keep); });
}

int64_t latte_session_n_unshifted(const latte_session* session) {
  return session ? session->session->n_unshifted() : 0;
}

latte_status latte_session_tokens(const latte_session* session, int32_t* tokens, size_t capacity, size_t* n_out) {
  if (session == nullptr) return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_tokens: session must not be NULL");
  return guarded([&] {
    const auto t = session->session->tokens();
    give("latte_session_tokens", t.data(), t.size(), false, tokens, capacity, n_out);
  });
}

latte_status latte_session_save(const latte_session* session, const char* path) {
  if (session == nullptr || path == nullptr)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_save: session and path must not be NULL");
  if (*path == '\0') return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_save: path must not be empty");
  return guarded([&] { session->session->save_state(path); });
}

latte_status latte_session_load(latte_session* session, const char* path) {
  if (session == nullptr || path == nullptr)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_load: session and path must not be NULL");
  if (*path == '\0') return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_load: path must not be empty");
  return guarded([&] { session->session->load_state(path); });
}

// ---------------------------------------------------------------- text

int32_t latte_model_has_tokenizer(const latte_model* model) {
  return model != nullptr && model->model->tokenizer() != nullptr ? 1 : 0;
}

latte_status latte_tokenize(const latte_model* model, const char* text, size_t text_len, int32_t add_bos,
                            int32_t parse_special, int32_t* tokens, size_t capacity, size_t* n_out) {
  constexpr const char* fn = "latte_tokenize";
  if (text == nullptr && text_len > 0) return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": text is NULL");
  if (add_bos < -1 || add_bos > 1)
    return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": add_bos must be -1, 0 or 1, got " + std::to_string(add_bos));
  if (latte_status st = bool_flag(fn, "parse_special", parse_special); st != LATTE_OK) return st;
  return guarded([&] {
    const latte::Tokenizer& tok = tokenizer_of(model, fn);
    const bool bos = add_bos == -1 ? tok.add_bos_by_default() && tok.bos_id() >= 0 : add_bos == 1;
    const auto ids = tok.encode(std::string_view(text ? text : "", text_len), bos, parse_special == 1);
    give(fn, ids.data(), ids.size(), false, tokens, capacity, n_out);
  });
}

latte_status latte_detokenize(const latte_model* model, const int32_t* tokens, size_t n_tokens, int32_t hide_control,
                              char* text, size_t capacity, size_t* n_out) {
  constexpr const char* fn = "latte_detokenize";
  if (tokens == nullptr && n_tokens > 0) return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": tokens is NULL");
  if (latte_status st = bool_flag(fn, "hide_control", hide_control); st != LATTE_OK) return st;
  return guarded([&] {
    const std::string s = tokenizer_of(model, fn).decode(std::span<const int32_t>(tokens, n_tokens),
                                                         {.hide_control = hide_control == 1});
    give(fn, s.data(), s.size(), true, text, capacity, n_out);
  });
}

latte_status latte_token_to_piece(const latte_model* model, int32_t token, int32_t hide_control, char* buf,
                                  size_t capacity, size_t* n_out) {
  constexpr const char* fn = "latte_token_to_piece";
  if (latte_status st = bool_flag(fn, "hide_control", hide_control); st != LATTE_OK) return st;
  return guarded([&] {
    const std::string s = tokenizer_of(model, fn).token_to_piece(token, hide_control == 1);
    give(fn, s.data(), s.size(), true, buf, capacity, n_out);
  });
}

int32_t latte_token_bos(const latte_model* model) {
  const latte::Tokenizer* t = model ? model->model->tokenizer() : nullptr;
  return t ? t->bos_id() : -1;
}

int32_t latte_token_eos(const latte_model* model) {
  const latte::Tokenizer* t = model ? model->model->tokenizer() : nullptr;
  return t ? t->eos_id() : -1;
}

int32_t latte_token_is_end_of_generation(const latte_model* model, int32_t token) {
  const latte::Tokenizer* t = model ? model->model->tokenizer() : nullptr;
  return t && token >= 0 && token < t->n_vocab() && t->is_end_of_generation(token) ? 1 : 0;
}

// ---------------------------------------------------------------- chat

const char* latte_chat_format(const latte_model* model) {
  const char* name = nullptr;
  guarded([&] {
    const latte::Tokenizer& tok = tokenizer_of(model, "latte_chat_format");
    const latte::ChatFormat f = latte::detect_chat_format(tok, latte::model_arch_name(model->model->params().arch));
    name = latte::chat_format_name(latte::ChatFormatter(tok, f).format()).data();  // static strings
  });
  return name;
}

namespace {

// The formatter for `format` (NULL: the model's) and the messages as turns,
// for latte_chat_apply and latte_chat_tokenize.
std::pair<latte::ChatFormatter, std::vector<latte::ChatTurn>> chat_turns(const char* fn, const latte_model* model,
                                                                         const char* format,
                                                                         const latte_chat_message* messages,
                                                                         std::size_t n_messages) {
  const latte::Tokenizer& tok = tokenizer_of(model, fn);
  latte::ChatFormat f;
  if (format == nullptr) {
    f = latte::detect_chat_format(tok, latte::model_arch_name(model->model->params().arch));
  } else if (auto named = latte::parse_chat_format(format)) {
    f = *named;
  } else {
    throw latte::Error(latte::Status::invalid_argument,
                       std::string(fn) + ": unknown chat format '" + format + "' (deepseek2, deepseek3 or chatml)");
  }
  std::vector<latte::ChatTurn> turns;
  turns.reserve(n_messages);
  for (std::size_t i = 0; i < n_messages; ++i) {
    if (messages[i].role == nullptr || messages[i].content == nullptr)
      throw latte::Error(latte::Status::invalid_argument,
                         std::string(fn) + ": message " + std::to_string(i) + " has a NULL role or content");
    turns.push_back({messages[i].role, messages[i].content});
  }
  return {latte::ChatFormatter(tok, f), std::move(turns)};
}

}  // namespace

latte_status latte_chat_apply(const latte_model* model, const char* format, const latte_chat_message* messages,
                              size_t n_messages, int32_t add_generation_prompt, char* text, size_t capacity,
                              size_t* n_out, int32_t* add_bos) {
  constexpr const char* fn = "latte_chat_apply";
  if (messages == nullptr && n_messages > 0) return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": messages is NULL");
  if (latte_status st = bool_flag(fn, "add_generation_prompt", add_generation_prompt); st != LATTE_OK) return st;
  return guarded([&] {
    const auto [chat, turns] = chat_turns(fn, model, format, messages, n_messages);
    const std::string s = chat.format(turns, add_generation_prompt == 1);
    give(fn, s.data(), s.size(), true, text, capacity, n_out);
    if (add_bos) *add_bos = chat.add_bos() ? 1 : 0;
  });
}

latte_status latte_chat_tokenize(const latte_model* model, const char* format, const latte_chat_message* messages,
                                 size_t n_messages, int32_t add_generation_prompt, int32_t add_bos, int32_t* tokens,
                                 size_t capacity, size_t* n_out) {
  constexpr const char* fn = "latte_chat_tokenize";
  if (messages == nullptr && n_messages > 0) return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": messages is NULL");
  if (latte_status st = bool_flag(fn, "add_generation_prompt", add_generation_prompt); st != LATTE_OK) return st;
  if (add_bos != -1 && add_bos != 0 && add_bos != 1)
    return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": add_bos must be -1, 0 or 1, got " + std::to_string(add_bos));
  return guarded([&] {
    const auto [chat, turns] = chat_turns(fn, model, format, messages, n_messages);
    const bool bos = add_bos == -1 ? chat.add_bos() : add_bos == 1;
    const std::vector<std::int32_t> ids = chat.encode(turns, add_generation_prompt == 1, bos);
    give(fn, ids.data(), ids.size(), false, tokens, capacity, n_out);
  });
}

latte_status latte_chat_tokenize_turn(const latte_model* model, const char* format, int32_t last_token,
                                      const latte_chat_message* messages, size_t n_messages,
                                      int32_t add_generation_prompt, int32_t* tokens, size_t capacity,
                                      size_t* n_out) {
  constexpr const char* fn = "latte_chat_tokenize_turn";
  if (messages == nullptr && n_messages > 0) return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": messages is NULL");
  if (latte_status st = bool_flag(fn, "add_generation_prompt", add_generation_prompt); st != LATTE_OK) return st;
  return guarded([&] {
    const auto [chat, turns] = chat_turns(fn, model, format, messages, n_messages);
    if (last_token < -1 || last_token >= model->model->params().n_vocab)
      throw latte::Error(latte::Status::invalid_argument,
                         std::string(fn) + ": last_token " + std::to_string(last_token) + " is outside [-1, " +
                             std::to_string(model->model->params().n_vocab) + ")");
    const std::vector<std::int32_t> ids =
        chat.encode(turns, add_generation_prompt == 1, false, chat.reply_end_after(last_token));
    give(fn, ids.data(), ids.size(), false, tokens, capacity, n_out);
  });
}

// ---------------------------------------------------------------- sampling

latte_sampler_params latte_sampler_default_params(void) {
  return latte::copy_sampling_fields<latte_sampler_params>(latte::SamplerConfig{});
}

latte_status latte_sampler_create(const latte_sampler_params* params, latte_sampler** out) {
  if (out == nullptr) return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_sampler_create: out must not be NULL");
  const latte_sampler_params p = params ? *params : latte_sampler_default_params();
  return guarded([&] {
    // The constructor validates.
    *out = new latte_sampler{latte::Sampler(latte::copy_sampling_fields<latte::SamplerConfig>(p))};
  });
}

void latte_sampler_free(latte_sampler* sampler) { delete sampler; }

latte_status latte_sampler_sample(latte_sampler* sampler, const float* logits, size_t n_logits, int32_t* token) {
  if (sampler == nullptr || logits == nullptr || token == nullptr)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_sampler_sample: sampler, logits and token must not be NULL");
  if (n_logits == 0 || n_logits > static_cast<size_t>(INT32_MAX))
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_sampler_sample: n_logits must be in 1..2^31-1, got " + std::to_string(n_logits));
  return guarded([&] { *token = sampler->sampler.sample(std::span<const float>(logits, n_logits)); });
}

latte_status latte_sampler_accept(latte_sampler* sampler, int32_t token) {
  if (sampler == nullptr) return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_sampler_accept: sampler must not be NULL");
  if (token < 0) return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_sampler_accept: token must be >= 0, got " + std::to_string(token));
  return guarded([&] { sampler->sampler.accept(token); });
}

latte_status latte_sampler_reset(latte_sampler* sampler, uint64_t seed) {
  if (sampler == nullptr) return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_sampler_reset: sampler must not be NULL");
  return guarded([&] { sampler->sampler.reset(seed); });
}

}  // extern "C"

// The C API (include/latte/latte.h) over Model and Session: every entry point
// catches everything and turns it into a status plus a thread-local message
// (also logged); options structs are read under their size rule.
#include "latte/latte.h"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/isa.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "quant/ggml_types.h"
#include "quant/latent_formats.h"
#include "runtime/mla/latent_cache.h"
#include "runtime/session/session.h"
#include "runtime/grammar/gbnf.h"
#include "runtime/grammar/json_schema.h"
#include "runtime/grammar/token_constraint.h"
#include "runtime/grammar/vocab_index.h"
#include "runtime/sampler/sampler.h"
#include "runtime/tokenizer/chat.h"
#include "runtime/tokenizer/tokenizer.h"

struct latte_model {
  std::shared_ptr<const latte::Model> model;
  std::string name;  // latte_model_name's: general.name or the file's name
  std::vector<std::string> tensor_names;  // latte_model_tensor's names, NUL-terminated
  // The vocabulary as grammars see it, built at the first grammar set on a
  // sampler with this model (a model is shared by threads: once only).
  mutable std::once_flag vocab_once;
  mutable std::shared_ptr<const latte::grammar::VocabIndex> vocab;
};

struct latte_sampler {
  latte::Sampler sampler;
};

struct latte_session {
  std::shared_ptr<const latte::Model> model;  // keeps the model alive
  std::unique_ptr<latte::Session> session;
  latte_abort_callback abort = nullptr;  // latte_session_set_abort_callback's
  void* abort_data = nullptr;
};

static_assert(LATTE_ERR_CONTEXT_OVERFLOW == static_cast<int>(latte::Status::context_overflow) &&
              LATTE_ERR_INTERNAL == static_cast<int>(latte::Status::internal) &&
              LATTE_ERR_BAD_FILE == static_cast<int>(latte::Status::bad_file) &&
              LATTE_ERR_ABORTED == static_cast<int>(latte::Status::aborted),
              "C status codes mirror latte::Status");
static_assert(LATTE_CACHE_INT8 == static_cast<int>(latte::LatentStorage::int8) &&
              LATTE_CACHE_INT4 == static_cast<int>(latte::LatentStorage::int4) &&
              LATTE_CACHE_F16 == static_cast<int>(latte::LatentStorage::f16));
static_assert(LATTE_LOG_ERROR == static_cast<int>(latte::LogLevel::error) &&
              LATTE_LOG_WARN == static_cast<int>(latte::LogLevel::warn) &&
              LATTE_LOG_INFO == static_cast<int>(latte::LogLevel::info) &&
              LATTE_LOG_DEBUG == static_cast<int>(latte::LogLevel::debug),
              "C log levels mirror latte::LogLevel");

namespace {

thread_local std::string g_last_error;
// Set instead where a message could not be stored (no memory for it).
thread_local const char* g_last_error_fixed = nullptr;

// A failed call's message goes to the log too: an error, or a note where
// the caller's own callback stopped the call.
void log_failure(latte_status s, std::string_view msg) noexcept {
  latte::log_message(s == LATTE_ERR_ABORTED ? latte::LogLevel::info : latte::LogLevel::error, msg);
}

latte_status fail(latte_status s, std::string msg) noexcept {
  log_failure(s, msg);
  g_last_error = std::move(msg);  // a move: allocates nothing
  g_last_error_fixed = nullptr;
  return s;
}

// The same from a C string (an exception's what()), without throwing.
latte_status fail_with(latte_status s, const char* msg) noexcept {
  log_failure(s, msg);
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

// ---- options structs and their size rule (latte.h's top comment)

// One field of an options struct, for the size rule.
struct Field {
  std::size_t offset, size;
  const char* name;
};
#define LATTE_FIELD(T, f) Field{offsetof(T, f), sizeof(static_cast<T*>(nullptr)->f), #f}

// Each struct's fields after `size`, and its name and defaults.
template <class T>
struct OptionsOf;
template <>
struct OptionsOf<latte_model_options> {
  static constexpr const char* type = "latte_model_options";
  static constexpr const char* init = "latte_model_default_options()";
  static constexpr Field fields[] = {LATTE_FIELD(latte_model_options, use_mmap),
                                     LATTE_FIELD(latte_model_options, progress),
                                     LATTE_FIELD(latte_model_options, progress_user_data)};
  static latte_model_options defaults() {
    latte_model_options o{};
    o.size = sizeof o;
    o.use_mmap = -1;
    return o;
  }
};
template <>
struct OptionsOf<latte_session_options> {
  static constexpr const char* type = "latte_session_options";
  static constexpr const char* init = "latte_session_default_options()";
  static constexpr Field fields[] = {
      LATTE_FIELD(latte_session_options, threads), LATTE_FIELD(latte_session_options, n_ctx),
      LATTE_FIELD(latte_session_options, cache_type), LATTE_FIELD(latte_session_options, prefill_chunk),
      LATTE_FIELD(latte_session_options, prefill_form)};
  static latte_session_options defaults() {
    latte_session_options o{};
    o.size = sizeof o;
    o.threads = 0;
    o.n_ctx = 4096;
    o.cache_type = LATTE_CACHE_INT8;
    o.prefill_chunk = 512;
    o.prefill_form = LATTE_PREFILL_AUTO;
    return o;
  }
};
template <>
struct OptionsOf<latte_sampler_options> {
  static constexpr const char* type = "latte_sampler_options";
  static constexpr const char* init = "latte_sampler_default_options()";
  static constexpr Field fields[] = {
      LATTE_FIELD(latte_sampler_options, temperature), LATTE_FIELD(latte_sampler_options, top_k),
      LATTE_FIELD(latte_sampler_options, top_p),       LATTE_FIELD(latte_sampler_options, min_p),
      LATTE_FIELD(latte_sampler_options, repeat_penalty), LATTE_FIELD(latte_sampler_options, repeat_last_n),
      LATTE_FIELD(latte_sampler_options, seed)};
  static latte_sampler_options defaults() {
    latte_sampler_options o = latte::copy_sampling_fields<latte_sampler_options>(latte::SamplerConfig{});
    o.size = sizeof o;
    return o;
  }
};
#undef LATTE_FIELD

// LATTE_OK where `size` is one this library takes for T; else the failure
// (0, larger than T here: a program built against a newer header, or
// ending inside a field), its message set. Allocates only to fail.
template <class T>
latte_status check_size(const char* fn, std::size_t size) noexcept {
  using O = OptionsOf<T>;
  const Field* inside = nullptr;
  for (const Field& f : O::fields)
    if (f.offset < size && size < f.offset + f.size) inside = &f;
  const bool fine = size >= sizeof(std::size_t) && size <= sizeof(T) && inside == nullptr;
  if (fine) return LATTE_OK;
  const latte_status st = size > sizeof(T) ? LATTE_ERR_UNSUPPORTED : LATTE_ERR_INVALID_ARGUMENT;
  try {
    std::string m = std::string(fn) + ": " + O::type + ".size is " + std::to_string(size);
    if (size == 0) {
      m += std::string(": start from ") + O::init + ", which sets it";
    } else if (size > sizeof(T)) {
      m += " bytes, larger than this library's " + std::to_string(sizeof(T)) +
           ": the program was built against a newer latte.h than the library it runs with (version " +
           std::to_string(LATTE_VERSION_MAJOR) + "." + std::to_string(LATTE_VERSION_MINOR) + "." +
           std::to_string(LATTE_VERSION_PATCH) + ")";
    } else if (size < sizeof(std::size_t)) {
      m += ": it ends inside the size field itself";
    } else {
      m += std::string(": it ends inside the field ") + inside->name + " (bytes " + std::to_string(inside->offset) +
           " to " + std::to_string(inside->offset + inside->size) + "): start from " + O::init;
    }
    return fail(st, std::move(m));
  } catch (...) {
    return fail_with(st, "an options struct's size is not one this library takes (no memory to say more)");
  }
}

// The caller's options (NULL: the defaults) as this library's struct: the
// fields its size covers, the defaults for the rest (a program built
// against an older header); only those bytes of it are read.
template <class T>
latte_status read_options(const char* fn, const T* in, T& out) {
  out = OptionsOf<T>::defaults();
  if (in == nullptr) return LATTE_OK;
  std::size_t size = 0;
  std::memcpy(&size, in, sizeof size);
  if (latte_status st = check_size<T>(fn, size); st != LATTE_OK) return st;
  for (const Field& f : OptionsOf<T>::fields)
    if (f.offset + f.size <= size)
      std::memcpy(reinterpret_cast<unsigned char*>(&out) + f.offset,
                  reinterpret_cast<const unsigned char*>(in) + f.offset, f.size);
  return LATTE_OK;
}

// latte_*_options_init: the defaults into the caller's `size` bytes (zeros
// past what this library knows), size set.
template <class T>
latte_status init_options(const char* fn, T* options, std::size_t size) {
  if (options == nullptr) return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": options must not be NULL");
  if (size < sizeof(std::size_t)) return check_size<T>(fn, size);  // not even room for `size`: nothing written
  const T d = OptionsOf<T>::defaults();
  std::memset(options, 0, size);
  std::memcpy(options, &d, std::min(size, sizeof(T)));
  std::memcpy(options, &size, sizeof size);
  return check_size<T>(fn, size);
}

// ---- metadata as text

// s as a JSON string: quoted, with ", \ and control bytes escaped (other
// bytes as they are: UTF-8 passes through).
void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

// A float or double in the shortest decimal that reads back as it.
template <class F>
void append_number(std::string& out, F v) {
  char b[64];
  const auto r = std::to_chars(b, b + sizeof b, v);
  out.append(b, r.ptr);
}

// One metadata value as latte_model_meta_value gives it; inside an array,
// strings quoted.
void append_value(std::string& out, const latte::GgufValue& v, bool in_array) {
  using T = latte::GgufValueType;
  switch (v.type) {
    case T::string: {
      const std::string_view s = *v.as_string();
      if (in_array) append_json_string(out, s);
      else out += s;
      return;
    }
    case T::boolean: out += *v.as_bool() ? "true" : "false"; return;
    case T::f32: append_number(out, static_cast<float>(*v.as_f64())); return;
    case T::f64: append_number(out, *v.as_f64()); return;
    case T::array: {
      out += '[';
      latte::GgufArrayElements it = v.elements();
      latte::GgufValue e;
      for (bool first = true; it.next(e); first = false) {
        if (!first) out += ", ";
        append_value(out, e, true);
      }
      out += ']';
      return;
    }
    default:
      if (const auto i = v.as_i64()) out += std::to_string(*i);
      else out += std::to_string(*v.as_u64());  // a u64 above INT64_MAX
  }
}

// general.name, or the file's name (its path's last component).
std::string model_name(const latte::Model& m) {
  if (const latte::GgufKv* kv = m.file().find("general.name"))
    if (const auto s = kv->value.as_string(); s && !s->empty()) return std::string(*s);
  const std::string& path = m.file().path();
  const std::size_t slash = path.find_last_of("/\\");
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// latte_log_set's callback, as the runtime's log sink.
struct CLogSink {
  latte_log_callback fn;
  void* data;
};
void c_log_sink(latte::LogLevel level, const char* message, void* p) {
  const auto* s = static_cast<const CLogSink*>(p);
  s->fn(static_cast<latte_log_level>(level), message, s->data);
}

// The session's abort hook: the C callback, nonzero meaning stop.
bool abort_requested(void* p) {
  const latte_session* s = static_cast<const latte_session*>(p);
  return s->abort(s->abort_data) != 0;
}

}  // namespace

// A cache's bytes for a shape; a cache type the shape cannot hold is
// unsupported, saying why (the argument checks are the callers').
latte_status cache_bytes_of(const char* fn, int n_layers, int d_c, int d_R, int32_t cache_type, int64_t n_tokens,
                            int64_t* bytes) {
  const auto storage = static_cast<latte::LatentStorage>(cache_type);
  if (const char* why = latte::latent_layout_problem(storage, d_c, d_R, latte::latent_cache_tile_tokens(storage)); *why)
    return fail(LATTE_ERR_UNSUPPORTED, std::string(fn) + ": a " + latte::latent_storage_name(storage) +
                                           " cache cannot hold this shape: " + why);
  return guarded([&] { *bytes = static_cast<int64_t>(latte::LatentCache::bytes_for(n_layers, d_c, d_R, n_tokens, storage)); });
}

extern "C" {

const char* latte_status_string(latte_status status) {
  if (status < LATTE_OK || status > LATTE_ERR_ABORTED) return "unknown status";
  return latte::status_name(static_cast<latte::Status>(status));
}

const char* latte_last_error(void) { return g_last_error_fixed ? g_last_error_fixed : g_last_error.c_str(); }

const char* latte_kernels(void) {
  try {
    return latte::isa_name(latte::active_isa());
  } catch (const std::exception& e) {  // LATTE_ISA names no ISA
    fail_with(LATTE_ERR_UNSUPPORTED, e.what());
    return nullptr;
  }
}

const char* latte_version(void) {
  try {
    static const std::string v = [] {
      std::string s = std::to_string(LATTE_VERSION_MAJOR) + "." + std::to_string(LATTE_VERSION_MINOR) + "." +
                      std::to_string(LATTE_VERSION_PATCH) + " (";
      try {
        s += latte::isa_name(latte::active_isa());
      } catch (const std::runtime_error& e) {  // LATTE_ISA names no ISA: every session would fail saying so
        s += e.what();
      }
      return s + ")";
    }();
    return v.c_str();
  } catch (...) {  // no memory for the string (the next call tries again)
#define LATTE_STR2(x) #x
#define LATTE_STR(x) LATTE_STR2(x)
    return LATTE_STR(LATTE_VERSION_MAJOR) "." LATTE_STR(LATTE_VERSION_MINOR) "." LATTE_STR(LATTE_VERSION_PATCH);
#undef LATTE_STR
#undef LATTE_STR2
  }
}

latte_status latte_log_set(latte_log_callback callback, void* user_data) {
  // Refused before the lock below: a thread setting the log waits for the
  // callbacks in progress, and one of them would wait for it.
  if (latte::in_log_sink())
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_log_set: called from inside the log callback");
  static std::mutex setting;  // one setter at a time: `current` is theirs
  static CLogSink* current = nullptr;
  const std::lock_guard<std::mutex> lock(setting);
  CLogSink* next = nullptr;
  if (callback != nullptr) {
    next = new (std::nothrow) CLogSink{callback, user_data};
    if (next == nullptr) return fail(LATTE_ERR_OUT_OF_MEMORY, "latte_log_set: out of memory");
  }
  latte::set_log_sink(next ? c_log_sink : nullptr, next);  // returns once no thread is in the old one
  delete current;
  current = next;
  return LATTE_OK;
}

latte_status latte_model_options_init(latte_model_options* options, size_t size) {
  return init_options("latte_model_options_init", options, size);
}

latte_status latte_model_load_with_options(const char* path, const latte_model_options* options,
                                           latte_model** out) {
  constexpr const char* fn = "latte_model_load";
  if (path == nullptr || out == nullptr)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_model_load: path and out must not be NULL");
  if (*path == '\0') return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_model_load: path must not be empty");
  latte_model_options o;
  if (latte_status st = read_options(fn, options, o); st != LATTE_OK) return st;
  if (o.use_mmap < -1 || o.use_mmap > 1)
    return fail(LATTE_ERR_INVALID_ARGUMENT,
                "latte_model_load: use_mmap must be -1 (automatic), 0 (read) or 1 (map), got " +
                    std::to_string(o.use_mmap));
  return guarded([&] {
    // The progress callback's 0 is an exception out of the load, which
    // gives back what it took.
    auto cancelled = [&](std::uint64_t done, std::uint64_t total) {
      return latte::Error(latte::Status::aborted, std::string(fn) + ": '" + path +
                                                      "': cancelled by the progress callback at " +
                                                      std::to_string(done) + " of " + std::to_string(total) + " bytes");
    };
    auto m = std::make_unique<latte_model>();
    latte::LoadOptions lo;
    lo.file = o.use_mmap < 0 ? latte::GgufLoad::automatic : o.use_mmap ? latte::GgufLoad::map : latte::GgufLoad::read;
    if (o.progress != nullptr)
      lo.on_progress = [&](std::size_t done, std::size_t total) {
        if (o.progress(done, total, o.progress_user_data) == 0) throw cancelled(done, total);
      };
    m->model = latte::Model::load(path, lo);
    m->name = model_name(*m->model);
    for (const auto& t : m->model->file().tensors()) m->tensor_names.emplace_back(t.name);
    const std::uint64_t total = m->model->load_progress_total();
    if (o.progress != nullptr && o.progress(total, total, o.progress_user_data) == 0) throw cancelled(total, total);
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

int64_t latte_model_decode_bytes(const latte_model* model) {
  return model ? static_cast<int64_t>(model->model->decode_weight_bytes()) : 0;
}

int64_t latte_model_expert_bytes(const latte_model* model) {
  return model ? static_cast<int64_t>(model->model->expert_bytes()) : 0;
}

int64_t latte_model_interleaved_bytes(const latte_model* model) {
  return model ? static_cast<int64_t>(model->model->interleaved_weight_bytes()) : 0;
}

latte_status latte_model_cache_bytes(const latte_model* model, int32_t cache_type, int64_t n_tokens, int64_t* bytes) {
  if (model == nullptr || bytes == nullptr)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_model_cache_bytes: model and bytes must not be NULL");
  if (cache_type < LATTE_CACHE_F32 || cache_type > LATTE_CACHE_INT4)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_model_cache_bytes: unknown cache_type " + std::to_string(cache_type));
  if (n_tokens < 0) return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_model_cache_bytes: n_tokens must be >= 0");
  const latte::ModelParams& p = model->model->params();
  return cache_bytes_of("latte_model_cache_bytes", p.n_layers, p.mla.kv_lora_rank, p.mla.d_rope, cache_type, n_tokens,
                        bytes);
}

int32_t latte_model_n_layers(const latte_model* model) { return model ? model->model->params().n_layers : 0; }

int32_t latte_model_n_embd(const latte_model* model) { return model ? model->model->params().mla.d_model : 0; }

int64_t latte_model_n_params(const latte_model* model) {
  return model ? static_cast<int64_t>(model->model->parameter_count()) : 0;
}

int64_t latte_model_file_size(const latte_model* model) {
  return model ? static_cast<int64_t>(model->model->file().file_size()) : 0;
}

const char* latte_model_name(const latte_model* model) { return model ? model->name.c_str() : ""; }

latte_status latte_model_describe(const latte_model* model, latte_model_desc* desc) {
  constexpr const char* fn = "latte_model_describe";
  if (model == nullptr || desc == nullptr) return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": model and desc must not be NULL");
  if (desc->size == 0)
    return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": desc->size is 0 (set it to sizeof(latte_model_desc))");
  if (desc->size > sizeof(latte_model_desc))
    return fail(LATTE_ERR_UNSUPPORTED, std::string(fn) + ": desc->size " + std::to_string(desc->size) +
                                           " is larger than this library's latte_model_desc (" +
                                           std::to_string(sizeof(latte_model_desc)) + " bytes): a newer header");
  return guarded([&] {
    const latte::Model& m = *model->model;
    const latte::ModelParams& p = m.params();
    const latte::MlaConfig& a = p.mla;
    latte_model_desc d{};
    d.size = desc->size;
    d.n_heads = a.n_heads;
    d.q_lora_rank = a.q_lora_rank;
    d.kv_lora_rank = a.kv_lora_rank;
    d.d_nope = a.d_nope;
    d.d_rope = a.d_rope;
    d.d_v = a.d_v;
    d.kv_split = p.kv_layout == latte::KvLayout::split ? 1 : 0;
    d.kq_scale = a.kq_scale();
    d.rope_consecutive = a.rope.style == latte::RopeStyle::consecutive_pairs ? 1 : 0;
    d.rope_freq_base = a.rope.freq_base;
    d.rope_yarn = a.rope.yarn ? 1 : 0;
    d.yarn_factor = a.rope.yarn ? a.rope.yarn_factor : 0.f;
    d.yarn_orig_ctx = a.rope.yarn ? a.rope.yarn_orig_ctx : 0.f;
    d.yarn_log_multiplier = a.rope.yarn ? a.rope.yarn_log_multiplier : 0.f;
    d.ffn = p.ffn_kind == latte::FfnKind::swiglu ? "swiglu" : "relu2";
    d.ff_dense = p.ff_dense;
    d.n_leading_dense = p.n_leading_dense;
    d.n_experts = p.n_experts;
    d.n_experts_used = p.n_experts_used;
    d.n_experts_shared = p.n_experts_shared;
    d.ff_expert = p.ff_expert;
    d.n_expert_groups = p.n_expert_groups;
    d.gating = p.n_experts == 0 ? "" : p.gating == latte::GatingFunc::softmax ? "softmax" : "sigmoid";
    d.gguf_version = m.file().version();
    d.n_tensors = static_cast<int64_t>(m.file().tensor_count());
    d.mapped_weight_bytes = static_cast<int64_t>(m.mapped_weight_bytes());
    d.packed_weight_bytes = static_cast<int64_t>(m.packed_weight_bytes());
    const latte::Tokenizer* t = m.tokenizer();
    d.tokenizer = t == nullptr ? "" : t->kind() == latte::Tokenizer::Kind::bpe ? "bpe" : "spm";
    d.pre_tokenizer = t == nullptr ? "" : t->pre().c_str();
    std::memcpy(desc, &d, desc->size);  // the fields an older caller's struct has
  });
}

int64_t latte_model_tensor_count(const latte_model* model) {
  return model ? static_cast<int64_t>(model->model->file().tensor_count()) : 0;
}

latte_status latte_model_tensor(const latte_model* model, int64_t index, latte_tensor_info* info) {
  constexpr const char* fn = "latte_model_tensor";
  if (model == nullptr || info == nullptr) return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": model and info must not be NULL");
  const auto& tensors = model->model->file().tensors();
  if (index < 0 || static_cast<std::size_t>(index) >= tensors.size())
    return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": index " + std::to_string(index) +
                                                " is out of range (the file has " + std::to_string(tensors.size()) +
                                                " tensors)");
  const latte::GgufTensor& t = tensors[static_cast<std::size_t>(index)];
  // The name is a view into the file's metadata, which lives as long as the
  // model; GGUF names carry no NUL, so the model keeps NUL-terminated copies.
  info->name = model->tensor_names[static_cast<std::size_t>(index)].c_str();
  info->type = latte::ggml_type_name(t.type);
  info->n_dims = static_cast<int32_t>(t.n_dims);
  for (int i = 0; i < 4; ++i) info->dims[i] = static_cast<int64_t>(t.ne[static_cast<std::size_t>(i)]);
  info->n_bytes = static_cast<int64_t>(t.n_bytes);
  return LATTE_OK;
}

latte_status latte_cache_bytes(int32_t n_layers, int32_t kv_lora_rank, int32_t d_rope, int32_t cache_type,
                               int64_t n_tokens, int64_t* bytes) {
  constexpr const char* fn = "latte_cache_bytes";
  if (bytes == nullptr) return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": bytes must not be NULL");
  if (cache_type < LATTE_CACHE_F32 || cache_type > LATTE_CACHE_INT4)
    return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": unknown cache_type " + std::to_string(cache_type));
  if (n_layers <= 0 || kv_lora_rank <= 0 || d_rope <= 0 || n_tokens < 0)
    return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": n_layers, kv_lora_rank and d_rope must be > 0 and n_tokens >= 0");
  return cache_bytes_of(fn, n_layers, kv_lora_rank, d_rope, cache_type, n_tokens, bytes);
}

int64_t latte_model_meta_count(const latte_model* model) {
  return model ? static_cast<int64_t>(model->model->file().kv_count()) : 0;
}

latte_status latte_model_meta_key(const latte_model* model, int64_t index, char* buf, size_t capacity,
                                  size_t* n_out) {
  constexpr const char* fn = "latte_model_meta_key";
  if (model == nullptr) return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": model must not be NULL");
  const auto count = static_cast<int64_t>(model->model->file().kv_count());
  if (index < 0 || index >= count)
    return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": index " + std::to_string(index) +
                                                " is outside [0, " + std::to_string(count) + ")");
  return guarded([&] {
    const std::string_view key = model->model->file().kv(static_cast<std::size_t>(index)).key;
    give(fn, key.data(), key.size(), true, buf, capacity, n_out);
  });
}

latte_status latte_model_meta_value(const latte_model* model, const char* key, char* buf, size_t capacity,
                                    size_t* n_out) {
  constexpr const char* fn = "latte_model_meta_value";
  if (model == nullptr || key == nullptr)
    return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": model and key must not be NULL");
  const latte::GgufKv* kv = model->model->file().find(key);
  if (kv == nullptr)
    return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": the model's file has no key '" + key + "'");
  return guarded([&] {
    std::string text;
    append_value(text, kv->value, false);
    give(fn, text.data(), text.size(), true, buf, capacity, n_out);
  });
}

latte_status latte_session_options_init(latte_session_options* options, size_t size) {
  return init_options("latte_session_options_init", options, size);
}

latte_status latte_session_create(latte_model* model, const latte_session_options* options, latte_session** out) {
  if (model == nullptr || out == nullptr)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_create: model and out must not be NULL");
  latte_session_options o;
  if (latte_status st = read_options("latte_session_create", options, o); st != LATTE_OK) return st;
  if (o.cache_type < LATTE_CACHE_F32 || o.cache_type > LATTE_CACHE_INT4)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_create: unknown cache_type " + std::to_string(o.cache_type));
  if (o.n_ctx < 0) return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_create: n_ctx must be >= 0");
  if (o.prefill_form < LATTE_PREFILL_AUTO || o.prefill_form > LATTE_PREFILL_ABSORBED)
    return fail(LATTE_ERR_INVALID_ARGUMENT,
                "latte_session_create: unknown prefill_form " + std::to_string(o.prefill_form) +
                    " (LATTE_PREFILL_AUTO, _NAIVE or _ABSORBED)");
  return guarded([&] {
    latte::SessionOptions so;
    so.threads = o.threads;
    so.n_ctx = o.n_ctx;
    so.cache = static_cast<latte::LatentStorage>(o.cache_type);
    so.prefill_chunk = o.prefill_chunk;
    if (o.prefill_form == LATTE_PREFILL_NAIVE) so.prefill_form = latte::MlaForm::naive;
    if (o.prefill_form == LATTE_PREFILL_ABSORBED) so.prefill_form = latte::MlaForm::absorbed;
    auto s = std::make_unique<latte_session>();
    s->model = model->model;
    s->session = std::make_unique<latte::Session>(model->model, so);
    *out = s.release();
  });
}

void latte_session_free(latte_session* session) { delete session; }

latte_status latte_session_copy(const latte_session* session, latte_session** out) {
  if (session == nullptr || out == nullptr)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_copy: session and out must not be NULL");
  return guarded([&] {
    auto s = std::make_unique<latte_session>();
    s->model = session->model;
    s->session = session->session->copy();
    *out = s.release();
  });
}

latte_status latte_session_set_threads(latte_session* session, int32_t threads) {
  if (session == nullptr)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_set_threads: session must not be NULL");
  return guarded([&] { session->session->set_threads(threads); });
}

int32_t latte_session_threads(const latte_session* session) { return session ? session->session->threads() : 0; }

latte_status latte_session_set_abort_callback(latte_session* session, latte_abort_callback callback,
                                              void* user_data) {
  if (session == nullptr)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_set_abort_callback: session must not be NULL");
  session->abort = callback;
  session->abort_data = user_data;
  session->session->set_abort(callback ? abort_requested : nullptr, session);
  return LATTE_OK;
}

latte_status latte_session_prefill(latte_session* session, const int32_t* tokens, size_t n_tokens) {
  if (session == nullptr || (tokens == nullptr && n_tokens > 0))
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_prefill: session and tokens must not be NULL");
  return guarded([&] {
    session->session->prefill(std::span<const int32_t>(tokens, n_tokens));
  });
}

latte_status latte_session_step(const latte_step_item* items, size_t n_items) {
  if (items == nullptr && n_items > 0)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_step: items must not be NULL");
  return guarded([&] {  // (messages are built inside: a failed allocation is a status)
    std::vector<latte::Session::StepItem> step(n_items);
    for (size_t i = 0; i < n_items; ++i) {
      if (items[i].session == nullptr || (items[i].tokens == nullptr && items[i].n_tokens > 0))
        throw latte::Error(latte::Status::invalid_argument,
                           "latte_session_step: item " + std::to_string(i) + ": session and tokens must not be NULL");
      step[i] = {items[i].session->session.get(), std::span<const int32_t>(items[i].tokens, items[i].n_tokens)};
    }
    latte::Session::step(step);
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

int32_t latte_session_last_form(const latte_session* session) {
  if (session == nullptr) return 0;
  return session->session->last_form() == latte::MlaForm::naive ? LATTE_PREFILL_NAIVE : LATTE_PREFILL_ABSORBED;
}

int64_t latte_session_last_experts_read(const latte_session* session) {
  return session ? session->session->last_experts_read() : 0;
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

size_t latte_session_state_size(const latte_session* session) {
  return session ? session->session->state_size() : 0;
}

latte_status latte_session_state_save_to(const latte_session* session, void* buf, size_t capacity, size_t* n_out) {
  constexpr const char* fn = "latte_session_state_save_to";
  if (session == nullptr || n_out == nullptr)
    return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": session and n_out must not be NULL");
  const std::size_t need = session->session->state_size();
  *n_out = need;
  if (buf == nullptr && capacity == 0) return LATTE_OK;
  if (buf == nullptr) return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": buffer is NULL with capacity > 0");
  if (capacity < need)
    return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": the buffer holds " + std::to_string(capacity) +
                                                " bytes; the session's state needs " + std::to_string(need));
  return guarded([&] { session->session->save_state_to(std::span(static_cast<std::uint8_t*>(buf), need)); });
}

latte_status latte_session_state_load_from(latte_session* session, const void* buf, size_t size) {
  if (session == nullptr || (buf == nullptr && size > 0))
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_state_load_from: session and buf must not be NULL");
  return guarded([&] {
    session->session->load_state_from(std::span(static_cast<const std::uint8_t*>(buf), size));
  });
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

latte_status latte_sampler_options_init(latte_sampler_options* options, size_t size) {
  return init_options("latte_sampler_options_init", options, size);
}

latte_status latte_sampler_create(const latte_sampler_options* options, latte_sampler** out) {
  if (out == nullptr) return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_sampler_create: out must not be NULL");
  latte_sampler_options p;
  if (latte_status st = read_options("latte_sampler_create", options, p); st != LATTE_OK) return st;
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

latte_status latte_sampler_set_logit_bias(latte_sampler* sampler, const latte_logit_bias* biases, size_t n_biases) {
  if (sampler == nullptr || (biases == nullptr && n_biases > 0))
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_sampler_set_logit_bias: sampler and biases must not be NULL");
  return guarded([&] {
    std::vector<latte::LogitBias> b(n_biases);
    for (std::size_t i = 0; i < n_biases; ++i) b[i] = {biases[i].token, biases[i].bias};
    sampler->sampler.set_logit_bias(b);
  });
}

}  // extern "C"

// ---------------------------------------------------------------- structured output

namespace {

std::shared_ptr<const latte::grammar::VocabIndex> vocab_of(const latte_model* model, const char* fn) {
  const latte::Tokenizer& tok = tokenizer_of(model, fn);
  std::call_once(model->vocab_once, [&] { model->vocab = latte::grammar::VocabIndex::from_tokenizer(tok); });
  return model->vocab;
}

// The constraint grammar_of(text) makes, set on the sampler (text NULL
// clears it); the model gives the vocabulary.
template <class GrammarOf>
latte_status set_constraint(const char* fn, latte_sampler* sampler, const latte_model* model, const char* text,
                            GrammarOf grammar_of) {
  if (sampler == nullptr) return fail(LATTE_ERR_INVALID_ARGUMENT, std::string(fn) + ": sampler must not be NULL");
  return guarded([&] {
    if (text == nullptr) {
      sampler->sampler.set_constraint(nullptr);
      return;
    }
    auto vocab = vocab_of(model, fn);
    auto g = std::make_shared<const latte::grammar::Grammar>(grammar_of(text));
    sampler->sampler.set_constraint(std::make_unique<latte::grammar::TokenConstraint>(std::move(g), std::move(vocab)));
  });
}

}  // namespace

latte_status latte_sampler_set_grammar(latte_sampler* sampler, const latte_model* model, const char* gbnf,
                                       const char* root) {
  return set_constraint("latte_sampler_set_grammar", sampler, model, gbnf,
                        [&](const char* text) { return latte::grammar::parse_gbnf(text, root ? root : "root"); });
}

latte_status latte_sampler_set_json_schema(latte_sampler* sampler, const latte_model* model, const char* schema_json) {
  return set_constraint("latte_sampler_set_json_schema", sampler, model, schema_json,
                        [](const char* text) { return latte::grammar::json_schema_grammar(text); });
}

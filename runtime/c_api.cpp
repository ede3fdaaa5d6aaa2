// The C API (include/latte/latte.h) over Model and Session: every entry point
// catches everything and turns it into a status plus a thread-local message.
#include "latte/latte.h"

#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "runtime/error.h"
#include "runtime/model/session.h"

struct latte_model {
  std::shared_ptr<const latte::Model> model;
};

struct latte_session {
  std::shared_ptr<const latte::Model> model;  // keeps the model alive
  std::unique_ptr<latte::Session> session;
  bool has_logits = false;
};

static_assert(LATTE_ERR_CONTEXT_OVERFLOW == static_cast<int>(latte::Status::context_overflow) &&
              LATTE_ERR_INTERNAL == static_cast<int>(latte::Status::internal) &&
              LATTE_ERR_BAD_FILE == static_cast<int>(latte::Status::bad_file),
              "C status codes mirror latte::Status");
static_assert(LATTE_CACHE_INT8 == static_cast<int>(latte::LatentStorage::int8) &&
              LATTE_CACHE_F16 == static_cast<int>(latte::LatentStorage::f16));

namespace {

thread_local std::string g_last_error;

latte_status fail(latte_status s, std::string msg) {
  g_last_error = std::move(msg);
  return s;
}

// Runs f, mapping every exception to a status and message.
template <class F>
latte_status guarded(F&& f) {
  try {
    f();
    return LATTE_OK;
  } catch (const latte::Error& e) {
    return fail(static_cast<latte_status>(e.status()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(LATTE_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(LATTE_ERR_INTERNAL, e.what());
  } catch (...) {
    return fail(LATTE_ERR_INTERNAL, "unknown error");
  }
}

}  // namespace

extern "C" {

const char* latte_status_string(latte_status status) {
  if (status < LATTE_OK || status > LATTE_ERR_INTERNAL) return "unknown status";
  return latte::status_name(static_cast<latte::Status>(status));
}

const char* latte_last_error(void) { return g_last_error.c_str(); }

latte_model_options latte_model_default_options(void) {
  latte_model_options o;
  o.use_mmap = 1;
  return o;
}

latte_status latte_model_load_with_options(const char* path, const latte_model_options* options,
                                           latte_model** out) {
  if (path == nullptr || out == nullptr)
    return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_model_load: path and out must not be NULL");
  const latte_model_options o = options ? *options : latte_model_default_options();
  if (o.use_mmap != 0 && o.use_mmap != 1)
    return fail(LATTE_ERR_INVALID_ARGUMENT,
                "latte_model_load: use_mmap must be 0 or 1, got " + std::to_string(o.use_mmap));
  return guarded([&] {
    auto m = std::make_unique<latte_model>();
    latte::LoadOptions lo;
    lo.file = o.use_mmap ? latte::GgufLoad::map : latte::GgufLoad::read;
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
    session->has_logits = true;
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
    session->has_logits = true;
  });
}

const float* latte_session_logits(const latte_session* session) {
  if (session == nullptr || !session->has_logits) return nullptr;
  return session->session->logits().data();
}

int64_t latte_session_n_past(const latte_session* session) { return session ? session->session->n_past() : 0; }

int64_t latte_session_n_ctx(const latte_session* session) { return session ? session->session->n_ctx() : 0; }

latte_status latte_session_reset(latte_session* session) {
  if (session == nullptr) return fail(LATTE_ERR_INVALID_ARGUMENT, "latte_session_reset: session must not be NULL");
  return guarded([&] {
    session->session->reset();
    session->has_logits = false;
  });
}

}  // extern "C"

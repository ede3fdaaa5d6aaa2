/* Latte: Multi-Head Latent Attention inference on the CPU. The C API.
 *
 * A model is loaded once (the GGUF file is memory-mapped and read-only) and
 * shared by any number of sessions, each on its own thread. A session holds
 * one sequence: its latent cache and scratch.
 *
 * Every function that can fail returns a latte_status; on failure
 * latte_last_error() gives a message naming what is wrong (thread-local,
 * valid until the next failing call on the same thread). */
#ifndef LATTE_H
#define LATTE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum latte_status {
  LATTE_OK = 0,
  LATTE_ERR_INVALID_ARGUMENT = 1, /* a caller passed something wrong */
  LATTE_ERR_IO = 2,               /* a file could not be opened, read or mapped */
  LATTE_ERR_BAD_FILE = 3,         /* malformed file: truncated, inconsistent, absurd */
  LATTE_ERR_UNSUPPORTED = 4,      /* valid, but not something Latte runs */
  LATTE_ERR_OUT_OF_MEMORY = 5,
  LATTE_ERR_CONTEXT_OVERFLOW = 6, /* more tokens than the session's context */
  LATTE_ERR_INTERNAL = 7
} latte_status;

typedef enum latte_cache_type {
  LATTE_CACHE_F32 = 0,
  LATTE_CACHE_F16 = 1,
  LATTE_CACHE_INT8 = 2
} latte_cache_type;

typedef struct latte_model latte_model;
typedef struct latte_session latte_session;

typedef struct latte_session_options {
  int32_t threads;            /* 1..1024; 0: OpenMP's default (all cores unless OMP_NUM_THREADS says) */
  int64_t n_ctx;              /* context capacity in tokens, up to 2^31 - 1; 0: the model's maximum */
  int32_t cache_type;         /* a latte_cache_type (an int, so any value a caller stores is checked) */
  int32_t prefill_chunk;      /* tokens per prefill chunk (512 by default) */
} latte_session_options;

/* A short name of a status ("context overflow"). */
const char* latte_status_string(latte_status status);
/* The message of the last failed call on this thread ("" if none). */
const char* latte_last_error(void);

typedef struct latte_model_options {
  /* 1 (default): map the file read-only, nothing copied. 0: read it into
   * private memory on huge pages (slower load, the model's size in private
   * memory, ~5-10% faster decode where decode is bound by weight reads). */
  int32_t use_mmap;
} latte_model_options;

latte_model_options latte_model_default_options(void);
/* Loads a GGUF model. *out is set only on success. */
latte_status latte_model_load(const char* path, latte_model** out);
/* The same with options (NULL: the defaults). */
latte_status latte_model_load_with_options(const char* path, const latte_model_options* options,
                                           latte_model** out);
void latte_model_free(latte_model* model); /* NULL is fine */
int32_t latte_model_n_vocab(const latte_model* model);
int64_t latte_model_n_ctx_train(const latte_model* model);
/* "deepseek2", "minicpm3" or "plm". */
const char* latte_model_architecture(const latte_model* model);

latte_session_options latte_session_default_options(void);
/* options may be NULL (defaults). The session keeps the model alive. */
latte_status latte_session_create(latte_model* model, const latte_session_options* options,
                                  latte_session** out);
void latte_session_free(latte_session* session); /* NULL is fine */

/* Feeds tokens at the next positions; afterwards latte_session_logits() holds
 * the last token's logits. On error nothing is consumed: the session keeps
 * its tokens and logits from before the call (also after
 * LATTE_ERR_OUT_OF_MEMORY, after which it stays usable). A logit that comes
 * out NaN or inf (the model's numbers overflow float32) is LATTE_ERR_BAD_FILE. */
latte_status latte_session_prefill(latte_session* session, const int32_t* tokens, size_t n_tokens);
/* Feeds one token. */
latte_status latte_session_decode(latte_session* session, int32_t token);
/* Like prefill, and writes the logits of every token to logits_out
 * (n_tokens * n_vocab floats, row-major). */
latte_status latte_session_eval_all(latte_session* session, const int32_t* tokens, size_t n_tokens,
                                    float* logits_out);
/* The last token's logits (n_vocab floats), NULL before the first token. */
const float* latte_session_logits(const latte_session* session);
int64_t latte_session_n_past(const latte_session* session);
int64_t latte_session_n_ctx(const latte_session* session);
/* Forgets every token. */
latte_status latte_session_reset(latte_session* session);

#ifdef __cplusplus
}
#endif

#endif /* LATTE_H */

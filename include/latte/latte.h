/* Latte: Multi-Head Latent Attention inference on the CPU. The C API.
 *
 * A model is loaded once (the GGUF file is memory-mapped and read-only) and
 * shared by any number of sessions, each on its own thread. A session holds
 * one sequence: its latent cache and scratch.
 *
 * Threads: a session (like a sampler) is used by one thread at a time; calls
 * on one session from two threads at once are not detected and corrupt it.
 * latte_model_free may come while sessions of the model exist (they keep it
 * alive), but not while another thread is in a call given that model. A
 * session runs on threads of its own (`threads`, the caller included; not
 * OpenMP's), which sleep between calls; a thread slow to start (another
 * program on its core) holds no work back, its share runs on the others.
 * Threads the OS refuses make latte_session_create fail (or, with threads 0,
 * the session keeps those that started). In a process forked after a call,
 * calls run on the calling thread alone. Latte leaves the caller's
 * floating-point environment as it was and computes in it: a rounding mode
 * other than to nearest (fesetround) changes the logits, and makes them
 * depend on the thread count (the session's threads keep the mode of the
 * thread that created it, or that last called latte_session_set_threads).
 *
 * Callbacks run on the thread that made the call that runs them, never on
 * the session's own threads and never two at once for one call: a load's
 * progress on latte_model_load's thread; a session's abort callback on the
 * thread in latte_session_prefill, _decode or _eval_all (so it may read a
 * flag another thread sets: that is how another thread stops a call); the
 * log callback on whichever thread logs (any thread with a call in
 * progress: it must be thread-safe). Inside a callback, calls on the
 * object being worked on (the session a callback stops, the model being
 * loaded) are not allowed; other objects' are. The log callback must not
 * call latte_log_set (refused), and messages that calls made inside it
 * would log are dropped. A callback must return: throwing through Latte
 * (C++) or jumping out of it (longjmp) is undefined.
 *
 * Every function that can fail returns a latte_status; on failure
 * latte_last_error() gives a message naming what is wrong (thread-local,
 * valid until the next failing call on the same thread).
 *
 * Options structs (latte_model_options, latte_session_options,
 * latte_sampler_options) begin with `size`, which the *_default_options()
 * calls set to the struct's size in the header the program was built with:
 * start from those and set fields by name, and a program built against
 * this header keeps working with later libraries, whose structs gain
 * fields at the end (the library takes the fields `size` covers and its
 * defaults for the rest). A size of 0 (a struct not from *_default_options)
 * is LATTE_ERR_INVALID_ARGUMENT; a size larger than the library knows (a
 * program built against a newer header than the library it runs with) is
 * LATTE_ERR_UNSUPPORTED. Naming: a struct of settings is *_options, and so
 * is the parameter that passes it. */
#ifndef LATTE_H
#define LATTE_H

#include <stddef.h>
#include <stdint.h>

/* LATTE_API marks the library's exported functions (the shared library
 * exports these and nothing else). On Windows a program using latte.dll
 * defines LATTE_SHARED (latte::latte and latte.pc do) to import them. */
#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(LATTE_BUILDING_LIBRARY) && defined(LATTE_SHARED)
#define LATTE_API __declspec(dllexport)
#elif defined(LATTE_SHARED)
#define LATTE_API __declspec(dllimport)
#else
#define LATTE_API
#endif
#elif defined(__GNUC__)
#define LATTE_API __attribute__((visibility("default")))
#else
#define LATTE_API
#endif

/* The version of this header; latte_version() gives the library's. */
#define LATTE_VERSION_MAJOR 0
#define LATTE_VERSION_MINOR 2
#define LATTE_VERSION_PATCH 0

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
  LATTE_ERR_INTERNAL = 7,
  LATTE_ERR_ABORTED = 8           /* an abort or progress callback stopped the call */
} latte_status;

typedef enum latte_cache_type {
  LATTE_CACHE_F32 = 0,
  LATTE_CACHE_F16 = 1,
  LATTE_CACHE_INT8 = 2,
  LATTE_CACHE_INT4 = 3 /* c_KV at 4 bits (a scale per channel and 512 tokens), k_pe at 8 */
} latte_cache_type;

typedef struct latte_model latte_model;
typedef struct latte_session latte_session;

/* A short name of a status ("context overflow"). */
LATTE_API const char* latte_status_string(latte_status status);
/* The message of the last failed call on this thread ("" if none). */
LATTE_API const char* latte_last_error(void);
/* The kernels the library runs on this CPU: "avx512", "avx2", "neon",
 * "asimd" or "ref" (the best this CPU has, capped by the environment
 * variable LATTE_ISA). NULL where LATTE_ISA names none of those: every
 * session would then fail, and latte_last_error() says why. */
LATTE_API const char* latte_kernels(void);
/* The library's version and the kernels it runs on this CPU: "0.2.0
 * (avx512)" (avx512, avx2, neon, asimd or ref). Its numbers are the
 * LATTE_VERSION_* the library was built with. */
LATTE_API const char* latte_version(void);

/* ---- Log ----------------------------------------------------------------
 * Warnings and notes the library has for the application (a model mapped
 * rather than read into memory and why, a context beyond the model's
 * trained one, kernels slower than the CPU's best, threads the OS refused),
 * what was loaded (info), each failed call's message (error; an aborted
 * call's at info), and details (debug). Silent until a callback is set. */

typedef enum latte_log_level {
  LATTE_LOG_ERROR = 0,
  LATTE_LOG_WARN = 1,
  LATTE_LOG_INFO = 2,
  LATTE_LOG_DEBUG = 3
} latte_log_level;

/* message: one line of UTF-8, no newline, valid during the call. */
typedef void (*latte_log_callback)(latte_log_level level, const char* message, void* user_data);

/* Sets the process's log callback (NULL: silent, the default). Thread-safe;
 * once it returns, the previous callback is no longer running on any
 * thread and is not called again. From inside the log callback:
 * LATTE_ERR_INVALID_ARGUMENT, nothing changed. */
LATTE_API latte_status latte_log_set(latte_log_callback callback, void* user_data);

/* ---- Models --------------------------------------------------------------- */

/* Load progress: called with the bytes done so far and bytes_total, the
 * same in every call of a load; bytes_done never falls, and the last call
 * has bytes_done == bytes_total, once the load is done. Mapped
 * (latte_model_is_mapped 1), bytes_total is the file's size and bytes_done
 * rises as its tensors are checked and bound. Read into memory, bytes_done
 * rises to the file's size as it is read; where this CPU's kernels take
 * weights re-laid out (use_mmap 0 below: interleaved by 16 rows) the load
 * then makes a second pass over the file's bytes to re-lay them out, and
 * bytes_total is twice the file's size: bytes_done rises from the size to
 * twice it, up to the end of each matrix re-laid out (by at most 64 MiB at
 * a time), whatever the file's types (an F32 file has nothing to re-lay
 * out: its second half passes at once). Return nonzero to go on; 0
 * cancels the load in any phase: latte_model_load returns
 * LATTE_ERR_ABORTED, everything it took given back. */
typedef int32_t (*latte_progress_callback)(uint64_t bytes_done, uint64_t bytes_total, void* user_data);

typedef struct latte_model_options {
  size_t size; /* sizeof(latte_model_options), as latte_model_default_options sets it */
  /* -1 (default): read the file into memory where it fits in the memory
   * available with room to spare (its size and 1 GiB, or an eighth of the
   * machine's memory where that is more), else map it.
   * 0: read it into private memory on huge pages, whatever its size: a
   * slower load (seconds per GiB) and the model's size in private memory,
   * faster decode (decode is bound by weight reads), the matrices decode
   * streams re-laid out in place for this CPU's kernels (Q4_K, Q5_K, Q6_K,
   * IQ4_XS, Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL interleaved by 16 rows with
   * AVX-512 VNNI; no second copy; the same results up to float summation
   * order, except that products of 8 to 31 tokens quantize their
   * activations per 256 values there rather than per 32: the interleaved
   * rows take them in their tile kernels, faster than repacking the
   * matrix). Where the page cache could not also hold the file beside the
   * copy, it is asked to let go of what was read.
   * 1: map the file read-only, nothing copied: an instant load, pages
   * shared with other processes. A mapped file truncated or rewritten in
   * place while loaded raises SIGBUS at the next read of a lost page:
   * replace files by rename. latte_model_is_mapped() says which was done. */
  int32_t use_mmap;
  latte_progress_callback progress; /* NULL (default): none */
  void* progress_user_data;         /* passed to progress */
} latte_model_options;

/* Fills the first `size` bytes of *options with the defaults (zeros past
 * the fields this library knows) and sets options->size = size. The
 * *_default_options functions below call it with their struct's size;
 * bindings that cannot use an inline function call it directly. A size the
 * library does not know: LATTE_ERR_UNSUPPORTED (its fields still filled). */
LATTE_API latte_status latte_model_options_init(latte_model_options* options, size_t size);
static inline latte_model_options latte_model_default_options(void) {
  latte_model_options o;
  latte_model_options_init(&o, sizeof o);
  return o;
}
/* Loads a GGUF model. *out is set only on success. */
LATTE_API latte_status latte_model_load(const char* path, latte_model** out);
/* The same with options (NULL: the defaults). */
LATTE_API latte_status latte_model_load_with_options(const char* path, const latte_model_options* options,
                                           latte_model** out);
LATTE_API void latte_model_free(latte_model* model); /* NULL is fine */
LATTE_API int32_t latte_model_n_vocab(const latte_model* model);
LATTE_API int64_t latte_model_n_ctx_train(const latte_model* model);
/* "deepseek2", "minicpm3" or "plm". */
LATTE_API const char* latte_model_architecture(const latte_model* model);
/* 1 if the model's file is mapped, 0 if it was read into memory. */
LATTE_API int32_t latte_model_is_mapped(const latte_model* model);
/* The model's layers, its embedding width (d_model), its parameters (the
 * elements of every tensor in the file) and its file's size in bytes; 0
 * for NULL. */
LATTE_API int32_t latte_model_n_layers(const latte_model* model);
LATTE_API int32_t latte_model_n_embd(const latte_model* model);
LATTE_API int64_t latte_model_n_params(const latte_model* model);
LATTE_API int64_t latte_model_file_size(const latte_model* model);
/* Sizes for benchmarks and memory planning, in bytes, 0 for NULL:
 * decode_bytes, the weights one decode step streams (every matrix a token
 * passes through as decode reads it, n_experts_used routed experts per MoE
 * layer, the output matrix and one embedding row: decode at depth 0 is
 * bound by reading these, so decode_bytes x tokens/s against the machine's
 * read bandwidth is its efficiency); expert_bytes, one routed expert of an
 * MoE layer (gate, up and down; 0 without MoE layers); interleaved_bytes,
 * the weights re-laid out for this CPU's kernels at load (use_mmap 0). */
LATTE_API int64_t latte_model_decode_bytes(const latte_model* model);
LATTE_API int64_t latte_model_expert_bytes(const latte_model* model);
LATTE_API int64_t latte_model_interleaved_bytes(const latte_model* model);
/* The bytes a session's latent cache of cache_type takes holding n_tokens
 * (n_tokens >= 0; every layer, int8 scales and tile tables included), to
 * size a context before creating it. LATTE_ERR_INVALID_ARGUMENT for a NULL
 * model or bytes, an unknown cache type or a negative n_tokens;
 * LATTE_ERR_UNSUPPORTED, saying why, for a cache type the model's shape
 * cannot hold (such a session would fail too). */
LATTE_API latte_status latte_model_cache_bytes(const latte_model* model, int32_t cache_type, int64_t n_tokens,
                                               int64_t* bytes);
/* general.name, or the file's name where the file has none; valid while
 * the model is ("" for NULL). */
LATTE_API const char* latte_model_name(const latte_model* model);
/* The GGUF metadata: latte_model_meta_count keys, each one's name by its
 * index in the file (0 <= index < count) and any key's value as text:
 * strings as they are, integers in decimal, floats in the shortest decimal
 * that reads back as the same value ("0.1", "1e-06", "inf", "nan"), bools
 * as true or false, arrays as [a, b, c] with their strings quoted and
 * escaped as JSON strings (["a", "b"]; tokenizer.ggml.tokens is then the
 * whole vocabulary). Buffer rules as for latte_tokenize (below). A
 * key the file does not have, or an index out of range, is
 * LATTE_ERR_INVALID_ARGUMENT naming it. */
LATTE_API int64_t latte_model_meta_count(const latte_model* model);
LATTE_API latte_status latte_model_meta_key(const latte_model* model, int64_t index, char* buf, size_t capacity,
                                            size_t* n_out);
LATTE_API latte_status latte_model_meta_value(const latte_model* model, const char* key, char* buf, size_t capacity,
                                              size_t* n_out);

/* What the model is, as Latte reads it (`latte info` prints it): its
 * attention, RoPE, feed-forward and tokenizer, resolved from the GGUF keys
 * (defaults and derived values included). Strings are valid while the
 * model is. */
typedef struct latte_model_desc {
  size_t size;                 /* sizeof(latte_model_desc): set it before latte_model_describe */
  /* Attention. */
  int32_t n_heads;
  int32_t q_lora_rank;         /* 0: the query is not compressed */
  int32_t kv_lora_rank;        /* d_c, the latent's width */
  int32_t d_nope, d_rope, d_v; /* per head: the key's position-free and RoPE parts, the value */
  int32_t kv_split;            /* 1: attn_k_b and attn_v_b; 0: the legacy attn_kv_b */
  float kq_scale;              /* the score scale (YaRN's included) */
  /* RoPE. */
  int32_t rope_consecutive;    /* 1: rotates consecutive pairs; 0: the halves */
  float rope_freq_base;
  int32_t rope_yarn;           /* 1: YaRN scaling, with the three below */
  float yarn_factor, yarn_orig_ctx, yarn_log_multiplier;
  /* Feed-forward. */
  const char* ffn;             /* "swiglu" or "relu2" (squared ReLU) */
  int32_t ff_dense;            /* the dense layers' width */
  int32_t n_leading_dense;     /* dense layers before the MoE ones */
  int32_t n_experts, n_experts_used, n_experts_shared, ff_expert; /* 0 without MoE */
  int32_t n_expert_groups;     /* 0 or 1: no group limit */
  const char* gating;          /* "softmax" or "sigmoid"; "" without MoE */
  /* The file. */
  uint32_t gguf_version;
  int64_t n_tensors;
  int64_t mapped_weight_bytes; /* weights used in place, from the file */
  int64_t packed_weight_bytes; /* weights Latte re-laid out at load */
  /* The tokenizer ("" for both without one). */
  const char* tokenizer;       /* "bpe" (byte-level) or "spm" (SentencePiece) */
  const char* pre_tokenizer;   /* tokenizer.ggml.pre, "" where the file has none */
} latte_model_desc;
/* Fills *desc (the fields its size covers). NULL model or desc, or a size
 * of 0: LATTE_ERR_INVALID_ARGUMENT; a size larger than the library knows:
 * LATTE_ERR_UNSUPPORTED. */
LATTE_API latte_status latte_model_describe(const latte_model* model, latte_model_desc* desc);

/* The file's tensors: latte_model_tensor_count of them, each by its index
 * in the file. Strings are valid while the model is. */
typedef struct latte_tensor_info {
  const char* name;
  const char* type;    /* the GGML type's name: "Q4_K", "F16", ... */
  int32_t n_dims;
  int64_t dims[4];     /* dims[0] is contiguous; the unused ones are 1 */
  int64_t n_bytes;
} latte_tensor_info;
LATTE_API int64_t latte_model_tensor_count(const latte_model* model); /* 0 for NULL */
/* An index out of range: LATTE_ERR_INVALID_ARGUMENT naming it. */
LATTE_API latte_status latte_model_tensor(const latte_model* model, int64_t index, latte_tensor_info* info);

/* latte_model_cache_bytes for a shape, without the model: n_layers layers
 * of latents kv_lora_rank + d_rope wide (plan memory for a file not
 * downloaded). A cache type the shape cannot hold (int8 needs widths in
 * multiples of 4) is LATTE_ERR_UNSUPPORTED saying why. */
LATTE_API latte_status latte_cache_bytes(int32_t n_layers, int32_t kv_lora_rank, int32_t d_rope, int32_t cache_type,
                                         int64_t n_tokens, int64_t* bytes);

/* ---- Sessions ------------------------------------------------------------- */

/* The two forms of attention over a prompt chunk: naive expands the cached
 * latents into every head's keys and values (less work for a long chunk
 * over a short cache), absorbed folds the up-projections into the query and
 * the output (decode's form, less work deep in a context). AUTO lets a cost
 * model pick each chunk's; forcing one is for comparing them (the logits
 * agree up to float summation order). */
typedef enum latte_prefill_form {
  LATTE_PREFILL_AUTO = 0,
  LATTE_PREFILL_NAIVE = 1,
  LATTE_PREFILL_ABSORBED = 2
} latte_prefill_form;

typedef struct latte_session_options {
  size_t size;                /* sizeof(latte_session_options), as latte_session_default_options sets it */
  int32_t threads;            /* 1..1024; 0: one per CPU the process may use, as many as start */
  int64_t n_ctx;              /* context capacity in tokens, up to 2^31 - 1; 0: the model's maximum;
                                 4096 by default, whatever the model: cap it at latte_model_n_ctx_train
                                 where that is smaller (beyond it the model was not trained; latte run
                                 does so and warns when told to go past it) */
  int32_t cache_type;         /* a latte_cache_type (an int, so any value a caller stores is checked) */
  int32_t prefill_chunk;      /* tokens per prefill chunk (512 by default) */
  int32_t prefill_form;       /* a latte_prefill_form: LATTE_PREFILL_AUTO (default) or one forced */
} latte_session_options;

/* As latte_model_options_init, for session options. */
LATTE_API latte_status latte_session_options_init(latte_session_options* options, size_t size);
static inline latte_session_options latte_session_default_options(void) {
  latte_session_options o;
  latte_session_options_init(&o, sizeof o);
  return o;
}
/* options may be NULL (defaults). The session keeps the model alive. */
LATTE_API latte_status latte_session_create(latte_model* model, const latte_session_options* options,
                                  latte_session** out);
LATTE_API void latte_session_free(latte_session* session); /* NULL is fine */
/* A new session of the same model and options (threads, context, cache
 * type, chunk, context shift; not the abort callback) holding a copy of
 * this one's tokens, latent cache and logits: a fork of the conversation.
 * Each then goes on alone, and computes exactly what the original would
 * have. *out is set only on success. */
LATTE_API latte_status latte_session_copy(const latte_session* session, latte_session** out);
/* Runs the session on `threads` threads from now on (1..1024; 0: one per
 * CPU the process may use, as many as start): the session's pool is
 * replaced (its threads then take the floating-point mode of the calling
 * thread). The logits are bit-identical on any thread count, except where
 * a token attends to more than 128 cached tokens in a decode (or in a
 * prefill chunk of fewer tokens than threads): that context is cut into
 * parts for the threads, as many as their count asks, and the merged
 * parts' sums differ in their last bits (f32, f16 caches) or by int8
 * rounding (int8 cache). Threads the OS refuses are
 * LATTE_ERR_OUT_OF_MEMORY, the session unchanged. */
LATTE_API latte_status latte_session_set_threads(latte_session* session, int32_t threads);
/* The threads the session runs on (0 for NULL). */
LATTE_API int32_t latte_session_threads(const latte_session* session);

/* Stops a call: return nonzero to abort it. */
typedef int32_t (*latte_abort_callback)(void* user_data);
/* Sets the session's abort callback (NULL: none, as a session starts).
 * latte_session_prefill, _decode and _eval_all call it on their thread
 * before they change anything and then at the start of every layer of
 * every chunk of tokens; when it returns nonzero the call returns
 * LATTE_ERR_ABORTED within the time of one layer, the session as it was
 * before the call (tokens, cache, logits; a context shift the call made
 * first stays, as for any other error). Keep it cheap: it runs once per
 * layer and chunk. */
LATTE_API latte_status latte_session_set_abort_callback(latte_session* session, latte_abort_callback callback,
                                                        void* user_data);

/* Feeds tokens at the next positions; afterwards latte_session_logits() holds
 * the last token's logits. On error nothing is consumed: the session keeps
 * its tokens and logits from before the call (also after
 * LATTE_ERR_OUT_OF_MEMORY, after which it stays usable, and after
 * LATTE_ERR_ABORTED, the abort callback's stop). A logit that comes out NaN
 * or inf (the model's numbers overflow float32) is LATTE_ERR_BAD_FILE. */
LATTE_API latte_status latte_session_prefill(latte_session* session, const int32_t* tokens, size_t n_tokens);
/* Feeds one token. */
LATTE_API latte_status latte_session_decode(latte_session* session, int32_t token);
/* Like prefill, and writes the logits of every token to logits_out
 * (n_tokens * n_vocab floats, row-major). */
LATTE_API latte_status latte_session_eval_all(latte_session* session, const int32_t* tokens, size_t n_tokens,
                                    float* logits_out);
/* One session's part of latte_session_step: tokens at its next positions. */
typedef struct latte_step_item {
  latte_session* session;
  const int32_t* tokens;
  size_t n_tokens;
} latte_step_item;
/* Advances several sessions of one model in one step, each by its own
 * tokens: a decoded token, or a chunk of a prompt (at most the session's
 * prefill_chunk tokens; feed a long prompt chunk by chunk across steps).
 * Every weight is read once for all of them, so n sequences decode in far
 * less than n times one's time; each attends over its own cache, and
 * afterwards each one's latte_session_logits() holds its last token's
 * logits. This is continuous batching: sessions join and leave between
 * steps, some decoding while another prefills. The step runs on the first
 * item's session's threads, and none of the sessions may be in another call
 * meanwhile. Each one's logits equal what it computes alone up to float
 * summation order (the weight products sum a row in an order that depends
 * on how many rows they have; tests bound the difference at NMSE 1e-8 with
 * f32 and f16 caches, 1e-5 with int8). Each session's context shift
 * applies as in prefill. LATTE_ERR_INVALID_ARGUMENT (naming the item) for
 * no items, a NULL session or tokens, a session twice, sessions of
 * different models, no tokens, a chunk longer than the session's
 * prefill_chunk or an id outside the vocabulary; LATTE_ERR_CONTEXT_OVERFLOW;
 * LATTE_ERR_ABORTED where any session's abort callback asks. On any error
 * every session is as before the call (except context shifts made). */
LATTE_API latte_status latte_session_step(const latte_step_item* items, size_t n_items);
/* What the session's last prefill, decode, eval_all or step did, for
 * benchmarks (0 for NULL): the form its last chunk of tokens ran in
 * (LATTE_PREFILL_NAIVE or LATTE_PREFILL_ABSORBED; a decode is absorbed, and
 * so is a session that ran nothing yet), and the routed experts it read,
 * summed over the MoE layers (a step's, on its first item's session: with
 * latte_model_expert_bytes, the expert bytes it streamed; 0 for a model
 * without MoE layers). */
LATTE_API int32_t latte_session_last_form(const latte_session* session);
LATTE_API int64_t latte_session_last_experts_read(const latte_session* session);
/* The last token's logits (n_vocab floats), NULL before the first token. */
LATTE_API const float* latte_session_logits(const latte_session* session);
LATTE_API int64_t latte_session_n_past(const latte_session* session);
LATTE_API int64_t latte_session_n_ctx(const latte_session* session);
/* Forgets every token. */
LATTE_API latte_status latte_session_reset(latte_session* session);
/* Forgets the tokens at positions >= n_tokens (0 <= n_tokens <= n_past), to
 * regenerate a reply or edit the end of a conversation without recomputing
 * what comes before. When tokens are cut the logits go with them
 * (latte_session_logits is NULL) until the next token is fed: to sample
 * position k again, truncate to k - 1 and feed token k - 1. */
LATTE_API latte_status latte_session_truncate(latte_session* session, int64_t n_tokens);
/* Context shift: forgets the n_discard tokens after the first n_keep and
 * moves the later ones down, so a conversation goes on past the context
 * while keeping its start (system prompt, BOS). The cached latents move as
 * they are; only their 64 RoPE dimensions (k_pe) are turned back by
 * n_discard positions with the model's RoPE (exact up to rounding: f32 and
 * f16 rows turn in place, int8 rows are requantized with a fresh k_pe scale).
 * Needs n_keep >= 0, n_discard >= 0 and n_keep + n_discard <= n_past, else
 * LATTE_ERR_INVALID_ARGUMENT and nothing changes. n_discard 0 changes
 * nothing; n_keep + n_discard == n_past is latte_session_truncate(n_keep).
 * Otherwise the last token stays and so do its logits (computed before the
 * shift). The kept rows after n_keep were computed with the dropped tokens in
 * view: the session computes what a model that had seen them would, not what
 * a fresh prefill of the kept tokens would (latte_session_n_unshifted). */
LATTE_API latte_status latte_session_shift(latte_session* session, int64_t n_keep, int64_t n_discard);
/* Automatic shift, off when a session is created: with enable 1, a prefill,
 * decode or eval_all that would overflow the context first shifts it,
 * keeping the first n_keep tokens (n_keep >= 0) and dropping half of the rest
 * (more where the new tokens need it); still LATTE_ERR_CONTEXT_OVERFLOW where
 * they do not fit beside the n_keep kept. A shift made by a call stays if the
 * call then fails evaluating its tokens (out of memory, a non-finite logit).
 * enable 0 turns it off. */
LATTE_API latte_status latte_session_set_context_shift(latte_session* session, int32_t enable, int64_t n_keep);
/* The leading tokens whose cache is what a fresh prefill of them would give:
 * n_past until a shift, then at most that shift's n_keep (until truncated to
 * it). Reuse a session as the cache of a new prompt only up to here. Session
 * files keep it. */
LATTE_API int64_t latte_session_n_unshifted(const latte_session* session);
/* The tokens in the session, in order (n_past of them); buffer rules as for
 * latte_tokenize below. */
LATTE_API latte_status latte_session_tokens(const latte_session* session, int32_t* tokens, size_t capacity, size_t* n_out);
/* Saves the session (its tokens, its latent cache as stored, its logits) to
 * a file (mode 0600: it holds the conversation), written to a temporary of
 * its own beside it, flushed to disk and renamed over it: an interrupted
 * save, or another saving to the same path at once, never leaves a mixed
 * file. Only a regular file is replaced: a path naming a device, FIFO,
 * socket or directory is refused (LATTE_ERR_IO), and a symbolic link is
 * followed (its target, which must be a regular file, is replaced; the link
 * stays). Loading it into a session of the same model and cache type resumes
 * the context without computing it again, and computes exactly what the
 * saved session would have. A file names its model by a hash of every byte
 * of the model file, computed on the first save or load of a session of
 * that model (a pass over the whole file) and kept. Load refuses a file of
 * another model, even one of the same shapes or with one weight edited
 * (LATTE_ERR_INVALID_ARGUMENT), another cache type or, for models with two
 * RoPE factor sets (MiniCPM3), a context on the other side of the model's
 * switch between them (the same), more tokens than the context
 * (LATTE_ERR_CONTEXT_OVERFLOW), one of a format version this build does
 * not read (it writes version 5 and reads 4 too, but not a version 4 file
 * of an int4 cache, whose tiles scaled each token where version 5 scales
 * each latent channel per tile; nor those written before that hash was
 * included) (LATTE_ERR_UNSUPPORTED), and one that is
 * not a session file, is truncated or damaged anywhere (its checksum is
 * verified before any field is judged) or holds a value its model cannot
 * write (LATTE_ERR_BAD_FILE, naming the field); a refused load changes
 * nothing. An empty or NULL path is LATTE_ERR_INVALID_ARGUMENT, for save
 * and load. */
LATTE_API latte_status latte_session_save(const latte_session* session, const char* path);
LATTE_API latte_status latte_session_load(latte_session* session, const char* path);
/* The same state in memory, byte for byte a session file's: its size (0
 * for NULL), written to a caller's buffer (buffer rules as for
 * latte_tokenize, in bytes and without a NUL), and loaded back with every
 * check and status of latte_session_load (the model's hash computed first,
 * as for files). */
LATTE_API size_t latte_session_state_size(const latte_session* session);
LATTE_API latte_status latte_session_state_save_to(const latte_session* session, void* buf, size_t capacity,
                                                   size_t* n_out);
LATTE_API latte_status latte_session_state_load_from(latte_session* session, const void* buf, size_t size);

/* ---- Text: the model's tokenizer ------------------------------------------
 * A model file without tokenizer metadata (tokenizer.ggml.*) runs on token
 * ids alone: these calls then return LATTE_ERR_UNSUPPORTED.
 *
 * Calls that fill a caller's buffer set *n_out to the size the result needs
 * (tokens, or bytes without the terminating NUL). With buf NULL and capacity
 * 0 they only do that and return LATTE_OK; a buffer too small is
 * LATTE_ERR_INVALID_ARGUMENT, with *n_out still set and nothing written.
 * Text comes back as bytes plus a NUL (capacity >= *n_out + 1); it can hold
 * NUL bytes and, where tokens cut a character, incomplete UTF-8. */

LATTE_API int32_t latte_model_has_tokenizer(const latte_model* model); /* 1 or 0 */
/* Text to token ids. add_bos: 1 prepends BOS (an error if the vocabulary has
 * none), 0 does not, -1 as the file says (tokenizer.ggml.add_bos_token).
 * parse_special: 1 turns the text of control tokens ("<|im_end|>") into those
 * tokens, 0 keeps it text (user input). */
LATTE_API latte_status latte_tokenize(const latte_model* model, const char* text, size_t text_len, int32_t add_bos,
                            int32_t parse_special, int32_t* tokens, size_t capacity, size_t* n_out);
/* Token ids to text. hide_control: 1 leaves out control tokens (BOS, EOS,
 * chat markers). */
LATTE_API latte_status latte_detokenize(const latte_model* model, const int32_t* tokens, size_t n_tokens,
                              int32_t hide_control, char* text, size_t capacity, size_t* n_out);
/* The bytes of one token, for streaming (join pieces before decoding UTF-8). */
LATTE_API latte_status latte_token_to_piece(const latte_model* model, int32_t token, int32_t hide_control, char* buf,
                                  size_t capacity, size_t* n_out);
LATTE_API int32_t latte_token_bos(const latte_model* model); /* -1: none (or no tokenizer) */
LATTE_API int32_t latte_token_eos(const latte_model* model); /* -1: none */
/* 1 for the tokens that end a reply: EOS, end-of-turn tokens (<|im_end|> ...). */
LATTE_API int32_t latte_token_is_end_of_generation(const latte_model* model, int32_t token);

/* ---- Chat -------------------------------------------------------------------
 * Formats: "deepseek2" (User: / Assistant:), "deepseek3" (<｜User｜> /
 * <｜Assistant｜>), "chatml" (<|im_start|>: MiniCPM3, PLM). */

typedef struct latte_chat_message {
  const char* role;    /* "system", "user" or "assistant" */
  const char* content;
} latte_chat_message;

/* The format the model's chat template writes; NULL (latte_last_error() says
 * why) when its template is none of the three, or it has no tokenizer. */
LATTE_API const char* latte_chat_format(const latte_model* model);
/* The messages as text in `format` (NULL: latte_chat_format's), then the
 * assistant's opening when add_generation_prompt is 1. Tokenize the text with
 * parse_special = 1; *add_bos (may be NULL) says whether a conversation in
 * this format starts with BOS: pass it as add_bos for its first text.
 * Tokenized so, content that spells a control token ("<|im_end|>", the EOS
 * text) becomes that token: for content from users, use latte_chat_tokenize. */
LATTE_API latte_status latte_chat_apply(const latte_model* model, const char* format, const latte_chat_message* messages,
                              size_t n_messages, int32_t add_generation_prompt, char* text, size_t capacity,
                              size_t* n_out, int32_t* add_bos);
/* The tokens of latte_chat_apply's text, with control tokens taken only from
 * the format's own markers: a message's content stays text whatever it
 * spells, so a user cannot end a turn or open another role. add_bos: 1
 * prepends BOS, 0 does not, -1 as the format starts a conversation. Buffer
 * rules as for latte_tokenize. */
LATTE_API latte_status latte_chat_tokenize(const latte_model* model, const char* format, const latte_chat_message* messages,
                                 size_t n_messages, int32_t add_generation_prompt, int32_t add_bos, int32_t* tokens,
                                 size_t capacity, size_t* n_out);

/* The tokens of a conversation's next turn, for a session that holds the
 * conversation so far: what still closes the reply whose last token in the
 * session is last_token (nothing after an end-of-generation token the
 * session was fed, chatml's "\n" after <|im_end|>, the format's whole reply
 * end when the reply was cut short or last_token is -1), then `messages`
 * (the new turns: usually one user message) and the assistant's opening
 * when add_generation_prompt is 1; never BOS. Prefilled after the session's
 * tokens, they compute only the new turn, and the model reads the reply as
 * it wrote it (a reply rendered back to text and tokenized again can come
 * out as other tokens, and the session then recomputes it). Control tokens
 * and buffer rules as latte_chat_tokenize; start a conversation with that. */
LATTE_API latte_status latte_chat_tokenize_turn(const latte_model* model, const char* format, int32_t last_token,
                                      const latte_chat_message* messages, size_t n_messages,
                                      int32_t add_generation_prompt, int32_t* tokens, size_t capacity,
                                      size_t* n_out);

/* ---- Sampling ---------------------------------------------------------------
 * Logit bias, repetition penalty, then greedy (temperature 0) or top-k ->
 * top-p -> min-p -> temperature -> a draw from a generator seeded with
 * `seed` (the same seed and logits give the same tokens on every platform).
 * A sampler is one sequence's: use one per thread. */

typedef struct latte_sampler latte_sampler;

typedef struct latte_sampler_options {
  size_t size;           /* sizeof(latte_sampler_options), as latte_sampler_default_options sets it */
  float temperature;     /* >= 0; 0: greedy (0.8) */
  int32_t top_k;         /* >= 0; 0: off (40) */
  float top_p;           /* (0, 1]; 1: off (0.95) */
  float min_p;           /* [0, 1]; 0: off (0.05) */
  float repeat_penalty;  /* > 0; 1: off (1) */
  int32_t repeat_last_n; /* >= 0: tokens the penalty looks back over (64) */
  uint64_t seed;
} latte_sampler_options;

/* As latte_model_options_init, for sampler options. */
LATTE_API latte_status latte_sampler_options_init(latte_sampler_options* options, size_t size);
static inline latte_sampler_options latte_sampler_default_options(void) {
  latte_sampler_options o;
  latte_sampler_options_init(&o, sizeof o);
  return o;
}
/* options may be NULL (defaults); a value out of range is an error naming it. */
LATTE_API latte_status latte_sampler_create(const latte_sampler_options* options, latte_sampler** out);
LATTE_API void latte_sampler_free(latte_sampler* sampler); /* NULL is fine */
/* Picks a token from n_logits logits (latte_session_logits: n_vocab) and
 * adds it to the penalty's history. NaN logits are an error. */
LATTE_API latte_status latte_sampler_sample(latte_sampler* sampler, const float* logits, size_t n_logits, int32_t* token);
/* Adds a token to the history without drawing (a prompt's tokens). It does
 * not advance a grammar: a grammar constrains the generated output alone. */
LATTE_API latte_status latte_sampler_accept(latte_sampler* sampler, int32_t token);
/* Clears the history, re-seeds with `seed`, and puts a grammar back at the
 * start of the output. */
LATTE_API latte_status latte_sampler_reset(latte_sampler* sampler, uint64_t seed);

typedef struct latte_logit_bias {
  int32_t token;
  float bias; /* added to the token's logit; -INFINITY: never sampled */
} latte_logit_bias;
/* Sets the biases every later latte_sampler_sample adds to the logits before
 * anything else (the repetition penalty included), replacing those set
 * before (n_biases 0: none). A token named twice gets the sum. A
 * negative token, a NaN or +inf bias is LATTE_ERR_INVALID_ARGUMENT, nothing
 * changed; a token outside the logits is refused by latte_sampler_sample.
 * Sampling fails when every token is banned. latte_sampler_reset keeps
 * them. */
LATTE_API latte_status latte_sampler_set_logit_bias(latte_sampler* sampler, const latte_logit_bias* biases,
                                                    size_t n_biases);

/* ---- Structured output ------------------------------------------------------
 * A grammar the output must follow (docs/structured-output.md): every later
 * latte_sampler_sample picks only tokens that continue a valid parse,
 * whatever the other settings (a token the grammar refuses is never
 * sampled), allows end-of-generation tokens only where the grammar may end,
 * and only those once it is complete. latte_sampler_sample advances the
 * grammar over the token it returns; latte_sampler_accept does not (the
 * prompt is not output). Tokens the grammar refuses include control tokens
 * other than end-of-generation ones. The model gives the vocabulary's bytes
 * (it must have a tokenizer); the sampler keeps what it needs, so the model
 * may be freed after. Setting one replaces the grammar or schema set before;
 * on failure (latte_last_error names the line and column, or the keyword)
 * the sampler keeps what it had. A grammar no token can start is refused
 * here; one that later reaches a point no token continues makes
 * latte_sampler_sample fail saying so. */

/* A GBNF grammar (llama.cpp's syntax), starting at rule `root` (NULL:
 * "root"). gbnf NULL clears the constraint (model may then be NULL). */
LATTE_API latte_status latte_sampler_set_grammar(latte_sampler* sampler, const latte_model* model, const char* gbnf,
                                                 const char* root);
/* A JSON Schema the output must validate against (the supported keywords:
 * docs/structured-output.md; one that constrains but is not supported is
 * refused by name). "{\"type\":\"object\"}" is any JSON object (OpenAI's
 * json_object), "{}" any JSON value. schema_json NULL clears the constraint. */
LATTE_API latte_status latte_sampler_set_json_schema(latte_sampler* sampler, const latte_model* model,
                                                     const char* schema_json);

#ifdef __cplusplus
}
#endif

#endif /* LATTE_H */

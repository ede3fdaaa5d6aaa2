/* The C API's control calls from C99 alone (the standard latte.h promises):
 * the version, the log, load progress, model metadata, an abort callback,
 * threads, a session's state in memory and a fork, four sessions stepped
 * together against each alone, and logit bias. Usage:
 *   control MODEL
 * Exits 0 when every check holds, 1 naming the first that does not. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "latte/latte.h"

static int failures = 0;

static void expect(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "control: %s (last error: %s)\n", what, latte_last_error());
    ++failures;
  }
}

struct log_count {
  int warn_or_error;
  int info;
};

static void on_log(latte_log_level level, const char* message, void* user_data) {
  struct log_count* c = (struct log_count*)user_data;
  if (level <= LATTE_LOG_WARN) ++c->warn_or_error;
  else if (level == LATTE_LOG_INFO) ++c->info;
  (void)message;
}

struct progress {
  uint64_t last_done, total;
  int calls;
};

static int32_t on_progress(uint64_t done, uint64_t total, void* user_data) {
  struct progress* p = (struct progress*)user_data;
  if (done < p->last_done || done > total) return 0; /* not rising: stop, and the check below fails */
  p->last_done = done;
  p->total = total;
  ++p->calls;
  return 1;
}

/* Stops the call once it has been asked `stop_at` times. */
struct abort_after {
  int calls, stop_at;
};

static int32_t on_abort(void* user_data) {
  struct abort_after* a = (struct abort_after*)user_data;
  return ++a->calls >= a->stop_at;
}

static int same_logits(const latte_session* a, const latte_session* b, size_t n_vocab) {
  const float* la = latte_session_logits(a);
  const float* lb = latte_session_logits(b);
  return la && lb && memcmp(la, lb, n_vocab * sizeof *la) == 0;
}

/* The NMSE of a's logits against b's. */
static double nmse(const latte_session* a, const latte_session* b, size_t n_vocab) {
  const float* la = latte_session_logits(a);
  const float* lb = latte_session_logits(b);
  double num = 0, den = 0;
  size_t k;
  if (!la || !lb) return INFINITY;
  for (k = 0; k < n_vocab; ++k) {
    num += ((double)la[k] - lb[k]) * ((double)la[k] - lb[k]);
    den += (double)lb[k] * lb[k];
  }
  return den > 0 ? num / den : INFINITY;
}

/* Four sessions stepped together (prompts of different lengths, then
 * decoded tokens) against the same four run alone: each step's logits
 * agree within the step's bound for an int8 cache (NMSE 1e-5). */
static void step_four(latte_model* model, const latte_session_options* so, const int32_t* tokens, size_t n_vocab) {
  latte_session *together[4] = {NULL, NULL, NULL, NULL}, *alone[4] = {NULL, NULL, NULL, NULL};
  latte_step_item items[4];
  const size_t prompt[4] = {7, 1, 8, 5};  /* within the prefill chunk (8 here) */
  double worst = 0;
  int k, j;
  for (k = 0; k < 4; ++k)
    expect(latte_session_create(model, so, &together[k]) == LATTE_OK &&
               latte_session_create(model, so, &alone[k]) == LATTE_OK,
           "the stepped sessions");
  for (j = 0; j < 4 && failures == 0; ++j) {  /* step 0: the prompts; then a decoded token each */
    for (k = 0; k < 4; ++k) {
      items[k].session = together[k];
      items[k].tokens = j == 0 ? tokens + k : tokens + 30 + 4 * j + k;
      items[k].n_tokens = j == 0 ? prompt[k] : 1;
      expect(latte_session_prefill(alone[k], items[k].tokens, items[k].n_tokens) == LATTE_OK, "alone");
    }
    expect(latte_session_step(items, 4) == LATTE_OK, "latte_session_step of four sessions");
    for (k = 0; k < 4; ++k) {
      const double e = nmse(together[k], alone[k], n_vocab);
      if (e > worst) worst = e;
      expect(latte_session_n_past(together[k]) == latte_session_n_past(alone[k]), "the same positions");
    }
  }
  expect(worst <= 1e-5, "four sessions stepped together compute what each computes alone");
  /* A session given twice is refused, naming the item; nothing moves. */
  items[1].session = together[0];
  expect(latte_session_step(items, 2) == LATTE_ERR_INVALID_ARGUMENT && strstr(latte_last_error(), "item 1") != NULL,
         "a session twice in a step is refused");
  expect(latte_session_n_past(together[0]) == latte_session_n_past(alone[0]), "the refused step changed nothing");
  for (k = 0; k < 4; ++k) {
    latte_session_free(together[k]);
    latte_session_free(alone[k]);
  }
}

int main(int argc, char** argv) {
  latte_model* model = NULL;
  latte_session *s = NULL, *fork = NULL, *loaded = NULL;
  latte_sampler* smp = NULL;
  unsigned char* state = NULL;
  struct log_count logs = {0, 0};
  struct progress prog = {0, 0, 0};
  latte_model_options mo = latte_model_default_options();
  latte_session_options so = latte_session_default_options();
  latte_sampler_options sp = latte_sampler_default_options();
  char text[256], version[64];
  size_t n = 0, n_vocab, state_size;
  int32_t tokens[64];
  int i;
  if (argc != 2) {
    fprintf(stderr, "usage: control MODEL\n");
    return 2;
  }

  /* The version: the header's numbers, then the kernels. */
  sprintf(version, "%d.%d.%d (", LATTE_VERSION_MAJOR, LATTE_VERSION_MINOR, LATTE_VERSION_PATCH);
  expect(strncmp(latte_version(), version, strlen(version)) == 0, "latte_version starts with LATTE_VERSION_*");
  expect(mo.size == sizeof mo && so.size == sizeof so && sp.size == sizeof sp, "default options set their size");

  /* Load with a log and progress. */
  expect(latte_log_set(on_log, &logs) == LATTE_OK, "latte_log_set");
  mo.progress = on_progress;
  mo.progress_user_data = &prog;
  if (latte_model_load_with_options(argv[1], &mo, &model) != LATTE_OK) {
    fprintf(stderr, "control: load: %s\n", latte_last_error());
    return 1;
  }
  /* To the file's size; read into memory, twice it where the CPU's kernels
   * take weights re-laid out (the second pass). */
  expect(prog.calls >= 2 && prog.last_done == prog.total &&
             ((int64_t)prog.total == latte_model_file_size(model) ||
              (!latte_model_is_mapped(model) && (int64_t)prog.total == 2 * latte_model_file_size(model))),
         "progress rises to the file's size (twice it with the re-layout's pass)");
  expect(logs.info >= 1, "the load is logged");
  n_vocab = (size_t)latte_model_n_vocab(model);

  /* Metadata. */
  expect(latte_model_meta_value(model, "general.architecture", text, sizeof text, &n) == LATTE_OK &&
             strcmp(text, latte_model_architecture(model)) == 0,
         "general.architecture as text");
  expect(latte_model_meta_value(model, "no.such.key", NULL, 0, &n) == LATTE_ERR_INVALID_ARGUMENT,
         "a missing key is refused");
  expect(latte_model_meta_count(model) > 0 && latte_model_meta_key(model, 0, text, sizeof text, &n) == LATTE_OK,
         "the first key");
  expect(latte_model_n_layers(model) > 0 && latte_model_n_embd(model) > 0 && latte_model_n_params(model) > 0 &&
             latte_model_name(model)[0] != '\0',
         "layers, width, parameters, name");

  /* A prefill stopped by its abort callback leaves the session as it was. */
  so.n_ctx = 256;
  so.prefill_chunk = 8;
  so.threads = 2;
  so.cache_type = LATTE_CACHE_INT8;
  expect(latte_session_create(model, &so, &s) == LATTE_OK, "session");
  if (!s) return 1;
  for (i = 0; i < 64; ++i) tokens[i] = (int32_t)((i * 37 + 11) % (int)n_vocab);
  expect(latte_session_prefill(s, tokens, 10) == LATTE_OK, "prefill 10");
  {
    struct abort_after a;
    a.calls = 0;
    a.stop_at = 2 + latte_model_n_layers(model); /* in the second chunk */
    expect(latte_session_set_abort_callback(s, on_abort, &a) == LATTE_OK, "set abort");
    expect(latte_session_prefill(s, tokens + 10, 40) == LATTE_ERR_ABORTED, "the prefill is aborted");
    expect(a.calls == a.stop_at, "the callback is asked until it says stop");
    expect(latte_session_n_past(s) == 10, "the aborted prefill consumed nothing");
    expect(latte_session_set_abort_callback(s, NULL, NULL) == LATTE_OK, "clear abort");
  }

  /* Threads: another count, the same logits. */
  expect(latte_session_set_threads(s, 1) == LATTE_OK && latte_session_threads(s) == 1, "set_threads 1");

  /* A fork and a state in memory continue as the original does. */
  expect(latte_session_copy(s, &fork) == LATTE_OK, "copy");
  state_size = latte_session_state_size(s);
  state = (unsigned char*)malloc(state_size);
  expect(state && latte_session_state_save_to(s, state, state_size, &n) == LATTE_OK && n == state_size,
         "state to memory");
  expect(latte_session_create(model, &so, &loaded) == LATTE_OK &&
             latte_session_state_load_from(loaded, state, state_size) == LATTE_OK,
         "state from memory");
  expect(latte_session_prefill(s, tokens + 10, 40) == LATTE_OK && fork &&
             latte_session_prefill(fork, tokens + 10, 40) == LATTE_OK && loaded &&
             latte_session_prefill(loaded, tokens + 10, 40) == LATTE_OK,
         "prefill after the abort, in the fork and in the loaded session");
  expect(same_logits(s, fork, n_vocab) && same_logits(s, loaded, n_vocab), "the same logits");

  step_four(model, &so, tokens, n_vocab);

  /* Logit bias: a banned token is never drawn. */
  sp.seed = 7;
  expect(latte_sampler_create(&sp, &smp) == LATTE_OK, "sampler");
  {
    const float* logits = latte_session_logits(s);
    latte_logit_bias ban[1];
    int32_t best = 0, t = -1;
    size_t k;
    for (k = 1; k < n_vocab; ++k)
      if (logits[k] > logits[best]) best = (int32_t)k;
    ban[0].token = best;
    ban[0].bias = -INFINITY;
    expect(latte_sampler_set_logit_bias(smp, ban, 1) == LATTE_OK, "set logit bias");
    for (i = 0; i < 200; ++i) {
      expect(latte_sampler_sample(smp, logits, n_vocab, &t) == LATTE_OK, "sample");
      if (t == best) {
        expect(0, "a banned token was sampled");
        break;
      }
    }
  }

  expect(latte_log_set(NULL, NULL) == LATTE_OK, "silence the log");
  free(state);
  latte_sampler_free(smp);
  latte_session_free(loaded);
  latte_session_free(fork);
  latte_session_free(s);
  latte_model_free(model);
  return failures == 0 ? 0 : 1;
}

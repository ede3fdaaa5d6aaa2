/* llama.cpp's logits through the C API alone, compiled as C11: the check an
 * app embedding Latte can run against its install. Usage:
 *   logits MODEL TOKENS LOGITS [TOLERANCE]
 * TOKENS: comma-separated token ids (../shared/testdata/tokens.txt); LOGITS:
 * llama.cpp's float32 logits for every position, row-major [n_tokens,
 * n_vocab]. Evaluates the tokens in one session with an f32 cache and prints
 * the largest absolute difference; exits 1 when it is above TOLERANCE (1e-4)
 * or anything fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "latte/latte.h"

static int failed(latte_status s, const char* what) {
  fprintf(stderr, "logits: %s: %s: %s\n", what, latte_status_string(s), latte_last_error());
  return 1;
}

/* Reads a whole file; *n gets its size. NULL on failure. */
static char* read_file(const char* path, size_t* n) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, len = 0;
  char* buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap) {
      char* grown = realloc(buf, cap *= 2);
      if (!grown) free(buf);
      buf = grown;
    }
  }
  fclose(f);
  if (buf) *n = len;
  return buf;
}

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: logits MODEL TOKENS LOGITS [TOLERANCE]\n");
    return 2;
  }
  const double tolerance = argc == 5 ? atof(argv[4]) : 1e-4;
  size_t text_len = 0, expect_bytes = 0;
  char* text = read_file(argv[2], &text_len);
  float* expect = (float*)read_file(argv[3], &expect_bytes);
  if (!text || !expect) {
    fprintf(stderr, "logits: cannot read %s\n", !text ? argv[2] : argv[3]);
    return 1;
  }
  int32_t* tokens = malloc((text_len / 2 + 1) * sizeof *tokens);
  size_t n_tokens = 0;
  for (char* p = text; p < text + text_len;) {
    char* end;
    long v = strtol(p, &end, 10);
    if (end == p) { ++p; continue; }
    tokens[n_tokens++] = (int32_t)v;
    p = end;
  }

  latte_model* model = NULL;
  latte_session* session = NULL;
  float* logits = NULL;
  int rc = 1;
  latte_status s;
  if ((s = latte_model_load(argv[1], &model)) != LATTE_OK) { rc = failed(s, "load"); goto done; }
  const size_t n_vocab = (size_t)latte_model_n_vocab(model);
  if (expect_bytes != n_tokens * n_vocab * sizeof(float)) {
    fprintf(stderr, "logits: %s holds %zu bytes, expected %zu tokens x %zu logits\n", argv[3], expect_bytes, n_tokens,
            n_vocab);
    goto done;
  }
  latte_session_options so = latte_session_default_options();
  so.cache_type = LATTE_CACHE_F32;
  if ((s = latte_session_create(model, &so, &session)) != LATTE_OK) { rc = failed(s, "session"); goto done; }
  logits = malloc(n_tokens * n_vocab * sizeof *logits);
  if ((s = latte_session_eval_all(session, tokens, n_tokens, logits)) != LATTE_OK) { rc = failed(s, "eval"); goto done; }
  double worst = 0;
  for (size_t i = 0; i < n_tokens * n_vocab; ++i) {
    const double d = fabs((double)logits[i] - (double)expect[i]);
    if (!(d <= worst)) worst = d; /* NaN makes it NaN, which fails below */
  }
  printf("%zu tokens x %zu logits: max |latte - llama.cpp| = %.3g\n", n_tokens, n_vocab, worst);
  rc = worst <= tolerance ? 0 : 1;
  if (rc) fprintf(stderr, "logits: above the tolerance %g\n", tolerance);

done:
  free(logits);
  free(tokens);
  free(text);
  free(expect);
  latte_session_free(session);
  latte_model_free(model);
  return rc;
}

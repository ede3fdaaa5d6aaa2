/* Generation through the C API alone, compiled as C11: the header must be C,
 * and text in, text out must be possible with what it offers (tokenizer,
 * chat format, sampler). Usage: generate MODEL PROMPT N_PREDICT [SEED]
 * The prompt goes in as one user turn in the model's chat format; decoding is
 * greedy, or with SEED the sampler's default settings and that seed. Prints
 * the generated token ids ("1,2,3") on one line, then their text on the next.
 * A test compares the ids with `latte run --chat --print-ids` (--temp 0, or
 * --seed SEED). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "latte/latte.h"

static int failed(latte_status s, const char* what) {
  fprintf(stderr, "generate: %s: %s: %s\n", what, latte_status_string(s), latte_last_error());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: generate MODEL PROMPT N_PREDICT [SEED]\n");
    return 2;
  }
  const int n_predict = atoi(argv[3]);
  latte_model* model = NULL;
  latte_session* session = NULL;
  latte_sampler* sampler = NULL;
  int32_t* prompt = NULL;
  int32_t* out = NULL;
  char* text = NULL;
  int rc = 1;
  latte_status s;

  if ((s = latte_model_load(argv[1], &model)) != LATTE_OK) return failed(s, "load");
  latte_session_options so = latte_session_default_options();
  so.n_ctx = latte_model_n_ctx_train(model) < so.n_ctx ? latte_model_n_ctx_train(model) : so.n_ctx;
  if ((s = latte_session_create(model, &so, &session)) != LATTE_OK) { rc = failed(s, "session"); goto done; }

  /* The prompt as a user turn, tokenized with the chat markers as control
   * tokens and the prompt as text (whatever it spells): size query, then the
   * tokens. */
  latte_chat_message turn = {"user", argv[2]};
  size_t n_prompt = 0;
  if ((s = latte_chat_tokenize(model, NULL, &turn, 1, 1, -1, NULL, 0, &n_prompt)) != LATTE_OK) { rc = failed(s, "chat"); goto done; }
  prompt = malloc(n_prompt * sizeof *prompt);
  if ((s = latte_chat_tokenize(model, NULL, &turn, 1, 1, -1, prompt, n_prompt, &n_prompt)) != LATTE_OK) { rc = failed(s, "chat"); goto done; }

  latte_sampler_options sp = latte_sampler_default_options();
  if (argc == 5)
    sp.seed = strtoull(argv[4], NULL, 10);
  else
    sp.temperature = 0.0f;
  if ((s = latte_sampler_create(&sp, &sampler)) != LATTE_OK) { rc = failed(s, "sampler"); goto done; }
  for (size_t i = 0; i < n_prompt; ++i) latte_sampler_accept(sampler, prompt[i]);
  if ((s = latte_session_prefill(session, prompt, n_prompt)) != LATTE_OK) { rc = failed(s, "prefill"); goto done; }

  out = malloc((size_t)(n_predict > 0 ? n_predict : 1) * sizeof *out);
  int n_out = 0;
  const size_t n_vocab = (size_t)latte_model_n_vocab(model);
  while (n_out < n_predict) {
    int32_t t;
    if ((s = latte_sampler_sample(sampler, latte_session_logits(session), n_vocab, &t)) != LATTE_OK) { rc = failed(s, "sample"); goto done; }
    if (latte_token_is_end_of_generation(model, t)) break;
    out[n_out++] = t;
    if (latte_session_n_past(session) >= latte_session_n_ctx(session)) break;
    if ((s = latte_session_decode(session, t)) != LATTE_OK) { rc = failed(s, "decode"); goto done; }
  }
  for (int i = 0; i < n_out; ++i) printf("%s%d", i ? "," : "", out[i]);
  printf("\n");

  size_t n_text = 0;
  if ((s = latte_detokenize(model, out, (size_t)n_out, 1, NULL, 0, &n_text)) != LATTE_OK) { rc = failed(s, "detokenize"); goto done; }
  text = malloc(n_text + 1);
  if ((s = latte_detokenize(model, out, (size_t)n_out, 1, text, n_text + 1, &n_text)) != LATTE_OK) { rc = failed(s, "detokenize"); goto done; }
  fwrite(text, 1, n_text, stdout);
  printf("\n");
  rc = 0;

done:
  free(out);
  free(prompt);
  free(text);
  latte_sampler_free(sampler);
  latte_session_free(session);
  latte_model_free(model);
  return rc;
}

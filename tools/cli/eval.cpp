// `latte eval`: the logits of every position of a token sequence, written
// whole or not at all (a pipe or device as they come).
#include <cstdio>
#include <string>
#include <vector>

#include "tools/cli/commands.h"
#include "tools/output_file.h"

namespace latte::cli {

int run_eval(const EvalOptions& o) {
  const auto tokens = parse_token_list(o.tokens, "--tokens");
  const api::Model model = open_model(o.model, o.no_mmap, o.mmap);
  check_token_ids(tokens, model.n_vocab(), "--tokens");
  warn_beyond_trained_context(model.n_ctx_train(), static_cast<std::int64_t>(tokens.size()), "--tokens");
  latte_session_options so = latte_session_default_options();
  so.threads = o.threads;
  so.cache_type = cache_type_of(o.cache);
  so.prefill_chunk = o.prefill_chunk;
  so.n_ctx = static_cast<std::int64_t>(tokens.size());
  api::Session s(model, so);
  const std::vector<float> logits = s.eval_all(tokens);
  const std::size_t bytes = logits.size() * sizeof(float);
  write_output_file(o.logits_out, logits.data(), bytes, "write logits");
  std::fprintf(stderr, "wrote %zu x %d logits (float32, row-major) to %s\n", tokens.size(), model.n_vocab(),
               o.logits_out.c_str());
  return 0;
}

}  // namespace latte::cli

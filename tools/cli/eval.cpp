#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/cli/commands.h"
#include "platform/paths.h"
#include "runtime/error.h"
#include "runtime/model/model.h"
#include "runtime/session/session.h"

namespace latte::cli {

int run_eval(const EvalOptions& o) {
  const auto tokens = parse_token_list(o.tokens, "--tokens");
  auto model = load_model(o.model, o.no_mmap);
  check_token_ids(tokens, model->params().n_vocab, "--tokens");
  warn_beyond_trained_context(*model, static_cast<std::int64_t>(tokens.size()), "--tokens");
  SessionOptions so;
  so.threads = o.threads;
  so.cache = *parse_latent_storage(o.cache);
  so.prefill_chunk = o.prefill_chunk;
  so.n_ctx = static_cast<std::int64_t>(tokens.size());
  Session s(model, so);
  std::vector<float> logits;
  s.prefill(tokens, &logits);
  std::FILE* f = fopen_utf8(o.logits_out, "wb");
  if (!f) throw Error(Status::io_error, "cannot open '" + o.logits_out + "' for writing: " + std::strerror(errno));
  const std::size_t wrote = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
  const bool ok = wrote == logits.size() && std::fclose(f) == 0;
  if (!ok) throw Error(Status::io_error, "writing '" + o.logits_out + "' failed: " + std::strerror(errno));
  std::fprintf(stderr, "wrote %zu x %d logits (float32, row-major) to %s\n", tokens.size(), model->params().n_vocab,
               o.logits_out.c_str());
  return 0;
}

}  // namespace latte::cli

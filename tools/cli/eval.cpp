// `latte eval`: the logits of every position of a token sequence, written
// whole or not at all (a pipe or device as they come).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tools/cli/commands.h"
#include "platform/atomic_file.h"
#include "platform/paths.h"

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
  std::error_code ec;
  const auto kind = std::filesystem::status(path_from_utf8(o.logits_out), ec).type();
  if (kind == std::filesystem::file_type::fifo || kind == std::filesystem::file_type::character) {
    // A pipe or a device (/dev/stdout, /dev/null): nothing to replace.
    std::FILE* f = fopen_utf8(o.logits_out, "wb");
    if (!f) fail(LATTE_ERR_IO, "cannot open '" + o.logits_out + "' for writing: " + std::strerror(errno));
    const bool ok = std::fwrite(logits.data(), 1, bytes, f) == bytes;
    if (std::fclose(f) != 0 || !ok)
      fail(LATTE_ERR_IO, "writing '" + o.logits_out + "' failed: " + std::strerror(errno));
  } else {
    // Through a temporary beside the file, renamed over it once whole: a
    // failed write (a full disk) leaves an earlier file as it was.
    AtomicFile f(o.logits_out, "write logits", /*private_mode=*/false);
    f.write(logits.data(), bytes);
    f.commit(/*sync=*/false);
  }
  std::fprintf(stderr, "wrote %zu x %d logits (float32, row-major) to %s\n", tokens.size(), model.n_vocab(),
               o.logits_out.c_str());
  return 0;
}

}  // namespace latte::cli

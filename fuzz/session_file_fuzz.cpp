// libFuzzer target for the session-file loader: the input is written to a
// file and loaded into a session of one small random model (f32, int8 or int4
// cache, by the input's last byte). The load must succeed or fail with a
// status latte.h names for files, and a failed load must leave the session as
// it was (tokens and logits). With LATTE_SESSION_SEEDS set, the first call
// writes valid session files there for a seed corpus.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "latte/latte.h"
#include "tools/random_model.h"

namespace {

latte_model* g_model = nullptr;
constexpr int kSessions = 3;
latte_session* g_session[kSessions] = {};  // f32, int8, int4; each holds kHeld
constexpr latte_cache_type kCacheOf[kSessions] = {LATTE_CACHE_F32, LATTE_CACHE_INT8, LATTE_CACHE_INT4};
std::string g_dir;
const std::int32_t kHeld[] = {3, 1, 4, 1, 5};

[[noreturn]] void broken(const char* what, latte_status st) {
  std::fprintf(stderr, "session_file_fuzz: %s (status %s: %s)\n", what, latte_status_string(st), latte_last_error());
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char dir[] = "/tmp/latte-session-file-fuzz-XXXXXX";
  if (!::mkdtemp(dir)) std::abort();
  g_dir = dir;
  latte::RandomModelSpec spec;
  const std::string path = g_dir + "/model.gguf";
  latte::write_random_model(spec, path);
  if (latte_model_load(path.c_str(), &g_model) != LATTE_OK) std::abort();
  for (int i = 0; i < kSessions; ++i) {
    latte_session_options o = latte_session_default_options();
    o.threads = 1;
    o.n_ctx = 300;  // more than one 128-token tile
    o.cache_type = kCacheOf[i];
    if (latte_session_create(g_model, &o, &g_session[i]) != LATTE_OK) std::abort();
    if (latte_session_prefill(g_session[i], kHeld, 5) != LATTE_OK) std::abort();
  }
  if (const char* seeds = std::getenv("LATTE_SESSION_SEEDS")) {
    // Files of each cache type: empty, with logits, more than one tile.
    for (int i = 0; i < kSessions; ++i) {
      latte_session* s = nullptr;
      latte_session_options o = latte_session_default_options();
      o.threads = 1;
      o.n_ctx = 300;
      o.cache_type = kCacheOf[i];
      latte_session_create(g_model, &o, &s);
      std::vector<std::int32_t> toks(140);
      for (std::size_t t = 0; t < toks.size(); ++t) toks[t] = static_cast<std::int32_t>(t % 250);
      for (std::size_t n : {std::size_t{0}, std::size_t{3}, toks.size()}) {
        latte_session_reset(s);
        if (n) latte_session_prefill(s, toks.data(), n);
        const std::string p = std::string(seeds) + "/seed-" + std::to_string(i) + "-" + std::to_string(n);
        latte_session_save(s, p.c_str());
        // The last byte picks the session: the seed's own cache type.
        std::FILE* f = std::fopen(p.c_str(), "ab");
        std::fputc(i, f);
        std::fclose(f);
      }
      latte_session_free(s);
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  latte_session* s = g_session[data[size - 1] % kSessions];
  const std::string file = g_dir + "/input.lsess";
  std::FILE* f = std::fopen(file.c_str(), "wb");
  if (!f) std::abort();
  std::fwrite(data, 1, size - 1, f);
  std::fclose(f);
  const std::int64_t n_before = latte_session_n_past(s);
  const float* l = latte_session_logits(s);
  const std::vector<float> before = l ? std::vector<float>(l, l + latte_model_n_vocab(g_model)) : std::vector<float>();
  const latte_status st = latte_session_load(s, file.c_str());
  if (st == LATTE_OK) {
    // Back to what every input starts from.
    if (latte_session_reset(s) != LATTE_OK || latte_session_prefill(s, kHeld, 5) != LATTE_OK)
      broken("the session after a load", st);
    return 0;
  }
  if (st != LATTE_ERR_BAD_FILE && st != LATTE_ERR_INVALID_ARGUMENT && st != LATTE_ERR_UNSUPPORTED &&
      st != LATTE_ERR_CONTEXT_OVERFLOW)
    broken("a status latte.h does not name for a refused file", st);
  if (latte_session_n_past(s) != n_before) broken("a refused load changed n_past", st);
  const float* after = latte_session_logits(s);
  if (!after || std::memcmp(after, before.data(), before.size() * sizeof(float)) != 0)
    broken("a refused load changed the logits", st);
  return 0;
}

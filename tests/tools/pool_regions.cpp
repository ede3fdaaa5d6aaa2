// pool_regions: the parallel regions a model's steps ask of the thread pool
// (platform/thread_pool.h's regions_asked): per decoded token at each depth,
// and per prefill chunk. Each region is a fork and a join; issue 59 counts
// them before and after the runtime took the threads over from the kernels.
// A measurement, not a ctest (its counts depend on the model's shapes).
//
// Usage: pool_regions -m FILE [-t THREADS] [--depths 0,512] [-n TOKENS]
//                     [-p PROMPT_CHUNK] [--cache-type int8|int4|f16|f32]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "latte/latte.h"
#include "platform/thread_pool.h"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "pool_regions: %s\n", what.c_str());
  std::exit(1);
}

void check(latte_status s, const char* what) {
  if (s != LATTE_OK) fail(std::string(what) + ": " + latte_last_error());
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, cache = "int8";
  int threads = 2, n_tokens = 16, chunk = 512;
  std::vector<std::int64_t> depths = {0, 512};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(a + " needs a value");
      return argv[++i];
    };
    if (a == "-m") path = value();
    else if (a == "-t") threads = std::atoi(value().c_str());
    else if (a == "-n") n_tokens = std::atoi(value().c_str());
    else if (a == "-p") chunk = std::atoi(value().c_str());
    else if (a == "--cache-type") cache = value();
    else if (a == "--depths") {
      depths.clear();
      std::stringstream ss(value());
      for (std::string d; std::getline(ss, d, ',');) depths.push_back(std::atoll(d.c_str()));
    } else fail("unknown argument " + a);
  }
  if (path.empty()) fail("usage: pool_regions -m FILE [-t N] [--depths 0,512] [-n N] [-p N] [--cache-type T]");
  latte_model* model = nullptr;
  check(latte_model_load(path.c_str(), &model), "load");
  latte_session_options so = latte_session_default_options();
  so.threads = threads;
  so.prefill_chunk = chunk;
  so.cache_type = cache == "int4"  ? LATTE_CACHE_INT4
                  : cache == "f16" ? LATTE_CACHE_F16
                  : cache == "f32" ? LATTE_CACHE_F32
                                   : LATTE_CACHE_INT8;
  std::int64_t max_depth = 0;
  for (std::int64_t d : depths) max_depth = d > max_depth ? d : max_depth;
  so.n_ctx = max_depth + n_tokens + chunk + 1;
  std::printf("# %s, %d threads, cache %s, %s\n", path.c_str(), threads, cache.c_str(), latte_version());
  for (std::int64_t depth : depths) {
    latte_session* s = nullptr;
    check(latte_session_create(model, &so, &s), "session");
    const std::int32_t vocab = latte_model_n_vocab(model);
    std::vector<std::int32_t> prompt(static_cast<std::size_t>(depth > 0 ? depth : 1));
    for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<std::int32_t>((i * 7919 + 13) % vocab);
    const std::uint64_t p0 = latte::regions_asked();
    check(latte_session_prefill(s, prompt.data(), prompt.size()), "prefill");
    const std::uint64_t p1 = latte::regions_asked();
    const std::int64_t chunks = (static_cast<std::int64_t>(prompt.size()) + chunk - 1) / chunk;
    for (int i = 0; i < n_tokens; ++i) check(latte_session_decode(s, (i * 31 + 5) % vocab), "decode");
    const std::uint64_t d1 = latte::regions_asked();
    std::printf("depth %lld: prefill %zu tokens, %.1f regions per chunk; decode %.1f regions per token\n",
                static_cast<long long>(depth), prompt.size(), static_cast<double>(p1 - p0) / static_cast<double>(chunks),
                static_cast<double>(d1 - p1) / n_tokens);
    latte_session_free(s);
  }
  latte_model_free(model);
  return 0;
}

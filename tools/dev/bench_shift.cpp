// `latte bench --shift`: what a context shift costs against what a runtime
// without one must do instead. For each depth D (a full context of D tokens)
// and each cache type, alternately:
//   shift:     LatentCache::shift keeping 1 token (BOS) and dropping half of
//              the rest, on a cache of the model's shapes filled to D by
//              writing random rows directly (no prefill, so 160K is feasible);
//              the dropped half is written back, untimed, before the next;
//   reprefill: a prefill of the D - dropped kept tokens into an empty session
//              of context D (skipped above --reprefill-max tokens: at depth it
//              takes minutes to hours).
// Alternating the two keeps a shared machine's drift out of their ratio; the
// medians over the repetitions are reported.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tools/paths.h"
#include "quant/latent_formats.h"
#include "runtime/error.h"
#include "runtime/mla/latent_cache.h"
#include "runtime/mla/rope.h"
#include "runtime/model/model.h"
#include "runtime/session/session.h"
#include "tools/cli/commands.h"
#include "tools/dev/dev_commands.h"
#include "tools/dev/dev_errors.h"
#include "tools/cli/progress.h"

namespace latte::cli {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The model as the engine holds it (the cache's shapes, its RoPE factors),
// with the CLI's progress line and "loaded" line.
std::shared_ptr<const Model> load_model(const std::string& path, bool no_mmap, bool mmap) {
  LoadOptions o;
  ProgressLine progress;  // erased by its destructor if the load fails
  const std::string name = file_name_of(path);
  o.on_progress = [&](std::size_t done, std::size_t total) {
    progress.show(load_progress_text(name, done, total));
  };
  o.file = no_mmap ? GgufLoad::read : mmap ? GgufLoad::map : GgufLoad::automatic;
  const auto t0 = std::chrono::steady_clock::now();
  auto model = Model::load(path, o);
  progress.clear();
  const GgufFile& f = model->file();
  std::fprintf(stderr, "loaded %s: %s, %s, in %.1f s\n", path.c_str(),
               binary_bytes(static_cast<double>(f.file_size())).c_str(),
               f.private_data() ? "read into memory" : "mapped", seconds_since(t0));
  if (!f.load_note().empty()) std::fprintf(stderr, "note: %s; --no-mmap reads it all the same\n", f.load_note().c_str());
  return model;
}

// Writes random rows (c_KV ~ the normalized latent's scale, k_pe unit) to
// positions [from, to) of every layer.
void fill(LatentCache& c, std::int64_t from, std::int64_t to, std::mt19937& rng) {
  const LatentCacheConfig& cc = c.config();
  std::normal_distribution<float> nd(0.f, 1.f);
  constexpr int kRows = 256;
  std::vector<float> ckv(static_cast<std::size_t>(kRows) * cc.d_c), kpe(static_cast<std::size_t>(kRows) * cc.d_R);
  for (float& v : ckv) v = nd(rng);
  for (float& v : kpe) v = nd(rng);
  for (int l = 0; l < cc.n_layers; ++l)
    for (std::int64_t p = from; p < to; p += kRows) {
      const int n = static_cast<int>(std::min<std::int64_t>(kRows, to - p));
      c.write(l, p, n, ckv.data(), kpe.data());
    }
}

}  // namespace

static int bench_shift(const BenchOptions& o);

int run_bench_shift(const BenchOptions& o) {
  return as_api_errors([&] { return bench_shift(o); });
}

static int bench_shift(const BenchOptions& o) {
  const std::vector<std::int64_t> depths = parse_int_list(o.depths, "--depths", std::int64_t{1} << 24);
  for (const std::int64_t D : depths)
    if (D < 3) throw UsageError("--shift: --depths of 3 tokens or more (" + std::to_string(D) + " given)");
  auto model = load_model(o.model, o.no_mmap, o.mmap);
  const ModelParams& p = model->params();
  std::vector<std::string> caches;
  if (o.cache == "all") caches = {"int4", "int8", "f16", "f32"};
  else caches = {o.cache};
  std::mt19937 rng(1234);
  std::uniform_int_distribution<std::int32_t> tok(0, p.n_vocab - 1);
  // The threads a session runs with (--threads 0: all cores, as the
  // runtime counts them), for the shifts as for the re-prefills.
  const int threads = [&] {
    SessionOptions so;
    so.threads = o.threads;
    so.n_ctx = 1;
    return Session(model, so).threads();
  }();
  if (!o.json)
    std::printf("shift of half the context (1 token kept) against a prefill of the kept tokens; %d layers, d_c %d, "
                "d_R %d, threads %d, medians of %d\n",
                p.n_layers, p.mla.kv_lora_rank, p.mla.d_rope, threads, o.repetitions);
  ProgressLine progress;
  bool first = true;
  if (o.json) std::printf("[");
  for (const std::string& cache : caches) {
    const LatentStorage storage = *parse_latent_storage(cache);
    for (const std::int64_t D : depths) {
      progress.show("bench --shift: " + cache + " cache, depth " + std::to_string(D) + ": filling it", /*now=*/true);
      const std::int64_t keep = 1, drop = (D - keep) / 2, kept = D - drop;
      LatentCacheConfig cc;
      cc.n_layers = p.n_layers;
      cc.d_c = p.mla.kv_lora_rank;
      cc.d_R = p.mla.d_rope;
      cc.max_tokens = D;
      cc.storage = storage;
      LatentCache c(cc);
      fill(c, 0, D, rng);
      RopeParams rp = p.mla.rope;
      rp.freq_factors = model->rope_factors(p.rope_long_factors(D));
      const RopeTurn turn = rope_turn(rp, -static_cast<double>(drop));
      const bool reprefill = kept <= o.reprefill_max;
      std::unique_ptr<Session> s;
      std::vector<std::int32_t> ids;
      if (reprefill) {
        SessionOptions so;
        so.threads = o.threads;
        so.n_ctx = D;
        so.cache = storage;
        so.prefill_chunk = o.prefill_chunk;
        s = std::make_unique<Session>(model, so);
        for (std::int64_t i = 0; i < kept; ++i) ids.push_back(tok(rng));
      }
      std::vector<double> shift_s, prefill_s;
      for (int r = 0; r < o.repetitions; ++r) {
        progress.show("bench --shift: " + cache + " cache, depth " + std::to_string(D) + ": repetition " +
                          std::to_string(r + 1) + " of " + std::to_string(o.repetitions),
                      /*now=*/true);
        auto t0 = std::chrono::steady_clock::now();
        c.shift(keep, drop, turn, threads);
        shift_s.push_back(seconds_since(t0));
        fill(c, kept, D, rng);  // untimed: full again for the next repetition
        if (reprefill) {
          s->reset();
          t0 = std::chrono::steady_clock::now();
          s->prefill(ids);
          prefill_s.push_back(seconds_since(t0));
        }
      }
      progress.clear();
      const double ms = median_of(shift_s) * 1e3, pms = median_of(prefill_s) * 1e3;
      if (o.json) {
        std::printf("%s{\"cache_type\": \"%s\", \"depth\": %lld, \"dropped\": %lld, \"shift_ms\": %.3f, "
                    "\"reprefill_ms\": %s, \"threads\": %d, \"repetitions\": %d}",
                    first ? "" : ",\n ", cache.c_str(), static_cast<long long>(D), static_cast<long long>(drop), ms,
                    reprefill ? std::to_string(pms).c_str() : "null", threads, o.repetitions);
      } else if (reprefill) {
        std::printf("%-5s %8lld tokens: shift %10.2f ms | re-prefill of %lld tokens %12.1f ms | %.0fx\n",
                    cache.c_str(), static_cast<long long>(D), ms, static_cast<long long>(kept), pms, pms / ms);
      } else {
        std::printf("%-5s %8lld tokens: shift %10.2f ms | re-prefill of %lld tokens not measured (above "
                    "--reprefill-max %lld)\n",
                    cache.c_str(), static_cast<long long>(D), ms, static_cast<long long>(kept),
                    static_cast<long long>(o.reprefill_max));
      }
      std::fflush(stdout);
      first = false;
    }
  }
  if (o.json) std::printf("]\n");
  return 0;
}

}  // namespace latte::cli

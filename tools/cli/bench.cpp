// `latte bench`: like llama-bench's depth runs. For each depth D the cache is
// filled to D tokens (a real prefill of seeded random ids), then
//   prefill: n_prompt tokens at depth D (then the cache is cut back to D),
//   decode:  n_gen single-token steps starting at depth D.
// The best of `repetitions` runs is reported, after a warm-up; the first
// prefill after load is timed apart from them and reported as "cold".
//
// Decode at depth 0 streams every weight once per token, so its ceiling is
// the machine's read bandwidth, and on a shared machine that moves by tens of
// percent from one minute to the next. The run therefore measures it too,
// before and after the depths, over as many bytes as a decode step reads and
// with the same threads, and reports decode's weight stream against it.
//
// The same drift skews decode at depth D against decode at depth 0 measured
// minutes earlier. So each repetition at a depth D > 0 also decodes n_gen
// steps from depth 0 right after its own (a second session, empty cache):
// `decode_depth0_adjacent_tok_s` and `decode_pct_of_adjacent_depth0`.
// Those runs are still tens of milliseconds apart, and the best of each may
// come from different repetitions. Closest of all, every depth D > 0 then
// alternates single steps: one at depth D (the cache cut back to D after
// it), one from the second session, n_gen x repetitions pairs; the median
// step times of the two (`decode_step_ms`, `decode_depth0_step_ms`) and
// their ratio (`decode_pct_of_interleaved_depth0`) compare them within
// milliseconds of each other.
//
// --versus-cache T compares two cache types the same way: a third session
// with cache T is filled with the same tokens to each depth, and its single
// steps join the alternation (`decode_versus_step_ms`; the order of the three
// rotates), since runs of two processes minutes apart differ by more than
// two caches do.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "latte/latte.hpp"
#include "tools/cli/commands.h"
#include "tools/cli/progress.h"
#include "tools/read_bandwidth.h"

namespace latte::cli {

namespace {

constexpr std::int64_t kMaxDepth = std::int64_t{1} << 24;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {  // v non-empty
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2) return *mid;
  return (*mid + *std::max_element(v.begin(), mid)) / 2;
}

}  // namespace

int run_bench(const BenchOptions& o) {
  if (o.cache == "all") throw UsageError("--cache-type all applies to --shift only");
  const bool versus = !o.versus.empty();
  if (versus && o.versus == o.cache)
    throw UsageError("--versus-cache " + o.versus + " is the --cache-type itself: name another cache type");
  if (versus && o.n_gen == 0) throw UsageError("--versus-cache compares decode steps, and -n is 0");
  if (o.n_prompt == 0 && o.n_gen == 0) throw UsageError("-p and -n are both 0, so there is nothing to measure");
  std::vector<std::int64_t> depths = parse_int_list(o.depths, "--depths", kMaxDepth);
  const api::Model model = open_model(o.model, o.no_mmap, o.mmap);
  struct Row {
    std::int64_t depth;
    double prefill_tps, decode_tps, fill_s;
    double decode0_tps = 0;  // depth 0, measured next to each repetition
    bool interleaved = false;          // depth > 0 and decode measured
    double step_ms = 0, step0_ms = 0;  // medians of the interleaved steps
    double versus_step_ms = 0;         // --versus-cache: its session's, among them
  };
  std::vector<Row> rows;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<std::int32_t> tok(0, model.n_vocab() - 1);
  // One session, depths in ascending order: the cache is filled up to each
  // depth in turn, so the total fill is the largest depth, not the sum.
  std::sort(depths.begin(), depths.end());
  depths.erase(std::unique(depths.begin(), depths.end()), depths.end());
  latte_session_options so = latte_session_default_options();
  so.threads = o.threads;
  so.cache_type = cache_type_of(o.cache);
  so.prefill_chunk = o.prefill_chunk;
  so.prefill_form = prefill_form_of(o.form);
  // Room for the largest depth plus the longer measurement, and at least
  // the warm-up's 3 tokens.
  so.n_ctx = depths.back() + std::max({o.n_prompt, o.n_gen, 3});
  warn_beyond_trained_context(model.n_ctx_train(), depths.back() + std::max(o.n_prompt, o.n_gen), "the deepest measurement");
  api::Session s(model, so);
  // Depth-0 decodes next to the deeper ones (see the top of the file).
  latte_session_options so0 = so;
  so0.n_ctx = std::max(o.n_gen, 1) + 1;
  api::Session s0(model, so0);
  std::optional<api::Session> sv;  // --versus-cache: the same depths, the other cache
  if (versus) {
    latte_session_options sov = so;
    sov.cache_type = cache_type_of(o.versus);
    sv.emplace(model, sov);
  }
  // What the sessions run with (the default: one per available CPU, as many
  // as start): the figure reported, and the plain reads' threads.
  const int threads = s.threads();
  const auto weight_bytes = static_cast<std::size_t>(model.decode_bytes());
  // Over the decode step's bytes, from 64 MiB (so a cache does not hold it
  // all unless it holds the weights too) to 1 GiB (enough for any cache).
  const std::size_t read_bytes = std::clamp<std::size_t>(weight_bytes, std::size_t{64} << 20, std::size_t{1} << 30);
  // What a run does not measure (-p 0 or -n 0) is reported blank, not as 0;
  // the plain reads only serve to judge decode's weight stream.
  const bool measured_prefill = o.n_prompt > 0, measured_decode = o.n_gen > 0;
  // What is being measured, on a terminal.
  ProgressLine progress;
  const auto measuring = [&](const std::string& what) { progress.show("bench: " + what, /*now=*/true); };
  const std::string plain_read = "reading " + binary_bytes(static_cast<double>(read_bytes)) + " (plain read bandwidth)";
  if (measured_decode) measuring(plain_read);
  const double read_before = measured_decode ? measure_read_bandwidth(read_bytes, threads, 5) : 0.0;
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(o.n_prompt));
  for (auto& t : prompt) t = tok(rng);
  // The first prefill after load, timed on its own (a user's first prompt
  // runs like this one): reported as "cold", then it serves as the warm-up
  // of the measured repetitions with one decode step in each session, as
  // llama-bench warms up with a whole prompt before it times one.
  double cold_prefill_tps = 0;
  if (measured_prefill) {
    measuring("the first prefill after load (cold), " + count_of(o.n_prompt, "token"));
    const auto t0 = std::chrono::steady_clock::now();
    s.prefill(prompt);
    cold_prefill_tps = o.n_prompt / seconds_since(t0);
    s.reset();
  }
  measuring("warm-up");
  {
    const std::int32_t w[2] = {tok(rng), tok(rng)};
    s.prefill(w);
    s.decode(tok(rng));
    s.reset();
    s0.decode(tok(rng));
    s0.reset();
    if (sv) {
      sv->decode(tok(rng));
      sv->reset();
    }
  }
  for (std::int64_t depth : depths) {
    const std::string at = "depth " + std::to_string(depth) + ": ";
    const auto t_fill = std::chrono::steady_clock::now();
    std::vector<std::int32_t> fill(static_cast<std::size_t>(depth - s.n_past()));
    for (auto& t : fill) t = tok(rng);
    if (!fill.empty()) {
      measuring(at + "filling the cache (a prefill of " + count_of(static_cast<long long>(fill.size()), "token") + ")");
      s.prefill(fill);
      if (sv) {
        measuring(at + "filling the " + o.versus + " cache too");
        sv->prefill(fill);
      }
    }
    Row r{depth, 0, 0, seconds_since(t_fill)};
    for (int rep = 0; rep < o.repetitions; ++rep) {
      const std::string of = ", repetition " + std::to_string(rep + 1) + " of " + std::to_string(o.repetitions);
      if (measured_prefill) {
        measuring(at + "prefill of " + count_of(o.n_prompt, "token") + of);
        const auto t0 = std::chrono::steady_clock::now();
        s.prefill(prompt);
        r.prefill_tps = std::max(r.prefill_tps, o.n_prompt / seconds_since(t0));
        s.truncate(depth);
      }
      if (measured_decode) {
        measuring(at + count_of(o.n_gen, "decode step") + of);
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < o.n_gen; ++i) s.decode(tok(rng));
        r.decode_tps = std::max(r.decode_tps, o.n_gen / seconds_since(t0));
        s.truncate(depth);
        if (depth > 0) {
          measuring(at + count_of(o.n_gen, "decode step") + " from depth 0 beside it" + of);
          const auto t1 = std::chrono::steady_clock::now();
          for (int i = 0; i < o.n_gen; ++i) s0.decode(tok(rng));
          r.decode0_tps = std::max(r.decode0_tps, o.n_gen / seconds_since(t1));
          s0.reset();
        }
      }
    }
    if (depth == 0) r.decode0_tps = r.decode_tps;
    if (measured_decode && depth > 0) {
      // Single steps alternated with depth-0 ones (and --versus-cache's), and
      // which runs first rotates too, so no kind always follows another.
      const int pairs = o.n_gen * o.repetitions;
      measuring(at + std::to_string(pairs) + " single steps alternated with steps from depth 0" +
                (sv ? " and with the " + o.versus + " cache's" : std::string()));
      std::vector<double> at_depth, at_0, at_versus;
      auto timed_decode = [&](api::Session& x, std::vector<double>& times) {
        const auto t0 = std::chrono::steady_clock::now();
        x.decode(tok(rng));
        times.push_back(seconds_since(t0) * 1e3);
      };
      auto step_at_depth = [&] {
        timed_decode(s, at_depth);
        s.truncate(depth);
      };
      auto step_at_0 = [&] {
        if (s0.n_past() == s0.n_ctx()) s0.reset();
        timed_decode(s0, at_0);
      };
      auto step_versus = [&] {
        timed_decode(*sv, at_versus);
        sv->truncate(depth);
      };
      // The kinds in a rotating order: round i starts at kind i mod n.
      std::vector<std::function<void()>> kinds{step_at_depth};
      if (sv) kinds.push_back(step_versus);
      kinds.push_back(step_at_0);
      for (int i = 0; i < pairs; ++i)
        for (std::size_t k = 0; k < kinds.size(); ++k) kinds[(i + k) % kinds.size()]();
      s0.reset();
      r.interleaved = true;
      r.step_ms = median(at_depth);
      r.step0_ms = median(at_0);
      if (sv) r.versus_step_ms = median(at_versus);
    }
    rows.push_back(r);
    progress.clear();
    if (!o.json)
      std::fprintf(stderr, "depth %lld done (fill %.1f s)\n", static_cast<long long>(depth), r.fill_s);
  }
  if (measured_decode) measuring(plain_read);
  const double read_after = measured_decode ? measure_read_bandwidth(read_bytes, threads, 5) : 0.0;
  progress.clear();
  const double read_best = std::max(read_before, read_after);
  auto weight_rate = [&](const Row& r) { return r.decode_tps * static_cast<double>(weight_bytes); };  // bytes/s
  auto pct_of_depth0 = [](const Row& r) { return r.decode0_tps > 0 ? 100 * r.decode_tps / r.decode0_tps : 0.0; };
  auto pct_interleaved = [](const Row& r) { return 100 * r.step0_ms / r.step_ms; };

  const std::string warmup = measured_prefill
                                 ? "the cold prefill of " + count_of(o.n_prompt, "token") + " and one decode step"
                                 : "a prefill of 2 tokens and one decode step";
  if (o.json) {
    std::printf("{\n  \"model\": %s,\n  \"architecture\": \"%s\",\n  \"cache_type\": \"%s\",\n  \"threads\": %d,\n"
                "  \"isa\": \"%s\",\n  \"weights\": \"%s\",\n  \"n_prompt\": %d,\n  \"n_gen\": %d,\n  \"prefill_chunk\": %d,\n",
                json_string(o.model).c_str(), model.architecture().c_str(), o.cache.c_str(), threads, api::kernels().c_str(),
                model.is_mapped() ? "mmap" : "read", o.n_prompt, o.n_gen, o.prefill_chunk);
    auto num = [](bool measured, double v, const char* fmt) {
      if (!measured) return std::string("null");
      char b[64];
      std::snprintf(b, sizeof b, fmt, v);
      return std::string(b);
    };
    // How the pool's threads wait moves these timings (docs/performance.md:
    // "Threads and other load on the cores"): the variables in effect, null
    // when unset.
    const auto env_json = [](const char* name) {
      const char* v = std::getenv(name);
      return v ? json_string(v) : std::string("null");
    };
    std::printf("  \"LATTE_POOL_SPIN_US\": %s,\n  \"LATTE_POOL_ADAPT\": %s,\n", env_json("LATTE_POOL_SPIN_US").c_str(),
                env_json("LATTE_POOL_ADAPT").c_str());
    std::printf("  \"versus_cache_type\": %s,\n", versus ? json_string(o.versus).c_str() : "null");
    std::printf("  \"prefill_cold_tok_s\": %s,\n  \"warmup\": \"%s\",\n",
                num(measured_prefill, cold_prefill_tps, "%.2f").c_str(), warmup.c_str());
    std::printf("  \"decode_weight_bytes\": %zu,\n  \"read_GBps_before\": %s,\n  \"read_GBps_after\": %s,\n",
                weight_bytes, num(measured_decode, read_before / 1e9, "%.2f").c_str(),
                num(measured_decode, read_after / 1e9, "%.2f").c_str());
    std::printf("  \"results\": [\n");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::printf("    {\"depth\": %lld, \"prefill_tok_s\": %s, \"decode_tok_s\": %s, \"decode_weights_GBps\": %s, "
                  "\"decode_read_pct\": %s, \"decode_depth0_adjacent_tok_s\": %s, "
                  "\"decode_pct_of_adjacent_depth0\": %s, \"decode_step_ms\": %s, \"decode_depth0_step_ms\": %s, "
                  "\"decode_pct_of_interleaved_depth0\": %s, \"decode_versus_step_ms\": %s, \"fill_s\": %.2f}%s\n",
                  static_cast<long long>(r.depth), num(measured_prefill, r.prefill_tps, "%.2f").c_str(),
                  num(measured_decode, r.decode_tps, "%.2f").c_str(),
                  num(measured_decode, weight_rate(r) / 1e9, "%.2f").c_str(),
                  num(measured_decode, 100 * weight_rate(r) / read_best, "%.1f").c_str(),
                  num(measured_decode, r.decode0_tps, "%.2f").c_str(),
                  num(measured_decode, pct_of_depth0(r), "%.1f").c_str(), num(r.interleaved, r.step_ms, "%.3f").c_str(),
                  num(r.interleaved, r.step0_ms, "%.3f").c_str(),
                  num(r.interleaved, pct_interleaved(r), "%.1f").c_str(),
                  num(r.interleaved && versus, r.versus_step_ms, "%.3f").c_str(), r.fill_s,
                  i + 1 < rows.size() ? "," : "");
    }
    std::printf("  ]\n}\n");
  } else {
    char weights[96] = "mapped";
    if (!model.is_mapped())
      std::snprintf(weights, sizeof weights, "read into memory, %.1f GB of them row-interleaved",
                    static_cast<double>(model.interleaved_bytes()) / 1e9);
    std::printf("model %s (%s), cache %s, threads %d, kernels %s, weights %s\n", o.model.c_str(),
                model.architecture().c_str(), o.cache.c_str(), threads, api::kernels().c_str(), weights);
    std::printf("%8s | %16s | %16s | %18s | %22s | %28s\n", "depth", "prefill tok/s", "decode tok/s",
                "weights GB/s (%)", "depth 0 next to it (%)", "step ms at it / at 0 (%)");
    for (const Row& r : rows) {
      char pre[32] = "-", dec[96], step[64] = "-";
      std::snprintf(dec, sizeof dec, "%16s | %18s | %22s", "-", "-", "-");
      if (measured_prefill) std::snprintf(pre, sizeof pre, "%.1f", r.prefill_tps);
      if (measured_decode)
        std::snprintf(dec, sizeof dec, "%16.1f | %11.1f (%3.0f%%) | %14.1f (%3.0f%%)", r.decode_tps,
                      weight_rate(r) / 1e9, 100 * weight_rate(r) / read_best, r.decode0_tps, pct_of_depth0(r));
      if (r.interleaved)
        std::snprintf(step, sizeof step, "%.3f / %.3f (%3.0f%%)", r.step_ms, r.step0_ms, pct_interleaved(r));
      std::printf("%8lld | %16s | %s | %28s\n", static_cast<long long>(r.depth), pre, dec, step);
    }
    std::printf("(prefill: %s at the depth; decode: %s from the depth; best of %d after a warm-up: %s)\n",
                count_of(o.n_prompt, "token").c_str(), count_of(o.n_gen, "step").c_str(), o.repetitions,
                warmup.c_str());
    if (measured_prefill) {
      const double best0 = rows.front().depth == 0 ? rows.front().prefill_tps : 0;
      std::printf("(cold: the first prefill after load, %s at depth 0: %.1f tok/s", count_of(o.n_prompt, "token").c_str(),
                  cold_prefill_tps);
      if (best0 > 0) std::printf(", %.0f%% of the best at depth 0", 100 * cold_prefill_tps / best0);
      std::printf(")\n");
    }
    std::printf("(depth 0 next to it: decode from an empty cache right after each repetition's; %% = decode at "
                "the depth / that)\n");
    if (measured_decode) {
      std::printf("(step ms: medians of %d single steps at the depth alternated with as many from depth 0; %% = "
                  "depth-0 step / step at the depth)\n",
                  o.n_gen * o.repetitions);
      if (versus) {
        std::printf("(--versus-cache: single steps of a second session, its cache %s, filled beside with the same "
                    "tokens and alternated with the two above; medians)\n",
                    o.versus.c_str());
        for (const Row& r : rows)
          if (r.interleaved)
            std::printf("%8lld | %s %.3f ms | %s %.3f ms | %s %.1f%% of %s's time\n", static_cast<long long>(r.depth),
                        o.cache.c_str(), r.step_ms, o.versus.c_str(), r.versus_step_ms, o.versus.c_str(),
                        100 * r.versus_step_ms / r.step_ms, o.cache.c_str());
      }
      std::printf("(decode reads %.1f MB of weights per token; a plain read of %.0f MB with these threads: %.1f GB/s "
                  "before, %.1f after; %% is of the better)\n",
                  weight_bytes / 1e6, read_bytes / 1e6, read_before / 1e9, read_after / 1e9);
    }
  }
  return 0;
}

}  // namespace latte::cli

// `latte bench --batch 1,2,4,8`: aggregate decode of N sequences stepped
// together (latte_session_step: each weight read once for all N tokens, each
// sequence attending over its own cache), like llama-batched-bench's
// generation figure. For each depth D, max(N) sessions are filled to D
// tokens once (prefills of seeded random ids); then for each N the first N
// decode n_gen steps together, best of the repetitions after a warm-up
// step, each cut back to D after it.
//
// Beside each figure, the memory bound: the bytes a step must read (the
// weights every token uses once, each distinct routed expert the N tokens
// went to, counted by the step itself, and each sequence's D cached rows)
// at the plain read bandwidth, with the same threads, measured right before
// and after that repetition's steps (the better of the two: this host's
// bandwidth moves within minutes); `%` is the aggregate rate against that
// bound.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "latte/latte.hpp"
#include "tools/cli/commands.h"
#include "tools/cli/progress.h"
#include "tools/read_bandwidth.h"

namespace latte::cli {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int run_bench_batch(const BenchOptions& o) {
  if (o.n_gen <= 0) throw UsageError("--batch measures decode: -n must be > 0");
  std::vector<std::int64_t> batches = parse_int_list(o.batch, "--batch", 256);
  std::vector<std::int64_t> depths = parse_int_list(o.depths, "--depths", std::int64_t{1} << 24);
  for (std::int64_t n : batches)
    if (n < 1) throw UsageError("--batch: sizes must be >= 1");
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  std::sort(depths.begin(), depths.end());
  depths.erase(std::unique(depths.begin(), depths.end()), depths.end());
  const api::Model model = open_model(o.model, o.no_mmap, o.mmap);
  const int max_n = static_cast<int>(batches.back());
  latte_session_options so = latte_session_default_options();
  so.threads = o.threads;
  so.cache_type = cache_type_of(o.cache);
  so.prefill_chunk = o.prefill_chunk;
  so.n_ctx = depths.back() + o.n_gen + 1;
  warn_beyond_trained_context(model.n_ctx_train(), so.n_ctx, "the deepest measurement");
  std::vector<std::unique_ptr<api::Session>> sessions;
  for (int i = 0; i < max_n; ++i) sessions.push_back(std::make_unique<api::Session>(model, so));
  const int threads = sessions[0]->threads();
  const auto expert = static_cast<std::size_t>(model.expert_bytes());
  // What every token of a step reads once: decode's weights less the routed
  // experts one token reads (n_experts_used per MoE layer, as one decode
  // step of a session alone counts them).
  sessions[0]->decode(0);
  const auto experts_per_token = static_cast<std::size_t>(sessions[0]->last_experts_read());
  sessions[0]->reset();
  const auto decode_bytes = static_cast<std::size_t>(model.decode_bytes());
  const std::size_t shared_bytes = decode_bytes - experts_per_token * expert;
  const std::size_t read_bytes =
      std::clamp<std::size_t>(decode_bytes, std::size_t{64} << 20, std::size_t{1} << 30);
  ProgressLine progress;
  const auto measuring = [&](const std::string& what) { progress.show("bench: " + what, /*now=*/true); };
  const std::string plain_read = "reading " + binary_bytes(static_cast<double>(read_bytes)) + " (plain read bandwidth)";
  measuring(plain_read);
  ReadProbe probe(read_bytes, threads);
  const double read_before = probe.measure(5);

  std::mt19937 rng(1234);
  std::uniform_int_distribution<std::int32_t> tok(0, model.n_vocab() - 1);
  struct Row {
    std::int64_t depth;
    int n;
    double tps = 0;       // aggregate tokens per second, the best repetition
    double step_ms = 0;   // that repetition's mean step
    double bytes = 0;     // mean bytes a step reads (that repetition)
    double read = 0;      // the plain read next to that repetition, bytes/s
  };
  std::vector<Row> rows;
  for (std::int64_t depth : depths) {
    const std::string at = "depth " + std::to_string(depth) + ": ";
    for (int i = 0; i < max_n; ++i) {
      api::Session& s = *sessions[i];
      std::vector<std::int32_t> fill(static_cast<std::size_t>(depth - s.n_past()));
      for (auto& t : fill) t = tok(rng);
      if (!fill.empty()) {
        measuring(at + "filling sequence " + std::to_string(i + 1) + " of " + std::to_string(max_n));
        s.prefill(fill);
      }
    }
    const auto cache_bytes =
        static_cast<std::size_t>(model.cache_bytes(cache_type_of(o.cache), std::max<std::int64_t>(depth, 1)));
    for (std::int64_t nb : batches) {
      const int n = static_cast<int>(nb);
      Row r{depth, n};
      std::vector<std::int32_t> next(static_cast<std::size_t>(n));
      std::vector<api::StepItem> items(static_cast<std::size_t>(n));
      auto step = [&] {
        for (int i = 0; i < n; ++i) {
          next[i] = tok(rng);
          items[i] = {sessions[i].get(), api::Span<const std::int32_t>(&next[i], 1)};
        }
        api::step(items);
        return sessions[0]->last_experts_read();
      };
      auto cut_back = [&] {
        for (int i = 0; i < n; ++i) sessions[i]->truncate(depth);
      };
      measuring(at + std::to_string(n) + " sequences: warm-up step");
      step();
      cut_back();
      for (int rep = 0; rep < o.repetitions; ++rep) {
        measuring(at + std::to_string(n) + " sequences: " + count_of(o.n_gen, "step") + ", repetition " +
                  std::to_string(rep + 1) + " of " + std::to_string(o.repetitions));
        std::int64_t experts = 0;
        const double read0 = probe.measure(2);
        const auto t0 = std::chrono::steady_clock::now();
        for (int k = 0; k < o.n_gen; ++k) experts += step();
        const double secs = seconds_since(t0);
        const double read1 = probe.measure(2);
        cut_back();
        const double tps = static_cast<double>(n) * o.n_gen / secs;
        if (tps > r.tps) {
          r.tps = tps;
          r.step_ms = secs * 1e3 / o.n_gen;
          r.bytes = static_cast<double>(shared_bytes) + static_cast<double>(experts) / o.n_gen * expert +
                    static_cast<double>(n) * cache_bytes;
          r.read = std::max(read0, read1);
        }
      }
      rows.push_back(r);
    }
  }
  measuring(plain_read);
  const double read_after = probe.measure(5);
  progress.clear();
  auto bound = [&](const Row& r) { return r.n * r.read / r.bytes; };  // tok/s at the adjacent plain read

  if (o.json) {
    std::printf("{\n  \"model\": %s,\n  \"architecture\": \"%s\",\n  \"cache_type\": \"%s\",\n  \"threads\": %d,\n"
                "  \"isa\": \"%s\",\n  \"weights\": \"%s\",\n  \"n_gen\": %d,\n  \"read_GBps_before\": %.2f,\n"
                "  \"read_GBps_after\": %.2f,\n  \"batch\": [\n",
                json_string(o.model).c_str(), model.architecture().c_str(), o.cache.c_str(), threads,
                api::kernels().c_str(), model.is_mapped() ? "mmap" : "read", o.n_gen, read_before / 1e9,
                read_after / 1e9);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::printf("    {\"depth\": %lld, \"n\": %d, \"decode_tok_s\": %.2f, \"per_sequence_tok_s\": %.2f, "
                  "\"step_ms\": %.3f, \"step_MB\": %.1f, \"read_GBps\": %.2f, \"bound_tok_s\": %.2f, "
                  "\"bound_pct\": %.1f}%s\n",
                  static_cast<long long>(r.depth), r.n, r.tps, r.tps / r.n, r.step_ms, r.bytes / 1e6, r.read / 1e9,
                  bound(r), 100 * r.tps / bound(r), i + 1 < rows.size() ? "," : "");
    }
    std::printf("  ]\n}\n");
    return 0;
  }
  std::printf("model %s (%s), cache %s, threads %d, kernels %s, weights %s\n", o.model.c_str(),
              model.architecture().c_str(), o.cache.c_str(), threads, api::kernels().c_str(),
              model.is_mapped() ? "mapped" : "read into memory");
  std::printf("%8s | %4s | %16s | %12s | %9s | %9s | %9s | %20s\n", "depth", "N", "decode tok/s", "per seq",
              "step ms", "step MB", "read GB/s", "memory bound (%)");
  for (const Row& r : rows)
    std::printf("%8lld | %4d | %16.1f | %12.1f | %9.2f | %9.1f | %9.1f | %12.1f (%3.0f%%)\n",
                static_cast<long long>(r.depth), r.n, r.tps, r.tps / r.n, r.step_ms, r.bytes / 1e6, r.read / 1e9,
                bound(r), 100 * r.tps / bound(r));
  std::printf("(N sequences at the depth decode %s together; best of %d after a warm-up step; decode tok/s: all "
              "N together)\n",
              count_of(o.n_gen, "step").c_str(), o.repetitions);
  std::printf("(step MB: the weights every token uses, the routed experts the N tokens went to, N caches at the "
              "depth; memory bound: N tokens per step read at read GB/s, the better of the plain reads right before "
              "and after that repetition; %.1f GB/s at the start, %.1f at the end)\n",
              read_before / 1e9, read_after / 1e9);
  return 0;
}

}  // namespace latte::cli

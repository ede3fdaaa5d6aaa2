// The developer commands: `latte make-model`, `latte demo` and `latte bench
// --shift`. They write test models with Latte's quantizers, run the MLA
// reference and time the latent cache's shift on rows written directly, so
// they use the engine's internals (as llama.cpp's quantize uses ggml's);
// tools/dev/ holds them so that tools/cli/ stays a client of latte.h only.
// This header names nothing internal: the CLI includes it. The engine's
// errors leave these commands as api::Exception, as the API's do.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace latte::cli {

struct BenchOptions;

struct DemoOptions {
  int n_prefill = 16;
  int n_decode = 8;
};
// `latte demo`: one MLA layer on random weights, naive versus absorbed.
int run_demo(const DemoOptions& opts);

struct MakeModelOptions {
  std::string preset = "v2-lite";
  std::string type = "F16";  // a canonical ggml type name (main.cpp's validator makes it one)
  int layers = 4;
  int vocab = 1024;
  std::uint64_t seed = 1;
  std::string out;
  std::string tokenizer_json;       // a Hugging Face tokenizer.json whose vocabulary the model carries
  std::string pre = "deepseek-v3";  // its pre-tokenizer
  bool vocab_given = false;         // --vocab given (with --tokenizer-json: pad to it)
};
// `latte make-model`: a random-weight GGUF with real shapes.
int run_make_model(const MakeModelOptions& opts);
// The presets, (name, one line for --help) in the order --help lists them.
std::vector<std::pair<std::string, std::string>> make_model_presets();
// The weight types make-model writes ("F32, F16, ...").
std::string weight_type_names();

// A weight type name in any case: "" and *canonical set ("q4_k" -> "Q4_K"),
// or what is wrong, listing the names taken (llama.cpp's mixes such as
// Q4_K_M are named as mixes).
std::string weight_type_problem(const std::string& name, std::string* canonical);

// `latte bench --shift`: a context shift of half of each depth against a
// prefill of the tokens it keeps, alternated, medians.
int run_bench_shift(const BenchOptions& opts);

}  // namespace latte::cli

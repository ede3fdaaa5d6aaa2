// `latte make-model`: a random-weight model file with real model shapes, for
// benchmarks (scripts/bench.sh model) and for trying Latte without a download.
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include "tools/cli/console.h"
#include "tools/paths.h"
#include "quant/ggml_types.h"
#include "tools/cli/commands.h"
#include "tools/dev/dev_commands.h"
#include "tools/dev/dev_errors.h"
#include "tools/cli/progress.h"
#include "tools/model_presets.h"
#include "tools/random_model.h"
#include "tools/tokenizer_json.h"

namespace latte::cli {

std::string weight_type_problem(const std::string& name, std::string* canonical) {
  std::string upper = name;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (std::uint32_t id = 0; id < 64; ++id) {
    const auto info = ggml_type_info(id);
    if (info && upper == info->name) {
      *canonical = info->name;
      return "";
    }
  }
  const std::string types = ggml_supported_type_names();
  // llama.cpp's file types such as Q4_K_M mix types per matrix; make-model
  // writes every matrix in one type, so the mix's main type is suggested.
  for (const char* suffix : {"_XS", "_S", "_M", "_L", "_XL"}) {
    if (upper.size() <= std::strlen(suffix) || !upper.ends_with(suffix)) continue;
    std::string base = upper.substr(0, upper.size() - std::strlen(suffix));
    for (std::uint32_t id = 0; id < 64; ++id) {
      const auto info = ggml_type_info(id);
      if (info && base == info->name)
        return "'" + name + "' is one of llama.cpp's mixes of types, not a type: make-model writes every matrix "
               "in one type (give " + base + " for the mix's main one; types: " + types + ")";
    }
  }
  return "'" + name + "' is not a weight type (types, in any case: " + types + ")";
}


std::vector<std::pair<std::string, std::string>> make_model_presets() {
  std::vector<std::pair<std::string, std::string>> v;
  for (const ModelPreset& p : model_presets()) v.emplace_back(p.name, p.what);
  return v;
}

std::string weight_type_names() { return ggml_supported_type_names(); }

static int make_model(const MakeModelOptions& o);

int run_make_model(const MakeModelOptions& o) {
  return as_api_errors([&] { return make_model(o); });
}

static int make_model(const MakeModelOptions& o) {
  std::optional<RandomModelSpec> preset = model_preset_spec(o.preset);
  if (!preset) throw UsageError("unknown preset '" + o.preset + "' (" + model_preset_names() + ")");
  RandomModelSpec& s = *preset;
  s.n_layers = o.layers;
  s.n_vocab = o.vocab;
  s.seed = o.seed;
  std::optional<VocabSpec> vocab;
  if (!o.tokenizer_json.empty()) {
    vocab = read_tokenizer_json(o.tokenizer_json, o.pre, o.vocab_given ? o.vocab : 0);
    Tokenizer::create(*vocab);  // refused here, not by the loader later
    s.vocab = &*vocab;
    s.n_vocab = static_cast<int>(vocab->tokens.size());
  }
  std::string type;
  if (const std::string problem = weight_type_problem(o.type, &type); !problem.empty()) throw UsageError(problem);
  for (std::uint32_t id = 0; id < 64; ++id)
    if (const auto info = ggml_type_info(id); info && type == info->name) s.weight_type = info->type;
  // Ctrl-C (or a termination request) abandons the work: nothing is left
  // behind, not even the temporary of the file being written.
  const CtrlCScope ctrl_c;
  struct Abandoned {};
  ProgressLine progress;
  const std::string name = file_name_of(o.out);
  s.on_progress = [&](RandomModelStage stage, std::uint64_t done, std::uint64_t total) {
    if (ctrl_c_pending() || termination_pending()) throw Abandoned{};
    char line[160];
    if (stage == RandomModelStage::weights)
      std::snprintf(line, sizeof line, "make-model %s: weights %.1f / %.1f M (%.0f%%)", name.c_str(), done / 1e6,
                    total / 1e6, total ? 100.0 * done / total : 100.0);
    else
      std::snprintf(line, sizeof line, "make-model %s: writing %s", name.c_str(), binary_bytes_of(done, total).c_str());
    progress.show(line);
  };
  const auto t0 = std::chrono::steady_clock::now();
  try {
    write_random_model(s, o.out);
  } catch (const Abandoned&) {
    progress.clear();
    const bool terminated = termination_pending();
    std::fprintf(stderr, "make-model: %s: nothing written\n",
                 terminated ? (std::string("stopped by ") + termination_signal_name()).c_str() : "interrupted");
    return terminated ? termination_exit_status() : 130;
  }
  progress.clear();
  std::fprintf(stderr, "wrote %s: %s preset, %s, vocab %d, %s weights (%s in %.1f s)\n", o.out.c_str(),
               o.preset.c_str(), count_of(o.layers, "layer").c_str(), s.n_vocab, type.c_str(),
               binary_bytes(static_cast<double>(std::filesystem::file_size(path_from_utf8(o.out)))).c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (ggml_type_info(static_cast<std::uint32_t>(s.weight_type))->block_elems > 32)
    std::fprintf(stderr, "(matrices whose rows a %s block does not divide are written as llama.cpp's quantizer "
                         "writes them: Q2_K, Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL, else F16)\n", type.c_str());
  return 0;
}

}  // namespace latte::cli

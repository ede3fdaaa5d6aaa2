// logit_hashes: one hash of the logits Latte computes per model, load form,
// cache type and attention form, over every architecture case, every weight
// type at DeepSeek-V2-Lite's real shapes, and MiniCPM3's and PLM's. For
// refactors that must leave results bit-identical (issue 59): run it before
// and after, under every ISA (scripts/logit_hashes.sh), and diff.
//
// Each configuration runs on 1 and on 3 threads, hashed apart, and the two
// must agree: latte.h promises bit-identical logits on any thread count
// while no token attends to more than 128 cached tokens (here at most 54).
// A difference ("THREADS DIFFER") or any failed call exits 1. What a configuration computes: eval_all of a
// 41-token prompt in chunks of 40 and 1 (the packed GEMM and the row kernels),
// 3 decodes, then one latte_session_step of the session decoding beside a copy
// of it fed 9 tokens (the 8-31 token tile path). The models are written with
// tools/random_model into --dir; the runs use latte.h alone.
//
// Usage: logit_hashes [--dir DIR] [--filter SUBSTRING]
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "latte/latte.h"
#include "tests/common/architecture_cases.h"
#include "tools/model_presets.h"
#include "tools/random_model.h"

namespace {

using latte::GgmlType;
using latte::RandomModelSpec;

struct Case {
  std::string name;
  RandomModelSpec spec;
};

// FNV-1a over the floats' bytes.
void mix(std::uint64_t& h, const float* v, std::size_t n) {
  const auto* b = reinterpret_cast<const unsigned char*>(v);
  for (std::size_t i = 0; i < n * sizeof(float); ++i) h = (h ^ b[i]) * 1099511628211ull;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (const latte::test::ArchCase& a : latte::test::architecture_cases()) v.push_back({a.name, a.spec});
  // V2-Lite's attention and expert widths (1408: the K-quants' fallbacks for
  // the down projections), a dense layer then a small MoE one, every type.
  const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,   GgmlType::Q4_1,
                            GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K,   GgmlType::Q3_K,
                            GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS};
  for (GgmlType t : types) {
    RandomModelSpec s = *latte::model_preset_spec("v2-lite");
    s.n_layers = 2, s.n_vocab = 512;
    s.n_experts = 4, s.n_experts_used = 2, s.n_experts_shared = 1, s.ff_expert = 1408, s.n_leading_dense = 1;
    s.weight_type = t;
    v.push_back({std::string("v2lite_moe_") + latte::ggml_type_name(t), s});
  }
  for (const char* preset : {"minicpm3-4b", "plm-1.8b"}) {
    RandomModelSpec s = *latte::model_preset_spec(preset);
    s.n_layers = 1, s.n_vocab = 512;
    s.weight_type = GgmlType::Q4_K;
    v.push_back({std::string(preset) + "_Q4_K", s});
  }
  return v;
}

bool ok(latte_status s, const std::string& what) {
  if (s == LATTE_OK) return true;
  std::fprintf(stderr, "logit_hashes: %s: %s: %s\n", what.c_str(), latte_status_string(s), latte_last_error());
  return false;
}

// The hash of one configuration's logits; false on a failed call.
bool run(latte_model* model, int cache, int form, int threads, std::uint64_t& h) {
  const int n_vocab = latte_model_n_vocab(model);
  latte_session_options o = latte_session_default_options();
  o.threads = threads, o.n_ctx = 256, o.cache_type = cache, o.prefill_chunk = 40, o.prefill_form = form;
  latte_session* s = nullptr;
  if (!ok(latte_session_create(model, &o, &s), "session_create")) return false;
  std::uint32_t r = 12345;
  auto next = [&] { return static_cast<std::int32_t>((r = r * 1664525u + 1013904223u) >> 8) % n_vocab; };
  std::vector<std::int32_t> prompt(41);
  for (auto& t : prompt) t = next();
  std::vector<float> all(prompt.size() * n_vocab);
  bool good = ok(latte_session_eval_all(s, prompt.data(), prompt.size(), all.data()), "eval_all");
  if (good) mix(h, all.data(), all.size());
  for (int i = 0; good && i < 3; ++i) {
    good = ok(latte_session_decode(s, next()), "decode");
    if (good) mix(h, latte_session_logits(s), n_vocab);
  }
  latte_session* fork = nullptr;
  if (good) good = ok(latte_session_copy(s, &fork), "session_copy");
  if (good) {
    std::int32_t one = next();
    std::vector<std::int32_t> chunk(9);
    for (auto& t : chunk) t = next();
    const latte_step_item items[2] = {{s, &one, 1}, {fork, chunk.data(), chunk.size()}};
    good = ok(latte_session_step(items, 2), "session_step");
    if (good) mix(h, latte_session_logits(s), n_vocab), mix(h, latte_session_logits(fork), n_vocab);
  }
  latte_session_free(fork);
  latte_session_free(s);
  return good;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = std::filesystem::temp_directory_path() / "latte-logit-hashes";
  std::string filter;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--dir") == 0) dir = argv[i + 1];
    else if (std::strcmp(argv[i], "--filter") == 0) filter = argv[i + 1];
    else return std::fprintf(stderr, "usage: logit_hashes [--dir DIR] [--filter SUBSTRING]\n"), 2;
  }
  std::filesystem::create_directories(dir);
  std::printf("# kernels: %s\n", latte_version());
  int failures = 0;
  const char* cache_names[] = {"f32", "f16", "int8", "int4"};
  const char* form_names[] = {"auto", "naive", "absorbed"};
  for (const Case& c : cases()) {
    if (c.name.find(filter) == std::string::npos) continue;
    const std::string path = dir + "/" + c.name + ".gguf";
    if (!std::filesystem::exists(path)) latte::write_random_model(c.spec, path);
    for (int mmap : {1, 0}) {
      latte_model_options mo = latte_model_default_options();
      mo.use_mmap = mmap;
      latte_model* model = nullptr;
      if (!ok(latte_model_load_with_options(path.c_str(), &mo, &model), c.name + ": load")) {
        ++failures;
        continue;
      }
      for (int cache : {LATTE_CACHE_F32, LATTE_CACHE_F16, LATTE_CACHE_INT8, LATTE_CACHE_INT4}) {
        for (int form : {LATTE_PREFILL_NAIVE, LATTE_PREFILL_ABSORBED}) {
          std::uint64_t first = 0;
          for (int threads : {1, 3}) {
            std::uint64_t h = 14695981039346656037ull;
            const bool good = run(model, cache, form, threads, h);
            if (threads == 1) first = h;
            const bool differ = good && h != first;
            std::printf("%-24s %-6s %-4s %-8s t%d %016llx%s\n", c.name.c_str(), mmap ? "mapped" : "read",
                        cache_names[cache], form_names[form], threads, static_cast<unsigned long long>(h),
                        !good ? "  FAILED" : differ ? "  THREADS DIFFER" : "");
            std::fflush(stdout);
            failures += !good || differ;
          }
        }
      }
      latte_model_free(model);
    }
  }
  return failures == 0 ? 0 : 1;
}

// `latte info`, and what every command that reads a model shares: the default
// model's path and the model's load with its progress.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tools/paths.h"
#include "tools/cli/commands.h"
#include "tools/model_catalog.h"
#include "tools/cli/progress.h"

namespace latte::cli {

namespace {

// Which kernels run, and why: capped by LATTE_ISA, or the best this CPU runs,
// naming what it lacks where that leaves slower kernels (an ARMv8.0 core such
// as the Raspberry Pi 4's Cortex-A72 has no dot products: asimd, not neon).
// The library chose (latte_kernels): the best up to the cap.
void print_kernels_line() {
  const std::string isa = api::kernels();
  const char* cap = std::getenv("LATTE_ISA");
  const bool capped = cap != nullptr && *cap != '\0';
  if (capped && isa == cap) {
    std::printf("kernels:       %s (LATTE_ISA=%s caps the choice)\n", isa.c_str(), cap);
    return;
  }
  // Either no cap, or one this CPU does not reach (LATTE_ISA=neon on a
  // Cortex-A72): then the CPU, not the cap, decided.
  std::string why = "the best this CPU runs";
  if (capped) why += " under LATTE_ISA=" + std::string(cap);
#if defined(__aarch64__) || defined(_M_ARM64)
  if (isa == "ref" || isa == "asimd")
    why += ": the neon kernels need ARMv8.2 dot products (asimddp), which it lacks";
#elif defined(__x86_64__) || defined(_M_X64)
  if (isa == "ref") why += ": the avx2 kernels need AVX2, FMA and F16C, which it lacks";
#endif
  std::printf("kernels:       %s (%s%s)\n", isa.c_str(), why.c_str(), capped || isa == "ref" ? "" : "; LATTE_ISA caps it");
}
double gib(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }
// Decimal GB, MB or kB, whichever keeps the figure at 1 or more: a small
// model's whole cache in "GB" read 0.000.
std::string decimal_bytes(double bytes) {
  char b[32];
  if (bytes >= 1e9) std::snprintf(b, sizeof b, "%.3f GB", bytes / 1e9);
  else if (bytes >= 1e6) std::snprintf(b, sizeof b, "%.3f MB", bytes / 1e6);
  else std::snprintf(b, sizeof b, "%.3f kB", bytes / 1e3);
  return b;
}
}  // namespace

std::string default_model_path() {
  // LATTE_MODEL, else the shipped model where an install puts it beside
  // bin/: <prefix>/share/latte/ (the build tree stages the same layout).
  if (const char* env = std::getenv("LATTE_MODEL"); env && *env) return env;
  const std::filesystem::path exe = path_from_utf8(executable_path());
  const std::filesystem::path share = exe.empty() ? std::filesystem::path("share/latte")
                                                  : exe.parent_path().parent_path() / "share" / "latte";
  return path_to_utf8(share / kShippedModelName);
}

std::string default_model_or_explain() {
  const std::string path = default_model_path();
  std::error_code ec;
  if (std::filesystem::exists(path_from_utf8(path), ec) || ec) return path;  // an unreadable one: the load says why
  const char* env = std::getenv("LATTE_MODEL");
  if (env && *env)
    fail(LATTE_ERR_IO, "LATTE_MODEL names '" + path + "', which does not exist (give -m FILE, or set "
                                  "LATTE_MODEL to a GGUF model file)");
  fail(LATTE_ERR_IO, "no model given, and the shipped one is not where this program looks for it: '" +
                                    path + "' (give -m FILE, or set LATTE_MODEL to a GGUF model file)");
}

void print_model_cache_table(std::FILE* out) {
  std::fprintf(out,
               "Cache per token per layer (elements): Latte keeps the latent [c_KV ; k_pe]; an MHA\n"
               "runtime keeps per-head K and V. Sizes are over all layers, in GiB; Latte's include\n"
               "its int8 and int4 scales and tile tables (latte_cache_bytes), MHA's are f16.\n\n");
  std::fprintf(out, "%-17s %6s %6s %6s %6s | %8s %8s %8s %8s | %8s %9s %9s %8s\n", "model", "layers", "latent", "MHA",
               "ratio", "f16 32K", "int8 32K", "int4 32K", "MHA 32K", "f16 128K", "int8 128K", "int4 128K", "MHA 128K");
  for (const auto& m : known_mla_models()) {
    auto latte_bytes = [&](std::int64_t tokens, latte_cache_type t) {
      return static_cast<double>(api::cache_bytes(m.n_layers, m.kv_lora_rank, m.d_rope, t, tokens));
    };
    auto mha = [&](std::int64_t tokens) { return static_cast<double>(m.mha_elems()) * 2 * m.n_layers * tokens; };
    std::fprintf(out, "%-17s %6d %6lld %6lld %6.2f | %8.2f %8.2f %8.2f %8.2f | %8.2f %9.2f %9.2f %8.2f\n", m.name,
                 m.n_layers, static_cast<long long>(m.latent_elems()), static_cast<long long>(m.mha_elems()),
                 static_cast<double>(m.mha_elems()) / m.latent_elems(), gib(latte_bytes(32768, LATTE_CACHE_F16)),
                 gib(latte_bytes(32768, LATTE_CACHE_INT8)), gib(latte_bytes(32768, LATTE_CACHE_INT4)), gib(mha(32768)),
                 gib(latte_bytes(131072, LATTE_CACHE_F16)), gib(latte_bytes(131072, LATTE_CACHE_INT8)),
                 gib(latte_bytes(131072, LATTE_CACHE_INT4)), gib(mha(131072)));
  }
  std::fprintf(out, "\nAt the maximum context (bytes, everything included):\n");
  for (const auto& m : known_mla_models()) {
    if (m.max_context == 0) continue;
    auto gb = [&](latte_cache_type t) {
      return static_cast<double>(api::cache_bytes(m.n_layers, m.kv_lora_rank, m.d_rope, t, m.max_context)) / 1e9;
    };
    std::fprintf(out, "  %-17s %7lld tokens: int4 %.3f GB, int8 %.3f GB, f16 %.3f GB, f32 %.3f GB\n", m.name,
                 static_cast<long long>(m.max_context), gb(LATTE_CACHE_INT4), gb(LATTE_CACHE_INT8), gb(LATTE_CACHE_F16),
                 gb(LATTE_CACHE_F32));
  }
}

int run_info_file(const std::string& path) {
  const api::Model model = open_model(path);
  const latte_model_desc d = model.describe();
  const std::vector<latte_tensor_info> tensors = model.tensors();
  // general.name where the file has it (latte_model_name falls back to the
  // file's name, which the line above already shows).
  std::string name;
  size_t n = 0;
  if (latte_model_meta_value(model.handle(), "general.name", nullptr, 0, &n) == LATTE_OK) name = model.name();
  std::printf("file:          %s (GGUF v%u, %lld tensors, %.1f MiB)\n", path.c_str(), d.gguf_version,
              static_cast<long long>(d.n_tensors), static_cast<double>(model.file_size()) / 1048576.0);
  std::printf("architecture:  %s%s%s\n", model.architecture().c_str(), name.empty() ? "" : "  name: ", name.c_str());
  std::printf("layers:        %d   d_model %d   vocab %d   context %lld\n", model.n_layers(), model.n_embd(),
              model.n_vocab(), static_cast<long long>(model.n_ctx_train()));
  std::printf("attention:     %d heads, q_lora %d, kv_lora (d_c) %d, nope %d, rope (d_R) %d, v %d, layout %s\n",
              d.n_heads, d.q_lora_rank, d.kv_lora_rank, d.d_nope, d.d_rope, d.d_v,
              d.kv_split ? "split attn_k_b/attn_v_b" : "legacy attn_kv_b");
  std::printf("rope:          %s pairs, base %g%s", d.rope_consecutive ? "consecutive" : "half-split", d.rope_freq_base,
              d.rope_yarn ? "" : "\n");
  if (d.rope_yarn)
    std::printf(", YaRN factor %g over %g, log multiplier %g\n", d.yarn_factor, d.yarn_orig_ctx, d.yarn_log_multiplier);
  std::printf("score scale:   %.6f\n", d.kq_scale);
  if (d.n_experts > 0)
    std::printf("ffn:           %d dense %s (ff %d), then MoE: %d experts, top-%d, %d shared, expert ff %d, %s gating%s\n",
                d.n_leading_dense, d.n_leading_dense == 1 ? "layer" : "layers", d.ff_dense, d.n_experts,
                d.n_experts_used, d.n_experts_shared, d.ff_expert, d.gating, d.n_expert_groups > 1 ? ", grouped" : "");
  else
    std::printf("ffn:           dense %s, ff %d\n", std::string(d.ffn) == "swiglu" ? "SwiGLU" : "relu^2", d.ff_dense);

  std::map<std::string, std::pair<int, std::int64_t>> types;  // type -> (tensors, bytes)
  for (const latte_tensor_info& t : tensors) {
    auto& e = types[t.type];
    ++e.first;
    e.second += t.n_bytes;
  }
  std::printf("tensor types: ");
  for (const auto& [type, e] : types)
    std::printf(" %s x%d (%.1f MiB)", type.c_str(), e.first, static_cast<double>(e.second) / 1048576.0);
  std::printf("\nweights:       %.1f MiB mapped in place, %.1f MiB packed at load\n",
              static_cast<double>(d.mapped_weight_bytes) / 1048576.0,
              static_cast<double>(d.packed_weight_bytes) / 1048576.0);

  // What a session with n_ctx 0 gets: the trained context, else 4096.
  const std::int64_t max_ctx = model.n_ctx_train() > 0 ? model.n_ctx_train() : 4096;
  std::printf("latent cache:  %d elements per token per layer (MHA would keep %d)\n", d.kv_lora_rank + d.d_rope,
              d.n_heads * (d.d_nope + d.d_rope + d.d_v));
  for (const auto& [type, type_name] : {std::pair{LATTE_CACHE_F32, "f32"}, std::pair{LATTE_CACHE_F16, "f16"},
                                        std::pair{LATTE_CACHE_INT8, "int8"}, std::pair{LATTE_CACHE_INT4, "int4"}}) {
    // A shape one layout cannot hold (int8 needs d_c and d_R in multiples of
    // 4) is said on its line: the model still runs with the others, and the
    // rest of the report must not be lost to an exception.
    int64_t at_max = 0, at_64k = 0;
    if (latte_model_cache_bytes(model.handle(), type, max_ctx, &at_max) != LATTE_OK ||
        latte_model_cache_bytes(model.handle(), type, 1 << 16, &at_64k) != LATTE_OK) {
      std::string why = latte_last_error();
      if (const auto colon = why.find("shape: "); colon != std::string::npos) why = why.substr(colon + 7);
      std::printf("  %-5s not available: %s\n", type_name, why.c_str());
      continue;
    }
    std::printf("  %-5s %8.1f bytes per token (all layers), %12s at %lld tokens", type_name,
                static_cast<double>(at_64k) / (1 << 16), decimal_bytes(static_cast<double>(at_max)).c_str(),
                static_cast<long long>(max_ctx));
    if (at_max >= (1 << 30) / 10) std::printf(" (%.2f GiB)", static_cast<double>(at_max) / (1 << 30));
    std::printf("\n");
  }
  if (model.has_tokenizer()) {
    std::string chat;
    if (const char* f = latte_chat_format(model.handle())) chat = f;
    else chat = std::string("none (") + latte_last_error() + ")";
    std::printf("tokenizer:     %s%s%s, %d tokens, BOS %d, EOS %d, chat format %s\n",
                std::string(d.tokenizer) == "bpe" ? "byte-level BPE" : "SentencePiece BPE",
                *d.pre_tokenizer ? ", pre-tokenizer " : "", d.pre_tokenizer, model.n_vocab(), model.bos(), model.eos(),
                chat.c_str());
  } else {
    std::printf("tokenizer:     none (tokenizer.ggml.* absent: token ids only)\n");
  }
  print_kernels_line();
  return 0;
}

}  // namespace latte::cli

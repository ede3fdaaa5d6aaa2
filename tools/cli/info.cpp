// `latte info`, and what every command that reads a model shares: the default
// model's path and the model's load with its progress.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "kernels/isa.h"
#include "tools/cli/commands.h"
#include "tools/cli/progress.h"
#include "runtime/mla/latent_cache.h"
#include "runtime/model/model.h"
#include "tools/model_catalog.h"
#include "runtime/tokenizer/chat.h"
#include "runtime/error.h"
#include "platform/paths.h"

namespace latte::cli {

namespace {

// Which kernels run, and why: capped by LATTE_ISA, or the best this CPU runs,
// naming what it lacks where that leaves slower kernels (an ARMv8.0 core such
// as the Raspberry Pi 4's Cortex-A72 has no dot products: asimd, not neon).
void print_kernels_line() {
  const Isa isa = active_isa();
  const char* cap = std::getenv("LATTE_ISA");
  const bool capped = cap != nullptr && *cap != '\0';
  // active_isa() has refused a LATTE_ISA that names no ISA.
  const Isa asked = capped ? parse_isa(cap).value_or(isa) : isa;
  if (capped && asked == isa) {
    std::printf("kernels:       %s (LATTE_ISA=%s caps the choice)\n", isa_name(isa), cap);
    return;
  }
  // Either no cap, or one this CPU does not reach (LATTE_ISA=neon on a
  // Cortex-A72): then the CPU, not the cap, decided.
  std::string why = "the best this CPU runs";
  if (capped) why += " under LATTE_ISA=" + std::string(cap);
#if defined(LATTE_HAVE_NEON)
  if ((isa == Isa::ref || isa == Isa::asimd) && !isa_supported(Isa::neon))
    why += ": the neon kernels need ARMv8.2 dot products (asimddp), which it lacks";
#elif defined(LATTE_HAVE_AVX2)
  if (isa == Isa::ref && !isa_supported(Isa::avx2)) why += ": the avx2 kernels need AVX2, FMA and F16C, which it lacks";
#endif
  std::printf("kernels:       %s (%s%s)\n", isa_name(isa), why.c_str(),
              capped || isa == Isa::ref ? "" : "; LATTE_ISA caps it");
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
    throw Error(Status::io_error, "LATTE_MODEL names '" + path + "', which does not exist (give -m FILE, or set "
                                  "LATTE_MODEL to a GGUF model file)");
  throw Error(Status::io_error, "no model given, and the shipped one is not where this program looks for it: '" +
                                    path + "' (give -m FILE, or set LATTE_MODEL to a GGUF model file)");
}

std::shared_ptr<const Model> load_model(const std::string& path, bool no_mmap, bool mmap) {
  LoadOptions o;
  ProgressLine progress;  // erased by its destructor if the load fails
  const std::string name = file_name_of(path);
  o.on_progress = [&](std::size_t done, std::size_t total) {
    progress.show("loading " + name + ": " + binary_bytes_of(static_cast<double>(done), static_cast<double>(total)));
  };
  o.file = no_mmap ? GgufLoad::read : mmap ? GgufLoad::map : GgufLoad::automatic;
  const auto t0 = std::chrono::steady_clock::now();
  auto model = Model::load(path, o);
  progress.clear();
  const GgufFile& f = model->file();
  std::fprintf(stderr, "loaded %s: %s, %s, in %.1f s\n", path.c_str(),
               binary_bytes(static_cast<double>(f.file_size())).c_str(),
               f.private_data() ? "read into memory" : "mapped",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (!f.load_note().empty()) std::fprintf(stderr, "note: %s; --no-mmap reads it all the same\n", f.load_note().c_str());
  return model;
}

void print_model_cache_table(std::FILE* out) {
  std::fprintf(out,
               "Cache per token per layer (elements): Latte keeps the latent [c_KV ; k_pe]; an MHA\n"
               "runtime keeps per-head K and V. Sizes are over all layers, in GiB; Latte's include\n"
               "its int8 scales and tile tables (LatentCache::bytes_for), MHA's are f16.\n\n");
  std::fprintf(out, "%-17s %6s %6s %6s %6s | %8s %8s %8s | %8s %8s %8s\n", "model", "layers", "latent", "MHA",
               "ratio", "f16 32K", "int8 32K", "MHA 32K", "f16 128K", "int8 128K", "MHA 128K");
  for (const auto& m : known_mla_models()) {
    auto latte_bytes = [&](std::int64_t tokens, LatentStorage st) {
      return static_cast<double>(LatentCache::bytes_for(m.n_layers, m.kv_lora_rank, m.d_rope, tokens, st));
    };
    auto mha = [&](std::int64_t tokens) { return static_cast<double>(m.mha_elems()) * 2 * m.n_layers * tokens; };
    std::fprintf(out, "%-17s %6d %6lld %6lld %6.2f | %8.2f %8.2f %8.2f | %8.2f %9.2f %8.2f\n", m.name, m.n_layers,
                 static_cast<long long>(m.latent_elems()), static_cast<long long>(m.mha_elems()),
                 static_cast<double>(m.mha_elems()) / m.latent_elems(), gib(latte_bytes(32768, LatentStorage::f16)),
                 gib(latte_bytes(32768, LatentStorage::int8)), gib(mha(32768)),
                 gib(latte_bytes(131072, LatentStorage::f16)), gib(latte_bytes(131072, LatentStorage::int8)),
                 gib(mha(131072)));
  }
  std::fprintf(out, "\nAt the maximum context (bytes, everything included):\n");
  for (const auto& m : known_mla_models()) {
    if (m.max_context == 0) continue;
    std::fprintf(out, "  %-17s %7lld tokens: int8 %.3f GB, f16 %.3f GB, f32 %.3f GB\n", m.name,
                 static_cast<long long>(m.max_context),
                 LatentCache::bytes_for(m.n_layers, m.kv_lora_rank, m.d_rope, m.max_context, LatentStorage::int8) / 1e9,
                 LatentCache::bytes_for(m.n_layers, m.kv_lora_rank, m.d_rope, m.max_context, LatentStorage::f16) / 1e9,
                 LatentCache::bytes_for(m.n_layers, m.kv_lora_rank, m.d_rope, m.max_context, LatentStorage::f32) / 1e9);
  }
}

int run_info_file(const std::string& path) {
  auto model = load_model(path);
  const ModelParams& p = model->params();
  const MlaConfig& m = p.mla;
  std::printf("file:          %s (GGUF v%u, %zu tensors, %.1f MiB)\n", path.c_str(), model->file().version(),
              model->file().tensor_count(), model->file().file_size() / 1048576.0);
  std::printf("architecture:  %s%s%s\n", model_arch_name(p.arch), p.name.empty() ? "" : "  name: ", p.name.c_str());
  std::printf("layers:        %d   d_model %d   vocab %d   context %lld\n", p.n_layers, m.d_model, p.n_vocab,
              static_cast<long long>(p.context_length));
  std::printf("attention:     %d heads, q_lora %d, kv_lora (d_c) %d, nope %d, rope (d_R) %d, v %d, layout %s\n",
              m.n_heads, m.q_lora_rank, m.kv_lora_rank, m.d_nope, m.d_rope, m.d_v,
              p.kv_layout == KvLayout::split ? "split attn_k_b/attn_v_b" : "legacy attn_kv_b");
  std::printf("rope:          %s pairs, base %g%s", m.rope.style == RopeStyle::consecutive_pairs ? "consecutive" : "half-split",
              m.rope.freq_base, m.rope.yarn ? "" : "\n");
  if (m.rope.yarn)
    std::printf(", YaRN factor %g over %g, log multiplier %g\n", m.rope.yarn_factor, m.rope.yarn_orig_ctx,
                m.rope.yarn_log_multiplier);
  std::printf("score scale:   %.6f\n", m.kq_scale());
  if (p.n_experts > 0)
    std::printf("ffn:           %d dense %s (ff %d), then MoE: %d experts, top-%d, %d shared, expert ff %d, %s gating%s\n",
                p.n_leading_dense, p.n_leading_dense == 1 ? "layer" : "layers", p.ff_dense, p.n_experts,
                p.n_experts_used, p.n_experts_shared, p.ff_expert,
                p.gating == GatingFunc::softmax ? "softmax" : "sigmoid", p.n_expert_groups > 1 ? ", grouped" : "");
  else
    std::printf("ffn:           dense %s, ff %d\n", p.ffn_kind == FfnKind::swiglu ? "SwiGLU" : "relu^2", p.ff_dense);

  std::map<std::string, std::pair<int, std::uint64_t>> types;  // type -> (tensors, bytes)
  for (const auto& t : model->file().tensors()) {
    auto& e = types[ggml_type_name(t.type)];
    ++e.first;
    e.second += t.n_bytes;
  }
  std::printf("tensor types: ");
  for (const auto& [name, e] : types) std::printf(" %s x%d (%.1f MiB)", name.c_str(), e.first, e.second / 1048576.0);
  std::printf("\nweights:       %.1f MiB mapped in place, %.1f MiB packed at load\n",
              model->mapped_weight_bytes() / 1048576.0, model->packed_weight_bytes() / 1048576.0);

  const std::int64_t max_ctx = p.resolve_n_ctx(0);  // what a session with n_ctx 0 gets
  std::printf("latent cache:  %d elements per token per layer (MHA would keep %d)\n", m.kv_lora_rank + m.d_rope,
              m.n_heads * (m.d_nope + m.d_rope + m.d_v));
  for (LatentStorage st : {LatentStorage::f32, LatentStorage::f16, LatentStorage::int8}) {
    // A shape one layout cannot hold (int8 needs d_c and d_R in multiples of
    // 4) is said on its line: the model still runs with the others, and the
    // rest of the report must not be lost to an exception.
    if (const char* why = latent_layout_problem(st, m.kv_lora_rank, m.d_rope, kLatentCacheTileTokens); *why) {
      std::printf("  %-5s not available: %s\n", latent_storage_name(st), why);
      continue;
    }
    const double per_tok =
        static_cast<double>(LatentCache::bytes_for(p.n_layers, m.kv_lora_rank, m.d_rope, 1 << 16, st)) / (1 << 16);
    std::printf("  %-5s %8.1f bytes per token (all layers), %12s at %lld tokens\n", latent_storage_name(st), per_tok,
                decimal_bytes(static_cast<double>(LatentCache::bytes_for(p.n_layers, m.kv_lora_rank, m.d_rope, max_ctx, st)))
                    .c_str(),
                static_cast<long long>(max_ctx));
  }
  if (const Tokenizer* tok = model->tokenizer()) {
    std::string chat;
    try {
      chat = std::string(chat_format_name(ChatFormatter(*tok, detect_chat_format(*tok, model_arch_name(p.arch))).format()));
    } catch (const Error& e) {
      chat = std::string("none (") + e.what() + ")";
    }
    std::printf("tokenizer:     %s%s%s, %d tokens, BOS %d, EOS %d, chat format %s\n",
                tok->kind() == Tokenizer::Kind::bpe ? "byte-level BPE" : "SentencePiece BPE",
                tok->pre().empty() ? "" : ", pre-tokenizer ", tok->pre().c_str(), tok->n_vocab(), tok->bos_id(),
                tok->eos_id(), chat.c_str());
  } else {
    std::printf("tokenizer:     none (tokenizer.ggml.* absent: token ids only)\n");
  }
  print_kernels_line();
  return 0;
}

}  // namespace latte::cli

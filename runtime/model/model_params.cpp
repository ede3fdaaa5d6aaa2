#include "runtime/model/model_params.h"

#include <cmath>
#include <string>

#include "runtime/error.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/mla/latent_cache.h"

namespace latte {

const char* model_arch_name(ModelArch a) {
  switch (a) {
    case ModelArch::deepseek2: return "deepseek2";
    case ModelArch::minicpm3: return "minicpm3";
    case ModelArch::plm: return "plm";
  }
  return "?";
}

namespace {

[[noreturn]] void bad(const std::string& msg) { throw Error(Status::bad_file, msg); }

int as_dim(std::uint64_t v, const std::string& key, std::uint64_t max = 1u << 20) {
  if (v > max) bad("metadata " + key + " = " + std::to_string(v) + " is out of range");
  return static_cast<int>(v);
}

// A float hyperparameter must be finite (and > 0 where asked): NaN or inf
// in one of them turns every logit into NaN without an error.
float as_real(float v, const std::string& key, bool positive) {
  if (!std::isfinite(v) || (positive && !(v > 0.f)))
    bad("metadata " + key + " = " + std::to_string(v) + (positive ? " must be finite and > 0" : " must be finite"));
  return v;
}

}  // namespace

ModelParams ModelParams::from_gguf(const GgufFile& f) {
  ModelParams p;
  const std::string arch(f.require_string("general.architecture"));
  // A NUL inside would cut the name wherever it is printed as a C string.
  if (arch.find('\0') != std::string::npos)
    bad("metadata general.architecture holds a NUL byte (" + std::to_string(arch.size()) + " bytes)");
  if (arch == "deepseek2") p.arch = ModelArch::deepseek2;
  else if (arch == "minicpm3") p.arch = ModelArch::minicpm3;
  else if (arch == "plm") p.arch = ModelArch::plm;
  else
    throw Error(Status::unsupported, "unknown architecture '" + arch +
                                         "' (general.architecture): Latte runs deepseek2, minicpm3, plm");
  p.name = std::string(f.get_string("general.name", ""));
  const std::string k = arch + ".";
  auto req = [&](const char* key, std::uint64_t max = 1u << 20) {
    return as_dim(f.require_u64(k + key), k + key, max);
  };
  auto opt = [&](const char* key, std::uint64_t def, std::uint64_t max = 1u << 20) {
    return as_dim(f.get_u64(k + key, def), k + key, max);
  };
  auto real = [&](const char* key, float def, bool positive) {
    return as_real(f.get_f32(k + key, def), k + key, positive);
  };
  auto req_real = [&](const char* key, bool positive) {
    return as_real(f.require_f32(k + key), k + key, positive);
  };

  MlaConfig& m = p.mla;
  p.n_layers = req("block_count", 4096);
  // No layers: nothing could run (every session would be refused).
  if (p.n_layers == 0) bad("metadata " + k + "block_count = 0: a model needs at least one layer");
  p.context_length = opt("context_length", 0, kMaxContextTokens);
  m.d_model = req("embedding_length");
  m.n_heads = req("attention.head_count", 4096);
  const int n_head_kv = opt("attention.head_count_kv", m.n_heads, 4096);
  m.q_lora_rank = opt("attention.q_lora_rank", 0);
  m.kv_lora_rank = req("attention.kv_lora_rank");
  m.d_rope = req("rope.dimension_count", 4096);
  m.rms_eps = req_real("attention.layer_norm_rms_epsilon", true);
  // Absent: d_model / n_heads, as llama.cpp defaults them (its MiniCPM3
  // converter writes key_length only; value_length is then 2560 / 40 = 64).
  const std::uint64_t head_dim = m.n_heads > 0 ? static_cast<std::uint64_t>(m.d_model / m.n_heads) : 0;
  const int key_length = opt("attention.key_length", head_dim);
  const int value_length = opt("attention.value_length", head_dim);
  const int key_mla = opt("attention.key_length_mla", 0);
  const int value_mla = opt("attention.value_length_mla", 0);
  if (key_mla > 0 && value_mla > 0) {
    // New layout: key/value_length describe the cache row (d_c + d_R, d_c).
    p.kv_layout = KvLayout::split;
    if (n_head_kv != 1) bad(k + "attention.head_count_kv must be 1 in the split (MLA) layout");
    if (key_length != m.kv_lora_rank + m.d_rope || value_length != m.kv_lora_rank)
      bad(k + "attention.key_length = " + std::to_string(key_length) + " / " + k + "attention.value_length = " +
          std::to_string(value_length) + " do not match " + k + "attention.kv_lora_rank = " +
          std::to_string(m.kv_lora_rank) + " + " + k + "rope.dimension_count = " + std::to_string(m.d_rope));
    m.d_nope = key_mla - m.d_rope;
    m.d_v = value_mla;
  } else {
    p.kv_layout = KvLayout::legacy;
    m.d_nope = key_length - m.d_rope;
    m.d_v = value_length;
  }
  if (m.d_nope <= 0)
    bad(k + (p.kv_layout == KvLayout::split ? "attention.key_length_mla" : "attention.key_length") + " = " +
        std::to_string(m.d_nope + m.d_rope) + " is not larger than " + k + "rope.dimension_count = " +
        std::to_string(m.d_rope));

  RopeParams& r = m.rope;
  r.dim = m.d_rope;
  r.style = p.arch == ModelArch::minicpm3 ? RopeStyle::half_split : RopeStyle::consecutive_pairs;
  r.freq_base = real("rope.freq_base", 10000.f, true);
  r.attn_factor = real("rope.scaling.attn_factor", 1.f, true);
  p.rope_orig_ctx = opt("rope.scaling.original_context_length", 0, kMaxContextTokens);
  const bool typed = f.has(k + "rope.scaling.type");
  const std::string scaling(f.get_string(k + "rope.scaling.type", "none"));
  if (scaling == "yarn") {
    r.yarn = true;
    r.yarn_factor = req_real("rope.scaling.factor", true);
    // Absent: the trained context, as llama.cpp defaults it.
    r.yarn_orig_ctx = static_cast<double>(p.context_length > 0 && !f.has(k + "rope.scaling.original_context_length")
                                              ? p.context_length
                                              : req("rope.scaling.original_context_length", kMaxContextTokens));
    r.yarn_log_multiplier = real("rope.scaling.yarn_log_multiplier", 0.f, false);
    r.yarn_beta_fast = real("rope.scaling.yarn_beta_fast", 32.f, true);
    r.yarn_beta_slow = real("rope.scaling.yarn_beta_slow", 1.f, true);
    if (!(r.yarn_orig_ctx > 0))  // (the factor is checked above)
      bad(k + "rope.scaling.original_context_length must be > 0 for yarn");
    // minicpm3 and plm: llama.cpp's RoPE multiplies cos and sin by YaRN's
    // magnitude 1 + 0.1 ln(factor) (Hugging Face's generic YaRN does the
    // same), and their score scale stays 1/sqrt(head dim). deepseek2's graph
    // cancels that factor and puts its own mscale into the score scale
    // (MlaConfig::kq_scale). Which magnitude llama.cpp derives from a
    // yarn_log_multiplier on these architectures changed between its
    // versions: refused rather than guessed.
    if (p.arch != ModelArch::deepseek2) {
      if (r.yarn_log_multiplier != 0)
        throw Error(Status::unsupported, k + "rope.scaling.yarn_log_multiplier = " +
                                             std::to_string(r.yarn_log_multiplier) +
                                             ": Latte runs YaRN's log multiplier for deepseek2 only");
      if (r.yarn_factor > 1) r.attn_factor *= 1.0 + 0.1 * std::log(r.yarn_factor);
    }
  } else if (scaling != "none" && scaling != "") {
    throw Error(Status::unsupported, "rope scaling type '" + scaling + "' (" + k +
                                         "rope.scaling.type) is not supported: Latte runs none and yarn");
  }
  // Without a type, llama.cpp scales linearly by rope.scaling.factor (or the
  // older rope.scale_linear): refused rather than run unscaled.
  if (!typed) {
    for (const char* key : {"rope.scaling.factor", "rope.scale_linear"}) {
      const float factor = real(key, 1.f, false);
      if (factor != 1.f && factor != 0.f)
        throw Error(Status::unsupported, k + key + " = " + std::to_string(factor) + " without " + k +
                                             "rope.scaling.type means linear RoPE scaling, which Latte does not "
                                             "run (it runs none and yarn)");
    }
  }
  // Per-position query scaling (llama 4 style, which llama.cpp's deepseek2
  // graph applies when this is nonzero): refused rather than ignored.
  if (const float t = real("attention.temperature_scale", 0.f, false); t != 0.f)
    throw Error(Status::unsupported, k + "attention.temperature_scale = " + std::to_string(t) +
                                         ": position-dependent query scaling is not supported");
  if (p.arch == ModelArch::minicpm3 || p.arch == ModelArch::plm) {
    // Both scale scores by 1/sqrt(head dim) only (llama.cpp's graphs).
    m.kq_scale_override = 1.0 / std::sqrt(static_cast<double>(m.d_nope + m.d_rope));
  } else if (p.kv_layout == KvLayout::legacy) {
    // Legacy deepseek2: key_length (d_nope + d_R) under the sqrt, as the default.
  }

  // Feed-forward.
  p.ff_dense = req("feed_forward_length");
  p.ffn_kind = p.arch == ModelArch::plm ? FfnKind::relu2 : FfnKind::swiglu;
  p.n_experts = opt("expert_count", 0, 1u << 16);
  if (p.n_experts > 0) {
    p.n_experts_used = req("expert_used_count", 1u << 16);
    p.n_experts_shared = opt("expert_shared_count", 0, 1u << 16);
    p.ff_expert = req("expert_feed_forward_length");
    p.n_leading_dense = opt("leading_dense_block_count", 0, 4096);
    p.expert_weights_scale = real("expert_weights_scale", 0.f, false);
    p.expert_weights_norm = f.get_bool(k + "expert_weights_norm", false);
    const int g = opt("expert_gating_func", 1, 16);
    if (g > 2) bad(k + "expert_gating_func = " + std::to_string(g) + " (1 softmax, 2 sigmoid)");
    // 0 (none): softmax, as llama.cpp reads it (DeepSeek V2 / V2.5 files).
    p.gating = g == 0 ? GatingFunc::softmax : static_cast<GatingFunc>(g);
    p.n_expert_groups = opt("expert_group_count", 0, 1u << 16);
    p.n_expert_groups_used = opt("expert_group_used_count", 0, 1u << 16);
    if (p.n_experts_used < 1 || p.n_experts_used > p.n_experts)
      bad(k + "expert_used_count = " + std::to_string(p.n_experts_used) + " must be in [1, " + k +
          "expert_count = " + std::to_string(p.n_experts) + "]");
    if (p.n_expert_groups > 1) {
      if (p.n_experts % p.n_expert_groups != 0)
        bad(k + "expert_count = " + std::to_string(p.n_experts) + " is not a multiple of " + k +
            "expert_group_count = " + std::to_string(p.n_expert_groups));
      if (p.n_expert_groups_used < 1 || p.n_expert_groups_used > p.n_expert_groups)
        bad(k + "expert_group_used_count must be in [1, expert_group_count]");
      // The kept groups must hold the experts used (else top-k would pick
      // masked ones).
      if (static_cast<std::int64_t>(p.n_expert_groups_used) * (p.n_experts / p.n_expert_groups) < p.n_experts_used)
        bad(k + "expert_group_used_count x (expert_count / expert_group_count) = " +
            std::to_string(static_cast<std::int64_t>(p.n_expert_groups_used) * (p.n_experts / p.n_expert_groups)) +
            " experts, fewer than expert_used_count " + std::to_string(p.n_experts_used));
    }
  }

  if (p.arch == ModelArch::minicpm3) {
    p.embed_scale = 12.f;
    p.residual_scale = 1.4f / std::sqrt(static_cast<float>(p.n_layers));
    p.logit_scale = 256.f / static_cast<float>(m.d_model);
  }

  // Vocabulary size: the key if present, else the token list.
  if (f.has(k + "vocab_size")) {
    p.n_vocab = req("vocab_size", 1u << 24);
  } else if (f.has("tokenizer.ggml.tokens")) {
    const std::uint64_t n = f.require_array("tokenizer.ggml.tokens").count;
    if (n == 0 || n > (1u << 24))
      bad("tokenizer.ggml.tokens holds " + std::to_string(n) + " tokens (" + k + "vocab_size absent): not in [1, 2^24]");
    p.n_vocab = static_cast<int>(n);
  }
  if (p.n_vocab <= 0) bad("vocabulary size unknown (" + k + "vocab_size and tokenizer.ggml.tokens absent)");

  // The attention shapes by the keys they come from (validate() below names
  // MlaConfig's fields, which a file does not have).
  auto positive = [&](int v, const std::string& key) {
    if (v <= 0) bad(key + " = " + std::to_string(v) + " must be > 0");
  };
  positive(m.d_model, k + "embedding_length");
  positive(m.n_heads, k + "attention.head_count");
  positive(m.kv_lora_rank, k + "attention.kv_lora_rank");
  if (m.d_rope <= 0 || m.d_rope % 2 != 0)
    bad(k + "rope.dimension_count = " + std::to_string(m.d_rope) + " must be even and > 0 (RoPE rotates pairs)");
  positive(m.d_v, k + (p.kv_layout == KvLayout::split ? "attention.value_length_mla" : "attention.value_length"));
  try {
    m.validate();
  } catch (const Error& e) {
    bad(std::string("inconsistent attention shapes: ") + e.what());
  }
  // Finite inputs can still overflow here (a huge YaRN log multiplier squared).
  const float kq = static_cast<float>(m.kq_scale());
  if (!std::isfinite(kq) || !(kq > 0.f))
    bad("attention score scale " + std::to_string(kq) + " (from " + k + "rope.scaling.yarn_log_multiplier, " + k +
        "rope.scaling.factor, " + k + "rope.scaling.attn_factor and the key length) is not finite and > 0");
  return p;
}

}  // namespace latte

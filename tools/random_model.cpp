#include "tools/random_model.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "quant/ggml_blocks.h"
#include "platform/atomic_file.h"
#include "runtime/error.h"
#include "tools/gguf_writer.h"
#include "runtime/tokenizer/tokenizer.h"

namespace latte {

namespace {

std::string utf8(std::uint32_t cp) {  // code points below U+0800 only (GPT-2's byte alphabet)
  std::string s;
  if (cp < 0x80) s += static_cast<char>(cp);
  else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

std::uint32_t block_elems(GgmlType t) { return ggml_type_info(static_cast<std::uint32_t>(t))->block_elems; }

}  // namespace

GgmlType row_type_for(GgmlType want, std::uint64_t cols) {
  if (cols % block_elems(want) == 0) return want;
  // As llama.cpp's quantizer does for rows a 256-element K-quant block does
  // not divide, then F16 where the 32-element fallback does not divide either.
  GgmlType fallback = GgmlType::F16;
  if (want == GgmlType::Q2_K || want == GgmlType::Q3_K) fallback = GgmlType::Q4_0;
  if (want == GgmlType::Q4_K) fallback = GgmlType::Q5_0;
  if (want == GgmlType::Q5_K) fallback = GgmlType::Q5_1;
  if (want == GgmlType::Q6_K) fallback = GgmlType::Q8_0;
  if (want == GgmlType::IQ4_XS) fallback = GgmlType::IQ4_NL;
  return cols % block_elems(fallback) == 0 ? fallback : GgmlType::F16;
}

std::vector<std::uint8_t> random_model_bytes(const RandomModelSpec& s) {
  if (s.n_vocab < 258) throw Error(Status::invalid_argument, "random model: n_vocab must be >= 258");
  for (const auto* f : {&s.rope_factors_long, &s.rope_factors_short})
    if (!f->empty() && f->size() != static_cast<std::size_t>(s.d_rope / 2))
      throw Error(Status::invalid_argument, "random model: " + std::to_string(f->size()) +
                                                " rope factors given for d_rope " + std::to_string(s.d_rope) +
                                                " (one per rotated pair: " + std::to_string(s.d_rope / 2) + ")");
  std::mt19937_64 rng(s.seed);
  GgufWriter w;
  const std::string arch = model_arch_name(s.arch);
  const std::string k = arch + ".";
  const std::uint64_t d = s.d_model, nh = s.n_heads, dc = s.kv_lora_rank, dr = s.d_rope, dn = s.d_nope,
                      dv = s.d_v, ql = s.q_lora_rank, V = s.n_vocab;

  if (s.alignment != 0) w.set_alignment(s.alignment);
  w.add_string("general.architecture", arch);
  w.add_string("general.name", "latte-random-" + arch);
  w.add_u32(k + "context_length", static_cast<std::uint32_t>(s.context_length));
  w.add_u32(k + "embedding_length", s.d_model);
  w.add_u32(k + "block_count", s.n_layers);
  w.add_u32(k + "feed_forward_length", s.ff);
  w.add_u32(k + "attention.head_count", s.n_heads);
  w.add_f32(k + "rope.freq_base", s.rope_freq_base);
  w.add_f32(k + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w.add_u32(k + "vocab_size", s.n_vocab);
  w.add_u32(k + "attention.q_lora_rank", s.q_lora_rank);
  w.add_u32(k + "attention.kv_lora_rank", s.kv_lora_rank);
  if (s.layout == KvLayout::split) {
    w.add_u32(k + "attention.head_count_kv", 1);
    w.add_u32(k + "attention.key_length", s.kv_lora_rank + s.d_rope);
    w.add_u32(k + "attention.value_length", s.kv_lora_rank);
    w.add_u32(k + "attention.key_length_mla", s.d_nope + s.d_rope);
    w.add_u32(k + "attention.value_length_mla", s.d_v);
  } else {
    w.add_u32(k + "attention.head_count_kv", s.n_heads);
    w.add_u32(k + "attention.key_length", s.d_nope + s.d_rope);
    w.add_u32(k + "attention.value_length", s.d_v);
  }
  w.add_u32(k + "rope.dimension_count", s.d_rope);
  if (s.yarn) {
    w.add_string(k + "rope.scaling.type", "yarn");
    w.add_f32(k + "rope.scaling.factor", s.yarn_factor);
    w.add_u32(k + "rope.scaling.original_context_length", s.yarn_orig_ctx);
    w.add_f32(k + "rope.scaling.yarn_log_multiplier", s.yarn_log_multiplier);
  }
  if (s.n_experts > 0) {
    w.add_u32(k + "leading_dense_block_count", s.n_leading_dense);
    w.add_u32(k + "expert_count", s.n_experts);
    w.add_u32(k + "expert_used_count", s.n_experts_used);
    w.add_u32(k + "expert_shared_count", s.n_experts_shared);
    w.add_u32(k + "expert_feed_forward_length", s.ff_expert);
    w.add_f32(k + "expert_weights_scale", s.expert_weights_scale);
    w.add_bool(k + "expert_weights_norm", s.expert_weights_norm);
    w.add_u32(k + "expert_gating_func", static_cast<std::uint32_t>(s.gating));
    if (s.n_expert_groups > 0) {
      w.add_u32(k + "expert_group_count", s.n_expert_groups);
      w.add_u32(k + "expert_group_used_count", s.n_expert_groups_used);
    }
  }
  if (s.vocab) {
    const VocabSpec& v = *s.vocab;
    if (v.tokens.size() != static_cast<std::size_t>(s.n_vocab))
      throw Error(Status::invalid_argument, "random model: n_vocab differs from the vocabulary's size");
    w.add_string("tokenizer.ggml.model", v.model);
    w.add_string("tokenizer.ggml.pre", v.pre);
    w.add_string_array("tokenizer.ggml.tokens", v.tokens);
    w.add_i32_array("tokenizer.ggml.token_type", v.token_types);
    w.add_string_array("tokenizer.ggml.merges", v.merges);
    if (v.bos_id >= 0) w.add_u32("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(v.bos_id));
    if (v.eos_id >= 0) w.add_u32("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(v.eos_id));
    w.add_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  } else if (s.tokenizer) {
    // A byte-level vocabulary: 256 byte tokens, fillers, BOS, EOS.
    std::vector<std::string> tokens;
    std::vector<std::int32_t> types;
    for (int b = 0; b < 256; ++b) {
      tokens.push_back(utf8(gpt2_byte_to_codepoint(static_cast<unsigned char>(b))));
      types.push_back(1);
    }
    if (s.control_tokens.size() > static_cast<std::size_t>(s.n_vocab - 258))
      throw Error(Status::invalid_argument, "random model: more control tokens than the vocabulary has room for");
    for (const std::string& t : s.control_tokens) {
      tokens.push_back(t);
      types.push_back(3);  // control
    }
    for (int i = 256 + static_cast<int>(s.control_tokens.size()); i < s.n_vocab - 2; ++i) {
      tokens.push_back("<filler_" + std::to_string(i) + ">");
      types.push_back(4);  // user-defined
    }
    tokens.push_back("<|begin▁of▁sentence|>");
    types.push_back(3);
    tokens.push_back("<|end▁of▁sentence|>");
    types.push_back(3);
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", "deepseek-llm");
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_i32_array("tokenizer.ggml.token_type", types);
    w.add_string_array("tokenizer.ggml.merges", std::vector<std::string>{});
    w.add_u32("tokenizer.ggml.bos_token_id", s.n_vocab - 2);
    w.add_u32("tokenizer.ggml.eos_token_id", s.n_vocab - 1);
    w.add_bool("tokenizer.ggml.add_bos_token", true);
  }
  if (s.edit_metadata) s.edit_metadata(w);

  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  // The tensors are listed twice: first only counting the matrices'
  // elements (no tensor added, no random number drawn), for the progress
  // said after each matrix; then made.
  bool counting = true;
  std::uint64_t elements_total = 0, elements_done = 0;
  // A matrix with ne = {cols, rows, (n)}: uniform / sqrt(cols), quantized row by row.
  auto matrix = [&](const std::string& name, std::initializer_list<std::uint64_t> ne, float gain = 1.f) {
    std::uint64_t cols = *ne.begin(), rows = 1;
    for (auto it = ne.begin() + 1; it != ne.end(); ++it) rows *= *it;
    if (counting) {
      elements_total += cols * rows;
      return;
    }
    const GgmlType t = row_type_for(s.weight_type, cols);
    std::vector<float> row(cols);
    const std::size_t rb = ggml_row_bytes(t, cols);
    std::vector<std::uint8_t> data(rb * rows);
    const float scale = gain / std::sqrt(static_cast<float>(cols));
    for (std::uint64_t r = 0; r < rows; ++r) {
      for (auto& v : row) v = uni(rng) * scale;
      quantize_row_ref(t, row.data(), data.data() + r * rb, cols);
    }
    w.add_tensor(name, t, ne, std::move(data));
    elements_done += cols * rows;
    if (s.on_progress) s.on_progress(RandomModelStage::weights, elements_done, elements_total);
  };
  auto norm = [&](const std::string& name, std::uint64_t n) {
    if (counting) return;
    std::vector<float> v(n);
    for (auto& x : v) x = 1.f + 0.2f * uni(rng);
    w.add_tensor_f32(name, {n}, v);
  };
  auto blk = [](int i, const char* n) { return "blk." + std::to_string(i) + "." + n + ".weight"; };

  auto add_tensors = [&] {
    matrix("token_embd.weight", {d, V}, s.embd_range * std::sqrt(static_cast<float>(d)));
    norm("output_norm.weight", d);
    if (s.arch == ModelArch::minicpm3 && s.rope_factors && !counting) {
      // Frequency divisors per rotated pair, as MiniCPM3's LongRoPE lists
      // them: near 1 (short) and up to tens for the slow pairs (long).
      std::vector<float> shorts(dr / 2), longs(dr / 2);
      for (std::uint64_t i = 0; i < dr / 2; ++i) {
        const float u = static_cast<float>(i) / static_cast<float>(dr / 2);
        shorts[i] = 1.f + 0.3f * u * (1.f + 0.5f * uni(rng));
        longs[i] = 1.f + 30.f * u * u * (1.f + 0.5f * uni(rng));
      }
      if (!s.rope_factors_long.empty()) longs = s.rope_factors_long;
      if (!s.rope_factors_short.empty()) shorts = s.rope_factors_short;
      w.add_tensor_f32("rope_factors_long.weight", {dr / 2}, longs);
      w.add_tensor_f32("rope_factors_short.weight", {dr / 2}, shorts);
    }
    if (!s.tied_output) matrix("output.weight", {d, V});
    for (int i = 0; i < s.n_layers; ++i) {
      norm(blk(i, "attn_norm"), d);
      if (ql > 0) {
        matrix(blk(i, "attn_q_a"), {d, ql});
        norm(blk(i, "attn_q_a_norm"), ql);
        matrix(blk(i, "attn_q_b"), {ql, nh * (dn + dr)});
      } else {
        matrix(blk(i, "attn_q"), {d, nh * (dn + dr)});
      }
      matrix(blk(i, "attn_kv_a_mqa"), {d, dc + dr});
      norm(blk(i, "attn_kv_a_norm"), dc);
      if (s.layout == KvLayout::split) {
        matrix(blk(i, "attn_k_b"), {dn, dc, nh});
        matrix(blk(i, "attn_v_b"), {dc, dv, nh});
      } else {
        matrix(blk(i, "attn_kv_b"), {dc, nh * (dn + dv)});
      }
      matrix(blk(i, "attn_output"), {nh * dv, d});
      norm(blk(i, "ffn_norm"), d);
      const bool swiglu = s.arch != ModelArch::plm;
      if (s.n_experts == 0 || i < s.n_leading_dense) {
        if (swiglu) matrix(blk(i, "ffn_gate"), {d, static_cast<std::uint64_t>(s.ff)});
        matrix(blk(i, "ffn_up"), {d, static_cast<std::uint64_t>(s.ff)});
        matrix(blk(i, "ffn_down"), {static_cast<std::uint64_t>(s.ff), d});
      } else {
        const std::uint64_t ne = s.n_experts, ff = s.ff_expert;
        matrix(blk(i, "ffn_gate_inp"), {d, ne}, 4.f);
        if (s.expert_bias && !counting) {
          std::vector<float> b(ne);
          for (auto& x : b) x = 0.05f * uni(rng);
          w.add_tensor_f32("blk." + std::to_string(i) + ".exp_probs_b.bias", {ne}, b);
        }
        matrix(blk(i, "ffn_gate_exps"), {d, ff, ne});
        matrix(blk(i, "ffn_up_exps"), {d, ff, ne});
        matrix(blk(i, "ffn_down_exps"), {ff, d, ne});
        if (s.n_experts_shared > 0) {
          const std::uint64_t sf = ff * s.n_experts_shared;
          matrix(blk(i, "ffn_gate_shexp"), {d, sf});
          matrix(blk(i, "ffn_up_shexp"), {d, sf});
          matrix(blk(i, "ffn_down_shexp"), {sf, d});
        }
      }
    }
  };
  add_tensors();
  counting = false;
  add_tensors();
  return w.to_bytes();
}

void write_random_model(const RandomModelSpec& spec, const std::string& path) {
  // The target judged before minutes of work, not after (a directory, a
  // FIFO, a link to one); AtomicFile judges it again when it writes.
  (void)AtomicFile::target_of(path, "write model");
  const auto bytes = random_model_bytes(spec);
  // Whole or not at all (scripts/bench.sh reuses a model file it finds), in
  // steps of 64 MiB, each said to on_progress.
  AtomicFile f(path, "write model", /*private_mode=*/false);
  constexpr std::size_t kStep = std::size_t{64} << 20;
  for (std::size_t at = 0; at < bytes.size(); at += kStep) {
    const std::size_t n = std::min(kStep, bytes.size() - at);
    f.write(bytes.data() + at, n);
    if (spec.on_progress) spec.on_progress(RandomModelStage::writing, at + n, bytes.size());
  }
  f.commit(/*sync=*/false);
}

}  // namespace latte

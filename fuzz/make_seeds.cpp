// Writes the GGUF fuzzer's seed corpus into a folder: small valid files made
// with GgufWriter (every value type, nested arrays, every tensor type Latte
// reads, a tiny deepseek2-shaped model, another alignment, version 2, a valid
// vocabulary of each tokenizer kind) plus truncated copies of each.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "runtime/error.h"
#include "tools/gguf_writer.h"
#include "runtime/tokenizer/pretokenizer.h"
#include "runtime/tokenizer/tokenizer.h"

namespace {

using latte::GgmlType;
using latte::GgufValueType;
using latte::GgufWriter;
using V = GgufWriter::Value;

std::vector<std::uint8_t> bytes_for(GgmlType type, std::vector<std::uint64_t> ne, std::uint8_t fill) {
  auto info = latte::ggml_type_info(static_cast<std::uint32_t>(type));
  std::uint64_t n = 1;
  for (std::uint64_t d : ne) n *= d;
  std::vector<std::uint8_t> b(n / info->block_elems * info->block_bytes);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(fill + i * 7);
  return b;
}

void add(GgufWriter& w, const char* name, GgmlType type, std::vector<std::uint64_t> ne) {
  auto data = bytes_for(type, ne, static_cast<std::uint8_t>(ne[0]));
  w.add_tensor(name, type, ne, std::move(data));
}

GgufWriter all_value_types() {
  GgufWriter w;
  w.add_u8("t.u8", 1);
  w.add_i8("t.i8", -2);
  w.add_u16("t.u16", 3);
  w.add_i16("t.i16", -4);
  w.add_u32("t.u32", 5);
  w.add_i32("t.i32", -6);
  w.add_f32("t.f32", 7.5f);
  w.add_bool("t.bool", true);
  w.add_string("t.string", "eight");
  w.add_u64("t.u64", 9);
  w.add_i64("t.i64", -10);
  w.add_f64("t.f64", 11.25);
  const std::uint8_t u8s[] = {1, 2};
  const std::int16_t i16s[] = {-1, 2};
  const float f32s[] = {0.5f, 1.5f};
  const double f64s[] = {2.5};
  const bool bools[] = {true, false};
  const std::uint64_t u64s[] = {1, 2, 3};
  const std::string strs[] = {"a", "bc", ""};
  w.add("a.u8", V::array_u8(u8s));
  w.add("a.i16", V::array_i16(i16s));
  w.add("a.f32", V::array_f32(f32s));
  w.add("a.f64", V::array_f64(f64s));
  w.add("a.bool", V::array_bool(bools));
  w.add("a.u64", V::array_u64(u64s));
  w.add("a.string", V::array_string(strs));
  const std::int32_t r[] = {1, 2};
  std::vector<V> rows = {V::array_i32(r), V::array_string(strs)};
  w.add("a.nested", V::array(GgufValueType::array, rows));
  return w;
}

GgufWriter every_tensor_type() {
  GgufWriter w;
  w.add_string("general.architecture", "deepseek2");
  add(w, "f32", GgmlType::F32, {4, 2});
  add(w, "f16", GgmlType::F16, {4});
  add(w, "bf16", GgmlType::BF16, {2, 2});
  add(w, "q4_0", GgmlType::Q4_0, {32});
  add(w, "q4_1", GgmlType::Q4_1, {32});
  add(w, "q5_0", GgmlType::Q5_0, {32});
  add(w, "q5_1", GgmlType::Q5_1, {32});
  add(w, "q8_0", GgmlType::Q8_0, {32, 1, 2});
  add(w, "q2_k", GgmlType::Q2_K, {256});
  add(w, "q3_k", GgmlType::Q3_K, {256, 2});
  add(w, "q4_k", GgmlType::Q4_K, {256});
  add(w, "q5_k", GgmlType::Q5_K, {256});
  add(w, "q6_k", GgmlType::Q6_K, {256, 1, 1, 1});
  add(w, "iq4_nl", GgmlType::IQ4_NL, {64});
  add(w, "iq4_xs", GgmlType::IQ4_XS, {256});
  return w;
}

GgufWriter tiny_deepseek2() {
  GgufWriter w;
  w.add_string("general.architecture", "deepseek2");
  w.add_string("general.name", "seed");
  w.add_u32("deepseek2.context_length", 256);
  w.add_u32("deepseek2.embedding_length", 8);
  w.add_u32("deepseek2.block_count", 1);
  w.add_u32("deepseek2.attention.head_count", 2);
  w.add_u32("deepseek2.attention.head_count_kv", 1);
  w.add_u32("deepseek2.attention.kv_lora_rank", 4);
  w.add_u32("deepseek2.rope.dimension_count", 2);
  w.add_f32("deepseek2.rope.freq_base", 10000.f);
  w.add_f32("deepseek2.attention.layer_norm_rms_epsilon", 1e-6f);
  w.add_string("deepseek2.rope.scaling.type", "yarn");
  w.add_bool("deepseek2.expert_weights_norm", false);
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "deepseek-llm");
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
  for (int i = 0; i < 12; ++i) {
    tokens.push_back(std::string(1, static_cast<char>('a' + i)));
    types.push_back(i < 10 ? 1 : 3);
  }
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  const std::string merges[] = {"a b", "c d"};
  w.add_string_array("tokenizer.ggml.merges", merges);
  w.add_u32("tokenizer.ggml.bos_token_id", 10);
  w.add_u32("tokenizer.ggml.eos_token_id", 11);
  add(w, "token_embd.weight", GgmlType::F32, {8, 12});
  add(w, "output_norm.weight", GgmlType::F32, {8});
  add(w, "blk.0.attn_k_b.weight", GgmlType::F16, {2, 4, 2});
  add(w, "blk.0.ffn_down.weight", GgmlType::Q8_0, {32, 8});
  return w;
}

// A valid byte-level BPE vocabulary: the 256 byte tokens of GPT-2's
// alphabet, a few merges, a control token.
GgufWriter vocab_gpt2() {
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "deepseek-llm");
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    latte::detail::append_utf8(s, latte::gpt2_byte_to_codepoint(static_cast<unsigned char>(b)));
    tokens.push_back(s);
  }
  const std::string merges[] = {"H e", "l l", "He ll", "o \xC4\xA0", "1 2"};
  for (const std::string& m : merges) tokens.push_back(m.substr(0, m.find(' ')) + m.substr(m.find(' ') + 1));
  tokens.push_back("<|endoftext|>");
  std::vector<std::int32_t> types(tokens.size(), 1);
  types.back() = 3;
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_string_array("tokenizer.ggml.merges", merges);
  w.add_u32("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(tokens.size() - 1));
  return w;
}

// A valid SentencePiece vocabulary: <unk>, <s>, </s>, the 256 <0xXX> byte
// tokens, a few scored pieces.
GgufWriter vocab_llama() {
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "llama");
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<std::int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(latte::hex_byte_token(static_cast<unsigned char>(b)));
    types.push_back(6);
  }
  for (const char* p : {"\xE2\x96\x81", "H", "e", "l", "o", "He", "ll", "\xE2\x96\x81Hell"}) {
    tokens.push_back(p);
    types.push_back(1);
  }
  std::vector<float> scores(tokens.size());
  for (std::size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add("tokenizer.ggml.scores", V::array_f32(scores));
  w.add_u32("tokenizer.ggml.unknown_token_id", 0);
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
  return w;
}

void write(const std::string& dir, const std::string& name, const std::vector<std::uint8_t>& b) {
  const std::string path = dir + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(b.data(), 1, b.size(), f) != b.size()) {
    std::fprintf(stderr, "make_seeds: cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  try {
    std::vector<std::pair<std::string, GgufWriter>> seeds;
    seeds.emplace_back("empty", GgufWriter());
    seeds.emplace_back("values", all_value_types());
    seeds.emplace_back("tensors", every_tensor_type());
    seeds.emplace_back("deepseek2", tiny_deepseek2());
    GgufWriter aligned = tiny_deepseek2();
    aligned.set_alignment(64);
    seeds.emplace_back("aligned64", std::move(aligned));
    seeds.emplace_back("vocab_gpt2", vocab_gpt2());
    seeds.emplace_back("vocab_llama", vocab_llama());
    GgufWriter v2 = every_tensor_type();
    v2.faults().version = 2;
    seeds.emplace_back("v2", std::move(v2));
    int n = 0;
    for (const auto& [name, w] : seeds) {
      const std::vector<std::uint8_t> b = w.to_bytes();
      write(dir, name + ".gguf", b);
      ++n;
      // Truncated copies: inside the header, the metadata, the infos, the data.
      for (std::size_t cut : {std::size_t{16}, b.size() / 4, b.size() / 2, b.size() * 3 / 4, b.size() - 1}) {
        if (cut == 0 || cut >= b.size()) continue;
        write(dir, name + ".cut" + std::to_string(cut) + ".gguf",
              std::vector<std::uint8_t>(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(cut)));
        ++n;
      }
    }
    std::printf("make_seeds: %d files in %s\n", n, dir.c_str());
  } catch (const latte::Error& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}

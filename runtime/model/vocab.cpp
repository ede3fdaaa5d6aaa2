#include "runtime/model/vocab.h"

#include "runtime/gguf/gguf_file.h"

namespace latte {

bool gguf_has_vocab(const GgufFile& f) {
  return f.has("tokenizer.ggml.model") && f.has("tokenizer.ggml.tokens");
}

VocabSpec vocab_from_gguf(const GgufFile& f) {
  VocabSpec v;
  v.model = std::string(f.require_string("tokenizer.ggml.model"));
  v.pre = std::string(f.get_string("tokenizer.ggml.pre", ""));
  for (auto t : f.get_string_array("tokenizer.ggml.tokens")) v.tokens.emplace_back(t);
  if (f.has("tokenizer.ggml.token_type")) v.token_types = f.get_i32_array("tokenizer.ggml.token_type");
  if (f.has("tokenizer.ggml.scores")) v.scores = f.get_f32_array("tokenizer.ggml.scores");
  if (f.has("tokenizer.ggml.merges"))
    for (auto m : f.get_string_array("tokenizer.ggml.merges")) v.merges.emplace_back(m);
  v.bos_id = f.get_i32("tokenizer.ggml.bos_token_id", -1);
  v.eos_id = f.get_i32("tokenizer.ggml.eos_token_id", -1);
  v.unk_id = f.get_i32("tokenizer.ggml.unknown_token_id", -1);
  v.pad_id = f.get_i32("tokenizer.ggml.padding_token_id", -1);
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (f.has(key)) v.eot_ids.push_back(f.require_i32(key));
  // llama.cpp's defaults: no BOS for gpt2 unless asked, BOS for llama.
  v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", v.model == "llama");
  v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", true);
  v.chat_template = std::string(f.get_string("tokenizer.chat_template", ""));
  return v;
}

}  // namespace latte

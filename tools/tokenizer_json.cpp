#include "tools/tokenizer_json.h"

#include <fstream>
#include <sstream>

#include "tools/paths.h"
#include "runtime/error.h"
#include "runtime/grammar/json_value.h"

namespace latte {

namespace {

[[noreturn]] void bad(const std::string& path, const std::string& msg) {
  throw Error(Status::invalid_argument, "tokenizer.json '" + path + "': " + msg);
}

}  // namespace

VocabSpec read_tokenizer_json(const std::string& path, const std::string& pre, int pad_to) {
  using grammar::JsonValue;
  std::ifstream in(path_from_utf8(path), std::ios::binary);
  if (!in) throw Error(Status::io_error, "cannot open '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  const JsonValue doc = grammar::parse_json(ss.str(), path);
  const JsonValue* model = doc.find("model");
  if (!model || !model->is(JsonValue::Type::object)) bad(path, "no \"model\" object");
  const JsonValue* type = model->find("type");
  if (!type || type->text != "BPE") bad(path, "model.type is not \"BPE\" (only byte-level BPE is read)");
  const JsonValue* vocab = model->find("vocab");
  if (!vocab || !vocab->is(JsonValue::Type::object)) bad(path, "no model.vocab object");

  VocabSpec spec;
  spec.model = "gpt2";
  spec.pre = pre;
  spec.add_bos = true;
  auto place = [&](std::int64_t id, const std::string& text, std::int32_t t) {
    if (id < 0 || id >= (1 << 22)) bad(path, "token id " + std::to_string(id) + " out of range");
    if (static_cast<std::size_t>(id) >= spec.tokens.size()) {
      spec.tokens.resize(static_cast<std::size_t>(id) + 1);
      spec.token_types.resize(static_cast<std::size_t>(id) + 1, 0);
    }
    spec.tokens[static_cast<std::size_t>(id)] = text;
    spec.token_types[static_cast<std::size_t>(id)] = t;
  };
  for (const auto& [text, id] : vocab->members) {
    if (!id.is(JsonValue::Type::number)) bad(path, "model.vocab's id of '" + text + "' is not a number");
    place(static_cast<std::int64_t>(id.number), text, 1);
  }
  if (const JsonValue* added = doc.find("added_tokens"))
    for (const JsonValue& a : added->items) {
      const JsonValue* id = a.find("id");
      const JsonValue* content = a.find("content");
      const JsonValue* special = a.find("special");
      if (!id || !content) bad(path, "an added token without id or content");
      const bool control = special && special->is(JsonValue::Type::boolean) && special->boolean;
      place(static_cast<std::int64_t>(id->number), content->text, control ? 3 : 4);
    }
  if (pad_to > 0 && spec.tokens.size() < static_cast<std::size_t>(pad_to)) {
    spec.tokens.resize(static_cast<std::size_t>(pad_to));
    spec.token_types.resize(static_cast<std::size_t>(pad_to), 0);
  }
  for (std::size_t i = 0; i < spec.tokens.size(); ++i)
    if (spec.token_types[i] == 0) {  // an id the file leaves unused
      spec.tokens[i] = "<unused_" + std::to_string(i) + ">";
      spec.token_types[i] = 5;
    }
  if (const JsonValue* merges = model->find("merges"))
    for (const JsonValue& m : merges->items) {
      if (m.is(JsonValue::Type::string)) spec.merges.push_back(m.text);
      else if (m.is(JsonValue::Type::array) && m.items.size() == 2) spec.merges.push_back(m.items[0].text + " " + m.items[1].text);
      else bad(path, "a merge that is neither \"a b\" nor [a, b]");
    }
  for (std::size_t i = 0; i < spec.tokens.size(); ++i) {
    const std::string& t = spec.tokens[i];
    if (spec.token_types[i] != 3) continue;
    if (t.find("begin") != std::string::npos && spec.bos_id < 0) spec.bos_id = static_cast<std::int32_t>(i);
    if ((t.find("end▁of▁sentence") != std::string::npos || t == "<|endoftext|>" || t == "</s>") && spec.eos_id < 0)
      spec.eos_id = static_cast<std::int32_t>(i);
  }
  if (spec.bos_id < 0) spec.add_bos = false;
  return spec;
}

}  // namespace latte

// libFuzzer target for the GGUF reader: parses the input as a GGUF file from
// memory, then touches every metadata value (recursively through arrays),
// every typed accessor and every tensor's first and last data byte; a file
// that carries a tokenizer has it built, encode a text and decode it. Only
// latte::Error may come out of a malformed file; anything else (a crash, a
// sanitizer report, another exception, a huge allocation) is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/error.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/model/vocab.h"
#include "runtime/tokenizer/tokenizer.h"

namespace {

using latte::Error;
using latte::GgufArrayElements;
using latte::GgufFile;
using latte::GgufValue;
using latte::GgufValueType;

volatile std::uint64_t g_sink;

// Reads every byte a value's view claims, so ASan sees any view past the input.
std::uint64_t touch(const GgufValue& v) {
  std::uint64_t h = static_cast<std::uint32_t>(v.type);
  if (v.bytes) h += v.data[0] + v.data[v.bytes - 1];
  if (v.type == GgufValueType::array) {
    GgufArrayElements it = v.elements();
    GgufValue e;
    std::uint64_t n = 0;
    while (it.next(e)) {
      h += touch(e);
      ++n;
    }
    if (n != v.count) __builtin_trap();  // a validated array always iterates fully
  } else if (v.type == GgufValueType::string) {
    h += v.as_string()->size();
  } else if (auto i = v.as_i64()) {
    h += static_cast<std::uint64_t>(*i);
  } else if (auto f = v.as_f64()) {
    h += *f != *f;
  } else if (auto b = v.as_bool()) {
    h += *b;
  }
  return h;
}

template <class F>
void guarded(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
}

// The file's tokenizer, as a model load builds it, over a text with plain
// words, digits, a special token and a byte of invalid UTF-8.
std::uint64_t use_vocab(const GgufFile& f) {
  if (!latte::gguf_has_vocab(f)) return 0;
  const latte::Tokenizer tok = latte::Tokenizer::create(latte::vocab_from_gguf(f));
  std::uint64_t h = 0;
  for (bool special : {false, true}) {
    std::vector<std::int32_t> ids;
    guarded([&] { ids = tok.encode("Hello world, 12345 <|endoftext|> abc\xff\n", false, special); });
    for (std::int32_t id : ids)
      if (id < 0 || id >= tok.n_vocab()) __builtin_trap();
    h += tok.decode(ids).size() + ids.size();
  }
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::uint64_t h = 0;
  try {
    GgufFile f = GgufFile::from_memory(data, size);
    h += f.alignment() + f.data_offset();
    for (const latte::GgufKv& kv : f.kvs()) {
      if (f.find(kv.key) != &kv) __builtin_trap();  // keys are unique after parsing
      h += touch(kv.value);
      const std::string_view k = kv.key;
      guarded([&] { h += f.get_u32(k, 0); });
      guarded([&] { h += f.get_u64(k, 0); });
      guarded([&] { h += static_cast<std::uint64_t>(f.get_i32(k, 0)); });
      guarded([&] { h += static_cast<std::uint64_t>(f.get_i64(k, 0)); });
      guarded([&] { h += f.get_f32(k, 0.f) > 0.f; });
      guarded([&] { h += f.get_bool(k, false); });
      guarded([&] { h += f.get_string(k, "").size(); });
      if (kv.value.type == GgufValueType::array) {
        guarded([&] { h += f.get_string_array(k).size(); });
        guarded([&] { h += f.get_i32_array(k).size(); });
        guarded([&] { h += f.get_u32_array(k).size(); });
        guarded([&] { h += f.get_i64_array(k).size(); });
        guarded([&] { h += f.get_f32_array(k).size(); });
      }
    }
    for (const latte::GgufTensor& t : f.tensors()) {
      if (f.find_tensor(t.name) != &t) __builtin_trap();
      if (t.data < data || t.n_bytes == 0 || t.data + t.n_bytes > data + size) __builtin_trap();
      // The sizes are exact (nothing wrapped) and the data sits on the alignment.
      const auto info = latte::ggml_type_info(static_cast<std::uint32_t>(t.type));
      if (!info || t.n_bytes / info->block_bytes * info->block_elems != t.n_elements ||
          t.n_bytes % info->block_bytes != 0)
        __builtin_trap();
      if (static_cast<std::uint64_t>(t.data - data) != f.data_offset() + t.offset ||
          t.offset % f.alignment() != 0)
        __builtin_trap();
      h += t.data[0] + t.data[t.n_bytes - 1] + t.n_elements + t.row_bytes;
      h += f.require_tensor(t.name, t.dims()).n_dims;
      h += t.shape_string().size();
    }
    guarded([&] { h += use_vocab(f); });
  } catch (const Error&) {
  }
  g_sink = h;
  return 0;
}

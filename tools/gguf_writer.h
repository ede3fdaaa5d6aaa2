// GGUF v3 writer (little-endian), for tests and tools that make model files.
// Values and tensors are written in the order they were added; tensor data is
// laid out in that order, each tensor at the next multiple of the alignment.
//
// The writer checks what it is given (duplicate keys or tensor names, data
// size against type and shape, ...) and throws latte::Error(invalid_argument).
// For tests of the reader, GgufWriter::Faults turns those checks off and can
// override header fields and tensor offsets to produce broken files.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "quant/ggml_types.h"
#include "runtime/gguf/gguf_file.h"

namespace latte {

class GgufWriter {
 public:
  // One encoded metadata value: its type and the bytes that follow the type id.
  struct Value {
    GgufValueType type = GgufValueType::u8;
    std::vector<std::uint8_t> payload;

    static Value u8(std::uint8_t v);
    static Value i8(std::int8_t v);
    static Value u16(std::uint16_t v);
    static Value i16(std::int16_t v);
    static Value u32(std::uint32_t v);
    static Value i32(std::int32_t v);
    static Value f32(float v);
    static Value boolean(bool v);
    static Value string(std::string_view v);
    static Value u64(std::uint64_t v);
    static Value i64(std::int64_t v);
    static Value f64(double v);
    // Array of values that all have type `elem` (checked), including arrays
    // of arrays (nested arrays may have different element types).
    static Value array(GgufValueType elem, std::span<const Value> elems);
    // Arrays of plain values.
    static Value array_u8(std::span<const std::uint8_t> v);
    static Value array_i8(std::span<const std::int8_t> v);
    static Value array_u16(std::span<const std::uint16_t> v);
    static Value array_i16(std::span<const std::int16_t> v);
    static Value array_u32(std::span<const std::uint32_t> v);
    static Value array_i32(std::span<const std::int32_t> v);
    static Value array_f32(std::span<const float> v);
    static Value array_bool(std::span<const bool> v);
    static Value array_u64(std::span<const std::uint64_t> v);
    static Value array_i64(std::span<const std::int64_t> v);
    static Value array_f64(std::span<const double> v);
    static Value array_string(std::span<const std::string> v);
    static Value array_string(std::span<const std::string_view> v);
  };

  // For reader tests: what to break. Defaults write a valid file.
  struct Faults {
    bool unchecked = false;  // accept duplicate keys/names, bad shapes, unknown types, ...
    std::optional<std::uint32_t> magic;  // as a little-endian u32 ("GGUF" = 0x46554747)
    std::optional<std::uint32_t> version;
    std::optional<std::uint64_t> tensor_count;
    std::optional<std::uint64_t> kv_count;
  };

  GgufWriter() = default;

  // Alignment of the data section and of each tensor (power of two). Setting
  // it also writes the `general.alignment` key (as u32, at the front).
  void set_alignment(std::uint32_t alignment);
  std::uint32_t alignment() const { return alignment_; }
  Faults& faults() { return faults_; }

  // ---- metadata
  void add(std::string key, Value value);
  // Drops a key added before; false if there is none of that name.
  bool remove(std::string_view key);
  void add_u8(std::string key, std::uint8_t v) { add(std::move(key), Value::u8(v)); }
  void add_i8(std::string key, std::int8_t v) { add(std::move(key), Value::i8(v)); }
  void add_u16(std::string key, std::uint16_t v) { add(std::move(key), Value::u16(v)); }
  void add_i16(std::string key, std::int16_t v) { add(std::move(key), Value::i16(v)); }
  void add_u32(std::string key, std::uint32_t v) { add(std::move(key), Value::u32(v)); }
  void add_i32(std::string key, std::int32_t v) { add(std::move(key), Value::i32(v)); }
  void add_f32(std::string key, float v) { add(std::move(key), Value::f32(v)); }
  void add_bool(std::string key, bool v) { add(std::move(key), Value::boolean(v)); }
  void add_string(std::string key, std::string_view v) { add(std::move(key), Value::string(v)); }
  void add_u64(std::string key, std::uint64_t v) { add(std::move(key), Value::u64(v)); }
  void add_i64(std::string key, std::int64_t v) { add(std::move(key), Value::i64(v)); }
  void add_f64(std::string key, double v) { add(std::move(key), Value::f64(v)); }
  void add_string_array(std::string key, std::span<const std::string> v) {
    add(std::move(key), Value::array_string(v));
  }
  void add_i32_array(std::string key, std::span<const std::int32_t> v) {
    add(std::move(key), Value::array_i32(v));
  }
  void add_f32_array(std::string key, std::span<const float> v) {
    add(std::move(key), Value::array_f32(v));
  }

  // ---- tensors
  // ne[0] is the contiguous dimension (1..4 dims). `data` must hold exactly
  // the bytes the type and shape need.
  void add_tensor(std::string name, GgmlType type, std::span<const std::uint64_t> ne,
                  std::vector<std::uint8_t> data);
  void add_tensor(std::string name, GgmlType type, std::initializer_list<std::uint64_t> ne,
                  std::vector<std::uint8_t> data) {
    add_tensor(std::move(name), type, std::span<const std::uint64_t>(ne.begin(), ne.size()),
               std::move(data));
  }
  // F32 convenience: the values in ne order.
  void add_tensor_f32(std::string name, std::initializer_list<std::uint64_t> ne,
                      std::span<const float> values);
  // Anything at all, for reader tests (needs faults().unchecked): any type id,
  // any number of dims, any data size; `offset` overrides the offset written
  // in the tensor info (the data is still placed where it would normally go).
  void add_tensor_raw(std::string name, std::uint32_t type_id, std::vector<std::uint64_t> ne,
                      std::vector<std::uint8_t> data, std::optional<std::uint64_t> offset = {});

  std::size_t kv_count() const { return kvs_.size(); }
  std::size_t tensor_count() const { return tensors_.size(); }

  // The whole file.
  std::vector<std::uint8_t> to_bytes() const;
  // Streams to `path` (io_error if it cannot be written).
  void write_file(const std::string& path) const;

 private:
  struct Kv {
    std::string key;
    Value value;
  };
  struct Tensor {
    std::string name;
    std::uint32_t type_id;
    std::vector<std::uint64_t> ne;
    std::vector<std::uint8_t> data;
    std::optional<std::uint64_t> offset_override;
  };
  template <class Sink>
  void emit(Sink& sink) const;

  std::uint32_t alignment_ = kGgufDefaultAlignment;
  bool alignment_set_ = false;
  Faults faults_;
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace latte

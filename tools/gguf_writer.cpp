#include "tools/gguf_writer.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "platform/atomic_file.h"
#include "runtime/error.h"

namespace latte {

namespace {

template <class T>
void put(std::vector<std::uint8_t>& out, T v) {
  const std::size_t n = out.size();
  out.resize(n + sizeof(T));
  std::memcpy(out.data() + n, &v, sizeof(T));
}

void put_string(std::vector<std::uint8_t>& out, std::string_view s) {
  put<std::uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

template <class T>
GgufWriter::Value scalar(GgufValueType type, T v) {
  GgufWriter::Value val;
  val.type = type;
  put(val.payload, v);
  return val;
}

template <class T>
GgufWriter::Value plain_array(GgufValueType elem, std::span<const T> v) {
  GgufWriter::Value val;
  val.type = GgufValueType::array;
  val.payload.reserve(12 + v.size() * sizeof(T));
  put<std::uint32_t>(val.payload, static_cast<std::uint32_t>(elem));
  put<std::uint64_t>(val.payload, v.size());
  for (const T& x : v) put(val.payload, x);
  return val;
}

template <class S>
GgufWriter::Value string_array(std::span<const S> v) {
  GgufWriter::Value val;
  val.type = GgufValueType::array;
  put<std::uint32_t>(val.payload, static_cast<std::uint32_t>(GgufValueType::string));
  put<std::uint64_t>(val.payload, v.size());
  for (const S& s : v) put_string(val.payload, s);
  return val;
}

[[noreturn]] void bad_arg(const std::string& msg) {
  throw Error(Status::invalid_argument, "GgufWriter: " + msg);
}

std::uint64_t align_up(std::uint64_t x, std::uint64_t a) { return (x + a - 1) / a * a; }

// Byte sinks for emit(): a vector, or a buffered file.
struct VectorSink {
  std::vector<std::uint8_t>& out;
  void write(const void* p, std::size_t n) {
    auto* b = static_cast<const std::uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  void zeros(std::size_t n) { out.insert(out.end(), n, 0); }
};

struct FileSink {
  std::FILE* f;
  const std::string& path;
  void write(const void* p, std::size_t n) {
    if (n && std::fwrite(p, 1, n, f) != n)
      throw Error(Status::io_error, path + ": write failed: " + std::strerror(errno));
  }
  void zeros(std::size_t n) {
    static const std::uint8_t z[256] = {};
    while (n) {
      std::size_t k = n < sizeof z ? n : sizeof z;
      write(z, k);
      n -= k;
    }
  }
};

}  // namespace

GgufWriter::Value GgufWriter::Value::u8(std::uint8_t v) { return scalar(GgufValueType::u8, v); }
GgufWriter::Value GgufWriter::Value::i8(std::int8_t v) { return scalar(GgufValueType::i8, v); }
GgufWriter::Value GgufWriter::Value::u16(std::uint16_t v) { return scalar(GgufValueType::u16, v); }
GgufWriter::Value GgufWriter::Value::i16(std::int16_t v) { return scalar(GgufValueType::i16, v); }
GgufWriter::Value GgufWriter::Value::u32(std::uint32_t v) { return scalar(GgufValueType::u32, v); }
GgufWriter::Value GgufWriter::Value::i32(std::int32_t v) { return scalar(GgufValueType::i32, v); }
GgufWriter::Value GgufWriter::Value::f32(float v) { return scalar(GgufValueType::f32, v); }
GgufWriter::Value GgufWriter::Value::boolean(bool v) {
  return scalar(GgufValueType::boolean, static_cast<std::uint8_t>(v ? 1 : 0));
}
GgufWriter::Value GgufWriter::Value::string(std::string_view v) {
  Value val;
  val.type = GgufValueType::string;
  put_string(val.payload, v);
  return val;
}
GgufWriter::Value GgufWriter::Value::u64(std::uint64_t v) { return scalar(GgufValueType::u64, v); }
GgufWriter::Value GgufWriter::Value::i64(std::int64_t v) { return scalar(GgufValueType::i64, v); }
GgufWriter::Value GgufWriter::Value::f64(double v) { return scalar(GgufValueType::f64, v); }

GgufWriter::Value GgufWriter::Value::array(GgufValueType elem, std::span<const Value> elems) {
  Value val;
  val.type = GgufValueType::array;
  put<std::uint32_t>(val.payload, static_cast<std::uint32_t>(elem));
  put<std::uint64_t>(val.payload, elems.size());
  for (const Value& e : elems) {
    if (e.type != elem)
      bad_arg(std::string("array of ") + gguf_value_type_name(elem) + " given an element of type " +
              gguf_value_type_name(e.type));
    // Nested arrays carry their own element type and count in their payload.
    val.payload.insert(val.payload.end(), e.payload.begin(), e.payload.end());
  }
  return val;
}

GgufWriter::Value GgufWriter::Value::array_u8(std::span<const std::uint8_t> v) { return plain_array(GgufValueType::u8, v); }
GgufWriter::Value GgufWriter::Value::array_i8(std::span<const std::int8_t> v) { return plain_array(GgufValueType::i8, v); }
GgufWriter::Value GgufWriter::Value::array_u16(std::span<const std::uint16_t> v) { return plain_array(GgufValueType::u16, v); }
GgufWriter::Value GgufWriter::Value::array_i16(std::span<const std::int16_t> v) { return plain_array(GgufValueType::i16, v); }
GgufWriter::Value GgufWriter::Value::array_u32(std::span<const std::uint32_t> v) { return plain_array(GgufValueType::u32, v); }
GgufWriter::Value GgufWriter::Value::array_i32(std::span<const std::int32_t> v) { return plain_array(GgufValueType::i32, v); }
GgufWriter::Value GgufWriter::Value::array_f32(std::span<const float> v) { return plain_array(GgufValueType::f32, v); }
GgufWriter::Value GgufWriter::Value::array_u64(std::span<const std::uint64_t> v) { return plain_array(GgufValueType::u64, v); }
GgufWriter::Value GgufWriter::Value::array_i64(std::span<const std::int64_t> v) { return plain_array(GgufValueType::i64, v); }
GgufWriter::Value GgufWriter::Value::array_f64(std::span<const double> v) { return plain_array(GgufValueType::f64, v); }
GgufWriter::Value GgufWriter::Value::array_bool(std::span<const bool> v) {
  std::vector<std::uint8_t> bytes(v.begin(), v.end());
  Value val = plain_array(GgufValueType::u8, std::span<const std::uint8_t>(bytes));
  std::uint32_t t = static_cast<std::uint32_t>(GgufValueType::boolean);
  std::memcpy(val.payload.data(), &t, sizeof t);
  return val;
}
GgufWriter::Value GgufWriter::Value::array_string(std::span<const std::string> v) { return string_array(v); }
GgufWriter::Value GgufWriter::Value::array_string(std::span<const std::string_view> v) { return string_array(v); }

void GgufWriter::set_alignment(std::uint32_t alignment) {
  if (!faults_.unchecked && (alignment == 0 || !std::has_single_bit(alignment)))
    bad_arg("alignment " + std::to_string(alignment) + " is not a nonzero power of two");
  alignment_ = alignment;
  alignment_set_ = true;
  for (Kv& kv : kvs_)
    if (kv.key == "general.alignment") {
      kv.value = Value::u32(alignment);
      return;
    }
  kvs_.insert(kvs_.begin(), Kv{"general.alignment", Value::u32(alignment)});
}

bool GgufWriter::remove(std::string_view key) {
  for (auto it = kvs_.begin(); it != kvs_.end(); ++it)
    if (it->key == key) {
      kvs_.erase(it);
      return true;
    }
  return false;
}

void GgufWriter::add(std::string key, Value value) {
  if (!faults_.unchecked) {
    if (key.empty()) bad_arg("empty key");
    for (const Kv& kv : kvs_)
      if (kv.key == key) bad_arg("duplicate key '" + key + "'");
    if (key == "general.alignment") {
      // Keep the layout consistent with what the reader will use.
      std::uint32_t a = 0;
      if (value.type != GgufValueType::u32) bad_arg("general.alignment must be u32");
      std::memcpy(&a, value.payload.data(), sizeof a);
      set_alignment(a);
      return;
    }
  }
  kvs_.push_back({std::move(key), std::move(value)});
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::span<const std::uint64_t> ne,
                            std::vector<std::uint8_t> data) {
  const std::uint32_t id = static_cast<std::uint32_t>(type);
  if (!faults_.unchecked) {
    if (name.empty() || name.size() > kGgufMaxTensorName)
      bad_arg("tensor name '" + name + "' must have 1 to " + std::to_string(kGgufMaxTensorName) + " bytes");
    for (const Tensor& t : tensors_)
      if (t.name == name) bad_arg("duplicate tensor '" + name + "'");
    if (ne.empty() || ne.size() > kGgufMaxDims)
      bad_arg("tensor '" + name + "': 1 to 4 dims");
    auto info = ggml_type_info(id);
    if (!info) bad_arg("tensor '" + name + "': unknown type id " + std::to_string(id));
    std::uint64_t n = 1;
    for (std::uint64_t d : ne) {
      if (d == 0 || __builtin_mul_overflow(n, d, &n)) bad_arg("tensor '" + name + "': bad shape");
    }
    if (ne[0] % info->block_elems)
      bad_arg("tensor '" + name + "': ne[0] not a multiple of the block size");
    const std::uint64_t bytes = n / info->block_elems * info->block_bytes;
    if (data.size() != bytes)
      bad_arg("tensor '" + name + "': " + std::to_string(data.size()) + " bytes given, " +
              std::to_string(bytes) + " needed");
  }
  tensors_.push_back({std::move(name), id, std::vector<std::uint64_t>(ne.begin(), ne.end()),
                      std::move(data), std::nullopt});
}

void GgufWriter::add_tensor_f32(std::string name, std::initializer_list<std::uint64_t> ne,
                                std::span<const float> values) {
  std::vector<std::uint8_t> bytes(values.size_bytes());
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  add_tensor(std::move(name), GgmlType::F32, ne, std::move(bytes));
}

void GgufWriter::add_tensor_raw(std::string name, std::uint32_t type_id,
                                std::vector<std::uint64_t> ne, std::vector<std::uint8_t> data,
                                std::optional<std::uint64_t> offset) {
  if (!faults_.unchecked) bad_arg("add_tensor_raw needs faults().unchecked");
  tensors_.push_back({std::move(name), type_id, std::move(ne), std::move(data), offset});
}

template <class Sink>
void GgufWriter::emit(Sink& sink) const {
  // Header, metadata and tensor infos are small: build them in memory.
  std::vector<std::uint8_t> head;
  put<std::uint32_t>(head, faults_.magic.value_or(0x46554747u));  // "GGUF"
  put<std::uint32_t>(head, faults_.version.value_or(3));
  put<std::uint64_t>(head, faults_.tensor_count.value_or(tensors_.size()));
  put<std::uint64_t>(head, faults_.kv_count.value_or(kvs_.size()));
  for (const Kv& kv : kvs_) {
    put_string(head, kv.key);
    put<std::uint32_t>(head, static_cast<std::uint32_t>(kv.value.type));
    head.insert(head.end(), kv.value.payload.begin(), kv.value.payload.end());
  }
  // An alignment of 0 is only possible with faults; lay out with 1 then.
  const std::uint64_t align = alignment_ ? alignment_ : 1;
  std::uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(head, t.name);
    put<std::uint32_t>(head, static_cast<std::uint32_t>(t.ne.size()));
    for (std::uint64_t d : t.ne) put<std::uint64_t>(head, d);
    put<std::uint32_t>(head, t.type_id);
    put<std::uint64_t>(head, t.offset_override.value_or(offset));
    offset = align_up(offset + t.data.size(), align);
  }
  sink.write(head.data(), head.size());
  sink.zeros(align_up(head.size(), align) - head.size());
  for (const Tensor& t : tensors_) {
    sink.write(t.data.data(), t.data.size());
    sink.zeros(align_up(t.data.size(), align) - t.data.size());
  }
}

std::vector<std::uint8_t> GgufWriter::to_bytes() const {
  std::vector<std::uint8_t> out;
  VectorSink sink{out};
  emit(sink);
  return out;
}

void GgufWriter::write_file(const std::string& path) const {
  // Whole or not at all: an interrupted write leaves no truncated model
  // that a later run (scripts/bench.sh reuses its models) would take.
  AtomicFile f(path, "write GGUF", /*private_mode=*/false);
  FileSink sink{f.stream(), path};
  emit(sink);
  f.commit(/*sync=*/false);
}

}  // namespace latte

// GGUF reader (mla-spec.md section 3): the file is mapped read-only and every
// count, length and offset is checked against its size when it is opened, so
// the accessors below never read outside the mapping. Weights are used in
// place: a tensor's `data` points into the mapping, which lives as long as the
// GgufFile (moving the GgufFile keeps the pointers valid).
//
// Errors are latte::Error: Status::io_error (cannot open/map), bad_file
// (truncated, inconsistent, absurd, wrong value type, missing key or tensor),
// unsupported (GGUF version, big-endian file, tensor type Latte does not read).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "platform/file_map.h"
#include "quant/ggml_types.h"

namespace latte {

// Metadata value type ids as stored in the file.
enum class GgufValueType : std::uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

const char* gguf_value_type_name(GgufValueType t);
bool gguf_value_type_is_integer(GgufValueType t);
// Bytes of one value of a fixed-size type; 0 for string and array.
std::size_t gguf_value_type_size(GgufValueType t);

inline constexpr std::uint32_t kGgufDefaultAlignment = 32;
inline constexpr std::size_t kGgufMaxTensorName = 63;  // bytes, without the NUL ggml adds
inline constexpr std::uint32_t kGgufMaxDims = 4;
inline constexpr int kGgufMaxArrayDepth = 8;  // arrays of arrays of ... (deeper: bad_file)

class GgufArrayElements;

// One metadata value, validated at open: a view into the file's bytes.
struct GgufValue {
  GgufValueType type = GgufValueType::u8;
  GgufValueType elem_type = GgufValueType::u8;  // arrays only
  std::uint64_t count = 0;            // arrays: elements; strings: bytes
  const std::uint8_t* data = nullptr; // scalar bytes / string bytes / first array element
  std::size_t bytes = 0;              // size of what `data` points to

  bool is_integer() const { return gguf_value_type_is_integer(type); }
  // Scalars (no type conversion across kinds; callers check `type` first or
  // use GgufFile's typed accessors, which name the key in their errors).
  std::optional<std::int64_t> as_i64() const;   // any integer type that fits
  std::optional<std::uint64_t> as_u64() const;  // any integer type that fits
  std::optional<double> as_f64() const;         // f32 or f64
  std::optional<bool> as_bool() const;
  std::optional<std::string_view> as_string() const;
  // Arrays: forward iteration over the elements (strings and nested arrays
  // have variable size, so there is no random access in general).
  GgufArrayElements elements() const;
};

// Forward iterator over an array value's elements: `while (it.next(v)) ...`.
class GgufArrayElements {
 public:
  GgufArrayElements() = default;
  GgufArrayElements(const GgufValue& array);
  bool next(GgufValue& out);
  std::uint64_t remaining() const { return remaining_; }

 private:
  GgufValueType elem_type_ = GgufValueType::u8;
  std::uint64_t remaining_ = 0;
  const std::uint8_t* p_ = nullptr;
  const std::uint8_t* end_ = nullptr;
};

struct GgufKv {
  std::string_view key;
  GgufValue value;
};

struct GgufTensor {
  std::string_view name;
  GgmlType type = GgmlType::F32;
  std::uint32_t n_dims = 0;
  std::array<std::uint64_t, kGgufMaxDims> ne{1, 1, 1, 1};  // ne[0] contiguous; unused dims 1
  std::uint64_t n_elements = 0;
  std::uint64_t n_bytes = 0;
  std::uint64_t row_bytes = 0;   // bytes of one ne[0] row
  std::uint64_t offset = 0;      // from the data start
  // Into the mapping: aligned to alignment() for open() (mappings are page aligned);
  // for from_memory()/from_bytes() only relative to the buffer start.
  const std::uint8_t* data = nullptr;

  std::span<const std::uint64_t> dims() const { return {ne.data(), n_dims}; }
  std::string shape_string() const;  // "[256, 512]"
};

// How open() makes the file's bytes addressable.
enum class GgufLoad {
  // Mapped read-only (platform/file_map.h): nothing copied, pages shared with the
  // page cache and with other processes mapping the file. Weights then sit
  // on whatever pages the page cache holds, usually 4 KiB ones.
  map,
  // Read into private memory on transparent huge pages (where the system has
  // them): twice the memory traffic at load and the model's size in private
  // memory, but more read bandwidth for decode, which streams every
  // weight once per token (fewer TLB misses; prefetchers cross no 4 KiB
  // boundaries).
  read,
  // read where the file fits in the memory available now with room to
  // spare (choose_automatic_load) and that memory can be had; mapped
  // otherwise (load_note() says why).
  automatic,
};

// GgufLoad::automatic's choice for a file of `size` bytes with `available`
// bytes of memory available (0: not known) on a machine of `total`: read
// where size + spare <= available, spare being 1 GiB or an eighth of total
// where that is more; drop_behind where the page cache could not also hold
// the file beside the copy; else mapped, `note` saying why.
struct AutomaticLoad {
  bool read = false;
  bool drop_behind = false;
  std::string note;
};
AutomaticLoad choose_automatic_load(std::uint64_t size, std::uint64_t available, std::uint64_t total);

class GgufFile {
 public:
  // Maps (or reads, see GgufLoad) `path`. io_error if it cannot be opened
  // or read. on_read, when the file is read: called with (bytes read, file
  // size) as it is read in, on the calling thread; it may throw to stop the
  // load (the exception propagates, the memory read into given back).
  static GgufFile open(const std::string& path, GgufLoad how = GgufLoad::map,
                       const std::function<void(std::size_t, std::size_t)>& on_read = {});
  // Parses a caller-owned buffer; it must outlive the GgufFile (no copy).
  static GgufFile from_memory(const void* data, std::size_t size);
  // Parses an owned copy of the bytes.
  static GgufFile from_bytes(std::vector<std::uint8_t> bytes);

  GgufFile(GgufFile&& other) noexcept;
  GgufFile& operator=(GgufFile&& other) noexcept;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  ~GgufFile();

  std::uint32_t version() const { return version_; }
  std::uint32_t alignment() const { return alignment_; }
  std::uint64_t data_offset() const { return data_offset_; }  // data start in the file
  std::size_t file_size() const { return size_; }
  const std::uint8_t* file_data() const { return base_; }
  // GgufLoad::read: the private copy of the file's bytes (null otherwise: a
  // mapping, or a buffer that is not ours). Read-only, but inside
  // edit_private_data(fn), which runs fn with it writable: the owner may
  // re-lay out tensors in place there (Model's row-interleaved weights).
  const std::uint8_t* private_data() const { return region_; }
  // GgufLoad::automatic: why the file was mapped rather than read ("" when
  // it was read, or when another GgufLoad was asked for).
  const std::string& load_note() const { return load_note_; }
  void edit_private_data(const std::function<void(std::uint8_t*)>& fn);
  const std::string& path() const { return path_; }  // "<memory>" for buffers

  // ---- metadata
  std::size_t kv_count() const { return kvs_.size(); }
  const GgufKv& kv(std::size_t i) const { return kvs_[i]; }  // file order
  const std::vector<GgufKv>& kvs() const { return kvs_; }
  const GgufKv* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // The value of `key`, or bad_file naming the key if it is absent.
  const GgufValue& require(std::string_view key) const;

  // Typed scalars. get_*(key, def) returns def when the key is absent;
  // require_*(key) throws bad_file naming an absent key. Both throw bad_file
  // naming the key, the expected and the found type when the type is wrong.
  // Integer accessors accept any integer value type whose value fits.
  std::uint32_t get_u32(std::string_view key, std::uint32_t def) const;
  std::uint64_t get_u64(std::string_view key, std::uint64_t def) const;
  std::int32_t get_i32(std::string_view key, std::int32_t def) const;
  std::int64_t get_i64(std::string_view key, std::int64_t def) const;
  float get_f32(std::string_view key, float def) const;  // f32 or f64
  bool get_bool(std::string_view key, bool def) const;
  std::string_view get_string(std::string_view key, std::string_view def) const;
  std::uint32_t require_u32(std::string_view key) const;
  std::uint64_t require_u64(std::string_view key) const;
  std::int32_t require_i32(std::string_view key) const;
  std::int64_t require_i64(std::string_view key) const;
  float require_f32(std::string_view key) const;
  bool require_bool(std::string_view key) const;
  std::string_view require_string(std::string_view key) const;

  // Typed arrays (required: an absent key is bad_file naming it; check has()
  // for optional ones). Element type checked like the scalars.
  const GgufValue& require_array(std::string_view key) const;
  std::vector<std::string_view> get_string_array(std::string_view key) const;  // views into the file
  std::vector<std::int32_t> get_i32_array(std::string_view key) const;  // any integer elements that fit
  std::vector<std::uint32_t> get_u32_array(std::string_view key) const;
  std::vector<std::int64_t> get_i64_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;  // f32 or f64 elements

  // ---- tensors
  std::size_t tensor_count() const { return tensors_.size(); }
  const GgufTensor& tensor(std::size_t i) const { return tensors_[i]; }  // file order
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;
  // bad_file "missing tensor 'name'".
  const GgufTensor& require_tensor(std::string_view name) const;
  // Also checks the shape (ne order, n_dims must match too): bad_file naming
  // the tensor, the expected and the found shape.
  const GgufTensor& require_tensor(std::string_view name, std::span<const std::uint64_t> ne) const;
  const GgufTensor& require_tensor(std::string_view name, std::initializer_list<std::uint64_t> ne) const {
    return require_tensor(name, std::span<const std::uint64_t>(ne.begin(), ne.size()));
  }

 private:
  GgufFile() = default;
  void parse();
  void release() noexcept;
  [[noreturn]] void fail_type(std::string_view key, const char* expected, const GgufValue& v) const;

  const std::uint8_t* base_ = nullptr;
  std::size_t size_ = 0;
  FileMapping mapping_;                // GgufLoad::map
  std::uint8_t* region_ = nullptr;     // GgufLoad::read: a map_huge_region of region_bytes_
  std::size_t region_bytes_ = 0;
  std::vector<std::uint8_t> owned_;  // from_bytes
  std::string path_;
  std::string load_note_;

  std::uint32_t version_ = 0;
  std::uint32_t alignment_ = kGgufDefaultAlignment;
  std::uint64_t data_offset_ = 0;
  std::vector<GgufKv> kvs_;
  std::vector<std::uint32_t> kv_by_key_;       // indices into kvs_, sorted by key
  std::vector<GgufTensor> tensors_;
  std::vector<std::uint32_t> tensor_by_name_;  // indices into tensors_, sorted by name
};

}  // namespace latte

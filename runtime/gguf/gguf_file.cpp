#include "runtime/gguf/gguf_file.h"

#include <algorithm>
#include <thread>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include "runtime/error.h"
#include "platform/file_map.h"
#include "platform/memory.h"
#include "platform/read_only_file.h"
#include "platform/thread_pool.h"

namespace latte {

static_assert(std::endian::native == std::endian::little,
              "GGUF values are read in place as little-endian");

const char* gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8: return "u8";
    case GgufValueType::i8: return "i8";
    case GgufValueType::u16: return "u16";
    case GgufValueType::i16: return "i16";
    case GgufValueType::u32: return "u32";
    case GgufValueType::i32: return "i32";
    case GgufValueType::f32: return "f32";
    case GgufValueType::boolean: return "bool";
    case GgufValueType::string: return "string";
    case GgufValueType::array: return "array";
    case GgufValueType::u64: return "u64";
    case GgufValueType::i64: return "i64";
    case GgufValueType::f64: return "f64";
  }
  return "unknown";
}

bool gguf_value_type_is_integer(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8: case GgufValueType::i8: case GgufValueType::u16:
    case GgufValueType::i16: case GgufValueType::u32: case GgufValueType::i32:
    case GgufValueType::u64: case GgufValueType::i64:
      return true;
    default:
      return false;
  }
}

std::size_t gguf_value_type_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8: case GgufValueType::i8: case GgufValueType::boolean: return 1;
    case GgufValueType::u16: case GgufValueType::i16: return 2;
    case GgufValueType::u32: case GgufValueType::i32: case GgufValueType::f32: return 4;
    case GgufValueType::u64: case GgufValueType::i64: case GgufValueType::f64: return 8;
    case GgufValueType::string: case GgufValueType::array: return 0;
  }
  return 0;
}

namespace {

constexpr std::uint32_t kMaxValueTypeId = 12;
// Smallest possible encodings, used to refuse counts the remaining bytes
// could never hold before anything is allocated for them.
constexpr std::size_t kMinKvBytes = 8 + 1 + 4 + 1;           // key len, 1-byte key, type, u8
constexpr std::size_t kMinTensorInfoBytes = 8 + 1 + 4 + 4 + 8;  // name len, 1-byte name, n_dims, type, offset
constexpr std::size_t kMinStringBytes = 8;
constexpr std::uint64_t kMaxReserve = 1 << 16;
constexpr std::size_t kMinArrayBytes = 4 + 8;

template <class T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

bool checked_mul(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  return !__builtin_mul_overflow(a, b, &out);
}
bool checked_add(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  return !__builtin_add_overflow(a, b, &out);
}

// Names from the file can be anything: keep messages short and printable.
std::string printable(std::string_view s) {
  constexpr std::size_t kMax = 80;
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < kMax; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > kMax) out += "...";
  return out;
}

std::string quoted(std::string_view s) {
  std::string q(1, '\'');
  q += printable(s);
  q += '\'';
  return q;
}

// Walks one already-validated value; false if it does not fit (never, for
// values that passed parse(), but the iterator stays memory-safe regardless).
bool skip_value(GgufValueType t, const std::uint8_t*& p, const std::uint8_t* end, int depth) {
  const std::size_t left = static_cast<std::size_t>(end - p);
  if (t == GgufValueType::string) {
    if (left < 8) return false;
    std::uint64_t n = load<std::uint64_t>(p);
    if (n > left - 8) return false;
    p += 8 + n;
    return true;
  }
  if (t == GgufValueType::array) {
    if (left < kMinArrayBytes || depth >= kGgufMaxArrayDepth) return false;
    std::uint32_t et = load<std::uint32_t>(p);
    std::uint64_t n = load<std::uint64_t>(p + 4);
    p += kMinArrayBytes;
    if (et > kMaxValueTypeId) return false;
    auto elem = static_cast<GgufValueType>(et);
    if (std::size_t sz = gguf_value_type_size(elem)) {
      std::uint64_t bytes;
      if (!checked_mul(n, sz, bytes) || bytes > static_cast<std::size_t>(end - p)) return false;
      p += bytes;
      return true;
    }
    for (std::uint64_t i = 0; i < n; ++i)
      if (!skip_value(elem, p, end, depth + 1)) return false;
    return true;
  }
  std::size_t sz = gguf_value_type_size(t);
  if (sz == 0 || left < sz) return false;
  p += sz;
  return true;
}

// Reads the file front to back; every read is bounds-checked and a failure
// throws naming what was being read. The subject (the metadata key or tensor
// being read) is kept as a view and only formatted when something fails, so
// the happy path allocates nothing per value.
class Parser {
 public:
  Parser(const std::uint8_t* base, std::size_t size, const std::string& path)
      : base_(base), size_(size), path_(path) {}

  std::size_t pos() const { return pos_; }
  std::size_t left() const { return size_ - pos_; }
  const std::uint8_t* here() const { return base_ + pos_; }

  // What is being read: "metadata key 'k'", "tensor 't'", or an entry number
  // while its name is not read yet.
  void subject(const char* kind, std::string_view name) { kind_ = kind; name_ = name; index_ = 0; }
  void subject(const char* kind, std::uint64_t index) { kind_ = kind; name_ = {}; index_ = index; }
  std::string subject() const {
    if (!kind_) return "header";
    if (name_.data()) return std::string(kind_) + " " + quoted(name_);
    return std::string(kind_) + " #" + std::to_string(index_);
  }

  [[noreturn]] void fail(Status s, const std::string& msg) const {
    throw Error(s, path_ + ": " + msg);
  }
  // `msg` about the current subject.
  [[noreturn]] void fail_here(Status s, const std::string& msg) const {
    fail(s, subject() + ": " + msg);
  }
  [[noreturn]] void truncated(const char* what) const {
    fail(Status::bad_file, "truncated file: " + subject() + ": " + what + " at byte " +
                               std::to_string(pos_) + " runs past the end (" +
                               std::to_string(size_) + " bytes)");
  }

  template <class T>
  T read(const char* what) {
    if (left() < sizeof(T)) truncated(what);
    T v = load<T>(here());
    pos_ += sizeof(T);
    return v;
  }

  std::string_view read_string(const char* what) {
    std::uint64_t n = read<std::uint64_t>(what);
    if (n > left())
      fail_here(Status::bad_file, std::string(what) + ": string length " + std::to_string(n) +
                                      " exceeds the " + std::to_string(left()) +
                                      " bytes left in the file");
    std::string_view s(reinterpret_cast<const char*>(here()), n);
    pos_ += n;
    return s;
  }

  GgufValueType read_type(const char* what) {
    std::uint32_t t = read<std::uint32_t>(what);
    if (t > kMaxValueTypeId)
      fail_here(Status::bad_file, std::string("unknown ") + what + " " + std::to_string(t));
    return static_cast<GgufValueType>(t);
  }

  GgufValue read_value(GgufValueType t, int depth) {
    GgufValue v;
    v.type = t;
    if (t == GgufValueType::string) {
      std::string_view s = read_string("string value");
      v.count = s.size();
      v.data = reinterpret_cast<const std::uint8_t*>(s.data());
      v.bytes = s.size();
      return v;
    }
    if (t == GgufValueType::array) {
      if (depth >= kGgufMaxArrayDepth)
        fail_here(Status::bad_file,
                  "arrays nested deeper than " + std::to_string(kGgufMaxArrayDepth));
      v.elem_type = read_type("array element type");
      v.count = read<std::uint64_t>("array count");
      std::size_t sz = gguf_value_type_size(v.elem_type);
      std::size_t min_elem = sz ? sz
                             : v.elem_type == GgufValueType::string ? kMinStringBytes
                                                                    : kMinArrayBytes;
      if (v.count > left() / min_elem)
        fail_here(Status::bad_file, "array count " + std::to_string(v.count) + " of " +
                                        gguf_value_type_name(v.elem_type) +
                                        " is absurd: only " + std::to_string(left()) +
                                        " bytes are left in the file");
      v.data = here();
      const std::size_t start = pos_;
      if (sz) {
        pos_ += static_cast<std::size_t>(v.count) * sz;  // fits: checked above
      } else {
        for (std::uint64_t i = 0; i < v.count; ++i) read_value(v.elem_type, depth + 1);
      }
      v.bytes = pos_ - start;
      return v;
    }
    std::size_t sz = gguf_value_type_size(t);
    if (left() < sz) truncated("value");
    v.data = here();
    v.bytes = sz;
    pos_ += sz;
    return v;
  }

 private:
  const std::uint8_t* base_;
  std::size_t size_;
  const std::string& path_;
  std::size_t pos_ = 0;
  const char* kind_ = nullptr;
  std::string_view name_;
  std::uint64_t index_ = 0;
};

}  // namespace

// ------------------------------------------------------------ GgufValue

std::optional<std::int64_t> GgufValue::as_i64() const {
  switch (type) {
    case GgufValueType::u8: return load<std::uint8_t>(data);
    case GgufValueType::i8: return load<std::int8_t>(data);
    case GgufValueType::u16: return load<std::uint16_t>(data);
    case GgufValueType::i16: return load<std::int16_t>(data);
    case GgufValueType::u32: return load<std::uint32_t>(data);
    case GgufValueType::i32: return load<std::int32_t>(data);
    case GgufValueType::i64: return load<std::int64_t>(data);
    case GgufValueType::u64: {
      std::uint64_t u = load<std::uint64_t>(data);
      if (!std::in_range<std::int64_t>(u)) return std::nullopt;
      return static_cast<std::int64_t>(u);
    }
    default: return std::nullopt;
  }
}

std::optional<std::uint64_t> GgufValue::as_u64() const {
  if (type == GgufValueType::u64) return load<std::uint64_t>(data);
  auto s = as_i64();
  if (!s || *s < 0) return std::nullopt;
  return static_cast<std::uint64_t>(*s);
}

std::optional<double> GgufValue::as_f64() const {
  if (type == GgufValueType::f32) return load<float>(data);
  if (type == GgufValueType::f64) return load<double>(data);
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
  if (type != GgufValueType::boolean) return std::nullopt;
  return load<std::uint8_t>(data) != 0;
}

std::optional<std::string_view> GgufValue::as_string() const {
  if (type != GgufValueType::string) return std::nullopt;
  return std::string_view(reinterpret_cast<const char*>(data), bytes);
}

GgufArrayElements GgufValue::elements() const { return GgufArrayElements(*this); }

GgufArrayElements::GgufArrayElements(const GgufValue& array) {
  if (array.type != GgufValueType::array) return;
  elem_type_ = array.elem_type;
  remaining_ = array.count;
  p_ = array.data;
  end_ = array.data + array.bytes;
}

bool GgufArrayElements::next(GgufValue& out) {
  if (remaining_ == 0) return false;
  const std::uint8_t* start = p_;
  // Depth 1: the nesting limit was enforced at parse, this only bounds the walk.
  if (!skip_value(elem_type_, p_, end_, 1)) {
    remaining_ = 0;
    return false;
  }
  --remaining_;
  out = GgufValue{};
  out.type = elem_type_;
  if (elem_type_ == GgufValueType::string) {
    out.count = load<std::uint64_t>(start);
    out.data = start + 8;
    out.bytes = static_cast<std::size_t>(p_ - out.data);
  } else if (elem_type_ == GgufValueType::array) {
    out.elem_type = static_cast<GgufValueType>(load<std::uint32_t>(start));
    out.count = load<std::uint64_t>(start + 4);
    out.data = start + kMinArrayBytes;
    out.bytes = static_cast<std::size_t>(p_ - out.data);
  } else {
    out.data = start;
    out.bytes = static_cast<std::size_t>(p_ - start);
  }
  return true;
}

std::string GgufTensor::shape_string() const {
  std::string s = "[";
  for (std::uint32_t i = 0; i < n_dims; ++i) {
    if (i) s += ", ";
    s += std::to_string(ne[i]);
  }
  return s + "]";
}

// ------------------------------------------------------------ GgufFile

namespace {

// Reads the whole of the file (size bytes) into a fresh 2 MiB-aligned region
// advised for huge pages, then makes it read-only like the mapping: parts of
// 64 MiB, read by the current pool's threads (a copy from the page cache, or
// the disk, is faster on several), on_read told of them on this thread.
// Null where the memory cannot be had and `or_null`; else out_of_memory.
// An exception from on_read (a cancelled load) stops the reading threads,
// gives the region back and propagates.
// drop_behind: the page cache's copy of each part is let go once read (a
// file that fits in memory once, not twice).
std::uint8_t* read_into_huge_pages(ReadOnlyFile& file, const std::string& path, std::size_t size,
                                   const std::function<void(std::size_t, std::size_t)>& on_read, bool or_null,
                                   bool drop_behind) {
  std::uint8_t* start = map_huge_region(size, 0, /*lazy=*/false);
  if (start == nullptr && or_null) return nullptr;
  if (start == nullptr)
    throw Error(Status::out_of_memory, path + ": cannot allocate " + std::to_string(size) + " bytes to read it into");
  constexpr std::size_t kStep = std::size_t{64} << 20;
  const std::size_t parts = (size + kStep - 1) / kStep;
  std::atomic<std::size_t> next{0}, done{0}, short_at{size};
  std::atomic<bool> stopped{false};  // on_read threw (a cancelled load): the other threads stop too
  const std::thread::id caller = std::this_thread::get_id();
  try {
    parallel_slots(static_cast<int>(std::min<std::size_t>(parts, current_pool_size())), [&](int, int) {
      for (std::size_t i; (i = next.fetch_add(1)) < parts && short_at.load() == size && !stopped.load();) {
        const std::size_t at = i * kStep, n = std::min(kStep, size - at);
        const std::size_t got = file.read_at(start + at, n, at);
        if (got != n) {  // the file shrank: the lowest place it was found short
          std::size_t s = short_at.load();
          while (at + got < s && !short_at.compare_exchange_weak(s, at + got)) {
          }
          return;
        }
        if (drop_behind) file.drop_cached(at, n);
        const std::size_t total = done.fetch_add(n) + n;
        if (on_read && std::this_thread::get_id() == caller) {
          try {
            on_read(total, size);
          } catch (...) {
            stopped.store(true);
            throw;
          }
        }
      }
    });
  } catch (...) {
    unmap_huge_region(start, size);
    throw;
  }
  if (short_at.load() != size) {
    unmap_huge_region(start, size);
    throw Error(Status::io_error, path + ": cannot read at byte " + std::to_string(short_at.load()) +
                                      ": the file shrank while being read");
  }
  if (on_read) {
    try {
      on_read(size, size);
    } catch (...) {
      unmap_huge_region(start, size);
      throw;
    }
  }
  protect_region_read_only(start, size);
  return start;
}

std::string gib_text(std::uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", static_cast<double>(bytes) / (1u << 30));
  return b;
}

}  // namespace

AutomaticLoad choose_automatic_load(std::uint64_t size, std::uint64_t available, std::uint64_t total) {
  AutomaticLoad c;
  const std::uint64_t spare = std::max<std::uint64_t>(std::uint64_t{1} << 30, total / 8);
  if (available == 0) {
    c.note = "mapped, not read into memory: the memory available is not known";
    return c;
  }
  c.read = available >= spare && size <= available - spare;
  if (c.read) {
    c.drop_behind = size > available - spare - size;
    return c;
  }
  c.note = "mapped, not read into memory: " + gib_text(size) + " and " + gib_text(spare) +
           " to spare need more than the " + gib_text(available) + " available (decode is slower mapped)";
  return c;
}

void GgufFile::edit_private_data(const std::function<void(std::uint8_t*)>& fn) {
  if (!region_) return;
  protect_region_writable(region_, region_bytes_);
  try {
    fn(region_);
  } catch (...) {
    protect_region_read_only(region_, region_bytes_);
    throw;
  }
  protect_region_read_only(region_, region_bytes_);
}

GgufFile GgufFile::open(const std::string& path, GgufLoad how,
                        const std::function<void(std::size_t, std::size_t)>& on_read) {
  GgufFile f;
  f.path_ = path;
  // Close-on-exec, and a FIFO or device in the path's place refused rather
  // than waited on (see ReadOnlyFile); the mapping outlives the descriptor.
  ReadOnlyFile file(path, path);
  const auto size = static_cast<std::size_t>(file.size());
  bool read = how == GgufLoad::read, drop_behind = false;
  if (size > 0 && how == GgufLoad::automatic) {
    AutomaticLoad choice = choose_automatic_load(size, available_memory_bytes(), total_memory_bytes());
    read = choice.read;
    drop_behind = choice.drop_behind;
    f.load_note_ = std::move(choice.note);
  }
  std::uint8_t* start = nullptr;
  if (size > 0 && read) {
    start = read_into_huge_pages(file, path, size, on_read, how == GgufLoad::automatic, drop_behind);
    if (start == nullptr)
      f.load_note_ = "mapped, not read into memory: " + gib_text(size) + " to read it into cannot be had";
  }
  if (start != nullptr) {
    f.region_ = start;
    f.region_bytes_ = size;  // what release() unmaps
    f.base_ = start;
  } else if (size > 0) {
    f.mapping_ = FileMapping(file, size, path);
    f.base_ = f.mapping_.data();
  }
  f.size_ = size;
  f.parse();
  return f;
}

GgufFile GgufFile::from_memory(const void* data, std::size_t size) {
  GgufFile f;
  f.path_ = "<memory>";
  f.base_ = static_cast<const std::uint8_t*>(data);
  f.size_ = data ? size : 0;
  f.parse();
  return f;
}

GgufFile GgufFile::from_bytes(std::vector<std::uint8_t> bytes) {
  GgufFile f;
  f.path_ = "<memory>";
  f.owned_ = std::move(bytes);
  f.base_ = f.owned_.data();
  f.size_ = f.owned_.size();
  f.parse();
  return f;
}

GgufFile::GgufFile(GgufFile&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      mapping_(std::move(o.mapping_)),
      region_(std::exchange(o.region_, nullptr)),
      region_bytes_(std::exchange(o.region_bytes_, 0)),
      owned_(std::move(o.owned_)),  // a vector's move keeps its buffer, so base_ stays valid
      path_(std::move(o.path_)),
      load_note_(std::move(o.load_note_)),
      version_(o.version_),
      alignment_(o.alignment_),
      data_offset_(o.data_offset_),
      kvs_(std::move(o.kvs_)),
      kv_by_key_(std::move(o.kv_by_key_)),
      tensors_(std::move(o.tensors_)),
      tensor_by_name_(std::move(o.tensor_by_name_)) {}

GgufFile& GgufFile::operator=(GgufFile&& o) noexcept {
  if (this != &o) {
    release();
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapping_ = std::move(o.mapping_);
    region_ = std::exchange(o.region_, nullptr);
    region_bytes_ = std::exchange(o.region_bytes_, 0);
    owned_ = std::move(o.owned_);
    path_ = std::move(o.path_);
    load_note_ = std::move(o.load_note_);
    version_ = o.version_;
    alignment_ = o.alignment_;
    data_offset_ = o.data_offset_;
    kvs_ = std::move(o.kvs_);
    kv_by_key_ = std::move(o.kv_by_key_);
    tensors_ = std::move(o.tensors_);
    tensor_by_name_ = std::move(o.tensor_by_name_);
  }
  return *this;
}

GgufFile::~GgufFile() { release(); }

void GgufFile::release() noexcept {
  mapping_ = FileMapping();
  unmap_huge_region(region_, region_bytes_);
  region_ = nullptr;
  region_bytes_ = 0;
}

void GgufFile::parse() {
  Parser in(base_, size_, path_);

  // ---- header
  if (size_ < 4 || std::memcmp(base_, "GGUF", 4) != 0)
    in.fail(Status::bad_file, size_ < 4 ? "too small to be a GGUF file (" +
                                              std::to_string(size_) + " bytes)"
                                        : std::string("not a GGUF file (bad magic)"));
  in.read<std::uint32_t>("magic");
  version_ = in.read<std::uint32_t>("version");
  if (version_ != 3 && version_ != 2) {
    // Version 3 only added big-endian files, so version 2 reads the same; a
    // big-endian file shows here as a byte-swapped version.
    if (version_ == 1)
      in.fail(Status::unsupported, "GGUF version 1 is not supported (32-bit counts); "
                                   "convert the file to version 3");
    if ((version_ & 0xffffu) == 0)
      in.fail(Status::unsupported, "big-endian GGUF files are not supported");
    in.fail(Status::unsupported, "unsupported GGUF version " + std::to_string(version_));
  }
  const std::uint64_t tensor_count = in.read<std::uint64_t>("tensor_count");
  const std::uint64_t kv_count = in.read<std::uint64_t>("kv_count");
  if (kv_count > in.left() / kMinKvBytes || kv_count > std::numeric_limits<std::uint32_t>::max())
    in.fail(Status::bad_file, "kv_count " + std::to_string(kv_count) +
                                  " is absurd: the file has only " + std::to_string(in.left()) +
                                  " bytes after the header");
  if (tensor_count > (in.left() - kv_count * kMinKvBytes) / kMinTensorInfoBytes ||
      tensor_count > std::numeric_limits<std::uint32_t>::max())
    in.fail(Status::bad_file, "tensor_count " + std::to_string(tensor_count) +
                                  " is absurd: the file has only " + std::to_string(in.left()) +
                                  " bytes after the header");

  // ---- metadata
  kvs_.clear();
  // Counts are only bounded by the file size so far: a corrupt count in a big
  // file must not reserve gigabytes up front (entries are added as parsed).
  kvs_.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(kv_count, kMaxReserve)));
  for (std::uint64_t i = 0; i < kv_count; ++i) {
    in.subject("metadata entry", i);
    std::string_view key = in.read_string("key");
    if (key.empty()) in.fail_here(Status::bad_file, "empty key");
    in.subject("metadata key", key);
    GgufValueType t = in.read_type("value type");
    kvs_.push_back({key, in.read_value(t, 0)});
  }
  kv_by_key_.resize(kvs_.size());
  for (std::uint32_t i = 0; i < kv_by_key_.size(); ++i) kv_by_key_[i] = i;
  std::sort(kv_by_key_.begin(), kv_by_key_.end(),
            [&](std::uint32_t a, std::uint32_t b) { return kvs_[a].key < kvs_[b].key; });
  for (std::size_t i = 1; i < kv_by_key_.size(); ++i)
    if (kvs_[kv_by_key_[i]].key == kvs_[kv_by_key_[i - 1]].key)
      in.fail(Status::bad_file, "duplicate metadata key " + quoted(kvs_[kv_by_key_[i]].key));

  alignment_ = get_u32("general.alignment", kGgufDefaultAlignment);
  if (alignment_ == 0 || !std::has_single_bit(alignment_))
    in.fail(Status::bad_file, "metadata key 'general.alignment': " + std::to_string(alignment_) +
                                  " is not a nonzero power of two");

  // ---- tensor infos
  tensors_.clear();
  tensors_.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(tensor_count, kMaxReserve)));
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensor t;
    in.subject("tensor info", i);
    t.name = in.read_string("name");
    if (t.name.empty()) in.fail_here(Status::bad_file, "empty name");
    in.subject("tensor", t.name);
    if (t.name.size() > kGgufMaxTensorName)
      in.fail_here(Status::bad_file, "name of " + std::to_string(t.name.size()) +
                                         " bytes is too long (at most " +
                                         std::to_string(kGgufMaxTensorName) + ")");
    t.n_dims = in.read<std::uint32_t>("n_dims");
    if (t.n_dims > kGgufMaxDims)
      in.fail_here(Status::bad_file, "n_dims " + std::to_string(t.n_dims) + " > " +
                                         std::to_string(kGgufMaxDims));
    t.n_elements = 1;
    for (std::uint32_t d = 0; d < t.n_dims; ++d) {
      std::uint64_t n = in.read<std::uint64_t>("dimensions");
      if (n == 0 || n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        in.fail_here(Status::bad_file,
                     "ne[" + std::to_string(d) + "] = " +
                         std::to_string(static_cast<std::int64_t>(n)) +
                         " is not a positive dimension");
      t.ne[d] = n;
      if (!checked_mul(t.n_elements, n, t.n_elements) ||
          t.n_elements > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        in.fail_here(Status::bad_file, "element count overflows 64 bits");
    }
    const std::uint32_t type_id = in.read<std::uint32_t>("type");
    const auto info = ggml_type_info(type_id);
    if (!info) {
      const char* known = ggml_type_id_name(type_id);
      in.fail_here(Status::unsupported,
                   (known ? std::string("ggml type ") + known + " (id " + std::to_string(type_id) + "), which Latte does not read"
                          : "unknown ggml type id " + std::to_string(static_cast<std::int32_t>(type_id))) +
                       " (Latte reads " + ggml_supported_type_names() + ")");
    }
    t.type = info->type;
    if (t.ne[0] % info->block_elems != 0)
      in.fail_here(Status::bad_file, "ne[0] = " + std::to_string(t.ne[0]) +
                                         " is not a multiple of the " + info->name +
                                         " block size " + std::to_string(info->block_elems));
    // n_bytes can overflow (2^62 F32 elements): a wrapped size would pass the
    // range check below. row_bytes <= n_bytes cannot then.
    if (!checked_mul(t.n_elements / info->block_elems, info->block_bytes, t.n_bytes))
      in.fail_here(Status::bad_file, "byte size overflows 64 bits");
    t.row_bytes = t.ne[0] / info->block_elems * info->block_bytes;
    t.offset = in.read<std::uint64_t>("data offset");
    tensors_.push_back(t);
  }

  // ---- data
  const std::uint64_t end_of_infos = in.pos();
  // No overflow: end_of_infos <= size_ and alignment_ <= 2^31.
  data_offset_ = (end_of_infos + alignment_ - 1) & ~static_cast<std::uint64_t>(alignment_ - 1);
  for (GgufTensor& t : tensors_) {
    in.subject("tensor", t.name);
    if (t.offset % alignment_ != 0)
      in.fail_here(Status::bad_file, "data offset " + std::to_string(t.offset) +
                                         " is not a multiple of the alignment " +
                                         std::to_string(alignment_));
    std::uint64_t begin, end;
    if (!checked_add(data_offset_, t.offset, begin) || !checked_add(begin, t.n_bytes, end) ||
        end > size_)
      in.fail_here(Status::bad_file, "data (offset " + std::to_string(t.offset) + ", " +
                                         std::to_string(t.n_bytes) + " bytes, data start " +
                                         std::to_string(data_offset_) +
                                         ") runs past the end of the file (" +
                                         std::to_string(size_) + " bytes)");
    t.data = base_ + begin;
  }

  tensor_by_name_.resize(tensors_.size());
  for (std::uint32_t i = 0; i < tensor_by_name_.size(); ++i) tensor_by_name_[i] = i;
  std::sort(tensor_by_name_.begin(), tensor_by_name_.end(),
            [&](std::uint32_t a, std::uint32_t b) { return tensors_[a].name < tensors_[b].name; });
  for (std::size_t i = 1; i < tensor_by_name_.size(); ++i)
    if (tensors_[tensor_by_name_[i]].name == tensors_[tensor_by_name_[i - 1]].name)
      in.fail(Status::bad_file, "duplicate tensor name " + quoted(tensors_[tensor_by_name_[i]].name));

  // Overlap check over the tensors sorted by offset (ties: the shorter first,
  // so a zero-gap pair is never missed).
  if (tensors_.size() > 1) {
    std::vector<std::uint32_t> by_offset(tensor_by_name_);
    std::sort(by_offset.begin(), by_offset.end(), [&](std::uint32_t a, std::uint32_t b) {
      return tensors_[a].offset != tensors_[b].offset ? tensors_[a].offset < tensors_[b].offset
                                                      : tensors_[a].n_bytes < tensors_[b].n_bytes;
    });
    for (std::size_t i = 1; i < by_offset.size(); ++i) {
      const GgufTensor& a = tensors_[by_offset[i - 1]];
      const GgufTensor& b = tensors_[by_offset[i]];
      if (b.offset < a.offset + a.n_bytes)  // no overflow: both ends are inside the file
        in.fail(Status::bad_file, "tensors " + quoted(a.name) + " and " + quoted(b.name) +
                                      " overlap in the data section");
    }
  }
}

// ------------------------------------------------------------ metadata access

const GgufKv* GgufFile::find(std::string_view key) const {
  auto it = std::lower_bound(kv_by_key_.begin(), kv_by_key_.end(), key,
                             [&](std::uint32_t i, std::string_view k) { return kvs_[i].key < k; });
  if (it == kv_by_key_.end() || kvs_[*it].key != key) return nullptr;
  return &kvs_[*it];
}

const GgufValue& GgufFile::require(std::string_view key) const {
  const GgufKv* kv = find(key);
  if (!kv) throw Error(Status::bad_file, path_ + ": missing metadata key " + quoted(key));
  return kv->value;
}

void GgufFile::fail_type(std::string_view key, const char* expected, const GgufValue& v) const {
  std::string found = gguf_value_type_name(v.type);
  if (v.type == GgufValueType::array) found += std::string(" of ") + gguf_value_type_name(v.elem_type);
  throw Error(Status::bad_file, path_ + ": metadata key " + quoted(key) + ": expected " + expected +
                                    ", found " + found);
}

namespace {

// An integer value converted to T, or nullopt if it is no integer or does not fit.
template <class T>
std::optional<T> integer_as(const GgufValue& v) {
  if (!v.is_integer()) return std::nullopt;
  if (v.type == GgufValueType::u64) {
    std::uint64_t u = load<std::uint64_t>(v.data);
    if (!std::in_range<T>(u)) return std::nullopt;
    return static_cast<T>(u);
  }
  std::int64_t s = *v.as_i64();
  if (!std::in_range<T>(s)) return std::nullopt;
  return static_cast<T>(s);
}

std::string integer_string(const GgufValue& v) {
  if (v.type == GgufValueType::u64) return std::to_string(load<std::uint64_t>(v.data));
  return std::to_string(*v.as_i64());
}

template <class T> const char* int_name();
template <> const char* int_name<std::uint32_t>() { return "u32"; }
template <> const char* int_name<std::uint64_t>() { return "u64"; }
template <> const char* int_name<std::int32_t>() { return "i32"; }
template <> const char* int_name<std::int64_t>() { return "i64"; }

}  // namespace

#define LATTE_GGUF_INT_ACCESSORS(T, get, req)                                                  \
  T GgufFile::get(std::string_view key, T def) const {                                         \
    const GgufKv* kv = find(key);                                                              \
    return kv ? req(key) : def;                                                                \
  }                                                                                            \
  T GgufFile::req(std::string_view key) const {                                                \
    const GgufValue& v = require(key);                                                         \
    if (!v.is_integer()) fail_type(key, int_name<T>(), v);                                \
    auto r = integer_as<T>(v);                                                                 \
    if (!r)                                                                                    \
      throw Error(Status::bad_file, path_ + ": metadata key " + quoted(key) + ": value " +     \
                                        integer_string(v) + " does not fit " + int_name<T>()); \
    return *r;                                                                                 \
  }

LATTE_GGUF_INT_ACCESSORS(std::uint32_t, get_u32, require_u32)
LATTE_GGUF_INT_ACCESSORS(std::uint64_t, get_u64, require_u64)
LATTE_GGUF_INT_ACCESSORS(std::int32_t, get_i32, require_i32)
LATTE_GGUF_INT_ACCESSORS(std::int64_t, get_i64, require_i64)
#undef LATTE_GGUF_INT_ACCESSORS

float GgufFile::get_f32(std::string_view key, float def) const {
  return has(key) ? require_f32(key) : def;
}
float GgufFile::require_f32(std::string_view key) const {
  const GgufValue& v = require(key);
  auto r = v.as_f64();
  if (!r) fail_type(key, "f32", v);
  return static_cast<float>(*r);
}

bool GgufFile::get_bool(std::string_view key, bool def) const {
  return has(key) ? require_bool(key) : def;
}
bool GgufFile::require_bool(std::string_view key) const {
  const GgufValue& v = require(key);
  auto r = v.as_bool();
  if (!r) fail_type(key, "bool", v);
  return *r;
}

std::string_view GgufFile::get_string(std::string_view key, std::string_view def) const {
  return has(key) ? require_string(key) : def;
}
std::string_view GgufFile::require_string(std::string_view key) const {
  const GgufValue& v = require(key);
  auto r = v.as_string();
  if (!r) fail_type(key, "string", v);
  return *r;
}

const GgufValue& GgufFile::require_array(std::string_view key) const {
  const GgufValue& v = require(key);
  if (v.type != GgufValueType::array) fail_type(key, "array", v);
  return v;
}

std::vector<std::string_view> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue& a = require_array(key);
  if (a.elem_type != GgufValueType::string) fail_type(key, "array of string", a);
  std::vector<std::string_view> out;
  out.reserve(static_cast<std::size_t>(a.count));
  GgufArrayElements it(a);
  GgufValue e;
  while (it.next(e)) out.push_back(*e.as_string());
  return out;
}

namespace {
template <class T>
std::vector<T> integer_array(std::string_view key, const GgufValue& a,
                             const std::string& path) {
  std::vector<T> out;
  out.reserve(static_cast<std::size_t>(a.count));
  GgufArrayElements it(a);
  GgufValue e;
  while (it.next(e)) {
    auto r = integer_as<T>(e);
    if (!r)
      throw Error(Status::bad_file, path + ": metadata key " + quoted(key) + ": element " +
                                        std::to_string(out.size()) + " = " +
                                        integer_string(e) + " does not fit " + int_name<T>());
    out.push_back(*r);
  }
  return out;
}
}  // namespace

std::vector<std::int32_t> GgufFile::get_i32_array(std::string_view key) const {
  const GgufValue& a = require_array(key);
  if (!gguf_value_type_is_integer(a.elem_type)) fail_type(key, "array of integers (i32)", a);
  return integer_array<std::int32_t>(key, a, path_);
}
std::vector<std::uint32_t> GgufFile::get_u32_array(std::string_view key) const {
  const GgufValue& a = require_array(key);
  if (!gguf_value_type_is_integer(a.elem_type)) fail_type(key, "array of integers (u32)", a);
  return integer_array<std::uint32_t>(key, a, path_);
}
std::vector<std::int64_t> GgufFile::get_i64_array(std::string_view key) const {
  const GgufValue& a = require_array(key);
  if (!gguf_value_type_is_integer(a.elem_type)) fail_type(key, "array of integers (i64)", a);
  return integer_array<std::int64_t>(key, a, path_);
}

std::vector<float> GgufFile::get_f32_array(std::string_view key) const {
  const GgufValue& a = require_array(key);
  std::vector<float> out;
  if (a.elem_type == GgufValueType::f32) {
    out.resize(static_cast<std::size_t>(a.count));
    if (a.count) std::memcpy(out.data(), a.data, out.size() * sizeof(float));
  } else if (a.elem_type == GgufValueType::f64) {
    out.reserve(static_cast<std::size_t>(a.count));
    for (std::uint64_t i = 0; i < a.count; ++i) out.push_back(static_cast<float>(load<double>(a.data + 8 * i)));
  } else {
    fail_type(key, "array of f32", a);
  }
  return out;
}

// ------------------------------------------------------------ tensors

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = std::lower_bound(
      tensor_by_name_.begin(), tensor_by_name_.end(), name,
      [&](std::uint32_t i, std::string_view n) { return tensors_[i].name < n; });
  if (it == tensor_by_name_.end() || tensors_[*it].name != name) return nullptr;
  return &tensors_[*it];
}

const GgufTensor& GgufFile::require_tensor(std::string_view name) const {
  const GgufTensor* t = find_tensor(name);
  if (!t) throw Error(Status::bad_file, path_ + ": missing tensor " + quoted(name));
  return *t;
}

const GgufTensor& GgufFile::require_tensor(std::string_view name,
                                           std::span<const std::uint64_t> ne) const {
  const GgufTensor& t = require_tensor(name);
  // Compared as 4 dims padded with 1s, as ggml does: its writer drops
  // trailing 1s ([16, 32, 1] is stored as [16, 32]).
  const auto dim = [](auto dims, std::size_t i) { return i < dims.size() ? dims[i] : std::uint64_t{1}; };
  bool same = true;
  for (std::size_t i = 0; i < std::max<std::size_t>({ne.size(), t.dims().size(), 4}); ++i)
    same = same && dim(ne, i) == dim(t.dims(), i);
  if (!same) {
    std::string want = "[";
    for (auto it = ne.begin(); it != ne.end(); ++it) {
      if (it != ne.begin()) want += ", ";
      want += std::to_string(*it);
    }
    want += "]";
    throw Error(Status::bad_file, path_ + ": tensor " + quoted(name) + ": expected shape " + want +
                                      ", found " + t.shape_string());
  }
  return t;
}

}  // namespace latte

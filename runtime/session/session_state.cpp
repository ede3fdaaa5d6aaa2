// Saved sessions: Session::save_state / load_state to and from a file,
// save_state_to / load_state_from the same bytes in memory (one writer and
// one reader serve both), and copy(), a fork of a session.
//
// File layout (little-endian, as every machine Latte runs on):
//   0   char[8]  "LATTESES"
//   8   u32      version (5; 4 is read but for int4 caches; earlier ones are refused)
//   12  u32      cache storage (0 f32, 1 f16, 2 int8, 3 int4)
//   16  u64      Model::fingerprint() of the model that wrote it
//   24  u32 x 5  n_layers, d_c, d_R, tile_tokens, n_vocab
//   44  u32      has_logits (0 or 1)
//   48  u64      tile bytes
//   56  i64      n_past
//   64  u32      RoPE factor set the keys were rotated with: 0 the model has
//                one (or none), 1 its short-context set, 2 its long one
//   68  u32      unshifted prefix: the leading tokens whose rows a fresh
//                prefill would give (n_past unless the context was shifted)
//   72  i32      tokens[n_past]
//       f32      logits[n_vocab], when has_logits
//       tiles    per layer, ceil(n_past / tile_tokens) raw cache tiles; rows
//                past n_past in the last one are written as zeros. int4:
//                the last, when not full, in int8's layout (the cache keeps
//                the filling tile so), of that layout's size
//       u64      checksum of every byte before it
// The tiles are the cache as stored (LatentCache::tile): an int8 session
// saves and loads without requantizing, so a loaded session computes exactly
// what the saved one would have. Version 2 added the RoPE factor set:
// minicpm3 picks its set by the session's context, and keys rotated with one
// set are wrong under the other. Version 3 added the unshifted prefix: after a
// shift the later rows were computed with context that is gone, so a resumed
// session must not stand in for a fresh prompt's prefill past it. Version 4
// names the model by a hash of every byte of its file (before, of its
// metadata and a few bytes of each tensor: a file of other weights passed
// for its model), so earlier files cannot be matched to a model and are
// refused. Version 5 gave int4 tiles one latent scale per channel over the
// tile instead of one per token: a version 4 file of an int4 cache holds the
// old tiles and is refused; of any other cache it reads as before. The checksum is verified before any field is judged, so a
// damaged file is refused as corrupt, not as another model's; the checksum
// is no seal (anyone can recompute it), so every value is then checked
// against what the model could have written: a value this model cannot
// produce is refused by field, not left to fail every later call.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "quant/latent_formats.h"
#include "platform/atomic_file.h"
#include "platform/read_only_file.h"
#include "runtime/error.h"
#include "runtime/session/cache_bounds.h"
#include "runtime/session/session.h"

namespace latte {

namespace {

constexpr char kMagic[8] = {'L', 'A', 'T', 'T', 'E', 'S', 'E', 'S'};
constexpr std::uint32_t kVersion = 5;
// The oldest version read (for every cache type but int4).
constexpr std::uint32_t kOldestVersion = 4;
constexpr std::size_t kHeaderBytes = 72;

struct StateHeader {
  std::uint32_t version = kVersion;
  std::uint32_t storage = 0;
  std::uint64_t fingerprint = 0;
  std::uint32_t n_layers = 0, d_c = 0, d_R = 0, tile_tokens = 0, n_vocab = 0;
  std::uint32_t has_logits = 0;
  std::uint64_t tile_bytes = 0;
  std::int64_t n_past = 0;
  std::uint32_t rope_set = 0;
  std::uint32_t unshifted = 0;
};

template <class T>
void put(std::uint8_t* at, T v) {
  std::memcpy(at, &v, sizeof v);
}
template <class T>
T get(const std::uint8_t* at) {
  T v;
  std::memcpy(&v, at, sizeof v);
  return v;
}

// A streaming 64-bit checksum: FNV-1a over 8-byte words with a shift to
// spread high bits, fast enough for a few hundred MB of cache.
class Checksum {
 public:
  void add(const void* data, std::size_t n) {
    if (n == 0) return;  // data may be null (an empty session's tokens)
    const auto* p = static_cast<const std::uint8_t*>(data);
    for (; n > 0 && n_pending_ > 0; --n) {  // complete a word begun by an earlier call
      pending_[n_pending_++] = *p++;
      if (n_pending_ == 8) {
        word(get<std::uint64_t>(pending_));
        n_pending_ = 0;
      }
    }
    for (; n >= 8; p += 8, n -= 8) word(get<std::uint64_t>(p));
    std::memcpy(pending_ + n_pending_, p, n);  // n < 8, and n_pending_ is 0 whenever n > 0 here
    n_pending_ += static_cast<int>(n);
  }
  std::uint64_t value() const {
    std::uint64_t h = h_;
    for (int i = 0; i < n_pending_; ++i) h = (h ^ pending_[i]) * 0x100000001b3ULL;
    return h ^ (h >> 31);
  }

 private:
  void word(std::uint64_t w) {
    h_ = (h_ ^ w) * 0x100000001b3ULL;
    h_ ^= h_ >> 29;
  }
  std::uint64_t h_ = 0xcbf29ce484222325ULL;
  std::uint8_t pending_[8] = {};
  int n_pending_ = 0;
};

std::int64_t tiles_for(std::int64_t n, std::int64_t tile) { return (n + tile - 1) / tile; }

}  // namespace

// Where read_state reads a saved session's bytes from: a file or a caller's
// buffer, read in order from an offset (short only at the end).
class StateSource {
 public:
  virtual ~StateSource() = default;
  virtual std::uint64_t size() const = 0;
  virtual void seek(std::uint64_t offset) = 0;
  virtual std::size_t read(void* dst, std::size_t n) = 0;
};

namespace {

class FileSource final : public StateSource {
 public:
  explicit FileSource(ReadOnlyFile& f) : f_(f) {}
  std::uint64_t size() const override { return f_.size(); }
  void seek(std::uint64_t offset) override { f_.seek(offset); }
  std::size_t read(void* dst, std::size_t n) override { return f_.read(dst, n); }

 private:
  ReadOnlyFile& f_;
};

class MemorySource final : public StateSource {
 public:
  explicit MemorySource(std::span<const std::uint8_t> b) : b_(b) {}
  std::uint64_t size() const override { return b_.size(); }
  void seek(std::uint64_t offset) override { at_ = std::min<std::uint64_t>(offset, b_.size()); }
  std::size_t read(void* dst, std::size_t n) override {
    n = std::min<std::size_t>(n, b_.size() - static_cast<std::size_t>(at_));
    if (n > 0) std::memcpy(dst, b_.data() + at_, n);
    at_ += n;
    return n;
  }

 private:
  std::span<const std::uint8_t> b_;
  std::uint64_t at_ = 0;
};

// Whether the model rotates keys with one of two RoPE factor sets (minicpm3
// with both rope_factors tensors) by the session's context.
bool two_rope_sets(const Model& m) { return m.rope_factors(true) != m.rope_factors(false); }

// The RoPE factor set a session of n_ctx tokens rotates its keys with (the
// header's field at 64).
std::uint32_t rope_set(const Model& m, std::int64_t n_ctx) {
  if (!two_rope_sets(m)) return 0;
  return m.params().rope_long_factors(n_ctx) ? 2 : 1;
}

const char* rope_set_name(std::uint32_t set) {
  return set == 0 ? "its only" : set == 1 ? "its short-context" : "its long-context";
}

// A vector of n elements for a load, or Error(out_of_memory) naming the
// file, the buffer and its size.
template <class T>
std::vector<T> buffer_for(const std::string& what, const char* buffer, std::size_t n) {
  try {
    return std::vector<T>(n);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  throw Error(Status::out_of_memory,
              what + ": cannot allocate " + std::to_string(n * sizeof(T)) + " bytes for " + buffer);
}

void refuse_empty_path(const std::string& path, const char* fn) {
  if (path.empty()) throw Error(Status::invalid_argument, std::string(fn) + ": the path is empty");
}

// The model's fingerprint (a pass over its file the first time), a failed
// allocation there named with `what` (the file being saved or loaded).
std::uint64_t fingerprint_for(const Model& m, int threads, const std::string& what) {
  try {
    return m.fingerprint(threads);
  } catch (const Error& e) {
    if (e.status() != Status::out_of_memory) throw;
    throw Error(Status::out_of_memory, what + ": " + e.what());
  }
}

}  // namespace

std::uint64_t Session::state_checksum(const void* data, std::size_t n) {
  Checksum c;
  c.add(data, n);
  return c.value();
}

std::size_t Session::state_size() const {
  const LatentCacheConfig& cc = cache_.config();
  const std::size_t tiles = static_cast<std::size_t>(cc.n_layers) * cache_.stored_bytes(n_past_);
  return kHeaderBytes + tokens_.size() * sizeof(std::int32_t) + (has_logits_ ? last_logits_.size() * sizeof(float) : 0) +
         tiles + 8;
}

void Session::write_state(const std::function<void(const void*, std::size_t)>& write_out,
                          std::uint64_t fingerprint) const {
  const ModelParams& p = model_->params();
  const LatentCacheConfig& cc = cache_.config();
  const LatentTileLayout& lay = cache_.layout();
  std::uint8_t h[kHeaderBytes] = {};
  std::memcpy(h, kMagic, 8);
  put<std::uint32_t>(h + 8, kVersion);
  put<std::uint32_t>(h + 12, static_cast<std::uint32_t>(cc.storage));
  put<std::uint64_t>(h + 16, fingerprint);
  put<std::uint32_t>(h + 24, static_cast<std::uint32_t>(cc.n_layers));
  put<std::uint32_t>(h + 28, static_cast<std::uint32_t>(cc.d_c));
  put<std::uint32_t>(h + 32, static_cast<std::uint32_t>(cc.d_R));
  put<std::uint32_t>(h + 36, static_cast<std::uint32_t>(cc.tile_tokens));
  put<std::uint32_t>(h + 40, static_cast<std::uint32_t>(p.n_vocab));
  put<std::uint32_t>(h + 44, has_logits_ ? 1u : 0u);
  put<std::uint64_t>(h + 48, lay.bytes);
  put<std::int64_t>(h + 56, n_past_);
  put<std::uint32_t>(h + 64, rope_set(*model_, opts_.n_ctx));
  put<std::uint32_t>(h + 68, static_cast<std::uint32_t>(n_unshifted()));

  Checksum sum;
  const auto write = [&](const void* data, std::size_t n) {
    if (n == 0) return;  // data may be null
    write_out(data, n);
    sum.add(data, n);
  };
  write(h, sizeof h);
  write(tokens_.data(), tokens_.size() * sizeof(std::int32_t));
  if (has_logits_) write(last_logits_.data(), last_logits_.size() * sizeof(float));
  // Layer by layer (one layer's tiles in memory at a time).
  // Rows past n_past as zeros (LatentCache::save_tiles): a truncation or a
  // refused call may have left anything there, which a saved session or a
  // copy must not carry (load_state's check of every row passes).
  std::vector<std::uint8_t> tiles =
      buffer_for<std::uint8_t>("save session", "one layer's tiles", cache_.stored_bytes(n_past_));
  for (int l = 0; l < cc.n_layers; ++l) {
    cache_.save_tiles(l, n_past_, tiles.data());
    write(tiles.data(), tiles.size());
  }
  const std::uint64_t check = sum.value();
  write_out(&check, sizeof check);
}

void Session::save_state(const std::string& path) const {
  refuse_empty_path(path, "save session");
  // First (a pass over the model file, once per model): nothing is written if it fails.
  const std::uint64_t fp = fingerprint_for(*model_, threads(), "save session '" + path + "'");
  // A whole file or none; 0600: it holds a conversation.
  AtomicFile out(path, "save session", /*private_mode=*/true);
  write_state([&](const void* data, std::size_t n) { out.write(data, n); }, fp);
  out.commit(/*sync=*/true);
}

void Session::save_state_to(std::span<std::uint8_t> out) const {
  const std::size_t need = state_size();
  if (out.size() < need)
    throw Error(Status::invalid_argument, "save session to memory: the buffer holds " + std::to_string(out.size()) +
                                              " bytes; the session's state takes " + std::to_string(need));
  const std::uint64_t fp = fingerprint_for(*model_, threads(), "save session to memory");
  std::size_t at = 0;
  write_state(
      [&](const void* data, std::size_t n) {
        std::memcpy(out.data() + at, data, n);
        at += n;
      },
      fp);
}

namespace {

// Whether the checksum at the end of a file matches its other bytes. For a
// file whose header cannot be trusted yet: one streaming pass.
bool checksum_matches(StateSource& in, std::uint64_t size, const std::string& what) {
  if (size < 8) return false;
  in.seek(0);
  Checksum sum;
  std::vector<char> buf = buffer_for<char>(what, "its read buffer", std::size_t{1} << 20);
  for (std::uint64_t left = size - 8; left > 0;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, buf.size()));
    if (in.read(buf.data(), n) != n) return false;
    sum.add(buf.data(), n);
    left -= n;
  }
  std::uint64_t stored = 0;
  return in.read(&stored, sizeof stored) == sizeof stored && stored == sum.value();
}

}  // namespace

void Session::load_state(const std::string& path) {
  refuse_empty_path(path, "load session");
  const std::string what = "session file '" + path + "'";
  // Close-on-exec, and a FIFO in the path's place refused rather than
  // waited on (forever, in the caller's thread): see ReadOnlyFile.
  ReadOnlyFile file(path, what);
  FileSource in(file);
  read_state(in, what);
}

void Session::load_state_from(std::span<const std::uint8_t> bytes) {
  MemorySource in(bytes);
  read_state(in, "session state in memory");
}

// (A function try block: an allocation other than the named buffers below,
// a small one, still names the source.)
void Session::read_state(StateSource& in, const std::string& what) try {
  const ModelParams& p = model_->params();
  const LatentCacheConfig& cc = cache_.config();
  const LatentTileLayout& lay = cache_.layout();
  const std::uint64_t size = in.size();
  const std::string not_session = what + " is not a Latte session";
  const std::string corrupt = what + " is corrupt: its checksum does not match";

  // What the header says is judged only once the checksum vouches for it:
  // first the magic, the version and the size the header implies (a damaged
  // header fails those, or the checksum), then every byte.
  std::uint8_t h[kHeaderBytes] = {};
  const std::size_t head = in.read(h, 12);
  if (size < 12 || head != 12) throw Error(Status::bad_file, not_session + " (" + std::to_string(size) + " bytes)");
  if (std::memcmp(h, kMagic, 8) != 0) throw Error(Status::bad_file, not_session + " (no LATTESES magic)");
  const std::uint32_t version = get<std::uint32_t>(h + 8);
  if (version != kVersion && version != kOldestVersion) {
    // The checksum is the same in every version: it tells a file of
    // another version from a damaged version field.
    if (!checksum_matches(in, size, what)) throw Error(Status::bad_file, corrupt);
    const std::string reads = "; this build reads version " + std::to_string(kVersion);
    if (version >= 2 && version < kOldestVersion)
      throw Error(Status::unsupported,
                  what + " has format version " + std::to_string(version) + reads +
                      ": earlier versions named their model by its metadata and a few bytes of each tensor, "
                      "which other weights could match, so they cannot be matched to a model; compute the "
                      "session again (prefill its tokens) and save it");
    throw Error(Status::unsupported, what + " has format version " + std::to_string(version) + reads);
  }
  if (size < kHeaderBytes + 8) throw Error(Status::bad_file, not_session + " (" + std::to_string(size) + " bytes)");
  if (in.read(h + 12, kHeaderBytes - 12) != kHeaderBytes - 12)
    throw Error(Status::bad_file, what + " is truncated (it changed while being read?)");
  StateHeader s;
  s.version = version;
  s.storage = get<std::uint32_t>(h + 12);
  s.fingerprint = get<std::uint64_t>(h + 16);
  s.n_layers = get<std::uint32_t>(h + 24);
  s.d_c = get<std::uint32_t>(h + 28);
  s.d_R = get<std::uint32_t>(h + 32);
  s.tile_tokens = get<std::uint32_t>(h + 36);
  s.n_vocab = get<std::uint32_t>(h + 40);
  s.has_logits = get<std::uint32_t>(h + 44);
  s.tile_bytes = get<std::uint64_t>(h + 48);
  s.n_past = get<std::int64_t>(h + 56);
  s.rope_set = get<std::uint32_t>(h + 64);
  s.unshifted = get<std::uint32_t>(h + 68);
  // Each problem with the header is reported only once the checksum says
  // the file is as written: a damaged field is corruption, not a claim.
  std::string problem;
  if (version == 4 && s.storage == static_cast<std::uint32_t>(LatentStorage::int4)) {
    if (!checksum_matches(in, size, what)) throw Error(Status::bad_file, corrupt);
    throw Error(Status::unsupported,
                what + " has format version 4 and an int4 cache; this build reads version " + std::to_string(kVersion) +
                    ", whose int4 tiles scale each latent channel rather than each token: compute the session "
                    "again (prefill its tokens) and save it");
  }
  if (s.has_logits > 1) problem = "has_logits is " + std::to_string(s.has_logits);
  else if (s.n_past < 0 || s.n_past > kMaxContextTokens)
    problem = "token count " + std::to_string(s.n_past) + " is out of range";
  else if (s.tile_tokens == 0) problem = "tiles of 0 tokens";
  else if (s.has_logits == 1 && s.n_past == 0) problem = "logits but no tokens";
  else if (s.unshifted > s.n_past)
    problem = "unshifted prefix " + std::to_string(s.unshifted) + " is longer than its " + std::to_string(s.n_past) + " tokens";
  std::uint64_t n_tiles = 0;
  if (problem.empty()) {
    // The size the header implies, with the tile product checked for
    // overflow (a damaged tile size or layer count can be anything).
    n_tiles = static_cast<std::uint64_t>(tiles_for(s.n_past, s.tile_tokens));
    // int4: a last tile not full is in int8's layout, whose size follows
    // from the shape (an impossible shape: no such tile, refused below).
    const std::uint64_t partial = static_cast<std::uint64_t>(s.n_past % s.tile_tokens != 0);
    std::uint64_t last_bytes = s.tile_bytes;
    if (s.storage == static_cast<std::uint32_t>(LatentStorage::int4) && partial) {
      const bool shape_ok = s.d_c <= kLatentInt8MaxChannels && s.d_R <= kLatentInt8MaxChannels &&
                            s.tile_tokens <= static_cast<std::uint32_t>(kLatentInt8MaxTileTokens) &&
                            !*latent_layout_problem(LatentStorage::int8, static_cast<int>(s.d_c),
                                                    static_cast<int>(s.d_R), static_cast<int>(s.tile_tokens));
      last_bytes = shape_ok ? make_latent_tile_layout(LatentStorage::int8, static_cast<int>(s.d_c),
                                                      static_cast<int>(s.d_R), static_cast<int>(s.tile_tokens))
                                  .bytes
                            : ~std::uint64_t{0} >> 2;
    }
    std::uint64_t tile_total = 0, per_layer = 0;
    const bool overflow =
        __builtin_mul_overflow(n_tiles - partial, s.tile_bytes, &per_layer) ||
        __builtin_add_overflow(per_layer, partial * last_bytes, &per_layer) ||
        __builtin_mul_overflow(static_cast<std::uint64_t>(s.n_layers), per_layer, &tile_total) ||
        tile_total > (std::uint64_t{1} << 62);
    const std::uint64_t expect = overflow ? ~std::uint64_t{0}
                                          : kHeaderBytes + 4 * static_cast<std::uint64_t>(s.n_past) +
                                                (s.has_logits ? 4 * static_cast<std::uint64_t>(s.n_vocab) : 0) +
                                                tile_total + 8;
    if (size != expect)
      problem = std::to_string(size) + " bytes, where a session of " + std::to_string(s.n_past) + " tokens takes " +
                (overflow ? std::string("more than a file can hold") : std::to_string(expect)) +
                (size < expect ? ": truncated, or its header damaged" : ": trailing bytes, or its header damaged");
  }
  if (!problem.empty()) {
    if (!checksum_matches(in, size, what)) throw Error(Status::bad_file, corrupt + " (" + problem + ")");
    throw Error(Status::bad_file, what + ": " + problem);
  }
  if (!checksum_matches(in, size, what)) throw Error(Status::bad_file, corrupt);

  // The header is the writer's: now whether it fits this session.
  if (s.fingerprint != fingerprint_for(*model_, threads(), what))
    throw Error(Status::invalid_argument, what + " was saved from another model (or another file of it)");
  if (s.storage > 3) throw Error(Status::bad_file, what + ": unknown cache storage " + std::to_string(s.storage));
  if (s.storage != static_cast<std::uint32_t>(cc.storage))
    throw Error(Status::invalid_argument,
                what + " holds an " + latent_storage_name(static_cast<LatentStorage>(s.storage)) +
                    " cache; this session's is " + latent_storage_name(cc.storage));
  if (s.n_layers != static_cast<std::uint32_t>(cc.n_layers) || s.d_c != static_cast<std::uint32_t>(cc.d_c) ||
      s.d_R != static_cast<std::uint32_t>(cc.d_R) || s.n_vocab != static_cast<std::uint32_t>(p.n_vocab))
    throw Error(Status::bad_file, what + ": its shapes (layers, latent, rope, vocabulary) are not its model's");
  if (s.tile_tokens != static_cast<std::uint32_t>(cc.tile_tokens) || s.tile_bytes != lay.bytes)
    throw Error(Status::unsupported, what + " stores " + std::to_string(s.tile_tokens) + "-token tiles of " +
                                         std::to_string(s.tile_bytes) + " bytes; this build's are " +
                                         std::to_string(cc.tile_tokens) + " tokens, " + std::to_string(lay.bytes) + " bytes");
  // A set its model does not have is the file's fault; one the model has,
  // but not for this context, the caller's.
  if (!two_rope_sets(*model_) && s.rope_set != 0)
    throw Error(Status::bad_file, what + ": its RoPE factor set is " + std::to_string(s.rope_set) +
                                      ", but its model has a single set (0)");
  if (two_rope_sets(*model_) && (s.rope_set < 1 || s.rope_set > 2))
    throw Error(Status::bad_file, what + ": its RoPE factor set is " + std::to_string(s.rope_set) +
                                      ", but its model's are 1 (short-context) and 2 (long-context)");
  if (const std::uint32_t mine = rope_set(*model_, opts_.n_ctx); s.rope_set != mine)
    throw Error(Status::invalid_argument,
                what + "'s keys were rotated with " + rope_set_name(s.rope_set) + " RoPE factor set; a context of " +
                    std::to_string(opts_.n_ctx) + " tokens uses " + rope_set_name(mine) + " (the model switches above " +
                    std::to_string(p.rope_factor_switch()) +
                    " tokens): open the session with a context on the saver's side of that");
  if (s.n_past > opts_.n_ctx)
    throw Error(Status::context_overflow, what + " holds " + std::to_string(s.n_past) +
                                              " tokens; this session's context is " + std::to_string(opts_.n_ctx));

  in.seek(kHeaderBytes);
  Checksum sum;
  sum.add(h, sizeof h);
  const auto read = [&](void* data, std::size_t n) {
    if (n == 0) return;  // data may be null
    if (in.read(data, n) != n)
      throw Error(Status::bad_file, what + " is truncated (it changed while being read?)");
    sum.add(data, n);
  };
  std::vector<std::int32_t> tokens = buffer_for<std::int32_t>(what, "its tokens", static_cast<std::size_t>(s.n_past));
  read(tokens.data(), tokens.size() * sizeof(std::int32_t));
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= p.n_vocab)
      throw Error(Status::bad_file, what + ": token " + std::to_string(i) + " is " + std::to_string(tokens[i]) +
                                        ", outside the vocabulary [0, " + std::to_string(p.n_vocab) + ")");
  std::vector<float> logits = buffer_for<float>(what, "its logits", static_cast<std::size_t>(p.n_vocab));
  if (s.has_logits) {
    read(logits.data(), logits.size() * sizeof(float));
    for (std::size_t i = 0; i < logits.size(); ++i)
      if (!std::isfinite(logits[i]))
        throw Error(Status::bad_file, what + ": logit " + std::to_string(i) + " is " + std::to_string(logits[i]));
  }
  // The cache it fills: a failed allocation names the whole cache's size.
  const std::string cache_what = what + ": its latent cache (" + std::to_string(cc.n_layers) + " layers of " +
                                 std::to_string(n_tiles) + " tiles of " + std::to_string(lay.bytes) + " bytes, " +
                                 std::to_string(static_cast<std::uint64_t>(cc.n_layers) * n_tiles * lay.bytes) +
                                 " bytes)";
  const auto in_cache = [&](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      if (e.status() != Status::out_of_memory) throw;
      throw Error(Status::out_of_memory, cache_what + ": " + e.what());
    } catch (const std::bad_alloc&) {
      throw Error(Status::out_of_memory, cache_what + ": out of memory");
    }
  };
  std::optional<LatentCache> fresh;
  in_cache([&] { fresh.emplace(cc); });
  std::vector<std::uint8_t> layer_tiles =
      buffer_for<std::uint8_t>(what, "one layer's tiles", fresh->stored_bytes(s.n_past));
  for (int l = 0; l < cc.n_layers; ++l) {
    read(layer_tiles.data(), layer_tiles.size());
    // Values this model cannot have written (the checksum vouches for
    // nothing: anyone can recompute it), before the cache takes them.
    if (s.n_past > 0) {
      if (const std::string why = cache_tiles_problem(*fresh, layer_tiles.data(), static_cast<std::int64_t>(n_tiles),
                                                      s.n_past, cache_bound(*model_, l));
          !why.empty())
        throw Error(Status::bad_file, what + ": layer " + std::to_string(l) + ", " + why);
    }
    try {
      in_cache([&] { fresh->load_tiles(l, s.n_past, layer_tiles.data()); });
    } catch (const Error& e) {
      if (e.status() != Status::bad_file) throw;
      throw Error(Status::bad_file, what + ": " + e.what());
    }
  }
  std::uint64_t stored = 0;
  if (in.read(&stored, sizeof stored) != sizeof stored) throw Error(Status::bad_file, what + " is truncated (it changed while being read?)");
  if (stored != sum.value()) throw Error(Status::bad_file, corrupt + " (it changed while being read?)");

  // Nothing below throws: the session changes all at once.
  cache_ = std::move(*fresh);
  tokens_ = std::move(tokens);
  last_logits_ = std::move(logits);
  has_logits_ = s.has_logits == 1;
  n_past_ = s.n_past;
  unshifted_limit_ = s.unshifted == s.n_past ? kMaxContextTokens : s.unshifted;
} catch (const std::bad_alloc&) {
  throw Error(Status::out_of_memory, what + ": out of memory while loading it");
}

std::unique_ptr<Session> Session::copy() const {
  auto s = std::make_unique<Session>(model_, opts_);  // opts_.n_ctx is resolved; threads as asked
  const LatentCacheConfig& cc = cache_.config();
  const std::int64_t n_tiles = tiles_for(n_past_, cc.tile_tokens);
  const std::string what = "copy session: its latent cache (" + std::to_string(cc.n_layers) + " layers of " +
                           std::to_string(n_tiles) + " tiles of " + std::to_string(cache_.layout().bytes) + " bytes)";
  std::vector<std::uint8_t> tiles = buffer_for<std::uint8_t>(what, "one layer's tiles", cache_.stored_bytes(n_past_));
  for (int l = 0; l < cc.n_layers; ++l) {
    cache_.save_tiles(l, n_past_, tiles.data());
    try {
      s->cache_.load_tiles(l, n_past_, tiles.data());
    } catch (const Error& e) {
      if (e.status() != Status::out_of_memory) throw;
      throw Error(Status::out_of_memory, what + ": " + e.what());
    }
  }
  try {
    s->tokens_ = tokens_;
    s->last_logits_ = last_logits_;
  } catch (const std::bad_alloc&) {
    throw Error(Status::out_of_memory, "copy session: its tokens and logits: out of memory");
  }
  s->has_logits_ = has_logits_;
  s->n_past_ = n_past_;
  s->unshifted_limit_ = unshifted_limit_;
  s->last_form_ = last_form_;
  return s;
}

}  // namespace latte

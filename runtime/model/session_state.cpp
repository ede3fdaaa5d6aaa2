// Saved sessions: Session::save_state / load_state.
//
// File layout (little-endian, as every machine Latte runs on):
//   0   char[8]  "LATTESES"
//   8   u32      version (1)
//   12  u32      cache storage (0 f32, 1 f16, 2 int8)
//   16  u64      Model::fingerprint() of the model that wrote it
//   24  u32 x 5  n_layers, d_c, d_R, tile_tokens, n_vocab
//   44  u32      has_logits (0 or 1)
//   48  u64      tile bytes
//   56  i64      n_past
//   64  i32      tokens[n_past]
//       f32      logits[n_vocab], when has_logits
//       tiles    per layer, ceil(n_past / tile_tokens) raw cache tiles
//       u64      checksum of every byte before it
// The tiles are the cache as stored (LatentCache::tile): an int8 session
// saves and loads without requantizing, so a loaded session computes exactly
// what the saved one would have.
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/model/session.h"

namespace latte {

namespace {

constexpr char kMagic[8] = {'L', 'A', 'T', 'T', 'E', 'S', 'E', 'S'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 64;

struct StateHeader {
  std::uint32_t version = kVersion;
  std::uint32_t storage = 0;
  std::uint64_t fingerprint = 0;
  std::uint32_t n_layers = 0, d_c = 0, d_R = 0, tile_tokens = 0, n_vocab = 0;
  std::uint32_t has_logits = 0;
  std::uint64_t tile_bytes = 0;
  std::int64_t n_past = 0;
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

std::uint64_t Session::state_checksum(const void* data, std::size_t n) {
  Checksum c;
  c.add(data, n);
  return c.value();
}

void Session::save_state(const std::string& path) const {
  const ModelParams& p = model_->params();
  const LatentCacheConfig& cc = cache_.config();
  const LatentTileLayout& lay = cache_.layout();
  std::uint8_t h[kHeaderBytes] = {};
  std::memcpy(h, kMagic, 8);
  put<std::uint32_t>(h + 8, kVersion);
  put<std::uint32_t>(h + 12, static_cast<std::uint32_t>(cc.storage));
  put<std::uint64_t>(h + 16, model_->fingerprint());
  put<std::uint32_t>(h + 24, static_cast<std::uint32_t>(cc.n_layers));
  put<std::uint32_t>(h + 28, static_cast<std::uint32_t>(cc.d_c));
  put<std::uint32_t>(h + 32, static_cast<std::uint32_t>(cc.d_R));
  put<std::uint32_t>(h + 36, static_cast<std::uint32_t>(cc.tile_tokens));
  put<std::uint32_t>(h + 40, static_cast<std::uint32_t>(p.n_vocab));
  put<std::uint32_t>(h + 44, has_logits_ ? 1u : 0u);
  put<std::uint64_t>(h + 48, lay.bytes);
  put<std::int64_t>(h + 56, n_past_);

  // Written beside the target and renamed over it, so a failed save leaves
  // an earlier file whole.
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(Status::io_error, "save session: cannot create '" + tmp + "': " + std::strerror(errno));
  Checksum sum;
  const auto write = [&](const void* data, std::size_t n) {
    if (n == 0) return;  // data may be null
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
    sum.add(data, n);
  };
  write(h, sizeof h);
  write(tokens_.data(), tokens_.size() * sizeof(std::int32_t));
  if (has_logits_) write(last_logits_.data(), last_logits_.size() * sizeof(float));
  const std::int64_t n_tiles = tiles_for(n_past_, cc.tile_tokens);
  for (int l = 0; l < cc.n_layers; ++l)
    for (std::int64_t t = 0; t < n_tiles; ++t) write(cache_.tile(l, t), lay.bytes);
  const std::uint64_t check = sum.value();
  out.write(reinterpret_cast<const char*>(&check), sizeof check);
  out.close();
  std::error_code ec;
  if (!out) {
    const std::string why = std::strerror(errno);
    std::filesystem::remove(tmp, ec);
    throw Error(Status::io_error, "save session: writing '" + tmp + "' failed: " + why);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw Error(Status::io_error, "save session: cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
  }
}

void Session::load_state(const std::string& path) {
  const ModelParams& p = model_->params();
  const LatentCacheConfig& cc = cache_.config();
  const LatentTileLayout& lay = cache_.layout();
  const std::string what = "session file '" + path + "'";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(Status::io_error, what + " is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Status::io_error, "cannot open " + what + ": " + std::strerror(errno));
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw Error(Status::io_error, "cannot size " + what + ": " + ec.message());

  Checksum sum;
  const auto read = [&](void* data, std::size_t n) {
    if (n == 0) return;  // data may be null
    in.read(static_cast<char*>(data), static_cast<std::streamsize>(n));
    if (static_cast<std::size_t>(in.gcount()) != n)
      throw Error(Status::bad_file, what + " is truncated (it changed while being read?)");
    sum.add(data, n);
  };
  if (size < kHeaderBytes + 8) throw Error(Status::bad_file, what + " is not a Latte session (" + std::to_string(size) + " bytes)");
  std::uint8_t h[kHeaderBytes];
  read(h, sizeof h);
  if (std::memcmp(h, kMagic, 8) != 0) throw Error(Status::bad_file, what + " is not a Latte session (no LATTESES magic)");
  StateHeader s;
  s.version = get<std::uint32_t>(h + 8);
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
  if (s.version != kVersion)
    throw Error(Status::unsupported, what + " has format version " + std::to_string(s.version) + "; this build reads " +
                                         std::to_string(kVersion));
  if (s.fingerprint != model_->fingerprint())
    throw Error(Status::invalid_argument, what + " was saved from another model (or another file of it)");
  if (s.storage > 2) throw Error(Status::bad_file, what + ": unknown cache storage " + std::to_string(s.storage));
  if (s.storage != static_cast<std::uint32_t>(cc.storage))
    throw Error(Status::invalid_argument,
                what + " holds a " + latent_storage_name(static_cast<LatentStorage>(s.storage)) +
                    " cache; this session's is " + latent_storage_name(cc.storage));
  if (s.n_layers != static_cast<std::uint32_t>(cc.n_layers) || s.d_c != static_cast<std::uint32_t>(cc.d_c) ||
      s.d_R != static_cast<std::uint32_t>(cc.d_R) || s.n_vocab != static_cast<std::uint32_t>(p.n_vocab))
    throw Error(Status::bad_file, what + ": its shapes (layers, latent, rope, vocabulary) are not its model's");
  if (s.tile_tokens != static_cast<std::uint32_t>(cc.tile_tokens) || s.tile_bytes != lay.bytes)
    throw Error(Status::unsupported, what + " stores " + std::to_string(s.tile_tokens) + "-token tiles of " +
                                         std::to_string(s.tile_bytes) + " bytes; this build's are " +
                                         std::to_string(cc.tile_tokens) + " tokens, " + std::to_string(lay.bytes) + " bytes");
  if (s.has_logits > 1) throw Error(Status::bad_file, what + ": has_logits is " + std::to_string(s.has_logits));
  if (s.n_past < 0 || s.n_past > kMaxContextTokens)
    throw Error(Status::bad_file, what + ": token count " + std::to_string(s.n_past) + " is out of range");
  if (s.n_past > opts_.n_ctx)
    throw Error(Status::context_overflow, what + " holds " + std::to_string(s.n_past) +
                                              " tokens; this session's context is " + std::to_string(opts_.n_ctx));
  if (s.has_logits == 1 && s.n_past == 0) throw Error(Status::bad_file, what + " has logits but no tokens");
  // n_past < 2^31 and tiles of at most a few MB: no product below overflows.
  const std::uint64_t n_tiles = static_cast<std::uint64_t>(tiles_for(s.n_past, s.tile_tokens));
  const std::uint64_t expect = kHeaderBytes + 4 * static_cast<std::uint64_t>(s.n_past) +
                               (s.has_logits ? 4 * static_cast<std::uint64_t>(s.n_vocab) : 0) +
                               s.n_layers * n_tiles * s.tile_bytes + 8;
  if (size != expect)
    throw Error(Status::bad_file, what + " is " + std::to_string(size) + " bytes; a session of " +
                                      std::to_string(s.n_past) + " tokens takes " + std::to_string(expect) +
                                      (size < expect ? " (truncated)" : " (trailing bytes)"));

  std::vector<std::int32_t> tokens(static_cast<std::size_t>(s.n_past));
  read(tokens.data(), tokens.size() * sizeof(std::int32_t));
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= p.n_vocab)
      throw Error(Status::bad_file, what + ": token " + std::to_string(i) + " is " + std::to_string(tokens[i]) +
                                        ", outside the vocabulary [0, " + std::to_string(p.n_vocab) + ")");
  std::vector<float> logits(static_cast<std::size_t>(p.n_vocab), 0.f);
  if (s.has_logits) {
    read(logits.data(), logits.size() * sizeof(float));
    for (std::size_t i = 0; i < logits.size(); ++i)
      if (!std::isfinite(logits[i]))
        throw Error(Status::bad_file, what + ": logit " + std::to_string(i) + " is " + std::to_string(logits[i]));
  }
  LatentCache fresh(cc);
  std::vector<std::uint8_t> layer_tiles(static_cast<std::size_t>(n_tiles * s.tile_bytes));
  for (int l = 0; l < cc.n_layers; ++l) {
    read(layer_tiles.data(), layer_tiles.size());
    try {
      fresh.load_tiles(l, s.n_past, layer_tiles.data());
    } catch (const Error& e) {
      if (e.status() != Status::bad_file) throw;
      throw Error(Status::bad_file, what + ": " + e.what());
    }
  }
  std::uint64_t stored = 0;
  in.read(reinterpret_cast<char*>(&stored), sizeof stored);
  if (in.gcount() != sizeof stored) throw Error(Status::bad_file, what + " is truncated (it changed while being read?)");
  if (stored != sum.value()) throw Error(Status::bad_file, what + " is corrupt: its checksum does not match");

  // Nothing below throws: the session changes all at once.
  cache_ = std::move(fresh);
  tokens_ = std::move(tokens);
  last_logits_ = std::move(logits);
  has_logits_ = s.has_logits == 1;
  n_past_ = s.n_past;
}

}  // namespace latte

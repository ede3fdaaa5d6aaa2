#include "runtime/model/fingerprint.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "kernels/matvec/matvec.h"
#include "quant/ggml_blocks.h"
#include "quant/x16_layout.h"
#include "runtime/error.h"

namespace latte {

namespace {

constexpr std::uint64_t kP1 = 0x9E3779B97F4A7C15ULL;
constexpr std::uint64_t kP2 = 0xD1B54A32D192ED03ULL;
constexpr std::uint64_t kP3 = 0xAEF17502108EF2D9ULL;

inline std::uint64_t word_at(const std::uint8_t* p) {
  std::uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

// One lane's step: for a given word a bijection of the lane, for a given
// lane an injection of the word (times an odd constant, add, rotate, times
// another). The word is multiplied before it meets the lane, and the lane
// after the rotation, so a changed top bit (which a multiply passes on
// unchanged) does not reach the next word as the same single bit.
inline std::uint64_t step(std::uint64_t lane, std::uint64_t w) {
  const std::uint64_t x = lane + w * kP2;
  return ((x << 31) | (x >> 33)) * kP1;
}

// Spreads every bit of h over all of the result's.
inline std::uint64_t avalanche(std::uint64_t h) {
  h ^= h >> 32;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

}  // namespace

std::uint64_t hash64(const void* data, std::size_t n, std::uint64_t seed) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  // Eight independent lanes (locals, so they stay in registers): the
  // multiplies of one 64-byte stripe overlap.
  std::uint64_t a0 = seed + kP2, a1 = seed + 2 * kP2, a2 = seed + 3 * kP2, a3 = seed + 4 * kP2;
  std::uint64_t a4 = seed + 5 * kP2, a5 = seed + 6 * kP2, a6 = seed + 7 * kP2, a7 = seed + 8 * kP2;
  std::size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = step(a0, word_at(p + i));
    a1 = step(a1, word_at(p + i + 8));
    a2 = step(a2, word_at(p + i + 16));
    a3 = step(a3, word_at(p + i + 24));
    a4 = step(a4, word_at(p + i + 32));
    a5 = step(a5, word_at(p + i + 40));
    a6 = step(a6, word_at(p + i + 48));
    a7 = step(a7, word_at(p + i + 56));
  }
  // The tail: its whole words to lanes 0, 1, ..., then its last bytes,
  // zero-padded (the length, mixed in below, tells those zeros from data).
  std::uint64_t* lanes[8] = {&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7};
  int k = 0;
  for (; i + 8 <= n; i += 8, ++k) *lanes[k] = step(*lanes[k], word_at(p + i));
  if (i < n) {
    std::uint64_t w = 0;
    std::memcpy(&w, p + i, n - i);
    *lanes[k] = step(*lanes[k], w);
  }
  std::uint64_t h = avalanche(seed ^ (static_cast<std::uint64_t>(n) * kP3));
  for (const std::uint64_t* lane : lanes) h = avalanche(h ^ *lane) + kP1;
  return h;
}

namespace {

// The pass is bound by memory long before this many threads; each holds a
// chunk's scratch where matrices were relaid.
constexpr std::size_t kMaxHashThreads = 32;

// A buffer of `bytes`, or Error(out_of_memory) naming it.
std::vector<std::uint8_t> buffer(std::size_t bytes, const char* what) {
  try {
    return std::vector<std::uint8_t>(bytes);
  } catch (const std::bad_alloc&) {
    throw Error(Status::out_of_memory, std::string("model fingerprint: cannot allocate ") + std::to_string(bytes) +
                                           " bytes for " + what);
  }
}

// Bytes of the 16-row tiles of a relaid matrix.
std::size_t tile_bytes(const RelaidMatrix& m) { return 16 * ggml_row_bytes(m.type, m.cols); }

// Copies bytes [at, at + n) of the file as the file holds them to out:
// where they fall in a relaid matrix, its tiles are taken back to the
// original layout, straight into out where a whole tile fits, through
// `tile` (one tile's bytes) at the range's ends.
void file_bytes(const std::uint8_t* data, std::span<const RelaidMatrix> relaid, std::size_t at, std::size_t n,
                std::uint8_t* out, std::uint8_t* tile) {
  const std::size_t end = at + n;
  std::size_t done = at;  // [at, done) is in out
  // The first matrix that may reach `at`: the last one starting at or before it.
  auto it = std::upper_bound(relaid.begin(), relaid.end(), at,
                             [](std::size_t a, const RelaidMatrix& m) { return a < m.offset; });
  if (it != relaid.begin()) --it;
  for (; it != relaid.end() && it->offset < end; ++it) {
    const RelaidMatrix& m = *it;
    const std::size_t tb = tile_bytes(m), rb = tb / 16;
    const std::size_t m_end = m.offset + m.rows * rb;
    if (m_end <= at) continue;
    const std::size_t lo = std::max(at, m.offset), hi = std::min(end, m_end);
    if (lo > done) std::memcpy(out + (done - at), data + done, lo - done);
    const std::size_t nb = m.cols / ggml_block_elems(m.type);
    for (std::size_t t = (lo - m.offset) / tb; m.offset + t * tb < hi; ++t) {
      const std::size_t t0 = m.offset + t * tb;
      if (t0 >= lo && t0 + tb <= hi) {
        x16_deinterleave(m.type, data + t0, 0, nb, out + (t0 - at), rb);
        continue;
      }
      x16_deinterleave(m.type, data + t0, 0, nb, tile, rb);
      const std::size_t c0 = std::max(lo, t0), c1 = std::min(hi, t0 + tb);
      std::memcpy(out + (c0 - at), tile + (c0 - t0), c1 - c0);
    }
    done = hi;
  }
  if (done < end) std::memcpy(out + (done - at), data + done, end - done);
}

}  // namespace

std::uint64_t file_fingerprint(const std::uint8_t* data, std::size_t size, std::span<const RelaidMatrix> relaid,
                               int threads) {
  const std::size_t n_chunks = (size + kFingerprintChunkBytes - 1) / kFingerprintChunkBytes;
  std::vector<std::uint8_t> sums_buf = buffer(n_chunks * sizeof(std::uint64_t), "its chunks' hashes");
  auto* sums = reinterpret_cast<std::uint64_t*>(sums_buf.data());
  std::size_t n_threads = threads > 0 ? static_cast<std::size_t>(threads) : std::thread::hardware_concurrency();
  n_threads = std::clamp<std::size_t>(n_threads, 1, std::min(std::max<std::size_t>(n_chunks, 1), kMaxHashThreads));
  // Per thread, where relaid matrices are: a chunk of the file's bytes and one tile.
  std::size_t tile_max = 0;
  for (const RelaidMatrix& m : relaid) tile_max = std::max(tile_max, tile_bytes(m));
  const std::size_t scratch_each = relaid.empty() ? 0 : kFingerprintChunkBytes + tile_max;
  std::vector<std::uint8_t> scratch =
      buffer(scratch_each * n_threads, "the relaid matrices' bytes in the file's layout");

  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  const auto work = [&](std::size_t w) {
    try {
      std::uint8_t* chunk = scratch.data() + w * scratch_each;
      for (std::size_t c = next.fetch_add(1); c < n_chunks && !failed.load(); c = next.fetch_add(1)) {
        const std::size_t at = c * kFingerprintChunkBytes, n = std::min(kFingerprintChunkBytes, size - at);
        const std::uint8_t* bytes = data + at;
        if (!relaid.empty()) {
          file_bytes(data, relaid, at, n, chunk, chunk + kFingerprintChunkBytes);
          bytes = chunk;
        }
        sums[c] = hash64(bytes, n, c);
      }
    } catch (...) {  // not expected (the arguments were checked when the matrices were relaid): passed on
      if (!failed.exchange(true)) error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  try {
    pool.reserve(n_threads - 1);
    for (std::size_t w = 1; w < n_threads; ++w) pool.emplace_back(work, w);
  } catch (const std::system_error&) {  // no more threads: those started and this one share the chunks
  } catch (const std::bad_alloc&) {
  }
  work(0);
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return hash64(sums, n_chunks * sizeof(std::uint64_t), size);
}

}  // namespace latte

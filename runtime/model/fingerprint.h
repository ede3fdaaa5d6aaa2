// The model fingerprint (Model::fingerprint): a 64-bit hash of every byte of
// a model file as the file holds it, so that a saved session names the exact
// weights it was computed with. The file is hashed in fixed chunks, on
// several threads, and the chunks' hashes are combined in file order: the
// value does not depend on the thread count. Matrices a model read into
// memory re-laid out at load (x16) are taken back to the file's layout as
// they are hashed, so a file mapped or read gives one value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "quant/ggml_types.h"

namespace latte {

// Bytes per chunk: each is hashed alone, seeded with its index.
inline constexpr std::size_t kFingerprintChunkBytes = std::size_t{1} << 20;

// A 64-bit hash of n bytes (data may be null when n is 0). Not cryptographic:
// it tells files apart, it does not resist a file made to collide. Eight
// lanes take one 8-byte word each in turn, every step a bijection of the
// lane for a given word, so two inputs of one length differing in a single
// word always leave that lane different; the lanes, the length and the seed
// are then mixed into the result.
std::uint64_t hash64(const void* data, std::size_t n, std::uint64_t seed);

// A matrix held row-interleaved by 16 (x16, kernels/matvec/matvec.h) where
// the file holds it row by row: `rows` (a multiple of 16) rows of `cols`
// elements of `type`, from byte `offset` of the file.
struct RelaidMatrix {
  std::size_t offset = 0;
  GgmlType type = GgmlType::F32;
  std::size_t rows = 0, cols = 0;
};

// The fingerprint of the `size` bytes of a file held at `data`, with the
// matrices `relaid` (sorted by offset, disjoint, inside the file) held as
// x16: hash64 of every kFingerprintChunkBytes chunk of the file's bytes,
// then hash64 of those hashes, in order. Split over `threads` threads (0:
// the machine's hardware threads; at most 32; where a thread cannot be
// started, the others do its share). Error(out_of_memory) naming the buffer and its size.
std::uint64_t file_fingerprint(const std::uint8_t* data, std::size_t size, std::span<const RelaidMatrix> relaid,
                               int threads);

}  // namespace latte

// The model fingerprint's hash (runtime/model/fingerprint.h): its values are
// pinned (saved sessions carry them: another value would refuse every file
// saved before), any one changed bit changes them, and a file's value is
// the same on any thread count and with matrices held re-laid out (x16)
// across chunk boundaries.
#include "runtime/model/fingerprint.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "kernels/matvec/matvec.h"
#include "quant/ggml_blocks.h"
#include "tests/common/kernel_regions.h"

namespace latte {
namespace {

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> b(n);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng());
  return b;
}

TEST(Fingerprint, HashValuesArePinned) {
  std::vector<std::uint8_t> bytes(200);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 7 + 1);
  EXPECT_EQ(hash64(nullptr, 0, 0), 0xd7bc9e148370c68dULL);
  EXPECT_EQ(hash64(bytes.data(), 200, 0), 0xbd2b24443063a537ULL);
  EXPECT_EQ(hash64(bytes.data(), 77, 5), 0xa7c40e92e54676c5ULL);
}

// Every single-bit change gives another value (no two alike), as do the
// seed and zeros appended. (A step that passed a changed top bit through
// its multiply let the next word's flip cancel it.)
TEST(Fingerprint, EveryBitLengthAndSeedCounts) {
  const std::vector<std::uint8_t> base = random_bytes(300, 1);
  for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{63}, std::size_t{64},
                        std::size_t{65}, std::size_t{130}, std::size_t{300}}) {
    const std::uint64_t h = hash64(base.data(), n, 0);
    std::set<std::uint64_t> seen{h};
    for (std::size_t at = 0; at < n; ++at)
      for (int bit = 0; bit < 8; ++bit) {
        std::vector<std::uint8_t> b(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(n));
        b[at] ^= static_cast<std::uint8_t>(1u << bit);
        EXPECT_TRUE(seen.insert(hash64(b.data(), n, 0)).second) << n << " bytes, byte " << at << " bit " << bit;
      }
    EXPECT_NE(hash64(base.data(), n, 1), h) << n;
  }
  // Zeros appended are data: the length tells them from the padding.
  const std::vector<std::uint8_t> zeros(70, 0);
  std::set<std::uint64_t> lengths;
  for (std::size_t n = 0; n <= zeros.size(); ++n) EXPECT_TRUE(lengths.insert(hash64(zeros.data(), n, 0)).second) << n;
}

// A file's value: hash64 of each chunk (seeded by its index), then hash64 of
// those (seeded by the file's size).
std::uint64_t by_definition(const std::vector<std::uint8_t>& file) {
  std::vector<std::uint64_t> sums;
  for (std::size_t at = 0, c = 0; at < file.size(); at += kFingerprintChunkBytes, ++c)
    sums.push_back(hash64(file.data() + at, std::min(kFingerprintChunkBytes, file.size() - at), c));
  return hash64(sums.data(), sums.size() * 8, file.size());
}

TEST(Fingerprint, AFileHasOneValueOnAnyThreadsAndLayout) {
  const std::size_t size = 4 * kFingerprintChunkBytes + 12345;
  const std::vector<std::uint8_t> file = random_bytes(size, 2);
  const std::uint64_t want = by_definition(file);
  for (int threads : {0, 1, 2, 3, 7, 64}) EXPECT_EQ(file_fingerprint(file.data(), size, {}, threads), want) << threads;
  EXPECT_EQ(file_fingerprint(file.data(), 0, {}, 2), by_definition({}));

  // Matrices held as x16: one inside a chunk, one across a chunk boundary,
  // one across two (Q4_0 and Q4_K, valid blocks or not: the layout moves
  // bytes, it does not read them).
  std::vector<RelaidMatrix> relaid = {
      {1000, GgmlType::Q4_0, 32, 64},
      {kFingerprintChunkBytes - 7 * 16 * 36 - 100, GgmlType::Q4_0, 160, 64},
      {kFingerprintChunkBytes + 4096, GgmlType::Q4_K, 16 * 1000, 256},
  };
  const std::size_t end2 = relaid[2].offset + relaid[2].rows * ggml_row_bytes(GgmlType::Q4_K, 256);
  ASSERT_GT(end2, 3 * kFingerprintChunkBytes);
  ASSERT_LT(end2, size);
  std::vector<std::uint8_t> held = file;
  for (const RelaidMatrix& m : relaid) test::x16_interleave(m.type, held.data() + m.offset, m.rows, m.cols);
  ASSERT_NE(held, file);
  for (int threads : {1, 2, 5}) EXPECT_EQ(file_fingerprint(held.data(), size, relaid, threads), want) << threads;

  // One byte of a relaid matrix, as the file holds it, changes the value.
  std::vector<std::uint8_t> other = file;
  const std::size_t at = relaid[2].offset + kFingerprintChunkBytes;  // inside the third chunk
  other[at] ^= 0x40;
  std::vector<std::uint8_t> other_held = other;
  for (const RelaidMatrix& m : relaid)
    test::x16_interleave(m.type, other_held.data() + m.offset, m.rows, m.cols);
  EXPECT_NE(file_fingerprint(other_held.data(), size, relaid, 2), want);
  EXPECT_EQ(file_fingerprint(other_held.data(), size, relaid, 2), by_definition(other));
}

}  // namespace
}  // namespace latte

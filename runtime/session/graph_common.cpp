// The out-of-line helpers of graph_common.h (its rules apply).
#include "runtime/session/graph_common.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "platform/alloc_hook.h"
#include "platform/memory.h"
#include "runtime/error.h"

namespace latte {

namespace {

// From this size on, a buffer is its own region on huge pages (a prefill
// chunk's activations: 512 faults fewer per 2 MiB on its first use, and
// fewer TLB misses after); below, the heap.
constexpr std::size_t kRegionBytes = kHugePageBytes;

void free_buffer(float* p, std::size_t n) {
  if (p == nullptr) return;
  if (n * sizeof(float) >= kRegionBytes) unmap_huge_region(reinterpret_cast<std::uint8_t*>(p), n * sizeof(float));
  else aligned_free(p);
}

}  // namespace

AlignedBuffer::~AlignedBuffer() { free_buffer(p, n); }

float* AlignedBuffer::get(std::size_t want) {
  if (want > n) {
    // The old buffer stays until the new one exists: a failed
    // allocation leaves a buffer that matches n, and the session usable.
    const std::size_t m = std::max<std::size_t>(want, 16);
    float* q = nullptr;
    if (m <= (SIZE_MAX - kHugePageBytes) / sizeof(float)) {
      const std::size_t bytes = m * sizeof(float);
      if (bytes >= kRegionBytes) q = reinterpret_cast<float*>(map_huge_region(bytes, 0, /*lazy=*/false));
      else if (!alloc_should_fail(bytes)) q = static_cast<float*>(aligned_alloc_bytes(64, bytes));
    }
    if (!q) throw Error(Status::out_of_memory, "session scratch: cannot allocate " + std::to_string(m) + " floats");
    free_buffer(p, n);
    p = q;
    n = m;
  }
  return p;
}

void rms_norm_rows(const float* x, const float* w, int n, int d, double eps, float* y, std::size_t ld_in,
                   std::size_t ld_out, int threads) {
  for_rows(n, threads, [&](int t) {
    const float* xi = x + t * ld_in;
    double ss = 0;
    for (int i = 0; i < d; ++i) ss += double(xi[i]) * xi[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / d + eps));
    float* yi = y + t * ld_out;
    for (int i = 0; i < d; ++i) yi[i] = xi[i] * inv * w[i];
  });
}

// Exponent bits, OR-reduced over blocks so the loop vectorizes: small beside
// the output product that made those logits (docs/performance-log.md,
// "Figures moved out of runtime comments").
std::size_t first_non_finite(const float* x, std::size_t n) {
  constexpr std::uint32_t kExp = 0x7f800000u;
  constexpr std::size_t kBlock = 1024;
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t e = std::min(n, b + kBlock);
    std::uint32_t bad = 0;
    for (std::size_t i = b; i < e; ++i) {
      std::uint32_t u;
      std::memcpy(&u, x + i, sizeof(u));
      bad |= (u & kExp) == kExp;
    }
    if (bad)
      for (std::size_t i = b; i < e; ++i)
        if (!std::isfinite(x[i])) return i;
  }
  return n;
}

void refuse_non_finite_rows(const float* rows, int n, std::size_t width, int layer, std::int64_t p0,
                            const char* what) {
  const std::size_t count = static_cast<std::size_t>(n) * width;
  if (const std::size_t i = first_non_finite(rows, count); i < count)
    throw Error(Status::bad_file, std::string("the ") + what + " of layer " + std::to_string(layer) + " at position " +
                                      std::to_string(p0 + static_cast<std::int64_t>(i / width)) + " is " +
                                      std::to_string(rows[i]) +
                                      ": the model's weights or hyperparameters overflow float32");
}

}  // namespace latte

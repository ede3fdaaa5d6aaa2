// AlignedBuffer (aligned_buffer.h): the heap below 2 MiB, a huge-page region
// from there on; the allocation-failure hook (platform/alloc_hook.h) can
// refuse the heap's.
#include "runtime/session/aligned_buffer.h"

#include <algorithm>
#include <cstdint>
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

}  // namespace latte

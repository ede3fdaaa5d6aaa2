// Private anonymous memory for data read in long streams once per token (the
// weights read with GgufLoad::read, the latent cache): 2 MiB aligned so that
// transparent huge pages can back it (fewer TLB misses, and hardware
// prefetchers that cross no 4 KiB boundaries).
#pragma once

#include <cstddef>
#include <cstdint>

namespace latte {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// bytes rounded up to whole 2 MiB pages.
inline std::size_t round_to_huge_pages(std::size_t bytes) {
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

// Maps round_to_huge_pages(bytes) of zeroed, writable private memory starting
// on a 2 MiB boundary, advised for huge pages from byte huge_from on (a hint
// the system may ignore). lazy: reserve address space only (MAP_NORESERVE),
// for a region mostly never written. Returns null where the system refuses,
// and outside Linux. Free with unmap_huge_region(p, bytes).
std::uint8_t* map_huge_region(std::size_t bytes, std::size_t huge_from, bool lazy);
void unmap_huge_region(std::uint8_t* p, std::size_t bytes);

// Whether `bytes` of address space can be mapped now (mapped and let go at
// once, nothing committed): a probe before code that cannot report a failed
// mapping. True outside Linux.
bool address_space_available(std::size_t bytes);

}  // namespace latte

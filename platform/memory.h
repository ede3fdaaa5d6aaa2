// Memory ranges from the OS (platform layer): private regions for data read
// in long streams once per token (weights read with GgufLoad::read, the
// latent cache), reserved whole and committed as they are written, 2 MiB
// aligned. Linux advises transparent huge pages for them (fewer TLB misses,
// prefetchers that cross no 4 KiB boundary); elsewhere huge pages are not
// asked for. Implemented per OS: memory_posix.cpp,
// memory_windows.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

namespace latte {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// bytes rounded up to whole 2 MiB pages (every region's size, on every OS).
inline std::size_t round_to_huge_pages(std::size_t bytes) {
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

// A region of round_to_huge_pages(bytes) of zeroed, writable private memory,
// advised for huge pages from byte huge_from on where the OS has them (a
// hint). lazy: address space reserved only; commit_region() before writing a
// part of it. Null where the OS refuses. Free with unmap_huge_region(p, bytes).
std::uint8_t* map_huge_region(std::size_t bytes, std::size_t huge_from, bool lazy);
void unmap_huge_region(std::uint8_t* p, std::size_t bytes);

// Makes [p, p + bytes) of a lazy region usable (zeroed where first touched).
// False where the OS refuses (out of memory). POSIX commits pages on first
// touch, so there it only asks the allocation hook; Windows commits here.
bool commit_region(std::uint8_t* p, std::size_t bytes);

// Makes a whole region (as map_huge_region returned it) read-only, or
// writable again.
void protect_region_read_only(std::uint8_t* p, std::size_t bytes);
void protect_region_writable(std::uint8_t* p, std::size_t bytes);

// Heap memory aligned to `align` (a power of two), null where it cannot be
// had; free it with aligned_free (Windows' C library has no aligned_alloc).
void* aligned_alloc_bytes(std::size_t align, std::size_t bytes);
void aligned_free(void* p);

// Whether `bytes` of address space can be reserved now (reserved and let go
// at once, nothing committed): a probe before code that cannot report a
// failed mapping.
bool address_space_available(std::size_t bytes);

// Reads a byte of each 4 KiB page of [p, p + bytes), over the current
// pool's threads: the page-table work of a first access done now rather than
// on the first use (a machine virtualized with shadow page tables redoes it
// for every page after a protection change; docs/performance.md, "Loading:
// read or mapped").
void touch_pages(const std::uint8_t* p, std::size_t bytes);

// Memory a new allocation of this process can have without pushing other
// programs' pages out: Linux's MemAvailable (free memory and the caches the
// kernel can drop), less where the process's cgroup (v2) allows less;
// Windows' available physical memory. 0 where the OS does not say.
std::uint64_t available_memory_bytes();
// The machine's physical memory; 0 where the OS does not say.
std::uint64_t total_memory_bytes();

}  // namespace latte

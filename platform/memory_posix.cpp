// Memory ranges (memory.h) on POSIX systems: anonymous mmap, trimmed to a
// 2 MiB boundary; madvise(MADV_HUGEPAGE) where the system has it (Linux).
// Pages are committed by the kernel on first touch.
#include "platform/memory.h"

#include <sys/mman.h>

#include <cstdlib>

#include "platform/alloc_hook.h"

namespace latte {

std::uint8_t* map_huge_region(std::size_t bytes, std::size_t huge_from, bool lazy) {
  const std::size_t size = round_to_huge_pages(bytes);
  if (size == 0) return nullptr;
  // One page more than needed, then the unaligned head and the tail cut off.
  const std::size_t want = size + kHugePageBytes;
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#if defined(MAP_NORESERVE)
  if (lazy) flags |= MAP_NORESERVE;  // address space only until written
#endif
  if (alloc_should_fail(want)) return nullptr;
  void* m = ::mmap(nullptr, want, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  auto* raw = static_cast<std::uint8_t*>(m);
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(raw);
  auto* base = reinterpret_cast<std::uint8_t*>((a + kHugePageBytes - 1) & ~(kHugePageBytes - 1));
  const std::size_t head = static_cast<std::size_t>(base - raw), tail = want - head - size;
  if (head) ::munmap(raw, head);
  if (tail) ::munmap(base + size, tail);
#if defined(MADV_HUGEPAGE)
  if (huge_from < size) ::madvise(base + huge_from, size - huge_from, MADV_HUGEPAGE);
#else
  (void)huge_from;
#endif
  return base;
}

void unmap_huge_region(std::uint8_t* p, std::size_t bytes) {
  if (p) ::munmap(p, round_to_huge_pages(bytes));
}

bool commit_region(std::uint8_t* p, std::size_t bytes) { return p != nullptr; }

void protect_region_read_only(std::uint8_t* p, std::size_t bytes) {
  if (p) ::mprotect(p, round_to_huge_pages(bytes), PROT_READ);
}

void protect_region_writable(std::uint8_t* p, std::size_t bytes) {
  if (p) ::mprotect(p, round_to_huge_pages(bytes), PROT_READ | PROT_WRITE);
}

void* aligned_alloc_bytes(std::size_t align, std::size_t bytes) {
  return std::aligned_alloc(align, (bytes + align - 1) / align * align);  // a multiple of align, as C asks
}

void aligned_free(void* p) { std::free(p); }

bool address_space_available(std::size_t bytes) {
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#if defined(MAP_NORESERVE)
  flags |= MAP_NORESERVE;
#endif
  void* m = ::mmap(nullptr, bytes, PROT_NONE, flags, -1, 0);
  if (m == MAP_FAILED) return false;
  ::munmap(m, bytes);
  return true;
}

}  // namespace latte

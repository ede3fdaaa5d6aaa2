#include "runtime/huge_pages.h"

#include "runtime/alloc_hook.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace latte {

std::uint8_t* map_huge_region(std::size_t bytes, std::size_t huge_from, bool lazy) {
#if defined(__linux__)
  const std::size_t size = round_to_huge_pages(bytes);
  if (size == 0) return nullptr;
  // One page more than needed, then the unaligned head and the tail cut off.
  const std::size_t want = size + kHugePageBytes;
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (lazy ? MAP_NORESERVE : 0);
  if (alloc_should_fail(want)) return nullptr;
  void* m = ::mmap(nullptr, want, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  auto* raw = static_cast<std::uint8_t*>(m);
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(raw);
  auto* base = reinterpret_cast<std::uint8_t*>((a + kHugePageBytes - 1) & ~(kHugePageBytes - 1));
  const std::size_t head = static_cast<std::size_t>(base - raw), tail = want - head - size;
  if (head) ::munmap(raw, head);
  if (tail) ::munmap(base + size, tail);
  if (huge_from < size) ::madvise(base + huge_from, size - huge_from, MADV_HUGEPAGE);
  return base;
#else
  (void)bytes;
  (void)huge_from;
  (void)lazy;
  return nullptr;
#endif
}

void unmap_huge_region(std::uint8_t* p, std::size_t bytes) {
#if defined(__linux__)
  if (p) ::munmap(p, round_to_huge_pages(bytes));
#else
  (void)p;
  (void)bytes;
#endif
}

bool address_space_available(std::size_t bytes) {
#if defined(__linux__)
  void* m = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return false;
  ::munmap(m, bytes);
#else
  (void)bytes;
#endif
  return true;
}

}  // namespace latte

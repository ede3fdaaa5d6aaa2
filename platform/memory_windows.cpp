// Memory ranges (memory.h) on Windows: VirtualAlloc reserves the address
// range (MEM_RESERVE) and commits it whole, or, for a lazy region, part by
// part in commit_region (MEM_COMMIT). Page aligned (64 KiB allocation
// granularity); no huge pages (large pages need a privilege and locked memory).
#include "platform/memory.h"

#include <windows.h>

#include <malloc.h>

#include "platform/alloc_hook.h"

namespace latte {

std::uint8_t* map_huge_region(std::size_t bytes, std::size_t huge_from, bool lazy) {
  (void)huge_from;
  const std::size_t size = round_to_huge_pages(bytes);
  if (size == 0) return nullptr;
  if (alloc_should_fail(size)) return nullptr;
  const DWORD type = lazy ? MEM_RESERVE : (MEM_RESERVE | MEM_COMMIT);
  return static_cast<std::uint8_t*>(::VirtualAlloc(nullptr, size, type, lazy ? PAGE_NOACCESS : PAGE_READWRITE));
}

void unmap_huge_region(std::uint8_t* p, std::size_t bytes) {
  (void)bytes;
  if (p) ::VirtualFree(p, 0, MEM_RELEASE);
}

bool commit_region(std::uint8_t* p, std::size_t bytes) {
  if (p == nullptr) return false;
  if (bytes == 0) return true;
  // Committing pages already committed keeps their contents.
  return !alloc_should_fail(bytes) && ::VirtualAlloc(p, bytes, MEM_COMMIT, PAGE_READWRITE) != nullptr;
}

void protect_region_read_only(std::uint8_t* p, std::size_t bytes) {
  DWORD old = 0;
  if (p) ::VirtualProtect(p, round_to_huge_pages(bytes), PAGE_READONLY, &old);
}

void* aligned_alloc_bytes(std::size_t align, std::size_t bytes) { return ::_aligned_malloc(bytes, align); }

void aligned_free(void* p) { ::_aligned_free(p); }

bool address_space_available(std::size_t bytes) {
  void* m = ::VirtualAlloc(nullptr, bytes, MEM_RESERVE, PAGE_NOACCESS);
  if (m == nullptr) return false;
  ::VirtualFree(m, 0, MEM_RELEASE);
  return true;
}

}  // namespace latte

// Memory ranges (memory.h) on Windows: VirtualAlloc reserves the address
// range (MEM_RESERVE) and commits it whole, or, for a lazy region, part by
// part in commit_region (MEM_COMMIT). 2 MiB aligned as on Linux (a reservation
// cannot be trimmed, so an aligned address is found first); no huge pages
// (large pages need a privilege and locked memory).
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
  const DWORD protect = lazy ? PAGE_NOACCESS : PAGE_READWRITE;
  // Reserve a page more than needed to find a 2 MiB boundary, let it go and
  // take the aligned part; another thread may take it meanwhile: retried.
  for (int attempt = 0; attempt < 8; ++attempt) {
    void* probe = ::VirtualAlloc(nullptr, size + kHugePageBytes, MEM_RESERVE, PAGE_NOACCESS);
    if (probe == nullptr) return nullptr;
    const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(probe);
    void* aligned = reinterpret_cast<void*>((a + kHugePageBytes - 1) & ~(kHugePageBytes - 1));
    ::VirtualFree(probe, 0, MEM_RELEASE);
    if (void* p = ::VirtualAlloc(aligned, size, type, protect)) return static_cast<std::uint8_t*>(p);
  }
  return static_cast<std::uint8_t*>(::VirtualAlloc(nullptr, size, type, protect));
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

void protect_region_writable(std::uint8_t* p, std::size_t bytes) {
  DWORD old = 0;
  if (p) ::VirtualProtect(p, round_to_huge_pages(bytes), PAGE_READWRITE, &old);
}

void* aligned_alloc_bytes(std::size_t align, std::size_t bytes) { return ::_aligned_malloc(bytes, align); }

void aligned_free(void* p) { ::_aligned_free(p); }

bool address_space_available(std::size_t bytes) {
  void* m = ::VirtualAlloc(nullptr, bytes, MEM_RESERVE, PAGE_NOACCESS);
  if (m == nullptr) return false;
  ::VirtualFree(m, 0, MEM_RELEASE);
  return true;
}

std::uint64_t available_memory_bytes() {
  MEMORYSTATUSEX m{};
  m.dwLength = sizeof m;
  return ::GlobalMemoryStatusEx(&m) ? m.ullAvailPhys : 0;
}

std::uint64_t total_memory_bytes() {
  MEMORYSTATUSEX m{};
  m.dwLength = sizeof m;
  return ::GlobalMemoryStatusEx(&m) ? m.ullTotalPhys : 0;
}

}  // namespace latte

// Memory ranges (memory.h) on POSIX systems: anonymous mmap, trimmed to a
// 2 MiB boundary; madvise(MADV_HUGEPAGE) where the system has it (Linux).
// Pages are committed by the kernel on first touch.
#include "platform/memory.h"

#include <sys/mman.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

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

namespace {

#if defined(__linux__)
// The value of "key:" in /proc/meminfo, in bytes; 0 if absent.
std::uint64_t meminfo_bytes(const char* key) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> name >> kib) {
    std::getline(in, unit);
    if (name == key) return kib * 1024;
  }
  return 0;
}

// A limit file's value in bytes; none for "max", a huge v1 value or no file.
std::uint64_t limit_bytes(const std::string& path, std::uint64_t none) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return none;
  const std::uint64_t v = std::strtoull(text.c_str(), nullptr, 10);
  return v == 0 || v >= (std::uint64_t{1} << 60) ? none : v;
}

std::uint64_t stat_bytes(const std::string& path, const char* key) {
  std::ifstream in(path);
  std::string k;
  std::uint64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

// What the process's cgroup lets it add: the memory limit less its
// anonymous memory (its page cache can be dropped); max where there is no
// limit. cgroup v2 (the unified hierarchy), else v1's memory controller as
// a container sees it.
std::uint64_t cgroup_headroom_bytes() {
  constexpr std::uint64_t kNone = std::numeric_limits<std::uint64_t>::max();
  std::ifstream self("/proc/self/cgroup");
  std::string line, dir;
  while (std::getline(self, line))
    if (line.rfind("0::", 0) == 0) dir = "/sys/fs/cgroup" + line.substr(3);
  std::uint64_t max = kNone, used = 0;
  for (const std::string& d : {dir, std::string("/sys/fs/cgroup")}) {
    if (d.empty() || (max = limit_bytes(d + "/memory.max", kNone)) == kNone) continue;
    used = stat_bytes(d + "/memory.stat", "anon");
    break;
  }
  if (max == kNone && (max = limit_bytes("/sys/fs/cgroup/memory/memory.limit_in_bytes", kNone)) != kNone)
    used = stat_bytes("/sys/fs/cgroup/memory/memory.stat", "total_rss");
  if (max == kNone) return kNone;
  return max > used ? max - used : 0;
}
#endif

}  // namespace

std::uint64_t available_memory_bytes() {
#if defined(__linux__)
  const std::uint64_t avail = meminfo_bytes("MemAvailable:");
  if (avail > 0) return std::min(avail, cgroup_headroom_bytes());
#endif
#if defined(_SC_AVPHYS_PAGES)
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
#endif
  return 0;
}

std::uint64_t total_memory_bytes() {
#if defined(_SC_PHYS_PAGES)
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
#endif
  return 0;
}

}  // namespace latte

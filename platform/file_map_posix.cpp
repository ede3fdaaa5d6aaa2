// FileMapping (file_map.h) on POSIX systems: mmap of the descriptor.
#include "platform/file_map.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "runtime/error.h"

namespace latte {

FileMapping::FileMapping(const ReadOnlyFile& file, std::size_t size, const std::string& what) {
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, static_cast<int>(file.native_handle()), 0);
  if (m == MAP_FAILED) throw Error(Status::io_error, what + ": cannot mmap: " + std::strerror(errno));
#if defined(MADV_HUGEPAGE)
  // A hint: where the page cache holds 2 MiB folios (or reads the file now),
  // the weights are then mapped with huge pages.
  ::madvise(m, size, MADV_HUGEPAGE);
#endif
  data_ = static_cast<const std::uint8_t*>(m);
  size_ = size;
}

void FileMapping::unmap() noexcept {
  if (data_) ::munmap(const_cast<std::uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace latte

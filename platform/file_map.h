// A whole file mapped read-only into memory (platform layer): pages shared
// with the OS's file cache and with other processes mapping the file, nothing
// copied. mmap(PROT_READ, MAP_PRIVATE) on POSIX, advised for huge pages where
// Linux's page cache has them (file_map_posix.cpp); CreateFileMappingW +
// MapViewOfFile on Windows (file_map_windows.cpp). The mapping outlives the
// file's handle. Errors: Error(io_error) naming the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "platform/read_only_file.h"

namespace latte {

class FileMapping {
 public:
  FileMapping() = default;
  // The first `size` bytes of `file` (size > 0); what: the file for messages.
  FileMapping(const ReadOnlyFile& file, std::size_t size, const std::string& what);
  FileMapping(FileMapping&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  FileMapping& operator=(FileMapping&& o) noexcept {
    if (this != &o) {
      unmap();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~FileMapping() { unmap(); }

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void unmap() noexcept;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace latte

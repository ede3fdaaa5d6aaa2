// FileMapping (file_map.h) on Windows: a read-only section of the file
// (CreateFileMappingW) and one view of it; the section's handle is closed at
// once, the view keeps it alive.
#include "platform/file_map.h"

#include "platform/windows_util.h"
#include "runtime/error.h"

namespace latte {

FileMapping::FileMapping(const ReadOnlyFile& file, std::size_t size, const std::string& what) {
  HANDLE section = ::CreateFileMappingW(reinterpret_cast<HANDLE>(file.native_handle()), nullptr, PAGE_READONLY, 0, 0,
                                        nullptr);
  if (section == nullptr) throw Error(Status::io_error, what + ": cannot map: " + win::last_error_message());
  void* m = ::MapViewOfFile(section, FILE_MAP_READ, 0, 0, size);
  const DWORD err = ::GetLastError();
  ::CloseHandle(section);
  if (m == nullptr) throw Error(Status::io_error, what + ": cannot map: " + win::error_message(err));
  data_ = static_cast<const std::uint8_t*>(m);
  size_ = size;
}

void FileMapping::unmap() noexcept {
  if (data_) ::UnmapViewOfFile(data_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace latte

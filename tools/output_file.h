// A command's output file (latte eval's logits): written whole or not at
// all where it is a file (platform/atomic_file.h: through a temporary beside
// it, moved over it once whole, so a failed write such as a full disk leaves
// an earlier file as it was), or as it comes where it is a pipe or a device
// (/dev/stdout, /dev/null), which has nothing to replace. Paths are UTF-8.
#pragma once

#include <cstddef>
#include <string>

namespace latte {

// Writes data[0, n) to `path`. Errors: latte::api::Exception(LATTE_ERR_IO)
// where a pipe or device cannot be opened or written ("cannot open 'P' for
// writing: REASON", "writing 'P' failed: REASON"); AtomicFile's
// Error(io_error), naming `what`, for a file.
void write_output_file(const std::string& path, const void* data, std::size_t n, const std::string& what);

}  // namespace latte

// AlignedBuffer: the graph's scratch (a chunk's activations, the engines'
// work rows), a 64-byte aligned float buffer that only grows, on huge pages
// from 2 MiB on. Internal to runtime/session.
//
// Rules: growing never loses the old buffer on failure (Error(out_of_memory),
// the buffer as it was), so a failed call leaves the session usable; a
// buffer is never shrunk or copied.
#pragma once

#include <cstddef>

namespace latte {

// get() throws Error(out_of_memory) and keeps the old buffer if the new one
// cannot be had; the contents are not kept when it grows.
struct AlignedBuffer {
  float* p = nullptr;
  std::size_t n = 0;  // floats
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();
  float* get(std::size_t want);
};

}  // namespace latte

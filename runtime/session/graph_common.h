// The helpers every part of the model graph shares (session*.cpp,
// weight_multiply, ffn, moe, attention_*): chunk buffers, row loops over the
// threads, the regions' error guard, RMSNorm and the NaN/inf guard on rows.
// Internal to runtime/session.
//
// The graph's three rules, which every file of it keeps:
//  1. Results are bit-identical however the work is split over threads: each
//     output element's arithmetic (order of operations included) does not
//     depend on the thread count or which thread computes it.
//  2. Regions run on the session's thread pool (platform/thread_pool.h), in
//     slots that never wait for one another; each slot runs its part
//     through RegionError::run, which keeps the first exception (the other
//     slots stop early on failed()), rethrown after the region; allocation
//     and argument checks happen before a region wherever they can.
//  3. Any error rolls the session back to its state before the call: the
//     graph throws Error and leaves the rollback to Session::prefill, so
//     nothing here may change session state other than the chunk's buffers
//     and the cache rows at the chunk's positions.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>

#include "platform/thread_pool.h"

namespace latte {

// A 64-byte aligned float buffer that only grows. get() throws
// Error(out_of_memory) and keeps the old buffer if the new one cannot be had.
struct AlignedBuffer {
  float* p = nullptr;
  std::size_t n = 0;  // floats
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();
  float* get(std::size_t want);
};

// The first exception of a region's slots: each slot runs its part through
// run(), the others see failed() and stop early, and the caller rethrows it
// after the region. A kernel compiled for the ref ISA allocates, and
// oneDNN's GEMM can throw std::bad_alloc.
class RegionError {
 public:
  template <class F>
  void run(F&& f) noexcept {
    try {
      f();
    } catch (...) {
      bool expected = false;
      if (failed_.compare_exchange_strong(expected, true)) error_ = std::current_exception();
    }
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  void rethrow() const {
    if (failed_.load()) std::rethrow_exception(error_);
  }

 private:
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
};

// f(t) for the rows t in [0, n) of a per-token step, split over the
// threads where there are enough rows to pay for a parallel region (prefill
// chunks; a decode step's one row stays on the calling thread). Each row's
// arithmetic is the same however the rows are split, so results do not
// change. Run serially, these steps (norms, RoPE, SwiGLU, residual adds)
// left the other threads idle during a prefill chunk. f must not throw.
template <class F>
void for_rows(int n, int threads, F&& f) {
  if (n < 8 || threads <= 1) {
    for (int t = 0; t < n; ++t) f(t);
    return;
  }
  parallel_slots(std::min(threads, n), [&](int s, int ns) {
    for (int t = n * s / ns; t < n * (s + 1) / ns; ++t) f(t);
  });
}

// f(i) for every element i of n rows of `width` floats, split by rows as
// for_rows does.
template <class F>
void for_row_elements(int n, std::size_t width, int threads, F&& f) {
  for_rows(n, threads, [&](int t) {
    for (std::size_t i = static_cast<std::size_t>(t) * width; i < static_cast<std::size_t>(t + 1) * width; ++i) f(i);
  });
}

// y (n, d; row stride ld_out) = RMSNorm of x (n, d; row stride ld_in) times
// w (d), eps inside the root; the sum of squares in double. y may be x.
void rms_norm_rows(const float* x, const float* w, int n, int d, double eps, float* y, std::size_t ld_in,
                   std::size_t ld_out, int threads);

// Index of the first NaN or inf in x[0, n), or n.
std::size_t first_non_finite(const float* x, std::size_t n);

// Refuses rows (n, width) of one layer, positions p0.., holding a NaN or
// inf: Error(bad_file) naming the first; `what` names the rows ("latent
// row", "query").
void refuse_non_finite_rows(const float* rows, int n, std::size_t width, int layer, std::int64_t p0,
                            const char* what = "latent row");

}  // namespace latte

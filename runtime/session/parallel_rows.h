// How the graph splits work over the session's thread pool: RegionError,
// which carries a region's first exception out of its slots, and for_rows /
// for_row_elements, the per-token steps' split by rows. Internal to
// runtime/session.
//
// Rules (graph_rules.h, rules 1 and 2): a row's arithmetic is the same
// however the rows are split; slots never wait for one another, and a
// slot's exception is kept and rethrown after the region.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>

#include "platform/thread_pool.h"

namespace latte {

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

}  // namespace latte

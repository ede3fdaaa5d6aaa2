#include "tools/read_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "platform/thread_pool.h"

namespace latte {

std::uint32_t read_words(const std::uint32_t* p, std::size_t n, int threads) {
  std::atomic<std::uint32_t> total{0};
  parallel_slots(threads, [&](int s, int ns) {
    std::uint32_t sum = 0;
    for (std::size_t i = n * s / ns; i < n * (s + 1) / ns; ++i) sum += p[i];
    total.fetch_add(sum, std::memory_order_relaxed);
  });
  return total.load();
}

double measure_read_bandwidth(std::size_t bytes, int threads, int passes) {
  // A pool of exactly `threads`, as a session of that many runs on.
  ThreadPool pool(std::max(threads, 1), /*allow_fewer=*/true);
  const PoolScope scope(pool);
  const std::size_t n = bytes / sizeof(std::uint32_t);
  std::vector<std::uint32_t> buf(n);
  parallel_slots(threads, [&](int s, int ns) {
    for (std::size_t i = n * s / ns; i < n * (s + 1) / ns; ++i) buf[i] = static_cast<std::uint32_t>(i);
  });
  double best = 0;
  volatile std::uint32_t sink = 0;
  for (int pass = 0; pass < passes; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    sink = sink + read_words(buf.data(), n, threads);
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n * sizeof(std::uint32_t)) / t);
  }
  return best;
}

}  // namespace latte

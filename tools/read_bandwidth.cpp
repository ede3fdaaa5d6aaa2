#include "tools/read_bandwidth.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace latte {

std::uint32_t read_words(const std::uint32_t* p, std::size_t n, int threads) {
  std::uint32_t sum = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : sum)
  for (std::size_t i = 0; i < n; ++i) sum += p[i];
  return sum;
}

double measure_read_bandwidth(std::size_t bytes, int threads, int passes) {
  const std::size_t n = bytes / sizeof(std::uint32_t);
  std::vector<std::uint32_t> buf(n);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::size_t i = 0; i < n; ++i) buf[i] = static_cast<std::uint32_t>(i);
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

// The machine's read bandwidth, for reading decode figures against: decode at
// a short context streams every weight once per token. Used by `latte bench`
// and by the benchmark programs' rooflines.
#pragma once

#include <cstddef>
#include <cstdint>

namespace latte {

// One plain read of p[0, n) in `threads` slots of the calling thread's pool,
// each a contiguous part (as the decode matvecs split a matrix). Integer sums, which the
// compiler may widen and reorder, so the loop is bound by the loads: a float
// sum is an add chain, which capped one thread below what the memory gives.
// Returns the sum, so the reads cannot be dropped.
std::uint32_t read_words(const std::uint32_t* p, std::size_t n, int threads);

// A buffer of `bytes`, each of `threads` slots touching the part it reads,
// kept for reads next to each measurement: the machine's bandwidth moves
// within minutes, so a bound read long before or after a figure says little
// about it.
class ReadProbe {
 public:
  ReadProbe(std::size_t bytes, int threads);
  ~ReadProbe();
  ReadProbe(const ReadProbe&) = delete;
  ReadProbe& operator=(const ReadProbe&) = delete;
  // Bytes per second: the best of `passes` reads of the buffer.
  double measure(int passes);

 private:
  struct State;
  State* s_;
};

// One ReadProbe's measure(passes): a buffer made, touched and read.
double measure_read_bandwidth(std::size_t bytes, int threads, int passes);

}  // namespace latte

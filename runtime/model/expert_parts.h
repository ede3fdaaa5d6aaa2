// Token ranges of an MoE expert's tokens split into equal parts (moe.cpp's
// experts_parallel hands the parts of a large expert to different threads).
#pragma once

#include <cstdint>

namespace latte {

// The first of n tokens in part q of `parts` (q = parts: n); part q is
// [expert_part_begin(n, q, parts), expert_part_begin(n, q + 1, parts)).
// In 64 bits: n * q passes INT_MAX from 524,288 tokens an expert (one long
// prefill chunk), and wrapped bounds indexed outside the expert's tokens.
inline int expert_part_begin(int n, int q, int parts) {
  return static_cast<int>(static_cast<std::int64_t>(n) * q / parts);
}

}  // namespace latte

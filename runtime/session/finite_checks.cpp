// The NaN/inf guard (finite_checks.h; its rules apply).
#include "runtime/session/finite_checks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "runtime/error.h"

namespace latte {

// Exponent bits, OR-reduced over blocks so the loop vectorizes: small beside
// the output product that made those logits (docs/performance-log.md,
// "Figures moved out of runtime comments").
std::size_t first_non_finite(const float* x, std::size_t n) {
  constexpr std::uint32_t kExp = 0x7f800000u;
  constexpr std::size_t kBlock = 1024;
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t e = std::min(n, b + kBlock);
    std::uint32_t bad = 0;
    for (std::size_t i = b; i < e; ++i) {
      std::uint32_t u;
      std::memcpy(&u, x + i, sizeof(u));
      bad |= (u & kExp) == kExp;
    }
    if (bad)
      for (std::size_t i = b; i < e; ++i)
        if (!std::isfinite(x[i])) return i;
  }
  return n;
}

void refuse_non_finite_rows(const float* rows, int n, std::size_t width, int layer, std::int64_t p0,
                            const char* what) {
  const std::size_t count = static_cast<std::size_t>(n) * width;
  if (const std::size_t i = first_non_finite(rows, count); i < count)
    throw Error(Status::bad_file, std::string("the ") + what + " of layer " + std::to_string(layer) + " at position " +
                                      std::to_string(p0 + static_cast<std::int64_t>(i / width)) + " is " +
                                      std::to_string(rows[i]) +
                                      ": the model's weights or hyperparameters overflow float32");
}

}  // namespace latte

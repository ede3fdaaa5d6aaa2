// Making room in a full context by a shift, as the CLI's commands do it
// (latte run, latte perplexity --shift): through latte_session_shift, so
// they can say how much was dropped.
#include <algorithm>
#include <cstdint>
#include <string>

#include "latte/latte.hpp"
#include "tools/cli/commands.h"

namespace latte::cli {

std::int64_t make_room(api::Session& s, std::int64_t n_new, std::int64_t n_keep) {
  const std::int64_t n_past = s.n_past(), n_ctx = s.n_ctx();
  const std::int64_t need = n_past + n_new - n_ctx;
  if (need <= 0) return 0;
  const std::int64_t keep = std::clamp<std::int64_t>(n_keep, 0, n_past);
  const std::int64_t left = n_past - keep;
  if (need > left)
    fail(LATTE_ERR_CONTEXT_OVERFLOW, std::to_string(n_new) + " new tokens do not fit the context of " +
                                         std::to_string(n_ctx) + " even with only the first " + std::to_string(keep) +
                                         " of the " + std::to_string(n_past) + " tokens in the cache kept");
  const std::int64_t drop = std::max(left / 2, need);  // half the rest, or what the new tokens need
  s.shift(keep, drop);
  return drop;
}

}  // namespace latte::cli

// touch_pages (memory.h): the same on every OS.
#include <algorithm>
#include <atomic>

#include "platform/memory.h"
#include "platform/thread_pool.h"

namespace latte {

void touch_pages(const std::uint8_t* p, std::size_t bytes) {
  constexpr std::size_t kPage = 4096;
  const std::size_t pages = (bytes + kPage - 1) / kPage;
  if (pages == 0) return;
  std::atomic<unsigned> sink{0};  // the reads must happen: their sum is kept
  parallel_slots(static_cast<int>(std::min<std::size_t>(current_pool_size(), (pages + 255) / 256)), [&](int t, int nt) {
    unsigned sum = 0;
    for (std::size_t i = pages * t / nt; i < pages * (t + 1) / nt; ++i)
      sum += *static_cast<const volatile std::uint8_t*>(p + i * kPage);
    sink.fetch_add(sum, std::memory_order_relaxed);
  });
}

}  // namespace latte

// Server counters and their Prometheus text (GET /metrics). Rules: every
// member is atomic or under the mutex, updated by handlers and the
// scheduler alike; rendering takes a consistent enough snapshot.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

namespace latte::server {

class Metrics {
 public:
  std::atomic<std::int64_t> requests_total{0};     // HTTP requests handled (every route)
  std::atomic<std::int64_t> requests_errors{0};    // answered with a 4xx/5xx
  std::atomic<std::int64_t> requests_rejected{0};  // 503: the queue was full
  std::atomic<std::int64_t> generations{0};        // completions finished
  std::atomic<std::int64_t> prompt_tokens{0};      // prompt tokens computed (not reused)
  std::atomic<std::int64_t> cached_tokens{0};      // prompt tokens reused from a slot's cache
  std::atomic<std::int64_t> generated_tokens{0};
  std::atomic<std::int64_t> cancelled{0};          // clients gone mid-generation
  std::atomic<std::int64_t> context_shifts{0};
  std::atomic<int> queue_length{0};
  std::atomic<int> slots_busy{0};
  int slots_total = 0;

  // One step's decoded tokens and time, for the recent tok/s.
  void record_step(std::int64_t tokens, double seconds);
  // Generated tokens per second over the last ten seconds of steps.
  double tokens_per_second();
  std::string prometheus();

 private:
  struct Sample {
    std::chrono::steady_clock::time_point at;
    std::int64_t tokens;
    double seconds;
  };
  std::mutex m_;
  std::deque<Sample> recent_;
};

}  // namespace latte::server

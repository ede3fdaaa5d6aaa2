// Server counters and their Prometheus text exposition (metrics.h).
#include "tools/server/metrics.h"

#include <cstdio>

namespace latte::server {

namespace {
constexpr auto kWindow = std::chrono::seconds(10);
}

void Metrics::record_step(std::int64_t tokens, double seconds) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(m_);
  recent_.push_back({now, tokens, seconds});
  while (!recent_.empty() && now - recent_.front().at > kWindow) recent_.pop_front();
}

double Metrics::tokens_per_second() {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(m_);
  while (!recent_.empty() && now - recent_.front().at > kWindow) recent_.pop_front();
  std::int64_t tokens = 0;
  double seconds = 0;
  for (const Sample& s : recent_) {
    tokens += s.tokens;
    seconds += s.seconds;
  }
  return seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0;
}

std::string Metrics::prometheus() {
  std::string out;
  const auto metric = [&out](const char* name, const char* type, const char* help, double value) {
    char line[512];
    std::snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, value);
    out += line;
  };
  metric("latte_requests_total", "counter", "HTTP requests handled.", static_cast<double>(requests_total.load()));
  metric("latte_requests_errors_total", "counter", "Requests answered with an error status.",
         static_cast<double>(requests_errors.load()));
  metric("latte_requests_rejected_total", "counter", "Requests refused with 503 because the queue was full.",
         static_cast<double>(requests_rejected.load()));
  metric("latte_generations_total", "counter", "Completions finished.", static_cast<double>(generations.load()));
  metric("latte_prompt_tokens_total", "counter", "Prompt tokens computed.", static_cast<double>(prompt_tokens.load()));
  metric("latte_prompt_tokens_cached_total", "counter", "Prompt tokens reused from a slot's cache.",
         static_cast<double>(cached_tokens.load()));
  metric("latte_generated_tokens_total", "counter", "Tokens generated.", static_cast<double>(generated_tokens.load()));
  metric("latte_cancelled_total", "counter", "Generations stopped because the client went away.",
         static_cast<double>(cancelled.load()));
  metric("latte_context_shifts_total", "counter", "Context shifts made in full slots.",
         static_cast<double>(context_shifts.load()));
  metric("latte_tokens_per_second", "gauge", "Generated tokens per second of step time, last 10 s.", tokens_per_second());
  metric("latte_queue_length", "gauge", "Requests waiting for a slot.", queue_length.load());
  metric("latte_slots_busy", "gauge", "Slots generating.", slots_busy.load());
  metric("latte_slots_total", "gauge", "Slots (--parallel).", slots_total);
  return out;
}

}  // namespace latte::server

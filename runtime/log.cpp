// The runtime's log (log.h): one sink behind a reader-writer lock. Loggers
// hold it shared while the sink runs, so set_log_sink (exclusive) returns
// only once no thread is inside the previous sink; a thread-local flag
// keeps a sink's own calls into Latte from logging into it again or
// deadlocking on the lock.
#include "runtime/log.h"

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <string>

namespace latte {

namespace {

struct Sink {
  std::shared_mutex mutex;
  LogSink fn = nullptr;
  void* data = nullptr;
  std::atomic<bool> on{false};  // fn != nullptr, read without the lock
};

Sink& sink() {
  static Sink s;  // on first use: a log from another file's static initializer finds it built
  return s;
}

thread_local bool t_in_sink = false;

}  // namespace

bool set_log_sink(LogSink fn, void* data) {
  if (t_in_sink) return false;
  Sink& s = sink();
  const std::unique_lock lock(s.mutex);
  s.fn = fn;
  s.data = data;
  s.on.store(fn != nullptr, std::memory_order_release);
  return true;
}

bool in_log_sink() { return t_in_sink; }

bool log_enabled(LogLevel) { return sink().on.load(std::memory_order_acquire) && !t_in_sink; }

void log_message(LogLevel level, std::string_view message) noexcept {
  Sink& s = sink();
  if (!s.on.load(std::memory_order_acquire) || t_in_sink) return;
  struct InSink {
    InSink() { t_in_sink = true; }
    ~InSink() { t_in_sink = false; }
  };
  try {
    const std::string text(message);  // NUL-terminated for a C sink
    const std::shared_lock lock(s.mutex);
    if (s.fn == nullptr) return;  // cleared meanwhile
    const InSink in;
    s.fn(level, text.c_str(), s.data);
  } catch (...) {
    // No memory for the message, or a sink that threw: the message is lost,
    // the caller's work is not.
  }
}

}  // namespace latte

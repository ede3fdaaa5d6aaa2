// The runtime's log: warnings and notes (a model mapped rather than read, a
// context beyond the trained one, slower kernels) handed to one process-wide
// sink the application sets (the C API's latte_log_set); silent without one.
// Thread-safe: any thread may log while another sets the sink, and once
// set_log_sink returns, the previous sink is called no more.
#pragma once

#include <string_view>

namespace latte {

// The C API's latte_log_level values.
enum class LogLevel : int { error = 0, warn = 1, info = 2, debug = 3 };

using LogSink = void (*)(LogLevel level, const char* message, void* data);

// Sets the sink (null: silent). Waits for calls of the previous sink in
// other threads to return. Returns false, changing nothing, when called
// from inside the sink (it would wait for itself).
bool set_log_sink(LogSink sink, void* data);

// Whether the calling thread is inside the sink (a call made from it).
bool in_log_sink();

// Whether a message of `level` would reach a sink now: for messages worth
// building only when someone reads them.
bool log_enabled(LogLevel level);

// Hands `message` (one line, no newline) to the sink, if any. A message
// logged from inside the sink (on the sink's thread) is dropped. Never
// throws.
void log_message(LogLevel level, std::string_view message) noexcept;

}  // namespace latte

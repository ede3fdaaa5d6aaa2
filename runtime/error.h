// Errors inside Latte: one exception type carrying a status code. The C API
// (include/latte/latte.h) turns it into a status code plus its message.
#pragma once

#include <stdexcept>
#include <string>

namespace latte {

enum class Status : int {
  ok = 0,
  invalid_argument = 1,   // a caller passed something wrong
  io_error = 2,           // a file could not be opened, read or mapped
  bad_file = 3,           // a file is malformed: truncated, inconsistent, absurd
  unsupported = 4,        // valid, but not something Latte runs (type, architecture)
  out_of_memory = 5,
  context_overflow = 6,   // more tokens than the session's context holds
  internal = 7,
  aborted = 8,            // a caller's abort callback (or load progress) stopped the call
};

const char* status_name(Status s);

class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  Status status() const { return status_; }

 private:
  Status status_;
};

}  // namespace latte

// Status names.
#include "runtime/error.h"

namespace latte {

const char* status_name(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::invalid_argument: return "invalid argument";
    case Status::io_error: return "I/O error";
    case Status::bad_file: return "bad file";
    case Status::unsupported: return "unsupported";
    case Status::out_of_memory: return "out of memory";
    case Status::context_overflow: return "context overflow";
    case Status::internal: return "internal error";
    case Status::aborted: return "aborted";
  }
  return "unknown status";
}

}  // namespace latte

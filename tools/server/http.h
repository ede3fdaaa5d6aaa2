// The HTTP routes: authentication, body limits, each endpoint's handler
// and the SSE stream. Rules: handlers never touch sessions (the Scheduler
// does); every error leaves as OpenAI's error object; a client gone
// mid-stream cancels its generation.
#pragma once

#include <memory>
#include <string>

#include "tools/server/metrics.h"
#include "tools/server/protocol.h"
#include "tools/server/scheduler.h"

namespace httplib {
class Server;
}

namespace latte::server {

struct HttpOptions {
  std::string api_key;  // empty: no key needed
  std::size_t max_body = std::size_t{8} << 20;
  int threads = 16;     // connections served at once
};

// Builds the server with every route; the caller binds and listens.
std::unique_ptr<httplib::Server> make_http_server(const ServedModel& model, Scheduler& scheduler, Metrics& metrics,
                                                  const HttpOptions& options);

// Whether a and b are equal, in time that depends only on their lengths.
bool equal_constant_time(const std::string& a, const std::string& b);

}  // namespace latte::server

// `latte serve`: the options and the entry point. Owns nothing else; the
// CLI (tools/cli/main.cpp) parses the command line into ServeOptions.
// Rule: tools/server/ is a client of latte.h / latte.hpp only.
#pragma once

#include <cstdint>
#include <string>

namespace latte::server {

struct ServeOptions {
  std::string model;            // GGUF file (empty: the CLI resolves the shipped one first)
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 8080;              // 0: any free port (said on stderr)
  std::string port_file;        // where the port bound is written (tests with --port 0)
  int parallel = 4;             // conversations decoded at once (slots)
  int queue = 32;               // requests waiting beyond the slots, then 503
  std::int64_t n_ctx = -1;      // per slot; -1: 4096 capped at the trained context; 0: the model's
  std::string cache = "int8";   // latent cache type: f32, f16, int8, int4
  int threads = 0;              // 0: all cores
  int prefill_chunk = 512;      // prompt tokens per step (long prompts go in chunks between decode steps)
  std::string api_key;          // empty: $LATTE_API_KEY, else none
  std::string alias;            // the model's id in the API (default: its name)
  std::size_t max_body = std::size_t{8} << 20;  // request bodies past it: 413
  bool no_mmap = false;
  bool mmap = false;
};

// Serves until SIGINT/SIGTERM; returns the exit status.
int run_serve(const ServeOptions& options);

}  // namespace latte::server

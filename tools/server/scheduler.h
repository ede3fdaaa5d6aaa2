// The slot scheduler: one thread owns every session (one per --parallel
// slot) and runs them with continuous batching through latte_session_step.
// Rules: only the scheduler thread touches sessions and samplers; handler
// threads talk to it through Stream (a mutex and a condition variable) and
// the bounded queue. Each step: drop cancelled requests, admit queued ones
// into the free slot whose cache shares the longest prefix with the prompt,
// then one step over all busy slots (one token per decoding slot, a chunk
// of prompt per prefilling one, prefill tokens capped per step).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "latte/latte.hpp"
#include "tools/server/metrics.h"

namespace latte::server {

// One generation, as the protocol layer validated it.
struct GenRequest {
  std::vector<std::int32_t> prompt;  // never empty, fits the context
  std::int64_t n_keep = 0;           // tokens a context shift keeps (BOS, the system turn)
  std::int64_t max_tokens = 16;      // >= 1
  latte_sampler_options sampling = latte_sampler_default_options();
  std::vector<latte_logit_bias> logit_bias;
  std::vector<std::string> stop;     // non-empty strings
  // Structured output (at most one): a JSON Schema the reply validates
  // against, or a GBNF grammar it follows; both checked when parsed.
  std::string json_schema;
  std::string grammar;
};

// What a finished generation reports.
struct GenResult {
  std::string finish_reason;  // "stop", "length", or "error"/"cancelled"
  std::string error;          // with "error": what went wrong
  std::int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

// The channel between one request's handler thread and the scheduler.
class Stream {
 public:
  // Handler side: waits up to `timeout` for text or the end; appends new
  // text to *delta; true once the generation is done (then result() holds).
  bool wait(std::string* delta, std::chrono::milliseconds timeout);
  // Handler side: the client went away; the scheduler frees the slot at its
  // next step.
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  GenResult result() const;

  // Scheduler side.
  void push(const std::string& text);
  void finish(GenResult r);

 private:
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::string pending_;
  bool done_ = false;
  GenResult result_;
  std::atomic<bool> cancelled_{false};
};

struct SchedulerOptions {
  int parallel = 4;
  int queue = 32;
  int prefill_chunk = 512;
  latte_session_options session = latte_session_default_options();
};

class Scheduler {
 public:
  Scheduler(const api::Model& model, const SchedulerOptions& options, Metrics& metrics);
  ~Scheduler();  // stop() and join
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request; nullptr when the queue is full (the caller answers 503).
  std::shared_ptr<Stream> submit(GenRequest request);
  // Ends the loop: queued and running requests finish with "error".
  void stop();
  std::int64_t n_ctx() const { return n_ctx_; }
  int parallel() const { return static_cast<int>(slots_.size()); }

 private:
  struct Slot;
  struct Pending {
    GenRequest request;
    std::shared_ptr<Stream> stream;
    std::chrono::steady_clock::time_point queued;
  };
  void loop();
  void admit(Slot& slot, Pending p);
  void release(Slot& slot, GenResult r);
  // After the slot's last step: sample, stream, and finish where it ends.
  void after_token(Slot& slot);

  const api::Model& model_;
  SchedulerOptions options_;
  Metrics& metrics_;
  std::int64_t n_ctx_ = 0;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  std::uint64_t use_clock_ = 0;  // orders slots by last use (ties in prefix reuse)
  std::thread thread_;
};

}  // namespace latte::server

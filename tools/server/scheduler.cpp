// The slot scheduler (scheduler.h): continuous batching over one session
// per slot, prefix reuse, chunked prefill, context shift, cancellation.
#include "tools/server/scheduler.h"

#include <algorithm>
#include <optional>

#include "tools/server/text_stream.h"

namespace latte::server {

// ---------------------------------------------------------------- Stream

bool Stream::wait(std::string* delta, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(m_);
  cv_.wait_for(lock, timeout, [&] { return done_ || !pending_.empty(); });
  delta->append(pending_);
  pending_.clear();
  return done_;
}

GenResult Stream::result() const {
  std::lock_guard<std::mutex> lock(m_);
  return result_;
}

void Stream::push(const std::string& text) {
  if (text.empty()) return;
  {
    std::lock_guard<std::mutex> lock(m_);
    pending_ += text;
  }
  cv_.notify_all();
}

void Stream::finish(GenResult r) {
  {
    std::lock_guard<std::mutex> lock(m_);
    result_ = std::move(r);
    done_ = true;
  }
  cv_.notify_all();
}

// ---------------------------------------------------------------- Scheduler

struct Scheduler::Slot {
  api::Session session;
  std::shared_ptr<Stream> stream;  // null: free
  GenRequest request;
  std::optional<api::Sampler> sampler;
  std::optional<TextStream> text;
  std::size_t fed = 0;          // prompt tokens in the session
  std::int32_t next = -1;       // sampled, to be fed at the next step (decoding)
  std::int64_t generated = 0;
  std::int64_t cached = 0;      // prompt tokens reused from the cache
  std::uint64_t last_use = 0;
  explicit Slot(api::Session s) : session(std::move(s)) {}
  bool busy() const { return stream != nullptr; }
  bool prefilling() const { return fed < request.prompt.size(); }
};

Scheduler::Scheduler(const api::Model& model, const SchedulerOptions& options, Metrics& metrics)
    : model_(model), options_(options), metrics_(metrics) {
  for (int i = 0; i < options.parallel; ++i) slots_.push_back(std::make_unique<Slot>(api::Session(model, options.session)));
  n_ctx_ = slots_.front()->session.n_ctx();
  metrics_.slots_total = options.parallel;
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  stop();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Stream> Scheduler::submit(GenRequest request) {
  auto stream = std::make_shared<Stream>();
  {
    std::lock_guard<std::mutex> lock(m_);
    // Room: the queue's, plus the slots free now (requests wait in queue_
    // until the loop admits them, so --queue 0 still fills free slots).
    const int free_slots = std::max(0, options_.parallel - metrics_.slots_busy.load());
    if (stopping_ || static_cast<int>(queue_.size()) >= options_.queue + free_slots) return nullptr;
    queue_.push_back({std::move(request), stream, std::chrono::steady_clock::now()});
    metrics_.queue_length = static_cast<int>(queue_.size());
  }
  cv_.notify_all();
  return stream;
}

void Scheduler::stop() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stopping_ = true;
  }
  cv_.notify_all();
}

void Scheduler::release(Slot& slot, GenResult r) {
  r.prompt_tokens = static_cast<std::int64_t>(slot.request.prompt.size());
  r.completion_tokens = slot.generated;
  r.cached_tokens = slot.cached;
  if (r.finish_reason == "cancelled") ++metrics_.cancelled;
  else ++metrics_.generations;
  slot.stream->finish(std::move(r));
  slot.stream.reset();
  slot.sampler.reset();
  slot.text.reset();
  slot.last_use = ++use_clock_;
  --metrics_.slots_busy;
}

void Scheduler::admit(Slot& slot, Pending p) {
  // The sampler first: a setting it refuses fails this request alone.
  std::optional<api::Sampler> sampler;
  try {
    sampler.emplace(p.request.sampling);
    if (!p.request.logit_bias.empty()) sampler->set_logit_bias(p.request.logit_bias);
    if (!p.request.json_schema.empty()) sampler->set_json_schema(model_, p.request.json_schema);
    else if (!p.request.grammar.empty()) sampler->set_grammar(model_, p.request.grammar);
  } catch (const api::Exception& e) {
    p.stream->finish({"error", e.what(), 0, 0, 0});
    return;
  }
  const std::vector<std::int32_t>& prompt = p.request.prompt;
  // Reuse the cache up to the prompt's shared prefix (only the unshifted
  // part computes what a fresh prefill would); at least the prompt's last
  // token is fed again for its logits.
  const std::vector<std::int32_t> have = slot.session.tokens();
  const std::size_t reusable = std::min<std::size_t>(have.size(), static_cast<std::size_t>(slot.session.n_unshifted()));
  std::size_t common = 0;
  while (common < reusable && common + 1 < prompt.size() && have[common] == prompt[common]) ++common;
  slot.session.truncate(static_cast<std::int64_t>(common));
  slot.session.set_context_shift(true, std::min<std::int64_t>(p.request.n_keep, n_ctx_ / 2));
  slot.request = std::move(p.request);
  slot.stream = std::move(p.stream);
  slot.sampler = std::move(sampler);
  slot.text.emplace(slot.request.stop);
  slot.fed = common;
  slot.cached = static_cast<std::int64_t>(common);
  slot.generated = 0;
  slot.next = -1;
  slot.last_use = ++use_clock_;
  metrics_.cached_tokens += slot.cached;
  ++metrics_.slots_busy;
}

void Scheduler::after_token(Slot& slot) {
  const std::int32_t id = slot.sampler->sample(slot.session.logits());
  if (model_.is_end_of_generation(id)) {
    slot.stream->push(slot.text->flush());
    release(slot, {"stop", "", 0, 0, 0});
    return;
  }
  ++slot.generated;
  ++metrics_.generated_tokens;
  const bool stopped = slot.text->add(model_.token_to_piece(id, /*hide_control=*/true));
  slot.stream->push(stopped ? slot.text->flush() : slot.text->release());
  if (stopped) {
    release(slot, {"stop", "", 0, 0, 0});
  } else if (slot.generated >= slot.request.max_tokens) {
    slot.stream->push(slot.text->flush());
    release(slot, {"length", "", 0, 0, 0});
  } else {
    slot.next = id;
  }
}

void Scheduler::loop() {
  std::vector<latte_step_item> items;
  std::vector<Slot*> in_step;
  std::vector<std::size_t> chunk_of;
  for (;;) {
    // Admit and drop under the lock; the step runs without it.
    {
      std::unique_lock<std::mutex> lock(m_);
      const auto any_busy = [&] {
        return std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->busy(); });
      };
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || any_busy(); });
      if (stopping_) {
        for (auto& s : slots_)
          if (s->busy()) release(*s, {"error", "the server is stopping", 0, 0, 0});
        for (Pending& p : queue_) p.stream->finish({"error", "the server is stopping", 0, 0, 0});
        queue_.clear();
        metrics_.queue_length = 0;
        return;
      }
      // Queued requests whose client left never take a slot.
      for (auto it = queue_.begin(); it != queue_.end();) {
        if (it->stream->cancelled()) {
          it->stream->finish({"cancelled", "", 0, 0, 0});
          ++metrics_.cancelled;
          it = queue_.erase(it);
        } else {
          ++it;
        }
      }
      while (!queue_.empty()) {
        // The free slot sharing the longest prefix with the prompt; among
        // equals the least recently used (keeps others' conversations).
        Slot* best = nullptr;
        std::size_t best_common = 0;
        const std::vector<std::int32_t>& prompt = queue_.front().request.prompt;
        for (auto& s : slots_) {
          if (s->busy()) continue;
          const std::vector<std::int32_t> have = s->session.tokens();
          const std::size_t n = std::min<std::size_t>(have.size(), static_cast<std::size_t>(s->session.n_unshifted()));
          std::size_t common = 0;
          while (common < n && common < prompt.size() && have[common] == prompt[common]) ++common;
          if (best == nullptr || common > best_common || (common == best_common && s->last_use < best->last_use)) {
            best = s.get();
            best_common = common;
          }
        }
        if (best == nullptr) break;
        Pending p = std::move(queue_.front());
        queue_.pop_front();
        admit(*best, std::move(p));
      }
      metrics_.queue_length = static_cast<int>(queue_.size());
    }
    // Clients gone: their slots are free before this step.
    for (auto& s : slots_)
      if (s->busy() && s->stream->cancelled()) release(*s, {"cancelled", "", 0, 0, 0});

    items.clear();
    in_step.clear();
    chunk_of.clear();
    std::size_t prefill_budget = static_cast<std::size_t>(options_.prefill_chunk);
    std::int64_t decoding = 0;
    for (auto& s : slots_) {
      if (!s->busy()) continue;
      if (s->prefilling()) {
        if (prefill_budget == 0) continue;  // waits for the next step
        const std::size_t n = std::min(prefill_budget, s->request.prompt.size() - s->fed);
        prefill_budget -= n;
        items.push_back({s->session.handle(), s->request.prompt.data() + s->fed, n});
        chunk_of.push_back(n);
      } else {
        items.push_back({s->session.handle(), &s->next, 1});
        chunk_of.push_back(0);
        ++decoding;
      }
      in_step.push_back(s.get());
    }
    if (items.empty()) continue;
    std::vector<std::int64_t> before(in_step.size());
    for (std::size_t i = 0; i < in_step.size(); ++i) before[i] = in_step[i]->session.n_past();
    const auto t0 = std::chrono::steady_clock::now();
    const latte_status st = latte_session_step(items.data(), items.size());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (st != LATTE_OK) {
      const std::string why = std::string(latte_status_string(st)) + ": " + latte_last_error();
      for (Slot* s : in_step) release(*s, {"error", why, 0, 0, 0});
      continue;
    }
    metrics_.record_step(decoding, seconds);
    for (std::size_t i = 0; i < in_step.size(); ++i) {
      Slot& s = *in_step[i];
      const std::int64_t fed_now = chunk_of[i] ? static_cast<std::int64_t>(chunk_of[i]) : 1;
      if (s.session.n_past() != before[i] + fed_now) ++metrics_.context_shifts;
      if (chunk_of[i]) {
        s.fed += chunk_of[i];
        metrics_.prompt_tokens += static_cast<std::int64_t>(chunk_of[i]);
        if (s.prefilling()) continue;
      }
      try {
        after_token(s);
      } catch (const api::Exception& e) {
        release(s, {"error", e.what(), 0, 0, 0});
      }
    }
  }
}

}  // namespace latte::server

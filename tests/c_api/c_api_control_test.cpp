// The C API's control calls (issue 56): abort callbacks, load progress and
// cancel, the log, the version, model metadata, session state in memory and
// forks, threads after creation, logit bias, and the options structs' size
// rule; each through latte.h and, at the end, through latte.hpp.
#include "latte/latte.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/isa.h"
#include "quant/ggml_types.h"
#include "latte/latte.hpp"
#include "runtime/gguf/gguf_file.h"
#include "runtime/model/model.h"
#include "tests/common/testdata.h"
#include "tools/gguf_writer.h"
#include "tools/random_model.h"

namespace {

using latte::test::kTestdata;
using latte::test::testdata_tokens;

const std::string kDense = kTestdata + "/tiny-dense.gguf";
const std::string kMoe = kTestdata + "/tiny-moe-v2-lite.gguf";
const std::string kShipped = std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.gguf";

struct ModelDeleter {
  void operator()(latte_model* m) const { latte_model_free(m); }
};
struct SessionDeleter {
  void operator()(latte_session* s) const { latte_session_free(s); }
};
struct SamplerDeleter {
  void operator()(latte_sampler* s) const { latte_sampler_free(s); }
};
using ModelPtr = std::unique_ptr<latte_model, ModelDeleter>;
using SessionPtr = std::unique_ptr<latte_session, SessionDeleter>;
using SamplerPtr = std::unique_ptr<latte_sampler, SamplerDeleter>;

ModelPtr load(const std::string& path) {
  latte_model* m = nullptr;
  EXPECT_EQ(latte_model_load(path.c_str(), &m), LATTE_OK) << latte_last_error();
  return ModelPtr(m);
}

latte_session_options session_options(int32_t cache, int64_t n_ctx, int32_t chunk, int32_t threads = 2) {
  latte_session_options o = latte_session_default_options();
  o.cache_type = cache;
  o.n_ctx = n_ctx;
  o.prefill_chunk = chunk;
  o.threads = threads;
  return o;
}

SessionPtr session(latte_model* m, const latte_session_options& o) {
  latte_session* s = nullptr;
  EXPECT_EQ(latte_session_create(m, &o, &s), LATTE_OK) << latte_last_error();
  return SessionPtr(s);
}

std::vector<float> logits_of(const latte_session* s, const latte_model* m) {
  const float* l = latte_session_logits(s);
  if (l == nullptr) return {};
  return {l, l + latte_model_n_vocab(m)};
}

std::vector<int32_t> tokens_of(const latte_session* s) {
  size_t n = 0;
  EXPECT_EQ(latte_session_tokens(s, nullptr, 0, &n), LATTE_OK);
  std::vector<int32_t> t(n);
  EXPECT_EQ(latte_session_tokens(s, t.data(), t.size(), &n), LATTE_OK);
  return t;
}

std::vector<uint8_t> state_of(const latte_session* s) {
  size_t n = 0;
  EXPECT_EQ(latte_session_state_save_to(s, nullptr, 0, &n), LATTE_OK) << latte_last_error();
  std::vector<uint8_t> b(n);
  EXPECT_EQ(latte_session_state_save_to(s, b.data(), b.size(), &n), LATTE_OK) << latte_last_error();
  EXPECT_EQ(n, b.size());
  return b;
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

const int32_t kCaches[] = {LATTE_CACHE_F32, LATTE_CACHE_F16, LATTE_CACHE_INT8, LATTE_CACHE_INT4};

// ---------------------------------------------------------------- abort

// Stops the call on its stop_at-th question (0: never), counting them.
struct AbortAfter {
  int calls = 0;
  int stop_at = 0;
  static int32_t callback(void* p) {
    auto* a = static_cast<AbortAfter*>(p);
    ++a->calls;
    return a->stop_at > 0 && a->calls >= a->stop_at ? 1 : 0;
  }
};

// A callback that stops a prefill in its third chunk: the call fails with
// LATTE_ERR_ABORTED, the session holds exactly what it held before (tokens,
// logits, every cache byte), and the same prefill afterwards gives the
// logits of a session that was never stopped. The callback is asked once
// before the call changes anything and once per layer of every chunk.
TEST(CApiAbort, StopsAMultiChunkPrefillAndLeavesTheSessionAsItWas) {
  ModelPtr m = load(kMoe);
  const int layers = latte_model_n_layers(m.get());
  ASSERT_GT(layers, 1);
  const std::vector<int32_t> ids = testdata_tokens();
  ASSERT_GE(ids.size(), 61u);
  for (int32_t cache : kCaches) {
    SCOPED_TRACE("cache type " + std::to_string(cache));
    const latte_session_options o = session_options(cache, 256, 8);
    SessionPtr s = session(m.get(), o), ref = session(m.get(), o);
    ASSERT_EQ(latte_session_prefill(s.get(), ids.data(), 20), LATTE_OK);
    ASSERT_EQ(latte_session_prefill(ref.get(), ids.data(), 20), LATTE_OK);
    const std::vector<float> logits_before = logits_of(s.get(), m.get());
    const std::vector<uint8_t> state_before = state_of(s.get());

    // Uninterrupted: 1 + 5 chunks x layers questions.
    AbortAfter count;
    ASSERT_EQ(latte_session_set_abort_callback(ref.get(), AbortAfter::callback, &count), LATTE_OK);
    ASSERT_EQ(latte_session_prefill(ref.get(), ids.data() + 20, 40), LATTE_OK);
    EXPECT_EQ(count.calls, 1 + 5 * layers);

    AbortAfter stop;
    stop.stop_at = 1 + 2 * layers + 2;  // the third chunk's second layer
    ASSERT_EQ(latte_session_set_abort_callback(s.get(), AbortAfter::callback, &stop), LATTE_OK);
    EXPECT_EQ(latte_session_prefill(s.get(), ids.data() + 20, 40), LATTE_ERR_ABORTED);
    EXPECT_EQ(stop.calls, stop.stop_at);
    EXPECT_TRUE(contains(latte_last_error(), "abort callback")) << latte_last_error();
    EXPECT_TRUE(contains(latte_last_error(), "back at 20 tokens")) << latte_last_error();
    EXPECT_STREQ(latte_status_string(LATTE_ERR_ABORTED), "aborted");
    EXPECT_EQ(latte_session_n_past(s.get()), 20);
    EXPECT_EQ(tokens_of(s.get()), std::vector<int32_t>(ids.begin(), ids.begin() + 20));
    EXPECT_EQ(logits_of(s.get(), m.get()), logits_before);
    EXPECT_EQ(state_of(s.get()), state_before) << "the session's saved state changed";

    ASSERT_EQ(latte_session_set_abort_callback(s.get(), nullptr, nullptr), LATTE_OK);
    ASSERT_EQ(latte_session_prefill(s.get(), ids.data() + 20, 40), LATTE_OK) << latte_last_error();
    EXPECT_EQ(logits_of(s.get(), m.get()), logits_of(ref.get(), m.get()));
    ASSERT_EQ(latte_session_decode(s.get(), ids[60]), LATTE_OK);
    ASSERT_EQ(latte_session_decode(ref.get(), ids[60]), LATTE_OK);
    EXPECT_EQ(logits_of(s.get(), m.get()), logits_of(ref.get(), m.get()));
  }
}

// An abort requested before the call stops it before anything changes, a
// context shift included; decode and eval_all stop the same way.
TEST(CApiAbort, RequestedBeforeTheCallChangesNothing) {
  ModelPtr m = load(kDense);
  SessionPtr s = session(m.get(), session_options(LATTE_CACHE_F32, 16, 4));
  const int32_t toks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  ASSERT_EQ(latte_session_prefill(s.get(), toks, 14), LATTE_OK);
  ASSERT_EQ(latte_session_set_context_shift(s.get(), 1, 2), LATTE_OK);
  const std::vector<float> before = logits_of(s.get(), m.get());
  AbortAfter always;
  always.stop_at = 1;
  ASSERT_EQ(latte_session_set_abort_callback(s.get(), AbortAfter::callback, &always), LATTE_OK);
  EXPECT_EQ(latte_session_prefill(s.get(), toks, 8), LATTE_ERR_ABORTED);  // would shift first
  EXPECT_EQ(always.calls, 1);
  EXPECT_EQ(latte_session_n_past(s.get()), 14);
  EXPECT_EQ(latte_session_n_unshifted(s.get()), 14) << "the context was shifted";
  EXPECT_EQ(latte_session_decode(s.get(), 5), LATTE_ERR_ABORTED);
  std::vector<float> all(2 * 512, 7.f);
  EXPECT_EQ(latte_session_eval_all(s.get(), toks, 2, all.data()), LATTE_ERR_ABORTED);
  EXPECT_EQ(all, std::vector<float>(2 * 512, 7.f)) << "eval_all wrote logits of a stopped call";
  EXPECT_EQ(always.calls, 3);
  EXPECT_EQ(tokens_of(s.get()), std::vector<int32_t>(toks, toks + 14));
  EXPECT_EQ(logits_of(s.get(), m.get()), before);
  EXPECT_EQ(latte_session_set_abort_callback(nullptr, AbortAfter::callback, &always), LATTE_ERR_INVALID_ARGUMENT);
}

// Another thread stops a long prefill through a flag the callback reads: the
// call returns within the layer in progress. Prints the latency (flag set to
// call returned) and the longest interval between two questions (a layer of
// a chunk). LATTE_TEST_ABORT_MODEL names another model to measure (threads 2,
// LATTE_TEST_ABORT_TOKENS tokens, 4096 by default).
TEST(CApiAbort, AnotherThreadStopsALongPrefillWithinALayer) {
  const char* env_model = std::getenv("LATTE_TEST_ABORT_MODEL");
  const char* env_tokens = std::getenv("LATTE_TEST_ABORT_TOKENS");
  const std::string path = env_model && *env_model ? env_model : kShipped;
  const int n_tokens = env_tokens && *env_tokens ? std::atoi(env_tokens) : 4096;
  ModelPtr m = load(path);
  ASSERT_TRUE(m);
  const int layers = latte_model_n_layers(m.get());
  const int32_t n_vocab = latte_model_n_vocab(m.get());
  SessionPtr s = session(m.get(), session_options(LATTE_CACHE_INT8, n_tokens, 512, 2));
  std::vector<int32_t> ids(static_cast<std::size_t>(n_tokens));
  for (int i = 0; i < n_tokens; ++i) ids[i] = (i * 7919 + 13) % n_vocab;

  using Clock = std::chrono::steady_clock;
  struct Watch {
    std::atomic<bool> stop{false};
    std::atomic<int> calls{0};
    Clock::time_point set_at, seen_at, last_call;
    double longest = 0;  // seconds between two questions
    static int32_t callback(void* p) {
      auto* w = static_cast<Watch*>(p);
      const Clock::time_point now = Clock::now();
      if (w->calls.load() > 0) w->longest = std::max(w->longest, std::chrono::duration<double>(now - w->last_call).count());
      w->last_call = now;
      w->calls.fetch_add(1);
      if (!w->stop.load(std::memory_order_acquire)) return 0;
      w->seen_at = now;
      return 1;
    }
  };
  const int chunks = (n_tokens + 511) / 512;
  // Stop at a few places: early in the second chunk, the middle, the last chunk.
  for (const int at_call : {1 + layers + 1, 1 + (chunks / 2) * layers + layers / 2, 1 + (chunks - 1) * layers + 1}) {
    Watch w;
    ASSERT_EQ(latte_session_set_abort_callback(s.get(), Watch::callback, &w), LATTE_OK);
    std::thread stopper([&] {
      while (w.calls.load() < at_call) std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::this_thread::sleep_for(std::chrono::milliseconds(3));  // somewhere inside a layer
      w.set_at = Clock::now();
      w.stop.store(true, std::memory_order_release);
    });
    const latte_status st = latte_session_prefill(s.get(), ids.data(), ids.size());
    const Clock::time_point returned = Clock::now();
    stopper.join();
    ASSERT_EQ(st, LATTE_ERR_ABORTED) << latte_last_error();
    EXPECT_EQ(latte_session_n_past(s.get()), 0);
    const double latency = std::chrono::duration<double>(returned - w.set_at).count();
    const double to_seen = std::chrono::duration<double>(w.seen_at - w.set_at).count();
    const double unwind = std::chrono::duration<double>(returned - w.seen_at).count();
    std::printf("abort latency on %s (%d tokens, 2 threads, chunks of 512, %d layers), stopped after question %d: "
                "%.1f ms (flag seen %.1f ms after it was set, returned %.2f ms later); the longest layer: %.1f ms\n",
                path.c_str(), n_tokens, layers, at_call, 1e3 * latency, 1e3 * to_seen, 1e3 * unwind,
                1e3 * w.longest);
    // The flag is seen at the next layer's start, and the rollback is cheap.
    EXPECT_LE(to_seen, w.longest + 0.05);
    EXPECT_LT(unwind, 0.05);
  }
}

// ---------------------------------------------------------------- load progress

struct ProgressLog {
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  int cancel_at = 0;         // 1-based; 0: never
  uint64_t cancel_past = 0;  // cancels at the first call with bytes_done above it; 0: never
  static int32_t callback(uint64_t done, uint64_t total, void* p) {
    auto* l = static_cast<ProgressLog*>(p);
    l->calls.emplace_back(done, total);
    if (l->cancel_past > 0 && done > l->cancel_past) return 0;
    return l->cancel_at > 0 && static_cast<int>(l->calls.size()) >= l->cancel_at ? 0 : 1;
  }
};

// Each call's total the same, bytes_done never falling and at most the
// total, the last call (total, total).
void expect_progress_rises_to(const ProgressLog& log, uint64_t total) {
  ASSERT_GE(log.calls.size(), 2u);
  for (std::size_t i = 0; i < log.calls.size(); ++i) {
    EXPECT_EQ(log.calls[i].second, total) << "call " << i;
    EXPECT_LE(log.calls[i].first, total) << "call " << i;
    if (i > 0) {
      EXPECT_GE(log.calls[i].first, log.calls[i - 1].first) << "call " << i;
    }
  }
  EXPECT_EQ(log.calls.back(), std::make_pair(total, total));
}

latte_status load_with_progress(const std::string& path, int32_t use_mmap, ProgressLog& log, latte_model** out) {
  latte_model_options o = latte_model_default_options();
  o.use_mmap = use_mmap;
  o.progress = ProgressLog::callback;
  o.progress_user_data = &log;
  return latte_model_load_with_options(path.c_str(), &o, out);
}

// The process's virtual memory in bytes (Linux).
std::uint64_t virtual_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t pages = 0;
  statm >> pages;
  return pages * 4096;
}

// Progress rises to the file's size, mapped, or read where this CPU's
// kernels re-lay out nothing; read where they do, to twice it (the second
// pass: this F32 file has nothing to re-lay out, so it passes at once from
// the size to the end). It ends with one call at the total; a 0 from it at
// any call cancels the load with LATTE_ERR_ABORTED and sets nothing.
TEST(CApiLoad, ProgressRisesToTheFileSizeAndCancels) {
  const auto size = static_cast<uint64_t>(std::filesystem::file_size(kShipped));
  const bool relayout = latte::Model::relayout_pass(latte::LoadOptions{});
  for (int32_t use_mmap : {1, 0}) {
    SCOPED_TRACE("use_mmap " + std::to_string(use_mmap));
    ProgressLog full;
    latte_model* m = nullptr;
    ASSERT_EQ(load_with_progress(kShipped, use_mmap, full, &m), LATTE_OK) << latte_last_error();
    ModelPtr owned(m);
    EXPECT_EQ(latte_model_is_mapped(m), use_mmap);
    EXPECT_EQ(latte_model_interleaved_bytes(m), 0);
    const uint64_t total = use_mmap == 0 && relayout ? 2 * size : size;
    expect_progress_rises_to(full, total);
    if (use_mmap == 0) {  // the read's end, then the second pass's
      ASSERT_GE(full.calls.size(), 2u);
      EXPECT_EQ(full.calls[full.calls.size() - 2], std::make_pair(size, total));
    }
    // Mapped, the header comes first; read, a file under 64 MiB is one part.
    if (use_mmap == 1) {
      EXPECT_LT(full.calls.front().first, size);
    }

    const int n = static_cast<int>(full.calls.size());
    for (int cancel_at : {1, n / 2, n}) {
      ProgressLog cancel;
      cancel.cancel_at = cancel_at;
      latte_model* none = nullptr;
      EXPECT_EQ(load_with_progress(kShipped, use_mmap, cancel, &none), LATTE_ERR_ABORTED) << "at call " << cancel_at;
      EXPECT_EQ(none, nullptr);
      EXPECT_EQ(static_cast<int>(cancel.calls.size()), cancel_at);
      EXPECT_TRUE(contains(latte_last_error(), "cancelled by the progress callback")) << latte_last_error();
      EXPECT_TRUE(contains(latte_last_error(), "latte-tiny-mla.gguf")) << latte_last_error();
    }
  }
}

// A read whose second pass re-lays out weights (a Q4_K file of 5 MB where
// the CPU has x16 kernels): progress rises past the file's size as each
// matrix is re-laid out, to twice it; a 0 during that pass cancels the load
// with LATTE_ERR_ABORTED, and 20 loads cancelled there leave the address
// space as it was. The whole load's bytes: the read's calls end at the
// size, and the re-layout's calls each end a re-laid matrix's slice.
TEST(CApiLoad, ProgressCoversTheReLayoutAndCancelsThere) {
  if (!latte::Model::relayout_pass(latte::LoadOptions{})) GTEST_SKIP() << "no x16 kernels on this CPU";
  latte::RandomModelSpec spec;
  spec.d_model = 256;
  spec.ff = 512;
  spec.kv_lora_rank = 64;
  spec.n_vocab = 16000;  // embeddings and output: 2.3 MB each
  spec.weight_type = latte::GgmlType::Q4_K;
  const std::string path = ::testing::TempDir() + "/progress_relayout.gguf";
  latte::write_random_model(spec, path);
  const auto size = static_cast<uint64_t>(std::filesystem::file_size(path));

  ProgressLog full;
  latte_model* m = nullptr;
  ASSERT_EQ(load_with_progress(path, 0, full, &m), LATTE_OK) << latte_last_error();
  ModelPtr owned(m);
  ASSERT_EQ(latte_model_is_mapped(m), 0);
  const int64_t relaid = latte_model_interleaved_bytes(m);
  EXPECT_GT(relaid, static_cast<int64_t>(size / 2));
  expect_progress_rises_to(full, 2 * size);
  std::vector<uint64_t> second;  // the calls strictly inside the second pass
  for (const auto& c : full.calls)
    if (c.first > size && c.first < 2 * size) second.push_back(c.first);
  // One call at least per matrix re-laid out: the output matrix, and each
  // layer's attention and FFN matrices.
  EXPECT_GE(second.size(), 8u);
  // The output matrix (the file's largest re-laid out, 16000 rows) ends
  // past the middle of the file's data: the pass reports beyond it.
  EXPECT_GT(second.back(), size + size / 2);
  EXPECT_NE(std::find(full.calls.begin(), full.calls.end(), std::make_pair(size, 2 * size)), full.calls.end());

  auto cancel_in_relayout = [&] {
    ProgressLog cancel;
    cancel.cancel_past = size;
    latte_model* none = nullptr;
    EXPECT_EQ(load_with_progress(path, 0, cancel, &none), LATTE_ERR_ABORTED);
    EXPECT_EQ(none, nullptr);
    ASSERT_FALSE(cancel.calls.empty());
    EXPECT_GT(cancel.calls.back().first, size);
    EXPECT_LT(cancel.calls.back().first, 2 * size);  // before the load's last call
    EXPECT_EQ(cancel.calls.back().first, second.front());
    EXPECT_TRUE(contains(latte_last_error(), "cancelled by the progress callback")) << latte_last_error();
  };
  cancel_in_relayout();
  const std::uint64_t before = virtual_bytes();
  for (int i = 0; i < 20; ++i) cancel_in_relayout();
  const std::uint64_t after = virtual_bytes();
  EXPECT_LT(after, before + (std::uint64_t{8} << 20)) << before << " -> " << after << " bytes";
  // And a load after them is whole: the same bytes re-laid out.
  latte_model* again = nullptr;
  latte_model_options read = latte_model_default_options();
  read.use_mmap = 0;
  ASSERT_EQ(latte_model_load_with_options(path.c_str(), &read, &again), LATTE_OK);
  ModelPtr owned_again(again);
  EXPECT_EQ(latte_model_interleaved_bytes(again), relaid);
}

// A cancelled load gives back what it took: 40 loads read into memory (25
// MiB each) and cancelled halfway leave the process's address space as it
// was, give or take a few MiB.
TEST(CApiLoad, CancelledLoadsLeakNothing) {
  auto cancel_once = [] {
    ProgressLog cancel;
    cancel.cancel_at = 2;
    latte_model* none = nullptr;
    EXPECT_EQ(load_with_progress(kShipped, 0, cancel, &none), LATTE_ERR_ABORTED);
  };
  cancel_once();  // the process's shared pool starts on first use
  const std::uint64_t before = virtual_bytes();
  for (int i = 0; i < 40; ++i) cancel_once();
  const std::uint64_t after = virtual_bytes();
  EXPECT_LT(after, before + (std::uint64_t{8} << 20)) << before << " -> " << after << " bytes";
}

// ---------------------------------------------------------------- log

struct LogCollector {
  std::mutex m;
  std::vector<std::pair<latte_log_level, std::string>> lines;
  static void callback(latte_log_level level, const char* message, void* p) {
    auto* c = static_cast<LogCollector*>(p);
    const std::lock_guard<std::mutex> lock(c->m);
    c->lines.emplace_back(level, message);
  }
  // The lines of `level` that contain `needle`.
  int count(latte_log_level level, const std::string& needle) {
    const std::lock_guard<std::mutex> lock(m);
    return static_cast<int>(std::count_if(lines.begin(), lines.end(), [&](const auto& l) {
      return l.first == level && contains(l.second, needle);
    }));
  }
  std::string all() {
    const std::lock_guard<std::mutex> lock(m);
    std::string s;
    for (const auto& l : lines) s += std::to_string(l.first) + ": " + l.second + "\n";
    return s;
  }
};

// Sets a log for the test's life, silent again after.
struct ScopedLog {
  explicit ScopedLog(LogCollector& c) { EXPECT_EQ(latte_log_set(LogCollector::callback, &c), LATTE_OK); }
  ~ScopedLog() { EXPECT_EQ(latte_log_set(nullptr, nullptr), LATTE_OK); }
};

// What a load, a session past the trained context, a failed call and an
// aborted one log, at which level; nothing once the log is silenced.
TEST(CApiLog, WarningsNotesAndFailuresReachTheCallback) {
  LogCollector c;
  {
    ScopedLog scoped(c);
    ModelPtr m = load(kDense);
    EXPECT_EQ(c.count(LATTE_LOG_INFO, "loaded " + kDense + ": deepseek2"), 1) << c.all();
    SessionPtr s = session(m.get(), session_options(LATTE_CACHE_F32, 8192, 512));
    EXPECT_EQ(c.count(LATTE_LOG_WARN, "a context of 8192 tokens, beyond the model's trained context of 4096"), 1)
        << c.all();
    SessionPtr fits = session(m.get(), session_options(LATTE_CACHE_F32, 4096, 512));
    EXPECT_EQ(c.count(LATTE_LOG_WARN, "trained context"), 1) << "a context within the trained one warned";
    EXPECT_EQ(latte_session_truncate(s.get(), 3), LATTE_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(c.count(LATTE_LOG_ERROR, latte_last_error()), 1) << c.all();
    AbortAfter always;
    always.stop_at = 1;
    ASSERT_EQ(latte_session_set_abort_callback(s.get(), AbortAfter::callback, &always), LATTE_OK);
    const int32_t t = 5;
    EXPECT_EQ(latte_session_prefill(s.get(), &t, 1), LATTE_ERR_ABORTED);
    EXPECT_EQ(c.count(LATTE_LOG_INFO, "abort callback"), 1) << c.all();
    EXPECT_EQ(c.count(LATTE_LOG_ERROR, "abort callback"), 0) << c.all();
  }
  const std::size_t n = c.lines.size();
  ModelPtr m = load(kDense);
  latte_session* none = nullptr;
  EXPECT_EQ(latte_session_create(nullptr, nullptr, &none), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(c.lines.size(), n) << "a silenced log was called";
}

// Kernels slower than the CPU's best are a warning at load, naming why (run
// with LATTE_ISA=ref by ctest's log_slower_kernels_ref; without a cap on a
// CPU with AVX2 or dot products there is nothing to say).
TEST(CApiLog, SlowerKernelsAreAWarning) {
  LogCollector c;
  ScopedLog scoped(c);
  ModelPtr m = load(kDense);
  const std::string note = latte::slower_isa_note();
  EXPECT_EQ(c.count(LATTE_LOG_WARN, "kernels: "), note.empty() ? 0 : 1) << c.all();
  if (!note.empty()) {
    EXPECT_EQ(c.count(LATTE_LOG_WARN, note), 1) << c.all();
  }
  const char* cap = std::getenv("LATTE_ISA");
  if (cap && std::string(cap) == "ref" && latte::isa_supported(latte::Isa::avx2)) {
    EXPECT_TRUE(contains(note, "LATTE_ISA=ref caps them")) << note;
  }
}

struct Reentrant {
  latte_status set_inside = LATTE_OK;
  int calls = 0;
  static void callback(latte_log_level, const char*, void* p) {
    auto* r = static_cast<Reentrant*>(p);
    ++r->calls;
    r->set_inside = latte_log_set(nullptr, nullptr);  // refused: it would wait for itself
    latte_session_truncate(nullptr, 0);               // fails; its message is not logged into this call
  }
};

// The callback's own calls into Latte neither deadlock nor recurse.
TEST(CApiLog, TheCallbackMayCallLatteButNotSetTheLog) {
  Reentrant r;
  ASSERT_EQ(latte_log_set(Reentrant::callback, &r), LATTE_OK);
  EXPECT_EQ(latte_session_reset(nullptr), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(r.calls, 1);
  EXPECT_EQ(r.set_inside, LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(latte_log_set(nullptr, nullptr), LATTE_OK);
  EXPECT_EQ(latte_session_reset(nullptr), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(r.calls, 1);
}

// Four threads log (failing calls) while another switches the callback:
// once latte_log_set returns, the callback it replaced is never called.
TEST(CApiLog, SettingTheLogWhileThreadsLogIsSafe) {
  struct Sink {
    std::atomic<bool> retired{false};
    std::atomic<int> calls{0}, late{0};
    static void callback(latte_log_level, const char*, void* p) {
      auto* s = static_cast<Sink*>(p);
      s->calls.fetch_add(1);
      if (s->retired.load()) s->late.fetch_add(1);
    }
  };
  Sink a, b;
  std::atomic<bool> done{false};
  std::vector<std::thread> loggers;
  for (int i = 0; i < 4; ++i)
    loggers.emplace_back([&] {
      while (!done.load()) latte_session_truncate(nullptr, 0);
    });
  // 200 switches at least, and until both sinks have been called.
  for (int round = 0; round < 200 || a.calls.load() < 100 || b.calls.load() < 100; ++round) {
    ASSERT_LT(round, 1000000) << "the loggers never logged";
    Sink& next = round % 2 ? a : b;
    Sink& prev = round % 2 ? b : a;
    next.retired.store(false);
    ASSERT_EQ(latte_log_set(Sink::callback, &next), LATTE_OK);
    prev.retired.store(true);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  ASSERT_EQ(latte_log_set(nullptr, nullptr), LATTE_OK);
  a.retired.store(true);
  b.retired.store(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  done.store(true);
  for (auto& t : loggers) t.join();
  EXPECT_GT(a.calls.load() + b.calls.load(), 0);
  EXPECT_EQ(a.late.load() + b.late.load(), 0);
}

// ---------------------------------------------------------------- version

TEST(CApiVersion, MacrosMatchTheLibraryAndNameTheKernels) {
  const std::string want = std::to_string(LATTE_VERSION_MAJOR) + "." + std::to_string(LATTE_VERSION_MINOR) + "." +
                           std::to_string(LATTE_VERSION_PATCH) + " (" + latte::isa_name(latte::active_isa()) + ")";
  EXPECT_EQ(std::string(latte_version()), want);
  EXPECT_EQ(latte::api::version(), want);
}

// ---------------------------------------------------------------- metadata

// The bytes of a GGUF value as GgufWriter writes them after its type.
latte::GgufWriter::Value copy_value(const latte::GgufValue& v) {
  latte::GgufWriter::Value out;
  out.type = v.type;
  auto put = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    out.payload.insert(out.payload.end(), b, b + n);
  };
  if (v.type == latte::GgufValueType::string) {
    put(&v.count, 8);
  } else if (v.type == latte::GgufValueType::array) {
    const auto elem = static_cast<std::uint32_t>(v.elem_type);
    put(&elem, 4);
    put(&v.count, 8);
  }
  put(v.data, v.bytes);
  return out;
}

// `from` with its metadata (general.name replaced) and tensors, and `extra`
// keys at the end, written to `to`.
void write_with_keys(const std::string& from, const std::string& to,
                     std::vector<std::pair<std::string, latte::GgufWriter::Value>> extra) {
  const latte::GgufFile f = latte::GgufFile::open(from);
  latte::GgufWriter w;
  for (const latte::GgufKv& kv : f.kvs())
    if (kv.key != "general.alignment" && kv.key != "general.name") w.add(std::string(kv.key), copy_value(kv.value));
  for (auto& [k, v] : extra) w.add(k, std::move(v));
  for (const latte::GgufTensor& t : f.tensors())
    w.add_tensor(std::string(t.name), t.type, t.dims(), std::vector<std::uint8_t>(t.data, t.data + t.n_bytes));
  w.write_file(to);
}

std::string meta(const latte_model* m, const char* key) {
  size_t n = 0;
  EXPECT_EQ(latte_model_meta_value(m, key, nullptr, 0, &n), LATTE_OK) << latte_last_error();
  std::string s(n + 1, '\0');
  EXPECT_EQ(latte_model_meta_value(m, key, s.data(), s.size(), &n), LATTE_OK) << latte_last_error();
  s.resize(n);
  return s;
}

// Every value type as text, arrays nested and with strings to escape; the
// model's shape; keys by index; the buffer rules and refusals.
TEST(CApiMeta, AnyKeyAsTextAndTheModelsShape) {
  using V = latte::GgufWriter::Value;
  const std::string path = ::testing::TempDir() + "/meta_" + latte::test::process_tag() + ".gguf";
  const std::string strings[] = {"a\"b", "c\\d", "new\nline", "\x01", "é"};
  const float floats[] = {0.5f, std::numeric_limits<float>::infinity(), -0.0f};
  const V inner[] = {V::array_i32(std::vector<std::int32_t>{1, 2}), V::array_i32(std::vector<std::int32_t>{3})};
  write_with_keys(kDense, path,
                  {{"general.name", V::string("Tiny \"Dense\"")},
                   {"test.f32", V::f32(0.1f)},
                   {"test.f64", V::f64(1e-6)},
                   {"test.i8", V::i8(-5)},
                   {"test.u64", V::u64(std::numeric_limits<std::uint64_t>::max())},
                   {"test.i64", V::i64(std::numeric_limits<std::int64_t>::min())},
                   {"test.bool", V::boolean(false)},
                   {"test.strings", V::array_string(strings)},
                   {"test.floats", V::array_f32(floats)},
                   {"test.nested", V::array(latte::GgufValueType::array, inner)},
                   {"test.empty", V::array_u8(std::vector<std::uint8_t>{})}});
  ModelPtr m = load(path);
  ASSERT_TRUE(m);
  EXPECT_EQ(meta(m.get(), "general.architecture"), "deepseek2");
  EXPECT_EQ(meta(m.get(), "general.name"), "Tiny \"Dense\"");  // a plain string: as it is
  EXPECT_STREQ(latte_model_name(m.get()), "Tiny \"Dense\"");
  EXPECT_EQ(meta(m.get(), "test.f32"), "0.1");
  EXPECT_EQ(meta(m.get(), "test.f64"), "1e-06");
  EXPECT_EQ(meta(m.get(), "test.i8"), "-5");
  EXPECT_EQ(meta(m.get(), "test.u64"), "18446744073709551615");
  EXPECT_EQ(meta(m.get(), "test.i64"), "-9223372036854775808");
  EXPECT_EQ(meta(m.get(), "test.bool"), "false");
  EXPECT_EQ(meta(m.get(), "test.strings"), "[\"a\\\"b\", \"c\\\\d\", \"new\\nline\", \"\\u0001\", \"é\"]");
  EXPECT_EQ(meta(m.get(), "test.floats"), "[0.5, inf, -0]");
  EXPECT_EQ(meta(m.get(), "test.nested"), "[[1, 2], [3]]");
  EXPECT_EQ(meta(m.get(), "test.empty"), "[]");

  // The model's shape, against the runtime's view of the same file.
  const auto ref = latte::Model::load(path);
  EXPECT_EQ(latte_model_n_layers(m.get()), ref->params().n_layers);
  EXPECT_EQ(latte_model_n_embd(m.get()), ref->params().mla.d_model);
  EXPECT_EQ(latte_model_n_embd(m.get()), 256);
  std::uint64_t params = 0;
  for (const latte::GgufTensor& t : ref->file().tensors()) params += t.n_elements;
  EXPECT_EQ(latte_model_n_params(m.get()), static_cast<int64_t>(params));
  EXPECT_GT(params, 100000u);
  EXPECT_EQ(latte_model_file_size(m.get()), static_cast<int64_t>(std::filesystem::file_size(path)));
  EXPECT_EQ(meta(m.get(), "deepseek2.block_count"), std::to_string(ref->params().n_layers));

  // Keys by index, in the file's order; every value renders.
  const int64_t count = latte_model_meta_count(m.get());
  ASSERT_EQ(count, static_cast<int64_t>(ref->file().kv_count()));
  for (int64_t i = 0; i < count; ++i) {
    size_t n = 0;
    char key[256];
    ASSERT_EQ(latte_model_meta_key(m.get(), i, key, sizeof key, &n), LATTE_OK) << latte_last_error();
    EXPECT_EQ(std::string(key, n), ref->file().kv(static_cast<std::size_t>(i)).key);
    EXPECT_EQ(latte_model_meta_value(m.get(), key, nullptr, 0, &n), LATTE_OK) << key << ": " << latte_last_error();
  }
  const std::string tokens = meta(m.get(), "tokenizer.ggml.tokens");
  EXPECT_EQ(tokens.front(), '[');
  EXPECT_EQ(tokens.back(), ']');

  // Buffer rules and refusals.
  char small[4];
  size_t n = 0;
  EXPECT_EQ(latte_model_meta_value(m.get(), "general.architecture", small, sizeof small, &n),
            LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(n, 9u);
  EXPECT_TRUE(contains(latte_last_error(), "the buffer holds 4 bytes; the text needs 10")) << latte_last_error();
  EXPECT_EQ(latte_model_meta_value(m.get(), "no.such.key", nullptr, 0, &n), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(latte_last_error(), "no key 'no.such.key'")) << latte_last_error();
  EXPECT_EQ(latte_model_meta_key(m.get(), count, nullptr, 0, &n), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(latte_last_error(), "outside [0, " + std::to_string(count) + ")")) << latte_last_error();
  EXPECT_EQ(latte_model_meta_key(m.get(), -1, nullptr, 0, &n), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(latte_model_meta_value(nullptr, "general.name", nullptr, 0, &n), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(latte_model_meta_count(nullptr), 0);
  EXPECT_EQ(latte_model_n_params(nullptr), 0);
  EXPECT_STREQ(latte_model_name(nullptr), "");
  std::filesystem::remove(path);
}

// Without general.name, a model is named by its file.
TEST(CApiMeta, NameFallsBackToTheFileName) {
  const std::string path = ::testing::TempDir() + "/unnamed_" + latte::test::process_tag() + ".gguf";
  write_with_keys(kDense, path, {});
  ModelPtr m = load(path);
  ASSERT_TRUE(m);
  size_t n = 0;
  EXPECT_EQ(latte_model_meta_value(m.get(), "general.name", nullptr, 0, &n), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(latte_model_name(m.get())), std::filesystem::path(path).filename().string());
  std::filesystem::remove(path);
}

// latte_model_describe and latte_model_tensor against the runtime's own view
// of the same files (a dense one, an MoE one with YaRN), and the size rules.
TEST(CApiDescribe, MatchesTheRuntimesViewOfTheFile) {
  for (const std::string& path : {kDense, kMoe}) {
    SCOPED_TRACE(path);
    ModelPtr m = load(path);
    ASSERT_TRUE(m);
    const auto ref = latte::Model::load(path);
    const latte::ModelParams& p = ref->params();
    latte_model_desc d{};
    d.size = sizeof d;
    ASSERT_EQ(latte_model_describe(m.get(), &d), LATTE_OK) << latte_last_error();
    EXPECT_EQ(d.n_heads, p.mla.n_heads);
    EXPECT_EQ(d.q_lora_rank, p.mla.q_lora_rank);
    EXPECT_EQ(d.kv_lora_rank, p.mla.kv_lora_rank);
    EXPECT_EQ(d.d_nope, p.mla.d_nope);
    EXPECT_EQ(d.d_rope, p.mla.d_rope);
    EXPECT_EQ(d.d_v, p.mla.d_v);
    EXPECT_EQ(d.kq_scale, static_cast<float>(p.mla.kq_scale()));
    EXPECT_EQ(d.rope_yarn, p.mla.rope.yarn ? 1 : 0);
    EXPECT_EQ(d.rope_freq_base, p.mla.rope.freq_base);
    EXPECT_EQ(d.n_experts, p.n_experts);
    EXPECT_EQ(d.n_experts_used, p.n_experts_used);
    EXPECT_EQ(d.ff_dense, p.ff_dense);
    EXPECT_STREQ(d.ffn, "swiglu");
    EXPECT_STREQ(d.gating, p.n_experts == 0 ? "" : "softmax");
    EXPECT_EQ(d.gguf_version, ref->file().version());
    EXPECT_EQ(d.n_tensors, static_cast<int64_t>(ref->file().tensor_count()));
    EXPECT_EQ(d.mapped_weight_bytes + d.packed_weight_bytes > 0, true);
    EXPECT_STREQ(d.tokenizer, "bpe");
    EXPECT_STREQ(d.pre_tokenizer, ref->tokenizer()->pre().c_str());
    ASSERT_EQ(latte_model_tensor_count(m.get()), d.n_tensors);
    std::int64_t bytes = 0;
    for (int64_t i = 0; i < d.n_tensors; ++i) {
      latte_tensor_info t{};
      ASSERT_EQ(latte_model_tensor(m.get(), i, &t), LATTE_OK) << latte_last_error();
      const latte::GgufTensor& r = ref->file().tensors()[static_cast<std::size_t>(i)];
      EXPECT_EQ(std::string(t.name), std::string(r.name));
      EXPECT_EQ(std::strlen(t.name), r.name.size());  // NUL-terminated at the name's end
      EXPECT_STREQ(t.type, latte::ggml_type_name(r.type));
      EXPECT_EQ(t.n_dims, static_cast<int32_t>(r.n_dims));
      for (int k = 0; k < 4; ++k) EXPECT_EQ(t.dims[k], static_cast<int64_t>(r.ne[static_cast<std::size_t>(k)]));
      EXPECT_EQ(t.n_bytes, static_cast<int64_t>(r.n_bytes));
      bytes += t.n_bytes;
    }
    EXPECT_GT(bytes, 1000000);
    latte_tensor_info t{};
    EXPECT_EQ(latte_model_tensor(m.get(), d.n_tensors, &t), LATTE_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(latte_last_error(), "out of range")) << latte_last_error();
    EXPECT_EQ(latte_model_tensor(m.get(), -1, &t), LATTE_ERR_INVALID_ARGUMENT);
    // The wrapper gives the same.
    const latte::api::Model wm(path);
    EXPECT_EQ(wm.describe().kv_lora_rank, d.kv_lora_rank);
    EXPECT_EQ(wm.tensors().size(), static_cast<std::size_t>(d.n_tensors));
  }
  ModelPtr m = load(kMoe);
  // An older caller's struct gets the fields its size covers, nothing past them.
  unsigned char buf[sizeof(latte_model_desc)];
  std::memset(buf, 0xAB, sizeof buf);
  latte_model_desc* d = reinterpret_cast<latte_model_desc*>(buf);
  d->size = offsetof(latte_model_desc, kv_lora_rank);
  ASSERT_EQ(latte_model_describe(m.get(), d), LATTE_OK) << latte_last_error();
  EXPECT_GT(d->n_heads, 0);
  EXPECT_EQ(buf[offsetof(latte_model_desc, kv_lora_rank)], 0xAB);
  latte_model_desc z{};
  EXPECT_EQ(latte_model_describe(m.get(), &z), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(latte_last_error(), "desc->size is 0")) << latte_last_error();
  z.size = sizeof z + 8;
  EXPECT_EQ(latte_model_describe(m.get(), &z), LATTE_ERR_UNSUPPORTED);
  EXPECT_EQ(latte_model_describe(nullptr, &z), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(latte_model_tensor_count(nullptr), 0);
}

// latte_cache_bytes equals a model's latte_model_cache_bytes for its shape;
// a shape int8 cannot hold is refused saying why, by both.
TEST(CApiDescribe, CacheBytesForAShape) {
  ModelPtr m = load(kMoe);
  latte_model_desc d{};
  d.size = sizeof d;
  ASSERT_EQ(latte_model_describe(m.get(), &d), LATTE_OK);
  for (int32_t type : {LATTE_CACHE_F32, LATTE_CACHE_F16, LATTE_CACHE_INT8, LATTE_CACHE_INT4})
    for (int64_t n : {0, 1, 127, 128, 129, 511, 512, 513, 5000}) {
      int64_t a = -1, b = -2;
      ASSERT_EQ(latte_model_cache_bytes(m.get(), type, n, &a), LATTE_OK) << latte_last_error();
      ASSERT_EQ(latte_cache_bytes(latte_model_n_layers(m.get()), d.kv_lora_rank, d.d_rope, type, n, &b), LATTE_OK);
      EXPECT_EQ(a, b);
    }
  int64_t f16_1k = 0, f16_2k = 0;
  ASSERT_EQ(latte_cache_bytes(27, 512, 64, LATTE_CACHE_F16, 1024, &f16_1k), LATTE_OK);
  ASSERT_EQ(latte_cache_bytes(27, 512, 64, LATTE_CACHE_F16, 2048, &f16_2k), LATTE_OK);
  EXPECT_EQ(f16_2k - f16_1k, 27 * 1024 * (512 + 64) * 2 + 27 * 8 * 8);  // 576 f16 per token per layer, 8 tile pointers
  int64_t i4_1k = 0, i4_2k = 0;
  ASSERT_EQ(latte_cache_bytes(27, 512, 64, LATTE_CACHE_INT4, 1024, &i4_1k), LATTE_OK);
  ASSERT_EQ(latte_cache_bytes(27, 512, 64, LATTE_CACHE_INT4, 2048, &i4_2k), LATTE_OK);
  // Per token: 4-bit c_KV, int8 k_pe, an f32 rope scale; per 512-token tile
  // (int4's default): an f16 scale per latent channel; 2 tile pointers.
  EXPECT_EQ(i4_2k - i4_1k, 27 * 1024 * (256 + 64 + 4) + 27 * (1024 / 512) * (2 * 512) + 27 * 2 * 8);
  int64_t bytes = 0;
  EXPECT_EQ(latte_cache_bytes(2, 30, 6, LATTE_CACHE_INT8, 10, &bytes), LATTE_ERR_UNSUPPORTED);
  EXPECT_TRUE(contains(latte_last_error(), "multiples of 4")) << latte_last_error();
  EXPECT_EQ(latte_cache_bytes(2, 30, 6, LATTE_CACHE_F16, 10, &bytes), LATTE_OK);
  EXPECT_EQ(latte_cache_bytes(0, 512, 64, LATTE_CACHE_F16, 10, &bytes), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(latte_cache_bytes(2, 30, 6, LATTE_CACHE_INT4, 10, &bytes), LATTE_ERR_UNSUPPORTED);
  EXPECT_TRUE(contains(latte_last_error(), "int4") && contains(latte_last_error(), "multiples of 4")) << latte_last_error();
  EXPECT_EQ(latte_cache_bytes(2, 512, 64, 7, 10, &bytes), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(latte_cache_bytes(2, 512, 64, LATTE_CACHE_INT4 + 1, 10, &bytes), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(latte_cache_bytes(2, 512, 64, LATTE_CACHE_F16, -1, &bytes), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(latte_cache_bytes(2, 512, 64, LATTE_CACHE_F16, 1, nullptr), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(latte::api::cache_bytes(2, 512, 64, LATTE_CACHE_F32, 128), [] {
    int64_t b = 0;
    latte_cache_bytes(2, 512, 64, LATTE_CACHE_F32, 128, &b);
    return b;
  }());
}

// ---------------------------------------------------------------- state in memory, forks

// A session's state in memory is byte for byte its file, and loads back
// into a session that then continues exactly as the saved one; the buffer
// rules and the file's refusals hold.
TEST(CApiState, MemoryHoldsTheFilesBytesAndLoadsBack) {
  ModelPtr m = load(kMoe);
  const std::vector<int32_t> ids = testdata_tokens();
  for (int32_t cache : kCaches) {
    SCOPED_TRACE("cache type " + std::to_string(cache));
    const latte_session_options o = session_options(cache, 400, 64);
    SessionPtr a = session(m.get(), o), b = session(m.get(), o);
    ASSERT_EQ(latte_session_prefill(a.get(), ids.data(), 135), LATTE_OK);
    const std::string path = ::testing::TempDir() + "/state_" + latte::test::process_tag() + ".lsess";
    ASSERT_EQ(latte_session_save(a.get(), path.c_str()), LATTE_OK) << latte_last_error();
    const std::vector<uint8_t> bytes = state_of(a.get());
    EXPECT_EQ(bytes, file_bytes(path));
    EXPECT_EQ(latte_session_state_size(a.get()), bytes.size());
    std::filesystem::remove(path);

    ASSERT_EQ(latte_session_prefill(b.get(), ids.data(), 7), LATTE_OK);
    ASSERT_EQ(latte_session_state_load_from(b.get(), bytes.data(), bytes.size()), LATTE_OK) << latte_last_error();
    EXPECT_EQ(tokens_of(b.get()), tokens_of(a.get()));
    EXPECT_EQ(logits_of(b.get(), m.get()), logits_of(a.get(), m.get()));
    for (int t = 135; t < 145; ++t) {
      ASSERT_EQ(latte_session_decode(a.get(), ids[t]), LATTE_OK);
      ASSERT_EQ(latte_session_decode(b.get(), ids[t]), LATTE_OK);
      ASSERT_EQ(logits_of(b.get(), m.get()), logits_of(a.get(), m.get())) << "position " << t;
    }

    size_t n = 0;
    std::vector<uint8_t> small(bytes.size() - 1);
    EXPECT_EQ(latte_session_state_save_to(a.get(), small.data(), small.size(), &n), LATTE_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(n, latte_session_state_size(a.get()));
    EXPECT_TRUE(contains(latte_last_error(), "the buffer holds " + std::to_string(small.size()))) << latte_last_error();
    std::vector<uint8_t> damaged = bytes;
    damaged[damaged.size() / 2] ^= 0x10;
    EXPECT_EQ(latte_session_state_load_from(b.get(), damaged.data(), damaged.size()), LATTE_ERR_BAD_FILE);
    EXPECT_TRUE(contains(latte_last_error(), "session state in memory is corrupt")) << latte_last_error();
    EXPECT_EQ(latte_session_n_past(b.get()), 145);
    EXPECT_EQ(latte_session_state_load_from(b.get(), nullptr, 0), LATTE_ERR_BAD_FILE);
    EXPECT_TRUE(contains(latte_last_error(), "is not a Latte session")) << latte_last_error();
    EXPECT_EQ(latte_session_state_load_from(b.get(), nullptr, 5), LATTE_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(latte_session_n_past(b.get()), 145);
  }
  // Another model's state is refused as another model's.
  ModelPtr dense = load(kDense);
  SessionPtr d = session(dense.get(), session_options(LATTE_CACHE_INT8, 64, 64));
  ASSERT_EQ(latte_session_prefill(d.get(), ids.data(), 5), LATTE_OK);
  const std::vector<uint8_t> other = state_of(d.get());
  SessionPtr s = session(m.get(), session_options(LATTE_CACHE_INT8, 64, 64));
  EXPECT_EQ(latte_session_state_load_from(s.get(), other.data(), other.size()), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(latte_last_error(), "another model")) << latte_last_error();
  EXPECT_EQ(latte_session_state_size(nullptr), 0u);
}

// A fork continues exactly as the original would, for every cache type
// (after a truncation, so stale rows lie past its tokens), and each goes on
// alone afterwards.
TEST(CApiCopy, AForkContinuesExactlyAsTheOriginal) {
  ModelPtr m = load(kMoe);
  const std::vector<int32_t> ids = testdata_tokens();
  for (int32_t cache : kCaches) {
    SCOPED_TRACE("cache type " + std::to_string(cache));
    SessionPtr a = session(m.get(), session_options(cache, 400, 64));
    ASSERT_EQ(latte_session_prefill(a.get(), ids.data(), 140), LATTE_OK);
    ASSERT_EQ(latte_session_truncate(a.get(), 133), LATTE_OK);
    ASSERT_EQ(latte_session_decode(a.get(), ids[133]), LATTE_OK);
    latte_session* raw = nullptr;
    ASSERT_EQ(latte_session_copy(a.get(), &raw), LATTE_OK) << latte_last_error();
    SessionPtr b(raw);
    EXPECT_EQ(latte_session_n_past(b.get()), 134);
    EXPECT_EQ(latte_session_n_ctx(b.get()), 400);
    EXPECT_EQ(latte_session_threads(b.get()), 2);
    EXPECT_EQ(tokens_of(b.get()), tokens_of(a.get()));
    EXPECT_EQ(logits_of(b.get(), m.get()), logits_of(a.get(), m.get()));
    EXPECT_EQ(state_of(b.get()), state_of(a.get()));
    for (int t = 134; t < 150; ++t) {
      ASSERT_EQ(latte_session_decode(a.get(), ids[t]), LATTE_OK);
      ASSERT_EQ(latte_session_decode(b.get(), ids[t]), LATTE_OK);
      ASSERT_EQ(logits_of(b.get(), m.get()), logits_of(a.get(), m.get())) << "position " << t;
    }
    // Apart: the fork's new tokens leave the original as it was.
    const std::vector<uint8_t> original = state_of(a.get());
    ASSERT_EQ(latte_session_prefill(b.get(), ids.data(), 30), LATTE_OK);
    EXPECT_EQ(state_of(a.get()), original);
    EXPECT_EQ(latte_session_n_past(b.get()), 180);
  }
}

// A fork keeps the options and the automatic context shift, not the abort
// callback; a fork of an empty session is empty.
TEST(CApiCopy, KeepsTheOptionsNotTheAbortCallback) {
  ModelPtr m = load(kDense);
  SessionPtr a = session(m.get(), session_options(LATTE_CACHE_F16, 32, 8, 3));
  latte_session* raw = nullptr;
  ASSERT_EQ(latte_session_copy(a.get(), &raw), LATTE_OK);
  SessionPtr empty(raw);
  EXPECT_EQ(latte_session_n_past(empty.get()), 0);
  EXPECT_EQ(latte_session_logits(empty.get()), nullptr);
  const std::vector<int32_t> ids = testdata_tokens();
  ASSERT_EQ(latte_session_prefill(a.get(), ids.data(), 30), LATTE_OK);
  ASSERT_EQ(latte_session_set_context_shift(a.get(), 1, 4), LATTE_OK);
  AbortAfter always;
  always.stop_at = 1;
  ASSERT_EQ(latte_session_set_abort_callback(a.get(), AbortAfter::callback, &always), LATTE_OK);
  ASSERT_EQ(latte_session_copy(a.get(), &raw), LATTE_OK);
  SessionPtr b(raw);
  EXPECT_EQ(latte_session_threads(b.get()), 3);
  EXPECT_EQ(latte_session_prefill(b.get(), ids.data() + 30, 8), LATTE_OK) << latte_last_error();  // shifts: 30 + 8 > 32
  EXPECT_EQ(latte_session_n_past(b.get()), 4 + 13 + 8);
  EXPECT_EQ(always.calls, 0);
  EXPECT_EQ(latte_session_prefill(a.get(), ids.data() + 30, 8), LATTE_ERR_ABORTED);
  EXPECT_EQ(latte_session_copy(nullptr, &raw), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(latte_session_copy(a.get(), nullptr), LATTE_ERR_INVALID_ARGUMENT);
}

// ---------------------------------------------------------------- threads

// The same session on 1, 2, 3 and every CPU's threads, set after creation
// (in the middle of a conversation too): bit-identical logits.
TEST(CApiThreads, SetThreadsKeepsTheLogitsBitIdentical) {
  ModelPtr m = load(kMoe);
  const std::vector<int32_t> ids = testdata_tokens();
  SessionPtr ref = session(m.get(), session_options(LATTE_CACHE_INT8, 128, 16, 1));
  ASSERT_EQ(latte_session_prefill(ref.get(), ids.data(), 50), LATTE_OK);
  ASSERT_EQ(latte_session_decode(ref.get(), ids[50]), LATTE_OK);
  const std::vector<float> want = logits_of(ref.get(), m.get());

  SessionPtr s = session(m.get(), session_options(LATTE_CACHE_INT8, 128, 16, 1));
  for (int32_t threads : {2, 3, 0, 1}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    ASSERT_EQ(latte_session_set_threads(s.get(), threads), LATTE_OK) << latte_last_error();
    if (threads > 0) EXPECT_EQ(latte_session_threads(s.get()), threads);
    else EXPECT_GE(latte_session_threads(s.get()), 1);
    ASSERT_EQ(latte_session_reset(s.get()), LATTE_OK);
    ASSERT_EQ(latte_session_prefill(s.get(), ids.data(), 50), LATTE_OK);
    ASSERT_EQ(latte_session_decode(s.get(), ids[50]), LATTE_OK);
    EXPECT_EQ(logits_of(s.get(), m.get()), want);
  }
  // In the middle of a conversation (in the same calls as a one-thread
  // session: other chunks would be other arithmetic).
  ASSERT_EQ(latte_session_reset(ref.get()), LATTE_OK);
  ASSERT_EQ(latte_session_reset(s.get()), LATTE_OK);
  ASSERT_EQ(latte_session_set_threads(s.get(), 1), LATTE_OK);
  for (latte_session* x : {ref.get(), s.get()}) {
    ASSERT_EQ(latte_session_prefill(x, ids.data(), 25), LATTE_OK);
    if (x == s.get()) {
      ASSERT_EQ(latte_session_set_threads(s.get(), 3), LATTE_OK);
    }
    ASSERT_EQ(latte_session_prefill(x, ids.data() + 25, 25), LATTE_OK);
    ASSERT_EQ(latte_session_decode(x, ids[50]), LATTE_OK);
  }
  EXPECT_EQ(logits_of(s.get(), m.get()), logits_of(ref.get(), m.get()));
  // Refused, nothing changed.
  EXPECT_EQ(latte_session_set_threads(s.get(), -1), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(latte_last_error(), "threads -1 is outside [0, 1024]")) << latte_last_error();
  EXPECT_EQ(latte_session_set_threads(s.get(), 1025), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(latte_session_threads(s.get()), 3);
  EXPECT_EQ(latte_session_n_past(s.get()), 51);
  EXPECT_EQ(latte_session_set_threads(nullptr, 1), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(latte_session_threads(nullptr), 0);
}

// ---------------------------------------------------------------- sampler

SamplerPtr sampler(const latte_sampler_options& o) {
  latte_sampler* s = nullptr;
  EXPECT_EQ(latte_sampler_create(&o, &s), LATTE_OK) << latte_last_error();
  return SamplerPtr(s);
}

std::vector<float> random_logits(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 2.f);
  std::vector<float> l(static_cast<std::size_t>(n));
  for (float& x : l) x = d(rng);
  return l;
}

// A banned token is never drawn, greedy or sampled; a large bias makes a
// token the choice; biases are checked, replaced, cleared and kept by reset.
TEST(CApiSampler, LogitBiasBansAndForcesTokens) {
  const std::vector<float> logits = random_logits(64, 5);
  std::vector<int32_t> order(64);
  for (int i = 0; i < 64; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });

  latte_sampler_options wide = latte_sampler_default_options();
  wide.temperature = 1.5f;
  wide.top_k = 0;
  wide.top_p = 1.f;
  wide.min_p = 0.f;
  SamplerPtr s = sampler(wide);
  const float ninf = -std::numeric_limits<float>::infinity();
  const latte_logit_bias ban[] = {{order[0], ninf}, {order[1], ninf}, {order[2], ninf}};
  ASSERT_EQ(latte_sampler_set_logit_bias(s.get(), ban, 3), LATTE_OK);
  std::vector<int> seen(64, 0);
  for (int i = 0; i < 3000; ++i) {
    int32_t t = -1;
    ASSERT_EQ(latte_sampler_sample(s.get(), logits.data(), logits.size(), &t), LATTE_OK);
    ++seen[t];
  }
  EXPECT_EQ(seen[order[0]] + seen[order[1]] + seen[order[2]], 0);
  EXPECT_GT(seen[order[3]], 0);

  latte_sampler_options greedy = latte_sampler_default_options();
  greedy.temperature = 0.f;
  SamplerPtr g = sampler(greedy);
  ASSERT_EQ(latte_sampler_set_logit_bias(g.get(), ban, 1), LATTE_OK);
  int32_t t = -1;
  ASSERT_EQ(latte_sampler_sample(g.get(), logits.data(), logits.size(), &t), LATTE_OK);
  EXPECT_EQ(t, order[1]);

  // A large positive bias forces the least likely token, greedy and drawn.
  const int32_t last = order[63];
  const latte_logit_bias force[] = {{last, 1000.f}};
  SamplerPtr d = sampler(latte_sampler_default_options());
  ASSERT_EQ(latte_sampler_set_logit_bias(d.get(), force, 1), LATTE_OK);
  ASSERT_EQ(latte_sampler_set_logit_bias(g.get(), force, 1), LATTE_OK);  // replaces the ban
  for (int i = 0; i < 200; ++i) {
    ASSERT_EQ(latte_sampler_sample(d.get(), logits.data(), logits.size(), &t), LATTE_OK);
    ASSERT_EQ(t, last);
  }
  ASSERT_EQ(latte_sampler_sample(g.get(), logits.data(), logits.size(), &t), LATTE_OK);
  EXPECT_EQ(t, last);
  ASSERT_EQ(latte_sampler_reset(g.get(), 1), LATTE_OK);  // keeps the biases
  ASSERT_EQ(latte_sampler_sample(g.get(), logits.data(), logits.size(), &t), LATTE_OK);
  EXPECT_EQ(t, last);
  ASSERT_EQ(latte_sampler_set_logit_bias(g.get(), nullptr, 0), LATTE_OK);  // none
  ASSERT_EQ(latte_sampler_sample(g.get(), logits.data(), logits.size(), &t), LATTE_OK);
  EXPECT_EQ(t, order[0]);

  // Biases on one token add up.
  const latte_logit_bias twice[] = {{last, 600.f}, {last, 600.f}, {order[0], 1000.f}};
  ASSERT_EQ(latte_sampler_set_logit_bias(g.get(), twice, 3), LATTE_OK);
  ASSERT_EQ(latte_sampler_sample(g.get(), logits.data(), logits.size(), &t), LATTE_OK);
  EXPECT_EQ(t, last);

  // Refusals: nothing changes.
  const latte_logit_bias nan_bias[] = {{1, std::nanf("")}};
  EXPECT_EQ(latte_sampler_set_logit_bias(g.get(), nan_bias, 1), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(latte_last_error(), "logit bias 0 (token 1) is NaN")) << latte_last_error();
  const latte_logit_bias pinf[] = {{1, std::numeric_limits<float>::infinity()}};
  EXPECT_EQ(latte_sampler_set_logit_bias(g.get(), pinf, 1), LATTE_ERR_INVALID_ARGUMENT);
  const latte_logit_bias negative[] = {{-3, 1.f}};
  EXPECT_EQ(latte_sampler_set_logit_bias(g.get(), negative, 1), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(latte_last_error(), "token -3")) << latte_last_error();
  ASSERT_EQ(latte_sampler_sample(g.get(), logits.data(), logits.size(), &t), LATTE_OK);
  EXPECT_EQ(t, last) << "a refused set changed the biases";
  const latte_logit_bias outside[] = {{64, 1.f}};
  ASSERT_EQ(latte_sampler_set_logit_bias(g.get(), outside, 1), LATTE_OK);
  EXPECT_EQ(latte_sampler_sample(g.get(), logits.data(), logits.size(), &t), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(latte_last_error(), "token 64, outside the 64 logits")) << latte_last_error();
  std::vector<latte_logit_bias> all(64);
  for (int i = 0; i < 64; ++i) all[i] = {i, ninf};
  ASSERT_EQ(latte_sampler_set_logit_bias(g.get(), all.data(), all.size()), LATTE_OK);
  EXPECT_EQ(latte_sampler_sample(g.get(), logits.data(), logits.size(), &t), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(latte_last_error(), "every logit is -inf")) << latte_last_error();
  EXPECT_EQ(latte_sampler_set_logit_bias(nullptr, ban, 1), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(latte_sampler_set_logit_bias(g.get(), nullptr, 1), LATTE_ERR_INVALID_ARGUMENT);
}

// ---------------------------------------------------------------- options structs

// Size 0, a size larger than the library's struct, and one that ends inside
// a field are refused by name, for each options struct.
TEST(CApiOptions, SizesThatAreNoStructsAreRefused) {
  ModelPtr m = load(kDense);
  latte_model* none = nullptr;
  latte_session* no_session = nullptr;
  latte_sampler* no_sampler = nullptr;

  latte_model_options mo = latte_model_default_options();
  EXPECT_EQ(mo.size, sizeof mo);
  mo.size = 0;
  EXPECT_EQ(latte_model_load_with_options(kDense.c_str(), &mo, &none), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(latte_last_error(), "latte_model_options.size is 0: start from latte_model_default_options()"))
      << latte_last_error();
  latte_session_options so = latte_session_default_options();
  EXPECT_EQ(so.size, sizeof so);
  so.size = 0;
  EXPECT_EQ(latte_session_create(m.get(), &so, &no_session), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(latte_last_error(), "latte_session_options.size is 0")) << latte_last_error();
  latte_sampler_options sp = latte_sampler_default_options();
  EXPECT_EQ(sp.size, sizeof sp);
  sp.size = 0;
  EXPECT_EQ(latte_sampler_create(&sp, &no_sampler), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(latte_last_error(), "latte_sampler_options.size is 0")) << latte_last_error();

  // From a newer header: larger than this library's.
  struct Newer {
    latte_session_options o;
    int64_t added;
  } newer{latte_session_default_options(), 5};
  newer.o.size = sizeof newer;
  EXPECT_EQ(latte_session_create(m.get(), &newer.o, &no_session), LATTE_ERR_UNSUPPORTED);
  EXPECT_TRUE(contains(latte_last_error(), "larger than this library's " + std::to_string(sizeof(latte_session_options))))
      << latte_last_error();
  EXPECT_TRUE(contains(latte_last_error(), "newer latte.h")) << latte_last_error();

  // Ending inside a field.
  so = latte_session_default_options();
  so.size = offsetof(latte_session_options, n_ctx) + 4;
  EXPECT_EQ(latte_session_create(m.get(), &so, &no_session), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(latte_last_error(), "ends inside the field n_ctx")) << latte_last_error();
  sp = latte_sampler_default_options();
  sp.size = 4;
  EXPECT_EQ(latte_sampler_create(&sp, &no_sampler), LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(no_session, nullptr);
  EXPECT_EQ(no_sampler, nullptr);
}

// A struct from an older header (a size covering only its first fields) is
// read only as far as its size: the fields past it take the defaults, and
// the bytes past it are never read (here garbage that would crash a call).
TEST(CApiOptions, AnOlderStructTakesTheDefaultsForWhatItLacks) {
  ModelPtr m = load(kDense);
  // Model options up to use_mmap: the progress pointer past it is garbage.
  std::vector<unsigned char> mbuf(sizeof(latte_model_options), 0xff);
  latte_model_options mo = latte_model_default_options();
  mo.size = offsetof(latte_model_options, progress);
  mo.use_mmap = 1;
  std::memcpy(mbuf.data(), &mo, mo.size);
  latte_model* mapped = nullptr;
  ASSERT_EQ(latte_model_load_with_options(kDense.c_str(), reinterpret_cast<latte_model_options*>(mbuf.data()), &mapped),
            LATTE_OK)
      << latte_last_error();
  EXPECT_EQ(latte_model_is_mapped(mapped), 1);
  latte_model_free(mapped);

  // Session options up to n_ctx: cache type and chunk take the defaults.
  std::vector<unsigned char> sbuf(sizeof(latte_session_options), 0xff);
  latte_session_options so = latte_session_default_options();
  so.size = offsetof(latte_session_options, cache_type);
  so.threads = 3;
  so.n_ctx = 96;
  std::memcpy(sbuf.data(), &so, so.size);
  latte_session* s = nullptr;
  ASSERT_EQ(latte_session_create(m.get(), reinterpret_cast<latte_session_options*>(sbuf.data()), &s), LATTE_OK)
      << latte_last_error();
  SessionPtr older(s);
  EXPECT_EQ(latte_session_n_ctx(s), 96);
  EXPECT_EQ(latte_session_threads(s), 3);
  SessionPtr int8 = session(m.get(), session_options(LATTE_CACHE_INT8, 96, 512, 3));
  const int32_t toks[] = {1, 2, 3};
  ASSERT_EQ(latte_session_prefill(s, toks, 3), LATTE_OK);
  ASSERT_EQ(latte_session_prefill(int8.get(), toks, 3), LATTE_OK);
  EXPECT_EQ(state_of(s), state_of(int8.get())) << "not the default int8 cache";

  // Sampler options up to min_p: the penalty and seed take the defaults.
  std::vector<unsigned char> pbuf(sizeof(latte_sampler_options), 0xff);
  latte_sampler_options sp = latte_sampler_default_options();
  sp.size = offsetof(latte_sampler_options, repeat_penalty);
  sp.temperature = 1.f;
  sp.top_k = 5;
  std::memcpy(pbuf.data(), &sp, sp.size);
  latte_sampler* raw = nullptr;
  ASSERT_EQ(latte_sampler_create(reinterpret_cast<latte_sampler_options*>(pbuf.data()), &raw), LATTE_OK)
      << latte_last_error();
  SamplerPtr a(raw);
  latte_sampler_options full = latte_sampler_default_options();
  full.temperature = 1.f;
  full.top_k = 5;
  SamplerPtr b = sampler(full);
  const std::vector<float> logits = random_logits(40, 9);
  for (int i = 0; i < 50; ++i) {
    int32_t ta = -1, tb = -2;
    ASSERT_EQ(latte_sampler_sample(a.get(), logits.data(), logits.size(), &ta), LATTE_OK);
    ASSERT_EQ(latte_sampler_sample(b.get(), logits.data(), logits.size(), &tb), LATTE_OK);
    ASSERT_EQ(ta, tb) << "draw " << i;
  }
}

// The init calls: defaults in the caller's size (zeros past what the library
// knows), refusals for sizes no struct has.
TEST(CApiOptions, InitFillsTheCallersSize) {
  std::vector<unsigned char> buf(sizeof(latte_session_options) + 16, 0xee);
  auto* o = reinterpret_cast<latte_session_options*>(buf.data());
  EXPECT_EQ(latte_session_options_init(o, buf.size()), LATTE_ERR_UNSUPPORTED);
  EXPECT_EQ(o->size, buf.size());
  EXPECT_EQ(o->n_ctx, 4096);
  EXPECT_EQ(o->cache_type, LATTE_CACHE_INT8);
  EXPECT_EQ(o->prefill_chunk, 512);
  for (std::size_t i = sizeof(latte_session_options); i < buf.size(); ++i) EXPECT_EQ(buf[i], 0) << "byte " << i;

  std::vector<unsigned char> tiny(4, 0xee);
  EXPECT_EQ(latte_model_options_init(reinterpret_cast<latte_model_options*>(tiny.data()), tiny.size()),
            LATTE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tiny, std::vector<unsigned char>(4, 0xee)) << "written though it holds no size";
  EXPECT_EQ(latte_sampler_options_init(nullptr, sizeof(latte_sampler_options)), LATTE_ERR_INVALID_ARGUMENT);
  latte_sampler_options sp;
  EXPECT_EQ(latte_sampler_options_init(&sp, sizeof sp), LATTE_OK);
  EXPECT_EQ(sp.size, sizeof sp);
  EXPECT_FLOAT_EQ(sp.temperature, 0.8f);
  EXPECT_EQ(sp.top_k, 40);
  latte_model_options mo;
  EXPECT_EQ(latte_model_options_init(&mo, sizeof mo), LATTE_OK);
  EXPECT_EQ(mo.use_mmap, -1);
  EXPECT_EQ(mo.progress, nullptr);
  EXPECT_EQ(mo.progress_user_data, nullptr);
}

// ---------------------------------------------------------------- latte.hpp

// The wrapper's control calls: the log, progress and its cancel (a false
// or a throw), metadata, abort, threads, state, forks and logit bias.
TEST(CppWrapperControl, EveryControlCall) {
  namespace api = latte::api;
  std::vector<std::string> warnings;
  std::mutex mu;
  api::set_log([&](latte_log_level level, const char* message) {
    const std::lock_guard<std::mutex> lock(mu);
    if (level == LATTE_LOG_WARN) warnings.emplace_back(message);
  });

  std::uint64_t last = 0, last_total = 0;
  const api::Model model(kMoe, latte_model_default_options(), [&](std::uint64_t done, std::uint64_t total) {
    last = done;
    last_total = total;
    return done <= total;
  });
  // The file's size; read into memory, twice it where the load re-lays out
  // weights (the second pass).
  const auto size = static_cast<std::uint64_t>(model.file_size());
  EXPECT_EQ(last_total, !model.is_mapped() && latte::Model::relayout_pass(latte::LoadOptions{}) ? 2 * size : size);
  EXPECT_EQ(last, last_total);
  try {
    api::Model(kMoe, latte_model_default_options(), [](std::uint64_t, std::uint64_t) { return false; });
    ADD_FAILURE() << "a cancelled load did not throw";
  } catch (const api::Exception& e) {
    EXPECT_EQ(e.status(), LATTE_ERR_ABORTED);
  }
  EXPECT_THROW(api::Model(kMoe, latte_model_default_options(),
                          [](std::uint64_t, std::uint64_t) -> bool { throw std::out_of_range("mine"); }),
               std::out_of_range);

  EXPECT_EQ(model.meta_value("general.architecture"), "deepseek2");
  EXPECT_EQ(model.meta_key(0), latte::Model::load(kMoe)->file().kv(0).key);
  EXPECT_GT(model.meta_count(), 10);
  EXPECT_GT(model.n_layers(), 0);
  EXPECT_GT(model.n_params(), 0);
  EXPECT_FALSE(model.name().empty());
  EXPECT_THROW(model.meta_value("no.such.key"), api::Exception);

  latte_session_options so = session_options(LATTE_CACHE_INT8, 300, 16);
  so.n_ctx = 8192;  // beyond the trained 4096: a warning
  api::Session s(model, so);
  {
    const std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_TRUE(contains(warnings[0], "beyond the model's trained context")) << warnings[0];
  }
  api::set_log(nullptr);

  const std::vector<int32_t> ids = testdata_tokens();
  s.prefill(std::vector<int32_t>(ids.begin(), ids.begin() + 40));
  int asked = 0;
  s.set_abort([&] { return ++asked > 3; });
  try {
    s.prefill(std::vector<int32_t>(ids.begin() + 40, ids.begin() + 80));
    ADD_FAILURE() << "not aborted";
  } catch (const api::Exception& e) {
    EXPECT_EQ(e.status(), LATTE_ERR_ABORTED);
  }
  EXPECT_EQ(s.n_past(), 40);
  s.set_abort([]() -> bool { throw std::runtime_error("stop"); });  // a throw stops too
  EXPECT_THROW(s.decode(ids[40]), api::Exception);
  s.set_abort(nullptr);

  api::Session fork = s.copy();
  const std::vector<uint8_t> state = s.save_state();
  api::Session loaded(model, session_options(LATTE_CACHE_INT8, 8192, 16));
  loaded.load_state(state);
  s.set_threads(1);
  EXPECT_EQ(s.threads(), 1);
  api::Session moved = std::move(fork);  // the fork, moved
  for (api::Session* x : {&s, &moved, &loaded}) x->decode(ids[40]);
  const std::vector<float> ls(s.logits().begin(), s.logits().end());
  EXPECT_EQ(std::vector<float>(moved.logits().begin(), moved.logits().end()), ls);
  EXPECT_EQ(std::vector<float>(loaded.logits().begin(), loaded.logits().end()), ls);

  latte_sampler_options greedy = latte_sampler_default_options();
  greedy.temperature = 0.f;
  api::Sampler smp(greedy);
  smp.set_logit_bias({{7, 1e6f}});
  EXPECT_EQ(smp.sample(s.logits()), 7);
  EXPECT_THROW(smp.set_logit_bias({{7, std::numeric_limits<float>::infinity()}}), api::Exception);
}


// latte_session_step through the C++ wrapper: two sessions of kMoe, one
// prefilling while the other decodes, then both decoding, against each alone
// (the step's int8 bound); an abort asked by either session's callback
// stops the step with every session as before it.
TEST(CApiStep, WrapperStepsSessionsAndAnAbortPutsEveryOneBack) {
  namespace api = latte::api;
  const api::Model model(kMoe);
  latte_session_options o = latte_session_default_options();
  o.threads = 2;
  o.n_ctx = 64;
  o.prefill_chunk = 8;
  api::Session a(model, o), b(model, o), a1(model, o), b1(model, o);
  auto nmse = [&](const api::Session& x, const api::Session& y) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < x.logits().size(); ++i) {
      num += (double(x.logits()[i]) - y.logits()[i]) * (double(x.logits()[i]) - y.logits()[i]);
      den += double(y.logits()[i]) * y.logits()[i];
    }
    return num / den;
  };
  const std::vector<int32_t> pa{1, 2, 3}, pb{9, 8, 7, 6, 5, 4, 3, 2}, next{11, 12};
  a.prefill(pa);
  a1.prefill(pa);
  api::step({{&a, {next.data(), 1}}, {&b, pb}});
  a1.decode(next[0]);
  b1.prefill(pb);
  EXPECT_LE(nmse(a, a1), 1e-5);
  EXPECT_LE(nmse(b, b1), 1e-5);
  api::step({{&a, {next.data() + 1, 1}}, {&b, {next.data() + 1, 1}}});
  a1.decode(next[1]);
  b1.decode(next[1]);
  EXPECT_LE(nmse(a, a1), 1e-5);
  EXPECT_LE(nmse(b, b1), 1e-5);

  const std::vector<float> la(a.logits().begin(), a.logits().end()), lb(b.logits().begin(), b.logits().end());
  int asked = 0;
  b.set_abort([&] { return ++asked == 3; });  // stops the step inside its second layer
  try {
    api::step({{&a, {next.data(), 1}}, {&b, {next.data(), 1}}});
    ADD_FAILURE() << "the step was not aborted";
  } catch (const api::Exception& e) {
    EXPECT_EQ(e.status(), LATTE_ERR_ABORTED);
  }
  EXPECT_EQ(asked, 3);
  EXPECT_EQ(a.n_past(), 5);
  EXPECT_EQ(b.n_past(), 9);
  EXPECT_TRUE(std::equal(la.begin(), la.end(), a.logits().begin(), a.logits().end()));
  EXPECT_TRUE(std::equal(lb.begin(), lb.end(), b.logits().begin(), b.logits().end()));
  b.set_abort(nullptr);
  api::step({{&a, {next.data(), 1}}, {&b, {next.data(), 1}}});  // goes on as before
  EXPECT_EQ(a.n_past(), 6);
}

}  // namespace

// Allocation-failure injection: this binary replaces the global operator new
// and sets Latte's hook for its other allocations (platform/alloc_hook.h), so
// that the N-th allocation of a call fails. For every C API call that can
// allocate (model load, session create, prefill, decode, eval_all, truncate,
// reset, save, load; the first save or load of a model, which computes its
// fingerprint), N goes from 1 until the call makes fewer than N
// allocations: each failure must come back as LATTE_ERR_OUT_OF_MEMORY with
// the session as it was (tokens, logits) and usable afterwards (its next
// logits those of a session that never failed), and nothing may leak (the
// ASan build's leak check). A small random model keeps the sweep short.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>
#include <string>
#include <vector>

#include "latte/latte.h"
#include "platform/alloc_hook.h"
#include "runtime/gguf/gguf_file.h"
#include "tools/gguf_writer.h"
#include "tools/random_model.h"

namespace {

// The injector: armed, it counts allocations and fails the fail_at-th (or,
// with big_from, every one of at least that many bytes).
std::atomic<bool> g_armed{false};
std::atomic<long> g_count{0};
std::atomic<long> g_fail_at{0};
std::atomic<std::size_t> g_big_from{0};
std::atomic<long> g_failed{0};
std::atomic<std::size_t> g_failed_bytes{0};  // the size of the last allocation failed

bool should_fail(std::size_t bytes) {
  if (!g_armed.load(std::memory_order_relaxed)) return false;
  const std::size_t big = g_big_from.load(std::memory_order_relaxed);
  const bool fail = big ? bytes >= big : g_count.fetch_add(1) + 1 == g_fail_at.load();
  if (fail) {
    g_failed.fetch_add(1);
    g_failed_bytes.store(bytes);
  }
  return fail;
}

void* allocate(std::size_t n, std::size_t align) {
  if (should_fail(n)) return nullptr;
  if (n == 0) n = 1;
  if (align <= alignof(std::max_align_t)) return std::malloc(n);
  return std::aligned_alloc(align, (n + align - 1) / align * align);
}

void* allocate_or_throw(std::size_t n, std::size_t align) {
  if (void* p = allocate(n, align)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t n) { return allocate_or_throw(n, 0); }
void* operator new[](std::size_t n) { return allocate_or_throw(n, 0); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocate(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocate(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return allocate_or_throw(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return allocate_or_throw(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

namespace fs = std::filesystem;

// Arms the injector for one call: the n-th allocation fails.
void arm(long n) {
  g_count = 0;
  g_failed = 0;
  g_fail_at = n;
  g_big_from = 0;
  g_armed = true;
}
// Disarms it; returns the allocations counted.
long disarm() {
  g_armed = false;
  return g_count.load();
}

class AllocFault : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    latte::g_alloc_fail_hook.store(&should_fail);
    dir_ = new std::string(fs::temp_directory_path() / "latte-alloc-fault-XXXXXX");
    ASSERT_NE(::mkdtemp(dir_->data()), nullptr);
    latte::RandomModelSpec spec;  // deepseek2, 2 layers, d_model 64, vocab 300
    spec.q_lora_rank = 24;
    spec.n_experts = 4, spec.n_experts_used = 2, spec.n_experts_shared = 1, spec.ff_expert = 32;
    spec.n_leading_dense = 1;
    latte::write_random_model(spec, path("model.gguf"));
    ASSERT_EQ(latte_model_load(path("model.gguf").c_str(), &model_), LATTE_OK) << latte_last_error();
  }
  static void TearDownTestSuite() {
    latte_model_free(model_);
    model_ = nullptr;
    fs::remove_all(*dir_);
    delete dir_;
    latte::g_alloc_fail_hook.store(nullptr);
  }
  static std::string path(const char* name) { return *dir_ + "/" + name; }

  static latte_session_options options() {
    latte_session_options o = latte_session_default_options();
    o.threads = 2;  // through the parallel regions
    o.n_ctx = 64;
    o.prefill_chunk = 4;  // a prefill of 12 tokens takes 3 chunks
    return o;
  }
  static latte_session* session(const std::vector<std::int32_t>& tokens) {
    latte_session_options o = options();
    latte_session* s = nullptr;
    EXPECT_EQ(latte_session_create(model_, &o, &s), LATTE_OK) << latte_last_error();
    if (s && !tokens.empty()) {
      EXPECT_EQ(latte_session_prefill(s, tokens.data(), tokens.size()), LATTE_OK);
    }
    return s;
  }

  struct Snapshot {
    std::vector<std::int32_t> tokens;
    std::vector<float> logits;  // empty: none
  };
  static Snapshot snapshot(const latte_session* s) {
    Snapshot r;
    r.tokens.resize(static_cast<std::size_t>(latte_session_n_past(s)));
    std::size_t n = 0;
    EXPECT_EQ(latte_session_tokens(s, r.tokens.data(), r.tokens.size(), &n), LATTE_OK);
    if (const float* l = latte_session_logits(s)) r.logits.assign(l, l + latte_model_n_vocab(model_));
    return r;
  }
  static void expect_same(const Snapshot& a, const Snapshot& b, const std::string& what) {
    EXPECT_EQ(a.tokens, b.tokens) << what;
    EXPECT_EQ(a.logits.size(), b.logits.size()) << what;
    if (a.logits.size() == b.logits.size() && !a.logits.empty()) {
      EXPECT_EQ(std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)), 0) << what;
    }
  }
  // The logits after `tokens` in a session that never failed: all but the
  // last in one prefill, then the last decoded (as the sessions tested are
  // fed: logits depend on how tokens are split into calls).
  static std::vector<float> reference(const std::vector<std::int32_t>& tokens) {
    latte_session* s = session(std::vector<std::int32_t>(tokens.begin(), tokens.end() - 1));
    EXPECT_EQ(latte_session_decode(s, tokens.back()), LATTE_OK);
    const float* l = latte_session_logits(s);
    std::vector<float> r(l, l + latte_model_n_vocab(model_));
    latte_session_free(s);
    return r;
  }
  // After a failure: the session goes on, and computes what a session that
  // never failed computes.
  static void expect_usable(latte_session* s, const std::string& what) {
    Snapshot before = snapshot(s);
    const std::int32_t next = 77;
    ASSERT_EQ(latte_session_decode(s, next), LATTE_OK) << what << ": " << latte_last_error();
    before.tokens.push_back(next);
    const std::vector<float> want = reference(before.tokens);
    const float* got = latte_session_logits(s);
    ASSERT_NE(got, nullptr) << what;
    EXPECT_EQ(std::memcmp(got, want.data(), want.size() * sizeof(float)), 0) << what;
  }

  // Calls `call` on a state made by `setup` with the n-th allocation
  // failing, n = 1, 2, ... until a call completes within n - 1 allocations.
  // check(state, status, n) judges each outcome. Returns the number of
  // allocations the call made without a failure.
  template <class Setup, class Call, class Check>
  static long sweep(const char* name, Setup setup, Call call, Check check) {
    long n = 1;
    for (;; ++n) {
      auto state = setup();
      arm(n);
      const latte_status st = call(state);
      const long made = disarm();
      const bool injected = g_failed.load() > 0;
      const std::string what = std::string(name) + ", allocation " + std::to_string(n) + " of " + std::to_string(made);
      if (injected) {
        EXPECT_TRUE(st == LATTE_OK || st == LATTE_ERR_OUT_OF_MEMORY)
            << what << ": status " << latte_status_string(st) << ": " << latte_last_error();
      } else {
        EXPECT_EQ(st, LATTE_OK) << what << ": " << latte_last_error();
      }
      check(state, st, what);
      if (!injected) break;
      if (::testing::Test::HasFailure()) break;  // one report, not hundreds
    }
    ::testing::Test::RecordProperty(name, static_cast<int>(n - 1));
    return n - 1;
  }

  static std::string* dir_;
  static latte_model* model_;
};

std::string* AllocFault::dir_ = nullptr;
latte_model* AllocFault::model_ = nullptr;

const std::vector<std::int32_t> kStart = {1, 5, 9};
const std::vector<std::int32_t> kMore = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21};

TEST_F(AllocFault, ModelLoad) {
  for (int use_mmap : {1, 0}) {
    latte_model_options mo = latte_model_default_options();
    mo.use_mmap = use_mmap;
    const std::string file = path("model.gguf");  // not allocated while armed
    const long n = sweep(
        use_mmap ? "load (mmap)" : "load (read)", [] { return static_cast<latte_model*>(nullptr); },
        [&](latte_model*& m) { return latte_model_load_with_options(file.c_str(), &mo, &m); },
        [](latte_model*& m, latte_status st, const std::string& what) {
          if (st != LATTE_OK) {
            EXPECT_EQ(m, nullptr) << what;
          }
          latte_model_free(m);
        });
    EXPECT_GT(n, 10);
  }
}

// Session creation starts the session's threads: an allocation that fails
// there (a thread's state) is a status naming the thread, like any other.
TEST_F(AllocFault, SessionCreate) {
  latte_session_options o = options();
  bool thread_start_failed = false;
  const long n = sweep(
      "session create", [] { return static_cast<latte_session*>(nullptr); },
      [&](latte_session*& s) { return latte_session_create(model_, &o, &s); },
      [&](latte_session*& s, latte_status st, const std::string& what) {
        if (st != LATTE_OK) {
          EXPECT_EQ(s, nullptr) << what;
          if (std::string(latte_last_error()).find("cannot start thread 2 of 2") != std::string::npos)
            thread_start_failed = true;
          return;
        }
        EXPECT_EQ(latte_session_n_past(s), 0) << what;
        expect_usable(s, what);
        latte_session_free(s);
      });
  EXPECT_GT(n, 5);
  EXPECT_TRUE(thread_start_failed) << "no failed allocation reached the thread pool's start";
}

// The calls that change a session: on failure it is as it was, and usable.
template <class Call>
void sweep_session_call(const char* name, const std::vector<std::int32_t>& start, Call call, long at_least) {
  struct State {
    latte_session* s;
    AllocFault::Snapshot before;
  };
  const long n = AllocFault::sweep(
      name,
      [&] {
        State st{AllocFault::session(start), {}};
        st.before = AllocFault::snapshot(st.s);
        return st;
      },
      [&](State& st) { return call(st.s); },
      [](State& st, latte_status status, const std::string& what) {
        if (status != LATTE_OK) {
          AllocFault::expect_same(AllocFault::snapshot(st.s), st.before, what + ": the session changed");
          AllocFault::expect_usable(st.s, what);
        }
        latte_session_free(st.s);
      });
  EXPECT_GE(n, at_least) << name;
}

TEST_F(AllocFault, Prefill) {
  sweep_session_call("prefill", kStart, [](latte_session* s) { return latte_session_prefill(s, kMore.data(), kMore.size()); }, 1);
  // From an empty session too (no logits to keep).
  sweep_session_call("prefill (empty)", {}, [](latte_session* s) { return latte_session_prefill(s, kMore.data(), kMore.size()); }, 1);
}

TEST_F(AllocFault, Decode) {
  sweep_session_call("decode", kStart, [](latte_session* s) { return latte_session_decode(s, 42); }, 0);
}

TEST_F(AllocFault, EvalAll) {
  std::vector<float> out(kMore.size() * static_cast<std::size_t>(latte_model_n_vocab(model_)));
  sweep_session_call("eval_all", kStart, [&](latte_session* s) {
    return latte_session_eval_all(s, kMore.data(), kMore.size(), out.data());
  }, 1);
}

TEST_F(AllocFault, TruncateAndReset) {
  std::vector<std::int32_t> twelve = kStart;
  twelve.insert(twelve.end(), kMore.begin(), kMore.end());
  sweep_session_call("truncate", twelve, [](latte_session* s) { return latte_session_truncate(s, 5); }, 0);
  sweep_session_call("reset", twelve, [](latte_session* s) { return latte_session_reset(s); }, 0);
}

// The control calls (issue 56): threads set after creation, a fork, and a
// session's state to and from memory. A failure leaves the session as it
// was and usable, and makes no fork.
TEST_F(AllocFault, ControlCalls) {
  std::vector<std::int32_t> twelve = kStart;
  twelve.insert(twelve.end(), kMore.begin(), kMore.end());
  sweep_session_call("set_threads", twelve, [](latte_session* s) { return latte_session_set_threads(s, 3); }, 1);
  sweep_session_call("copy", twelve, [](latte_session* s) {
    latte_session* fork = nullptr;
    const latte_status st = latte_session_copy(s, &fork);
    if (st != LATTE_OK) {
      EXPECT_EQ(fork, nullptr);
    } else {
      EXPECT_EQ(latte_session_n_past(fork), latte_session_n_past(s));
    }
    latte_session_free(fork);
    return st;
  }, 1);
  latte_session* saved = session(twelve);
  std::size_t n = 0;
  ASSERT_EQ(latte_session_state_save_to(saved, nullptr, 0, &n), LATTE_OK);
  std::vector<std::uint8_t> state(n);
  ASSERT_EQ(latte_session_state_save_to(saved, state.data(), state.size(), &n), LATTE_OK) << latte_last_error();
  latte_session_free(saved);
  std::vector<std::uint8_t> out(state.size());  // not allocated while armed
  sweep_session_call("state save to memory", twelve, [&](latte_session* s) {
    std::size_t got = 0;
    const latte_status st = latte_session_state_save_to(s, out.data(), out.size(), &got);
    if (st == LATTE_OK) {
      EXPECT_EQ(out, state);
    }
    return st;
  }, 0);
  sweep_session_call("state load from memory", kStart, [&](latte_session* s) {
    return latte_session_state_load_from(s, state.data(), state.size());
  }, 1);
}

TEST_F(AllocFault, SaveLeavesTheEarlierFile) {
  // An earlier save at the path: a failed save leaves it whole.
  const std::string file = path("saved.lsess");
  latte_session* earlier = session(kStart);
  ASSERT_EQ(latte_session_save(earlier, file.c_str()), LATTE_OK);
  latte_session_free(earlier);
  std::ifstream in(file, std::ios::binary);
  const std::string earlier_bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::int32_t> twelve = kStart;
  twelve.insert(twelve.end(), kMore.begin(), kMore.end());
  sweep_session_call("save", twelve, [&](latte_session* s) {
    const latte_status st = latte_session_save(s, file.c_str());
    g_armed = false;  // the checks below allocate
    if (st != LATTE_OK) {
      std::ifstream again(file, std::ios::binary);
      const std::string now((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
      EXPECT_EQ(now, earlier_bytes) << "a failed save changed the file";
    } else {
      // Put the earlier file back for the next round.
      std::ofstream(file, std::ios::binary | std::ios::trunc) << earlier_bytes;
    }
    return st;
  }, 1);
  // No temporary left beside it.
  int files = 0;
  for (const auto& e : fs::directory_iterator(*dir_)) files += e.path().filename().string().rfind("saved.lsess", 0) == 0;
  EXPECT_EQ(files, 1);
}

TEST_F(AllocFault, Load) {
  const std::string file = path("load.lsess");
  std::vector<std::int32_t> twelve = kStart;
  twelve.insert(twelve.end(), kMore.begin(), kMore.end());
  latte_session* saved = session(twelve);
  ASSERT_EQ(latte_session_save(saved, file.c_str()), LATTE_OK);
  latte_session_free(saved);
  sweep_session_call("load", kStart, [&](latte_session* s) { return latte_session_load(s, file.c_str()); }, 1);
}

// A session load that runs out of memory names the file, and for any
// buffer (a kilobyte or more) what it was for and how many bytes (it said
// only "out of memory").
TEST_F(AllocFault, LoadNamesWhatItCouldNotAllocate) {
  const std::string file = path("named.lsess");
  std::vector<std::int32_t> twelve = kStart;
  twelve.insert(twelve.end(), kMore.begin(), kMore.end());
  latte_session* saved = session(twelve);
  ASSERT_EQ(latte_session_save(saved, file.c_str()), LATTE_OK);
  latte_session_free(saved);
  std::vector<std::string> buffers;  // the messages of failed buffers
  sweep(
      "load (messages)", [] { return session(kStart); },
      [&](latte_session*& s) { return latte_session_load(s, file.c_str()); },
      [&](latte_session*& s, latte_status st, const std::string& what) {
        if (st == LATTE_ERR_OUT_OF_MEMORY && g_failed_bytes.load() >= 1024) {
          const std::string msg = latte_last_error();
          EXPECT_NE(msg.find("session file '" + file + "'"), std::string::npos) << what << ": " << msg;
          const bool sized = msg.find("cannot allocate " + std::to_string(g_failed_bytes.load()) + " bytes for ") !=
                             std::string::npos;
          const bool cache = msg.find("': its latent cache (2 layers of 1 tiles of ") != std::string::npos;
          EXPECT_TRUE(sized || cache) << what << " (" << g_failed_bytes.load() << " bytes): " << msg;
          buffers.push_back(msg);
        }
        latte_session_free(s);
      });
  // Among them: the checksum's read buffer, the logits, one layer's tiles.
  for (const char* buffer : {"bytes for its read buffer", "bytes for its logits", "bytes for one layer's tiles"})
    EXPECT_TRUE(std::any_of(buffers.begin(), buffers.end(),
                            [&](const std::string& m) { return m.find(buffer) != std::string::npos; }))
        << buffer;
}

// The first save or load of a model computes its fingerprint (a hash of the
// whole file, on the session's threads): a failure there, or threads that
// cannot be started, leaves the session as it was, and a later call
// computes it. A model read into memory with Q4_0 matrices too (re-laid out
// where this CPU has x16 kernels: hashed in the file's layout).
TEST_F(AllocFault, FirstSaveAndLoadComputeTheFingerprint) {
  latte::RandomModelSpec spec;
  spec.weight_type = latte::GgmlType::Q4_0;
  latte::write_random_model(spec, path("q4_0.gguf"));
  struct Case {
    const char* name;
    std::string model;
    int use_mmap;
  };
  for (const Case& c :
       {Case{"first load (mmap)", path("model.gguf"), 1}, Case{"first load (read, Q4_0)", path("q4_0.gguf"), 0}}) {
    // The file to load, saved by another instance of the model.
    const std::string file = path("first.lsess");
    latte_model_options mo = latte_model_default_options();
    mo.use_mmap = c.use_mmap;
    latte_model* saver = nullptr;
    ASSERT_EQ(latte_model_load_with_options(c.model.c_str(), &mo, &saver), LATTE_OK) << latte_last_error();
    latte_session_options o = options();
    latte_session* s0 = nullptr;
    ASSERT_EQ(latte_session_create(saver, &o, &s0), LATTE_OK);
    ASSERT_EQ(latte_session_prefill(s0, kMore.data(), kMore.size()), LATTE_OK);
    ASSERT_EQ(latte_session_save(s0, file.c_str()), LATTE_OK) << latte_last_error();
    latte_session_free(s0);
    latte_model_free(saver);
    struct State {
      latte_model* m = nullptr;
      latte_session* s = nullptr;
    };
    const long n = sweep(
        c.name,
        [&] {
          State st;
          EXPECT_EQ(latte_model_load_with_options(c.model.c_str(), &mo, &st.m), LATTE_OK);
          latte_session_options so = options();
          EXPECT_EQ(latte_session_create(st.m, &so, &st.s), LATTE_OK);
          EXPECT_EQ(latte_session_prefill(st.s, kStart.data(), kStart.size()), LATTE_OK);
          return st;
        },
        [&](State& st) { return latte_session_load(st.s, file.c_str()); },
        [&](State& st, latte_status status, const std::string& what) {
          if (status != LATTE_OK) {
            EXPECT_EQ(latte_session_n_past(st.s), static_cast<std::int64_t>(kStart.size())) << what;
            if (g_failed_bytes.load() >= 1024) {
              EXPECT_NE(std::string(latte_last_error()).find(" bytes"), std::string::npos)
                  << what << ": " << latte_last_error();
            }
            // A later load computes the fingerprint and takes the file.
            EXPECT_EQ(latte_session_load(st.s, file.c_str()), LATTE_OK) << what << ": " << latte_last_error();
          }
          EXPECT_EQ(latte_session_n_past(st.s), static_cast<std::int64_t>(kMore.size())) << what;
          latte_session_free(st.s);
          latte_model_free(st.m);
        });
    EXPECT_GT(n, 3) << c.name;
    // The first save: on failure nothing is written, and a later save is
    // the file the other instance saved.
    std::ifstream in(file, std::ios::binary);
    const std::string want((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string out = path("first_save.lsess");
    const long n_save = sweep(
        c.use_mmap ? "first save (mmap)" : "first save (read, Q4_0)",
        [&] {
          State st;
          EXPECT_EQ(latte_model_load_with_options(c.model.c_str(), &mo, &st.m), LATTE_OK);
          latte_session_options so = options();
          EXPECT_EQ(latte_session_create(st.m, &so, &st.s), LATTE_OK);
          EXPECT_EQ(latte_session_prefill(st.s, kMore.data(), kMore.size()), LATTE_OK);
          fs::remove(out);
          return st;
        },
        [&](State& st) { return latte_session_save(st.s, out.c_str()); },
        [&](State& st, latte_status status, const std::string& what) {
          if (status != LATTE_OK) {
            EXPECT_FALSE(fs::exists(out)) << what;
            EXPECT_EQ(latte_session_save(st.s, out.c_str()), LATTE_OK) << what << ": " << latte_last_error();
          }
          std::ifstream again(out, std::ios::binary);
          const std::string got((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
          EXPECT_TRUE(got == want) << what << ": another file than the other instance saved";
          latte_session_free(st.s);
          latte_model_free(st.m);
        });
    EXPECT_GT(n_save, 3) << c.name;
  }
}

// A failed large allocation names what it was for and its size: a tensor
// the file places off its type's alignment is copied at load.
TEST_F(AllocFault, LargeAllocationIsNamed) {
  // A string key whose length moves the tensor data off 4-byte alignment
  // (general.alignment 1: no padding), and a 1.2 MB embedding.
  for (int pad = 1; pad <= 4; ++pad) {
    latte::RandomModelSpec spec;
    spec.n_vocab = 5000;
    spec.alignment = 1;
    spec.edit_metadata = [pad](latte::GgufWriter& w) { w.add_string("test.pad", std::string(pad, 'x')); };
    const std::vector<std::uint8_t> bytes = latte::random_model_bytes(spec);
    const latte::GgufFile f = latte::GgufFile::from_memory(bytes.data(), bytes.size());
    const latte::GgufTensor* t = f.find_tensor("token_embd.weight");
    ASSERT_NE(t, nullptr);
    if ((t->data - bytes.data()) % 4 == 0) continue;
    const std::string file = path("misaligned.gguf");
    std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    latte_model* m = nullptr;
    g_count = 0;
    g_failed = 0;
    g_big_from = std::size_t{1} << 20;
    g_armed = true;
    const latte_status st = latte_model_load(file.c_str(), &m);
    g_armed = false;
    g_big_from = 0;
    EXPECT_EQ(st, LATTE_ERR_OUT_OF_MEMORY);
    EXPECT_EQ(m, nullptr);
    const std::string msg = latte_last_error();
    EXPECT_NE(msg.find("token_embd.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cannot allocate " + std::to_string(t->n_bytes) + " bytes"), std::string::npos) << msg;
    latte_model_free(m);
    return;
  }
  FAIL() << "no padding put the embedding off alignment";
}

}  // namespace

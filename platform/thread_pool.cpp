// ThreadPool (thread_pool.h): publishing a region, claiming its slots, and
// the workers' wait between regions.
#include "platform/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <new>
#include <string>
#include <system_error>

namespace latte {

namespace {

// How long a worker polls for the next region before it sleeps: decode's
// regions follow each other within microseconds, and a wake-up from sleep
// costs the region ~5-50 us; a worker that polled longer would hold its
// core from another program that wants it.
constexpr auto kSpinTime = std::chrono::microseconds(50);

// LATTE_POOL_SPIN_US overrides it (0: sleep at once), for measurements.
std::chrono::microseconds spin_time() {
  static const std::chrono::microseconds t = [] {
    const char* v = std::getenv("LATTE_POOL_SPIN_US");
    if (v == nullptr || *v == '\0') return kSpinTime;
    char* end = nullptr;
    const long us = std::strtol(v, &end, 10);
    return *end == '\0' && us >= 0 && us <= 1000000 ? std::chrono::microseconds(us) : kSpinTime;
  }();
  return t;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// The governor: a trial is at least this long (a scheduler's time slices
// are a few ms: a shorter one could miss the preemptions it is about) and
// one step. After a decision, steps run its way at least kExploitMinNs and
// long enough that the losing way's trial costs at most kTrialShare of the
// time (a big model's serial step is a whole token slower), at most
// kExploitMaxNs. Parallel must be kParallelMargin faster (one thread frees a
// core for others). While parallel, kSlowSteps steps in a row kSlowFactor
// slower than its trial (another program took a core) end the wait early.
constexpr std::int64_t kTrialNs = 10'000'000;
constexpr std::int64_t kExploitMinNs = 160'000'000;
constexpr std::int64_t kExploitMaxNs = 10'000'000'000;
constexpr double kTrialShare = 0.03;
constexpr double kParallelMargin = 0.97;
constexpr double kSlowFactor = 1.5;
constexpr int kSlowSteps = 3;

// LATTE_POOL_ADAPT=0 turns the governor off, for measurements.
bool adaptive() {
  static const bool on = [] {
    const char* v = std::getenv("LATTE_POOL_ADAPT");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr std::uint32_t epoch_of(std::uint64_t v) { return static_cast<std::uint32_t>(v >> 32); }
constexpr int slots_of(std::uint64_t v) { return static_cast<int>((v >> 16) & 0xffff); }
constexpr int next_of(std::uint64_t v) { return static_cast<int>(v & 0xffff); }

// Whether the calling thread is running a slot (or a region of its own).
thread_local bool t_in_region = false;
thread_local ThreadPool* t_pool = nullptr;
// Regions asked of any pool (regions_asked()).
std::atomic<std::uint64_t> g_regions_asked{0};

struct RegionFlag {
  RegionFlag() { t_in_region = true; }
  ~RegionFlag() { t_in_region = false; }
};

}  // namespace

ThreadPool::ThreadPool(int threads, bool allow_fewer) : fork_generation_(fork_generation()) {
  const int want = threads > 1 ? threads - 1 : 0;
  workers_.reserve(static_cast<std::size_t>(want));
  for (int i = 0; i < want; ++i) {
    try {
      workers_.emplace_back([this] { worker_main(); });
    } catch (const std::system_error& e) {
      start_error_ = "cannot start thread " + std::to_string(i + 2) + " of " + std::to_string(threads) + ": " +
                     e.code().message();
    } catch (const std::bad_alloc&) {
      start_error_ = "cannot start thread " + std::to_string(i + 2) + " of " + std::to_string(threads) +
                     ": out of memory";
    }
    if (!start_error_.empty()) break;
  }
  if (!start_error_.empty() && !allow_fewer) {
    stop_workers();
    throw ThreadStartError(start_error_);
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  if (fork_generation_ != fork_generation()) {
    // A forked child: the workers exist only in the parent. Their handles
    // are left as they are (joining would wait forever).
    new std::vector<std::thread>(std::move(workers_));
    workers_.clear();
    return;
  }
  stop_.store(true, std::memory_order_seq_cst);
  wake_.fetch_add(1, std::memory_order_seq_cst);
  wake_all(wake_);
  for (std::thread& w : workers_)
    if (w.joinable()) w.join();
  workers_.clear();
}

void ThreadPool::serve(std::uint64_t v) {
  const std::uint32_t epoch = epoch_of(v);
  for (;;) {
    if (epoch_of(v) != epoch || next_of(v) >= slots_of(v)) return;
    if (!claim_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // Slot next_of(v) of this region is ours: fn_ and ctx_ are its until
    // done_ counts it.
    const int slot = next_of(v), n = slots_of(v);
    {
      const RegionFlag in;
      try {
        fn_(ctx_, slot, n);
      } catch (...) {
        if (!failed_.exchange(true, std::memory_order_acq_rel)) error_ = std::current_exception();
      }
    }
    done_.fetch_add(1, std::memory_order_acq_rel);
    v = claim_.load(std::memory_order_acquire);
  }
}

bool ThreadPool::wait_for_work(std::uint32_t seen) {
  const auto until = std::chrono::steady_clock::now() + spin_time();
  for (int i = 0;; ++i) {
    if (epoch_of(claim_.load(std::memory_order_acquire)) != seen || stop_.load(std::memory_order_relaxed))
      return true;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) break;
  }
  // Asleep until a region starts: either it sees sleepers_ and changes
  // wake_, or this thread sees the region before it waits.
  const std::uint32_t w = wake_.load(std::memory_order_seq_cst);
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  if (epoch_of(claim_.load(std::memory_order_seq_cst)) == seen && !stop_.load(std::memory_order_seq_cst))
    wait_while_equal(wake_, w);
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  return true;
}

void ThreadPool::worker_main() {
  std::uint32_t seen = 0;
  while (!stop_.load(std::memory_order_acquire)) {
    const std::uint64_t v = claim_.load(std::memory_order_acquire);
    if (epoch_of(v) != seen) {
      seen = epoch_of(v);
      serve(v);
      continue;
    }
    wait_for_work(seen);
  }
}

void ThreadPool::run_inline(SlotFn fn, void* ctx) { fn(ctx, 0, 1); }

void ThreadPool::run(int n_slots, SlotFn fn, void* ctx) {
  if (n_slots <= 0) return;
  if (n_slots > 0xffff) throw std::invalid_argument("thread pool: " + std::to_string(n_slots) + " slots, at most 65535");
  if (n_slots > 1 && !t_in_region) g_regions_asked.fetch_add(1, std::memory_order_relaxed);
  if (n_slots == 1 || workers_.empty() || t_in_region || fork_generation_ != fork_generation())
    return run_inline(fn, ctx);
  // In a step the governor runs on the caller alone, or on a pool another
  // thread is using: one slot here.
  if (threads_now() == 1 || busy_.test_and_set(std::memory_order_acquire)) return run_inline(fn, ctx);
  const RegionFlag in;
  fn_ = fn;
  ctx_ = ctx;
  failed_.store(false, std::memory_order_relaxed);
  error_ = nullptr;
  done_.store(0, std::memory_order_relaxed);
  ++epoch_;
  if (epoch_ == 0) ++epoch_;  // 0 is the workers' "none seen yet"
  const std::uint64_t v = (static_cast<std::uint64_t>(epoch_) << 32) | (static_cast<std::uint64_t>(n_slots) << 16);
  claim_.store(v, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    wake_.fetch_add(1, std::memory_order_seq_cst);
    wake_all(wake_);
  }
  // The caller takes slots like any worker, then waits for those started
  // elsewhere (polling: they are running, not waiting to be woken).
  {
    std::uint64_t c = claim_.load(std::memory_order_acquire);
    for (;;) {
      if (next_of(c) >= slots_of(c)) break;
      if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      try {
        fn(ctx, next_of(c), n_slots);
      } catch (...) {
        if (!failed_.exchange(true, std::memory_order_acq_rel)) error_ = std::current_exception();
      }
      done_.fetch_add(1, std::memory_order_acq_rel);
      c = claim_.load(std::memory_order_acquire);
    }
  }
  for (int i = 0; done_.load(std::memory_order_acquire) < n_slots; ++i) {
    if (i < 4096) cpu_relax();
    else std::this_thread::yield();
  }
  std::exception_ptr error = failed_.load(std::memory_order_acquire) ? error_ : nullptr;
  busy_.clear(std::memory_order_release);
  if (error) std::rethrow_exception(error);
}

void ThreadPool::begin_step() {
  if (!adaptive()) return;
  step_start_ns_ = now_ns();
  in_step_.store(true, std::memory_order_relaxed);
}

void ThreadPool::end_step() {
  if (!in_step_.load(std::memory_order_relaxed)) return;
  in_step_.store(false, std::memory_order_relaxed);
  const std::int64_t t1 = now_ns();
  const std::int64_t dt = t1 - step_start_ns_;
  ++phase_steps_;
  if (phase_ == Phase::exploit) {
    slow_steps_ = parallel_won_ && dt > kSlowFactor * parallel_mean_ ? slow_steps_ + 1 : 0;
    if (t1 < phase_end_ns_ && slow_steps_ < kSlowSteps) return;
    slow_steps_ = 0;
    start_phase(Phase::try_parallel, false, t1);  // measure both ways again
    return;
  }
  phase_time_ns_ += dt;
  if (t1 - phase_start_ns_ < kTrialNs) return;
  const double mean = static_cast<double>(phase_time_ns_) / phase_steps_;
  if (phase_ == Phase::try_parallel) {
    parallel_mean_ = mean;
    parallel_steps_ = phase_steps_;
    start_phase(Phase::try_serial, true, t1);
    return;
  }
  // Both measured on neighbouring steps of the same work: the faster way,
  // for a while.
  const bool parallel = parallel_mean_ < mean * kParallelMargin;
  // The next trial of the losing way costs its extra time on as many steps
  // as its trial took.
  const int loser_steps = parallel ? phase_steps_ : parallel_steps_;
  const double lost = std::abs(mean - parallel_mean_) * static_cast<double>(loser_steps);
  const auto exploit_ns = static_cast<std::int64_t>(std::min<double>(kExploitMaxNs, lost / kTrialShare));
  parallel_won_ = parallel;
  start_phase(Phase::exploit, !parallel, t1);
  phase_end_ns_ = t1 + std::max(kExploitMinNs, exploit_ns);
}

void ThreadPool::start_phase(Phase phase, bool serial, std::int64_t t) {
  phase_ = phase;
  serial_.store(serial, std::memory_order_relaxed);
  phase_start_ns_ = t;
  phase_time_ns_ = 0;
  phase_steps_ = 0;
}

ThreadPool& current_pool() {
  if (t_pool) return *t_pool;
  static ThreadPool* const shared = new ThreadPool(available_cpus(), /*allow_fewer=*/true);  // never freed
  return *shared;
}

PoolScope::PoolScope(ThreadPool& pool) : saved_(t_pool) { t_pool = &pool; }
PoolScope::~PoolScope() { t_pool = saved_; }

int current_pool_threads() { return current_pool().threads_now(); }
int current_pool_size() { return current_pool().threads(); }

std::uint64_t regions_asked() { return g_regions_asked.load(std::memory_order_relaxed); }


}  // namespace latte

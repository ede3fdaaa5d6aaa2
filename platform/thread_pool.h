// The threads Latte's parallel regions run on (platform layer,
// thread_pool.cpp; the CPU count and fork detection per OS in
// thread_pool_posix.cpp / thread_pool_windows.cpp).
//
// A region asks for a number of slots: fn(slot, n_slots) runs once for
// every slot, each on whichever thread claims it first. The calling thread
// claims slots too, and waits only for slots another thread has started: a
// worker slow to wake (another program on its core) delays nothing, its
// slots run on the caller. Where the region runs on the caller alone it is
// one slot, fn(0, 1). Hence the rules for code in a slot: take the share of
// the work from the n_slots given (it is the count asked for, or 1), never
// from the count asked; never wait for another slot (no barrier, no spin on
// another slot's result): a region that needs one is two regions. Per-slot
// scratch indexed by the slot is safe: a slot runs on one thread at a time.
//
// Workers wait for the next region spinning briefly, then asleep (futex),
// so an idle pool costs no CPU. A worker that another program preempts in
// the middle of a slot still holds the region up (a slot cannot be taken
// back), and small regions can gain nothing from a second thread. So the
// caller can mark steps, the repeated units of its work (a decoded token):
// the pool times a trial of steps with their regions in parallel and one
// with them on the caller alone (>= 10 ms and a step each), runs the faster
// way for a while (>= 0.16 s, and long enough that the slower way's next
// trial costs <= 3% of it, at most 10 s; sooner where parallel steps turn
// 1.5x slower than measured), then measures again. A region started inside another region, on a pool another thread
// is using, or in a process forked from the pool's runs as one slot on the
// calling thread too. The first
// exception a slot throws is rethrown by run() once every started slot has
// finished; the other slots still run.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace latte {

// The CPUs this process may run on (its affinity mask where the OS has one).
int available_cpus();

// A worker thread could not be started (the OS refused: thread limit,
// address space, memory); what() names which of how many and why.
class ThreadStartError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ThreadPool {
 public:
  using SlotFn = void (*)(void* ctx, int slot, int n_slots);

  // A pool of `threads` threads: the caller of run() and threads - 1
  // workers. Where a worker cannot be started: with allow_fewer the pool
  // keeps those that started (start_error() says why it has fewer), without
  // it the constructor stops them and throws ThreadStartError.
  explicit ThreadPool(int threads, bool allow_fewer = false);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The threads a region can use: the workers and the caller.
  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // The threads a region runs on now: threads(), or 1 in a step the
  // governor runs on the caller alone (for plans made before a region).
  int threads_now() const {
    return in_step_.load(std::memory_order_relaxed) && serial_.load(std::memory_order_relaxed) ? 1 : threads();
  }

  // A step of repeated work (a decoded token) from its caller: between
  // these, its regions run the way the governor found faster.
  void begin_step();
  void end_step();
  // Why the pool has fewer threads than asked (allow_fewer), else "".
  const std::string& start_error() const { return start_error_; }

  // fn(ctx, slot, n) for every slot in [0, n), n = n_slots or 1 (n_slots < 65536).
  void run(int n_slots, SlotFn fn, void* ctx);
  template <class F>
  void run(int n_slots, F&& f) {
    run(n_slots, [](void* c, int s, int n) { (*static_cast<std::remove_reference_t<F>*>(c))(s, n); }, &f);
  }

 private:
  void worker_main();
  bool wait_for_work(std::uint32_t seen);
  // Claims and runs the slots left of the region published as `v`.
  void serve(std::uint64_t v);
  void run_inline(SlotFn fn, void* ctx);
  void stop_workers();

  // The region: epoch (32 bits) | slots (16) | next unclaimed slot (16).
  // fn_ and ctx_ are written before a region's word is published and read
  // only after a slot of it is claimed, so they cannot change under a slot.
  std::atomic<std::uint64_t> claim_{0};
  SlotFn fn_ = nullptr;
  void* ctx_ = nullptr;
  std::atomic<int> done_{0};          // slots of the current region finished
  std::atomic<bool> failed_{false};   // a slot threw: error_ holds the first
  std::exception_ptr error_;
  std::uint32_t epoch_ = 0;           // the last region's, the caller's copy
  std::atomic_flag busy_ = ATOMIC_FLAG_INIT;  // a thread is in run()

  // Sleeping workers: wake_ changes (and is notified) when a region starts
  // while sleepers_ > 0, or when the pool stops.
  std::atomic<std::uint32_t> wake_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};

  // The contention governor (thread_pool.cpp), run by the thread that
  // marks steps: trials of steps in parallel and on the caller alone, then
  // the faster way for a while; serial_ says which way steps run now.
  enum class Phase { try_parallel, try_serial, exploit };
  void start_phase(Phase phase, bool serial, std::int64_t t);
  std::atomic<bool> in_step_{false};
  std::atomic<bool> serial_{false};
  Phase phase_ = Phase::try_parallel;
  bool parallel_won_ = true;
  std::int64_t step_start_ns_ = 0, phase_start_ns_ = 0, phase_time_ns_ = 0, phase_end_ns_ = 0;
  int phase_steps_ = 0, slow_steps_ = 0, parallel_steps_ = 0;
  double parallel_mean_ = 0;

  std::vector<std::thread> workers_;
  std::string start_error_;
  unsigned fork_generation_;  // the process's at creation: another means a forked child
};

// The pool the calling thread's regions run on: the innermost PoolScope's,
// else one the process shares (started on first use with a thread per
// available CPU, as many as start).
ThreadPool& current_pool();

// Sets the calling thread's pool for its lifetime (a session's, for its
// calls); the previous one is restored after.
// Marks a step of a pool for its lifetime (ThreadPool::begin_step); a pool
// given as nullptr, nothing.
class PoolStep {
 public:
  explicit PoolStep(ThreadPool* pool) : pool_(pool) {
    if (pool_) pool_->begin_step();
  }
  ~PoolStep() {
    if (pool_) pool_->end_step();
  }
  PoolStep(const PoolStep&) = delete;
  PoolStep& operator=(const PoolStep&) = delete;

 private:
  ThreadPool* pool_;
};

class PoolScope {
 public:
  explicit PoolScope(ThreadPool& pool);
  ~PoolScope();
  PoolScope(const PoolScope&) = delete;
  PoolScope& operator=(const PoolScope&) = delete;

 private:
  ThreadPool* saved_;
};

// current_pool().threads_now() and .threads().
int current_pool_threads();
int current_pool_size();

// Regions of more than one slot asked of any pool in this process so far,
// outside other regions (whether the pool ran them in parallel or, its
// governor deciding, on the caller alone): what a decoded token costs in
// fork/join points (tests/tools/pool_regions).
std::uint64_t regions_asked();

// f(slot, n_slots) for every slot, on the current pool.
template <class F>
void parallel_slots(int n_slots, F&& f) {
  current_pool().run(n_slots, std::forward<F>(f));
}

// The calling process's fork count, for pools to tell a forked child
// (thread_pool_posix.cpp: pthread_atfork; never changes on Windows).
unsigned fork_generation();

// Sleeps while word == old (it may return early: callers recheck);
// wake_all wakes every thread sleeping on word. A futex on Linux,
// WaitOnAddress on Windows: not std::atomic::wait, whose fallback in
// mingw's libstdc++ 12 (no futex there) loses wake-ups and hung the pool.
void wait_while_equal(std::atomic<std::uint32_t>& word, std::uint32_t old);
void wake_all(std::atomic<std::uint32_t>& word);

}  // namespace latte

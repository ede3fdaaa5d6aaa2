// The threads Latte's parallel regions run on (platform layer,
// thread_pool.cpp; the CPU count and fork detection per OS in
// thread_pool_posix.cpp / thread_pool_windows.cpp).
//
// A region is a number of slots: fn(slot, n_slots) runs once for every slot,
// each on whichever thread claims it first. The calling thread claims slots
// too, and waits only for slots another thread has started: a worker slow
// to wake (another program on its core) delays nothing, its slots run on
// the caller, so a busy machine makes a region no slower than one thread.
// Hence the one rule for code in a slot: never wait for another slot (no
// barrier, no spin on another slot's result); a region that needs one is two
// regions. Per-slot scratch indexed by the slot is safe: a slot runs on one
// thread at a time.
//
// Workers wait for the next region spinning briefly, then asleep (futex),
// so an idle pool costs no CPU. A region started inside another region, on
// a pool another thread is using, or in a process forked from the pool's
// runs its slots one after another on the calling thread. The first
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
  // Why the pool has fewer threads than asked (allow_fewer), else "".
  const std::string& start_error() const { return start_error_; }

  // fn(ctx, slot, n_slots) for every slot in [0, n_slots) (n_slots < 65536).
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
  void run_inline(int n_slots, SlotFn fn, void* ctx);
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
class PoolScope {
 public:
  explicit PoolScope(ThreadPool& pool);
  ~PoolScope();
  PoolScope(const PoolScope&) = delete;
  PoolScope& operator=(const PoolScope&) = delete;

 private:
  ThreadPool* saved_;
};

// current_pool().threads(), as a plain function (for per-ISA code).
int current_pool_threads();

// fn(ctx, slot, n_slots) for every slot, on the current pool (a plain
// function: what the per-ISA kernels call, through kernels/parallel_impl.h).
void parallel_run(int n_slots, ThreadPool::SlotFn fn, void* ctx);

// f(slot, n_slots) for every slot, on the current pool.
template <class F>
void parallel_slots(int n_slots, F&& f) {
  current_pool().run(n_slots, std::forward<F>(f));
}

// The calling process's fork count, for pools to tell a forked child
// (thread_pool_posix.cpp: pthread_atfork; never changes on Windows).
unsigned fork_generation();

}  // namespace latte

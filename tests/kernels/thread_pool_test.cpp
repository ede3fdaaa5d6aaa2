// The thread pool (platform/thread_pool.h): every slot of a region runs
// exactly once, as many slots as asked or, on the caller alone, one; the
// work split by the slots given is done whole; exceptions come back to the
// caller after every started slot ends; regions inside a region, or on a
// pool another thread is using, run on the calling thread; a region held up
// by a slow worker sends the pool to its caller alone; a pool that cannot
// start its threads says so (or keeps fewer, when allowed).
#include "platform/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

namespace latte {
namespace {

// Runs region(n) and checks its slots: the same count in every call, n or
// 1, each slot once. Returns that count.
template <class F>
int checked_run(ThreadPool& pool, int n, F&& f) {
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  std::atomic<int> seen_n{-1}, mixed{0};
  pool.run(n, [&](int s, int ns) {
    int expected = -1;
    if (!seen_n.compare_exchange_strong(expected, ns) && expected != ns) mixed.fetch_add(1);
    hits[static_cast<std::size_t>(s)].fetch_add(1);
    f(s, ns);
  });
  const int ns = seen_n.load();
  EXPECT_EQ(mixed.load(), 0) << "slots saw different counts";
  EXPECT_TRUE(ns == n || ns == 1) << ns << " slots for " << n;
  for (int s = 0; s < n; ++s) EXPECT_EQ(hits[static_cast<std::size_t>(s)].load(), s < ns ? 1 : 0) << "slot " << s;
  return ns;
}

TEST(ThreadPool, EverySlotRunsOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    EXPECT_EQ(pool.start_error(), "");
    for (int n : {1, 2, 3, 7, 64, 1000}) {
      for (int rep = 0; rep < 20; ++rep) {
        // Items split by the slots given: every item done once.
        std::vector<std::atomic<int>> items(static_cast<std::size_t>(3 * n));
        checked_run(pool, n, [&](int s, int ns) {
          for (int i = 3 * n * s / ns; i < 3 * n * (s + 1) / ns; ++i) items[static_cast<std::size_t>(i)].fetch_add(1);
        });
        for (auto& it : items) ASSERT_EQ(it.load(), 1) << threads << " threads, " << n << " slots";
      }
    }
  }
  // A pool without workers runs every region as one slot.
  ThreadPool one(1);
  EXPECT_EQ(checked_run(one, 8, [](int, int) {}), 1);
}

// Work written by the slots is visible to the caller when run() returns,
// and the workers really take part (over many regions, some slot runs on a
// thread other than the caller's).
TEST(ThreadPool, SlotsRunOnTheWorkersAndTheirWritesAreSeen) {
  ThreadPool pool(3);
  const std::thread::id caller = std::this_thread::get_id();
  bool elsewhere = false;
  for (int rep = 0; rep < 2000 && !elsewhere; ++rep) {
    std::vector<long> out(3, -1);
    std::vector<std::thread::id> who(3);
    pool.run(3, [&](int s, int ns) {
      if (ns != 3) return;
      long acc = 0;
      for (int i = 0; i <= 20000; ++i) acc += i % (s + 2);
      out[static_cast<std::size_t>(s)] = acc;
      who[static_cast<std::size_t>(s)] = std::this_thread::get_id();
    });
    if (out[0] < 0) continue;  // this region ran as one slot
    for (int s = 0; s < 3; ++s) {
      long want = 0;
      for (int i = 0; i <= 20000; ++i) want += i % (s + 2);
      ASSERT_EQ(out[static_cast<std::size_t>(s)], want);
      if (who[static_cast<std::size_t>(s)] != caller) elsewhere = true;
    }
  }
  EXPECT_TRUE(elsewhere) << "no slot ran on a worker in 2000 regions";
}

TEST(ThreadPool, FirstExceptionComesBackAfterEverySlot) {
  ThreadPool pool(2);
  for (int rep = 0; rep < 50; ++rep) {
    std::atomic<int> ran{0}, slots{0};
    try {
      pool.run(8, [&](int s, int ns) {
        slots.store(ns);
        ran.fetch_add(1);
        if (s == ns / 2) throw std::runtime_error("the middle slot");
      });
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "the middle slot");
    }
    EXPECT_EQ(ran.load(), slots.load());
  }
  // The pool is usable after it.
  std::atomic<int> sum{0};
  pool.run(4, [&](int s, int ns) {
    for (int i = 4 * s / ns; i < 4 * (s + 1) / ns; ++i) sum.fetch_add(i);
  });
  EXPECT_EQ(sum.load(), 6);
}

TEST(ThreadPool, RegionInsideARegionRunsOnTheCallingThread) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(4 * 5);
  std::atomic<int> inner_elsewhere{0}, inner_slots{0};
  pool.run(4, [&](int s, int ns) {
    for (int o = 4 * s / ns; o < 4 * (s + 1) / ns; ++o) {
      const std::thread::id me = std::this_thread::get_id();
      pool.run(5, [&](int t, int nt) {
        if (std::this_thread::get_id() != me) inner_elsewhere.fetch_add(1);
        if (nt != 1) inner_slots.fetch_add(1);
        for (int i = 5 * t / nt; i < 5 * (t + 1) / nt; ++i) hits[static_cast<std::size_t>(o * 5 + i)].fetch_add(1);
      });
    }
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  EXPECT_EQ(inner_elsewhere.load(), 0);
  EXPECT_EQ(inner_slots.load(), 0) << "an inner region ran as more than one slot";
}

// regions_asked counts the regions of more than one slot asked outside
// other regions, whether they then ran in parallel or on the caller: the
// fork/join points a step costs, whatever the governor decided.
TEST(ThreadPool, RegionsAskedCountsOuterRegionsOfSeveralSlots) {
  ThreadPool pool(2);
  const std::uint64_t r0 = regions_asked();
  pool.run(1, [](int, int) {});
  EXPECT_EQ(regions_asked(), r0) << "one slot is no region";
  pool.run(3, [&](int, int) { pool.run(2, [](int, int) {}); });
  EXPECT_EQ(regions_asked(), r0 + 1) << "the inner regions run inside the outer one";
  ThreadPool alone(1);
  alone.run(4, [](int, int) {});
  EXPECT_EQ(regions_asked(), r0 + 2) << "a region asked of a pool of one thread is still a region asked";
}

TEST(ThreadPool, TwoCallersOfOnePoolBothGetEverySlot) {
  ThreadPool pool(2);
  auto caller = [&](std::vector<int>& sums) {
    for (int rep = 0; rep < 300; ++rep) {
      std::vector<std::atomic<int>> hits(16);
      pool.run(16, [&](int s, int ns) {
        for (int i = 16 * s / ns; i < 16 * (s + 1) / ns; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
      });
      int total = 0;
      for (auto& h : hits) total += h.load() == 1;
      sums.push_back(total);
    }
  };
  std::vector<int> a, b;
  std::thread other([&] { caller(b); });
  caller(a);
  other.join();
  for (int v : a) ASSERT_EQ(v, 16);
  for (int v : b) ASSERT_EQ(v, 16);
}

TEST(ThreadPool, ScopeSetsTheCurrentPool) {
  ThreadPool a(2), b(3);
  {
    const PoolScope sa(a);
    EXPECT_EQ(&current_pool(), &a);
    {
      const PoolScope sb(b);
      EXPECT_EQ(&current_pool(), &b);
      EXPECT_EQ(current_pool_threads(), 3);
    }
    EXPECT_EQ(&current_pool(), &a);
  }
  EXPECT_NE(&current_pool(), &a);
  EXPECT_GE(current_pool().threads(), 1);
  EXPECT_GE(available_cpus(), 1);
}

// A worker that holds every region up (its slots take 2 ms where the
// caller's take nothing: what another program preempting it does) makes a
// step run in parallel slower than on the caller alone; after a trial of
// each, the pool's steps run on the caller (one slot), and after a while
// it tries in parallel again. Outside steps, regions stay parallel.
// Asleep is where a lost wake-up hides: the sleep primitive wakes a sleeper
// each time, and pools whose workers sleep (regions farther apart than
// their spin) start and stop without hanging (mingw's std::atomic::wait
// once lost a wake-up and hung a pool's stop under wine).
TEST(ThreadPool, SleepersWakeAndPoolsStopWithTheirWorkersAsleep) {
  std::atomic<std::uint32_t> word{0};
  std::atomic<int> woken{0};
  std::thread sleeper([&] {
    for (std::uint32_t i = 0; i < 200; ++i) {
      while (word.load() == i) wait_while_equal(word, i);
      woken.fetch_add(1);
    }
  });
  for (std::uint32_t i = 0; i < 200; ++i) {
    if (i % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));  // often asleep first
    word.fetch_add(1);
    wake_all(word);
    while (woken.load() <= static_cast<int>(i)) std::this_thread::yield();
  }
  sleeper.join();
  EXPECT_EQ(woken.load(), 200);

  for (int round = 0; round < 30; ++round) {
    ThreadPool pool(3);
    for (int r = 0; r < 3; ++r) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // past the spin: the workers sleep
      std::atomic<int> sum{0};
      pool.run(6, [&](int s, int n) { sum.fetch_add(n == 6 ? s + 1 : 21); });
      ASSERT_EQ(sum.load(), 21) << "round " << round;
    }
  }
}

TEST(ThreadPool, StepsHeldUpByAWorkerRunOnTheCaller) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  auto step = [&] {
    const PoolStep s(&pool);
    int slots = 0;
    for (int r = 0; r < 3; ++r)
      pool.run(2, [&](int, int ns) {
        slots = ns;
        if (std::this_thread::get_id() != caller) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      });
    return slots;
  };
  const auto start = std::chrono::steady_clock::now();
  bool alone = false;
  while (!alone && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) alone = step() == 1;
  ASSERT_TRUE(alone) << "steps still parallel after 5 s of slower steps";
  EXPECT_EQ(step(), 1);
  EXPECT_EQ(pool.threads_now(), 2) << "outside a step";
  int outside = 0;
  pool.run(2, [&](int, int ns) { outside = ns; });
  EXPECT_EQ(outside, 2) << "a region outside any step ran on the caller alone";
  bool parallel_again = false;
  const auto paused = std::chrono::steady_clock::now();
  while (!parallel_again && std::chrono::steady_clock::now() - paused < std::chrono::seconds(5)) parallel_again = step() == 2;
  EXPECT_TRUE(parallel_again) << "never tried in parallel again";
}

#if defined(__linux__)
// In a child process limited to 3 threads (RLIMIT_NPROC, which the kernel
// does not apply to root: the child gives root up first where it has it),
// a pool of 8 cannot start: the constructor throws naming the thread, or
// with allow_fewer keeps what started. Exit codes: 0 as expected, 10+ what
// went wrong.
int limited_child() {
  if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) return 10;
  const rlimit lim{3, 3};
  if (setrlimit(RLIMIT_NPROC, &lim) != 0) return 11;
  try {
    ThreadPool pool(8);
    return 12;  // started all 8
  } catch (const ThreadStartError& e) {
    if (std::string(e.what()).find("cannot start thread") == std::string::npos) return 13;
  }
  ThreadPool fewer(8, /*allow_fewer=*/true);
  if (fewer.threads() >= 8 || fewer.threads() < 1) return 14;
  if (fewer.start_error().find("of 8") == std::string::npos) return 15;
  std::atomic<int> sum{0};
  fewer.run(8, [&](int s, int ns) {
    for (int i = 8 * s / ns; i < 8 * (s + 1) / ns; ++i) sum.fetch_add(i);
  });
  return sum.load() == 28 ? 0 : 16;
}

TEST(ThreadPool, ThreadsTheOsRefusesAreAnErrorNotAnExit) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(limited_child());  // _exit: no atexit handlers (LeakSanitizer's thread) in the child
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// A child forked after the pool ran regions has none of its workers: its
// regions run on the calling thread instead of waiting for them.
TEST(ThreadPool, ForkedChildRunsRegionsItself) {
  ThreadPool pool(3);
  std::atomic<int> warm{0};
  pool.run(6, [&](int, int) { warm.fetch_add(1); });
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::atomic<int> sum{0}, slots{0};
    pool.run(6, [&](int s, int ns) {
      slots.store(ns);
      for (int i = 6 * s / ns; i < 6 * (s + 1) / ns; ++i) sum.fetch_add(i);
    });
    _exit(sum.load() == 15 && slots.load() == 1 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_GE(warm.load(), 1);
}
#endif

}  // namespace
}  // namespace latte

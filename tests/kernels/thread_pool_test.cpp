// The thread pool (platform/thread_pool.h): every slot runs exactly once on
// pools of any size, however many slots; exceptions come back to the caller
// after every started slot ends; regions inside a region, or on a pool
// another thread is using, run on the calling thread; a pool that cannot
// start its threads says so (or keeps fewer, when allowed).
#include "platform/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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

TEST(ThreadPool, EverySlotRunsOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    EXPECT_EQ(pool.start_error(), "");
    for (int n : {1, 2, 3, 7, 64, 1000}) {
      for (int rep = 0; rep < 20; ++rep) {
        std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
        std::atomic<int> wrong_n{0};
        pool.run(n, [&](int s, int ns) {
          hits[static_cast<std::size_t>(s)].fetch_add(1);
          if (ns != n) wrong_n.fetch_add(1);
        });
        for (int s = 0; s < n; ++s) ASSERT_EQ(hits[static_cast<std::size_t>(s)].load(), 1) << threads << " threads, slot " << s << " of " << n;
        ASSERT_EQ(wrong_n.load(), 0);
      }
    }
  }
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
    pool.run(3, [&](int s, int) {
      long acc = 0;
      for (int i = 0; i <= 20000; ++i) acc += i % (s + 2);
      out[static_cast<std::size_t>(s)] = acc;
      who[static_cast<std::size_t>(s)] = std::this_thread::get_id();
    });
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
    std::atomic<int> ran{0};
    try {
      pool.run(8, [&](int s, int) {
        ran.fetch_add(1);
        if (s == 3) throw std::runtime_error("slot 3");
      });
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "slot 3");
    }
    EXPECT_EQ(ran.load(), 8);
  }
  // The pool is usable after it.
  std::atomic<int> sum{0};
  pool.run(4, [&](int s, int) { sum.fetch_add(s); });
  EXPECT_EQ(sum.load(), 6);
}

TEST(ThreadPool, RegionInsideARegionRunsOnTheCallingThread) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(4 * 5);
  std::atomic<int> inner_elsewhere{0};
  pool.run(4, [&](int s, int) {
    const std::thread::id me = std::this_thread::get_id();
    pool.run(5, [&](int t, int) {
      if (std::this_thread::get_id() != me) inner_elsewhere.fetch_add(1);
      hits[static_cast<std::size_t>(s * 5 + t)].fetch_add(1);
    });
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  EXPECT_EQ(inner_elsewhere.load(), 0);
}

TEST(ThreadPool, TwoCallersOfOnePoolBothGetEverySlot) {
  ThreadPool pool(2);
  auto caller = [&](std::vector<int>& sums) {
    for (int rep = 0; rep < 300; ++rep) {
      std::vector<std::atomic<int>> hits(16);
      pool.run(16, [&](int s, int) { hits[static_cast<std::size_t>(s)].fetch_add(1); });
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
  fewer.run(8, [&](int s, int) { sum.fetch_add(s); });
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
    std::atomic<int> sum{0};
    pool.run(6, [&](int s, int) { sum.fetch_add(s); });
    _exit(sum.load() == 15 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(warm.load(), 6);
}
#endif

}  // namespace
}  // namespace latte

// Tests that a FIFO named as a file to read is refused rather than waited on
// (open() would block until a writer came, forever, in the caller's thread).
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

namespace latte::test {

// A FIFO at `path` (replacing whatever was there), removed at scope end.
class TempFifo {
 public:
  explicit TempFifo(std::string path) : path_(std::move(path)) {
    ::unlink(path_.c_str());
    if (::mkfifo(path_.c_str(), 0600) != 0) ADD_FAILURE() << "mkfifo " << path_ << ": " << std::strerror(errno);
  }
  ~TempFifo() { ::unlink(path_.c_str()); }
  TempFifo(const TempFifo&) = delete;
  TempFifo& operator=(const TempFifo&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs `child` in a child process under a 10 s alarm and expects exit code
// 0 from it: a read that blocks on the FIFO fails the test (SIGALRM) instead
// of hanging the run.
inline void expect_child_exits_0_unblocked(const std::function<int()>& child) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::alarm(10);
        std::exit(child());
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace latte::test

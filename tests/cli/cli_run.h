// Running the `latte` binary from the CLI's tests: through a shell with its
// output in a pipe, or with stderr (and stdin) on a pseudo-terminal, typing
// into it as a user would.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace latte::test {

struct Result {
  int code;
  std::string output;  // stdout + stderr
};

// The exit code and stdout of a shell command line.
inline Result run_command(const std::string& cmd) {
  Result r{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// latte's stdout + stderr, or with stdout_only the text a command generates alone.
inline Result run(const std::string& args, bool stdout_only = false) {
  return run_command(std::string(LATTE_CLI) + " " + args + (stdout_only ? " 2>/dev/null" : " 2>&1"));
}

// A shell command line as it is (stdout + stderr).
inline Result run_shell(const std::string& cmd) { return run_command(cmd + " 2>&1"); }

// Text to type into a terminal once its output holds `wait_for` (after what
// the previous step waited for), a fifth of a second later, as a person
// would: a program shows its prompt before it sets the terminal up to read
// (libedit's raw mode), and what is typed in between is read the
// terminal's default way. An empty `type` only waits. `signal`, when not
// 0, is sent to the command's process then (the command's own process with
// `exec` in front of it, else the shell).
struct TerminalStep {
  std::string wait_for;
  std::string type;
  int signal = 0;
};

// Runs a shell command line with stderr on a new pseudo-terminal (and stdin
// with stdin_on_terminal, else /dev/null; stdout as the command line
// redirects it, else /dev/null). The terminal translates no output ('\n'
// stays '\n', so a '\r' seen is the program's own). Returns the exit code
// (-1 on a signal or after timeout_s) and what the terminal showed.
inline Result run_on_terminal(const std::string& cmd, bool stdin_on_terminal,
                              const std::vector<TerminalStep>& steps = {}, int timeout_s = 120) {
  Result r{-1, ""};
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) return r;
  const std::string slave_name = ::ptsname(master);
  {
    const int slave = ::open(slave_name.c_str(), O_RDWR | O_NOCTTY);
    termios t{};
    ::tcgetattr(slave, &t);
    t.c_oflag &= ~static_cast<tcflag_t>(OPOST);
    ::tcsetattr(slave, TCSANOW, &t);
    ::close(slave);
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();  // the terminal becomes the child's controlling terminal
    const int slave = ::open(slave_name.c_str(), O_RDWR);
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(stdin_on_terminal ? slave : null, 0);
    ::dup2(null, 1);
    ::dup2(slave, 2);
    ::close(master);
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::size_t step = 0, from = 0;
  int status = 0;
  bool exited = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (true) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) {
      char buf[4096];
      const ssize_t n = ::read(master, buf, sizeof buf);
      if (n > 0) r.output.append(buf, static_cast<std::size_t>(n));
      else if (exited) break;  // EIO: the child and its terminal are gone
    } else if (exited) {
      break;
    }
    if (step < steps.size()) {
      const std::size_t at = r.output.find(steps[step].wait_for, from);
      if (at != std::string::npos) {
        from = at + steps[step].wait_for.size();
        const std::string& text = steps[step].type;
        if (!text.empty()) {
          ::usleep(200 * 1000);
          if (::write(master, text.data(), text.size()) != static_cast<ssize_t>(text.size())) break;
        }
        if (steps[step].signal != 0) ::kill(pid, steps[step].signal);
        ++step;
      }
    }
    if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) exited = true;
    if (!exited && std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      r.output += "\n[run_on_terminal: timed out after " + std::to_string(timeout_s) + " s]";
      ::close(master);
      return r;
    }
  }
  ::close(master);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace latte::test

// Starting a child process without a shell, with its stdin, stdout and stderr on pipes.
//
// Thread-safety: spawn() may be called from any thread; it only uses async-signal-safe calls
// between fork and exec, so other threads of the bridge cannot deadlock the child.
#pragma once

#include <string>
#include <vector>

#include <sys/types.h>

#include "common/error.hpp"
#include "common/expected.hpp"

namespace mcpmqtt::stdio {

// An owned file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct SpawnRequest {
  std::string command;  // argv[0]; looked up in the PATH of `env` unless it contains a '/'
  std::vector<std::string> args;
  std::vector<std::string> env;  // "NAME=value", the child's whole environment
  std::string cwd;               // empty: the bridge's working directory
};

struct SpawnedProcess {
  pid_t pid = -1;     // also the id of its process group
  UniqueFd stdin_fd;  // write end; all three are close-on-exec in the bridge
  UniqueFd stdout_fd;
  UniqueFd stderr_fd;
};

// Starts the process: in its own process group, signal mask and dispositions reset to the
// defaults (the bridge ignores SIGPIPE; a child must not inherit that), every descriptor other
// than 0, 1 and 2 closed, `cwd` applied, then exec'd like execvpe with the child's own PATH —
// never through a shell. A failure anywhere before the program runs (no such command, not
// executable, bad cwd, no more processes) is returned as its kind (not_found, permission_denied,
// resources_exhausted, ...) and a sentence naming what failed, and no process is left behind.
Expected<SpawnedProcess, Error> spawn(const SpawnRequest& request);

}  // namespace mcpmqtt::stdio

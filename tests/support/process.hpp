// Child processes for tests: start with argv (never a shell), optional pipes, signals, waiting
// with a deadline, and cleanup of the whole process group on destruction.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace mcpmqtt::test {

class Process {
 public:
  struct Options {
    std::vector<std::string> argv;
    std::map<std::string, std::string> env;  // added to (or replacing in) the inherited env
    std::string cwd;
    std::string stdout_file;  // empty: inherit (unless pipe_stdout)
    std::string stderr_file;  // empty: inherit
    bool pipe_stdin = false;
    bool pipe_stdout = false;
  };

  // Options for a process whose stdout the test reads (read_line), stdin and stderr inherited.
  static Options piped(std::vector<std::string> argv) {
    Options o;
    o.argv = std::move(argv);
    o.pipe_stdout = true;
    return o;
  }
  // Starts the process in a new process group; throws std::runtime_error when it cannot.
  static std::unique_ptr<Process> start(Options options);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  void signal(int sig);        // the process only
  void signal_group(int sig);  // its whole process group
  // Waits for exit; returns the wait status, or nullopt on timeout.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  // Exit code if it exited normally, -signal if killed, nullopt if still running.
  std::optional<int> exit_code() const;

  // Pipes (when requested).
  void write_stdin(const std::string& data);
  void close_stdin();
  // Reads one line from stdout (without the newline) before the deadline.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  // Everything buffered and readable from stdout right now or until EOF/timeout.
  std::string read_all(std::chrono::milliseconds timeout);

 private:
  Process() = default;
  pid_t pid_ = -1;
  std::optional<int> status_;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::string stdout_buf_;
};

// Runs a command to completion and captures stdout and stderr.
struct RunResult {
  int exit_code = -1;  // -signal if killed, -1000 on timeout
  std::string out;
  std::string err;
};
RunResult run_capture(const std::vector<std::string>& argv,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30),
                      const std::map<std::string, std::string>& env = {});

// True if a process with this pid exists (and is not a zombie of ours already reaped).
bool pid_alive(pid_t pid);

}  // namespace mcpmqtt::test

// The real mcp-mqtt-bridge executable as a process in a test: arguments, a configuration file,
// its log (stderr) in a temp file, waiting for log lines, SIGTERM and the exit status.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

namespace mcpmqtt::test {

class BridgeProcess {
 public:
  // Starts `mcp-mqtt-bridge ARGS...`; `config` (if not empty) is written to a file and passed
  // with --config. `env` is added to the environment.
  explicit BridgeProcess(std::vector<std::string> args, const std::string& config = {},
                         std::map<std::string, std::string> env = {}, bool pipe_stdio = false);
  ~BridgeProcess();

  Process& process() { return *proc_; }
  pid_t pid() const { return proc_->pid(); }
  std::string log() const;
  // True once a log line containing `needle` appeared (the log is polled).
  bool wait_for_log(const std::string& needle,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // SIGTERM, then the exit code (nullopt if it did not exit in time).
  std::optional<int> terminate(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // The exit code once it exits without another signal (nullopt if it did not exit in time):
  // after a SIGTERM of the test's own, whose graceful end a second one would cut short.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  const std::string& dir() const { return dir_.path(); }

 private:
  TempDir dir_;
  std::unique_ptr<Process> proc_;
};

// Processes whose parent is `pid` (from /proc), excluding zombies.
std::vector<pid_t> children_of(pid_t pid);

// The pinned Node binary and the server-everything entry point (tests/node, see its README).
std::string node_binary();
std::string server_everything();

}  // namespace mcpmqtt::test

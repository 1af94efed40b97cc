// Shared pieces of the stdio transport's integration tests: an io_context driven by the test
// thread until a condition holds, a recorder of what a channel delivered, a capture of the
// "stdio" log, and /proc inspection.
#pragma once

#include <algorithm>
#include <chrono>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <dirent.h>
#include <spdlog/sinks/base_sink.h>
#include <unistd.h>

#include "bridge/relay/channel.hpp"
#include "common/log.hpp"
#include "tests/support/log_capture.hpp"

namespace mcpmqtt::test::stdio {

using namespace std::chrono_literals;

// The io_context runs on the test thread only, inside run_until: calls the test makes between
// runs are therefore on the (otherwise idle) strand.
struct Loop {
  boost::asio::io_context ioc;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work =
      boost::asio::make_work_guard(ioc);
  boost::asio::any_io_executor strand = boost::asio::make_strand(ioc);

  template <typename Pred>
  bool run_until(Pred pred, std::chrono::milliseconds timeout = 20s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      ioc.run_one_for(20ms);
    }
    return true;
  }
  // Runs whatever is ready now, without waiting.
  void poll() { ioc.poll(); }
};

// What a channel delivered, in order.
struct Recorder {
  std::vector<jsonrpc::Message> messages;
  std::vector<bridge::CloseReason> closes;
  std::vector<std::string> events;  // "message <text>" and "close <detail>", in arrival order

  bridge::Channel::Receiver receiver() {
    return {[this](jsonrpc::Message m) {
              events.push_back("message " + std::string(m.text()));
              messages.push_back(std::move(m));
            },
            [this](const bridge::CloseReason& why) {
              events.push_back("close " + why.detail);
              closes.push_back(why);
            }};
  }
  bool closed() const { return !closes.empty(); }
};

// /proc/<pid>/stat: state letter and parent pid; nullopt when the process does not exist.
struct ProcStat {
  char state = '?';
  pid_t ppid = 0;
};
inline std::optional<ProcStat> proc_stat(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  if (!f || !std::getline(f, s)) return std::nullopt;
  const auto close = s.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(s.substr(close + 2));
  ProcStat st;
  rest >> st.state >> st.ppid;
  return st;
}

// Neither running nor a zombie waiting for this process to reap it.
inline bool gone(pid_t pid) {
  const auto st = proc_stat(pid);
  if (!st) return true;
  return st->state == 'Z' && st->ppid != ::getpid();
}

// Children of this process that are zombies (nobody reaped them).
inline std::vector<pid_t> zombie_children() {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    const auto st = proc_stat(pid);
    if (st && st->ppid == ::getpid() && st->state == 'Z') out.push_back(pid);
  }
  ::closedir(d);
  return out;
}

}  // namespace mcpmqtt::test::stdio

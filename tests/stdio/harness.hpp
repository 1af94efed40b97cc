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

// Captures what the "stdio" logger writes while it exists.
class LogCapture {
 public:
  LogCapture() : logger_(log::get("stdio")), sink_(std::make_shared<Sink>()) {
    logger_->sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = logger_->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::vector<std::string> lines() const {
    std::lock_guard lock(sink_->mu);
    return sink_->lines;
  }
  // The first captured line containing every one of `parts`, or nullopt.
  std::optional<std::string> find(const std::vector<std::string>& parts) const {
    for (const auto& l : lines()) {
      if (std::all_of(parts.begin(), parts.end(),
                      [&](const std::string& p) { return l.find(p) != std::string::npos; }))
        return l;
    }
    return std::nullopt;
  }
  std::string dump() const {
    std::string out;
    for (const auto& l : lines())
      out += l + "\n";
    return out;
  }

 private:
  struct Sink : spdlog::sinks::base_sink<std::mutex> {
    std::mutex mu;
    std::vector<std::string> lines;
    void sink_it_(const spdlog::details::log_msg& msg) override {
      std::lock_guard lock(mu);
      lines.emplace_back(msg.payload.data(), msg.payload.size());
    }
    void flush_() override {}
  };
  std::shared_ptr<spdlog::logger> logger_;
  std::shared_ptr<Sink> sink_;
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

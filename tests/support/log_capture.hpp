// Collects what one of the daemon's loggers ("daemon", "bridge", "mqtt", "http", "stdio") writes
// while it exists, for tests that check a message reached the log (or that a secret did not).
// Thread-safe: the sink has its own lock.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include "common/log.hpp"

namespace mcpmqtt::test {

class LogCapture {
 public:
  struct Options {
    // The newest lines kept; older ones are dropped.
    std::size_t max_lines = 4096;
    // Lowers the logger's level for as long as the capture lives (a test that checks what even
    // trace lines leave out), and puts it back after.
    std::optional<spdlog::level::level_enum> level;
  };

  explicit LogCapture(const std::string& logger) : LogCapture(logger, Options{}) {}
  LogCapture(const std::string& logger, Options o)
      : logger_(mcpmqtt::log::get(logger)), sink_(std::make_shared<Sink>(o.max_lines)) {
    logger_->sinks().push_back(sink_);
    if (o.level) {
      restore_level_ = logger_->level();
      logger_->set_level(*o.level);
    }
  }
  ~LogCapture() {
    if (restore_level_) logger_->set_level(*restore_level_);
    auto& s = logger_->sinks();
    s.erase(std::remove(s.begin(), s.end(), sink_), s.end());
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // The lines written, formatted, oldest first.
  std::vector<std::string> lines() const {
    std::lock_guard lock(sink_->mu);
    return {sink_->lines.begin(), sink_->lines.end()};
  }
  // The first line containing every one of `parts`, or nullopt.
  std::optional<std::string> find(const std::vector<std::string>& parts) const {
    for (const auto& l : lines()) {
      if (std::all_of(parts.begin(), parts.end(),
                      [&](const std::string& p) { return l.find(p) != std::string::npos; }))
        return l;
    }
    return std::nullopt;
  }
  // Every line, one per line of text.
  std::string dump() const {
    std::string out;
    for (const auto& l : lines())
      out += l + "\n";
    return out;
  }

 private:
  struct Sink : spdlog::sinks::base_sink<std::mutex> {
    explicit Sink(std::size_t max) : max_lines(max) {}
    const std::size_t max_lines;
    mutable std::mutex mu;
    std::deque<std::string> lines;
    void sink_it_(const spdlog::details::log_msg& msg) override {
      spdlog::memory_buf_t formatted;
      formatter_->format(msg, formatted);
      std::string line(formatted.data(), formatted.size());
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
        line.pop_back();
      std::lock_guard lock(mu);
      lines.push_back(std::move(line));
      if (lines.size() > max_lines) lines.pop_front();
    }
    void flush_() override {}
  };

  std::shared_ptr<spdlog::logger> logger_;
  std::shared_ptr<Sink> sink_;
  std::optional<spdlog::level::level_enum> restore_level_;
};

}  // namespace mcpmqtt::test

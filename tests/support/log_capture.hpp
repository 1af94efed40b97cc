// Collects what one of the daemon's loggers ("daemon", "bridge", "mqtt", …) writes while it
// exists, for tests that check a message reached the log. Thread-safe (spdlog's _mt sink).
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "common/log.hpp"

namespace mcpmqtt::test {

class LogCapture {
 public:
  explicit LogCapture(const std::string& logger, std::size_t lines = 64)
      : logger_(mcpmqtt::log::get(logger)),
        sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(lines)) {
    logger_->sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& s = logger_->sinks();
    s.erase(std::remove(s.begin(), s.end(), sink_), s.end());
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // The last lines written, formatted, oldest first.
  std::vector<std::string> lines() { return sink_->last_formatted(); }

 private:
  std::shared_ptr<spdlog::logger> logger_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

}  // namespace mcpmqtt::test

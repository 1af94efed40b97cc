// Loggers, one per component (bridge, mqtt, http, stdio, daemon), all writing to stderr so that
// systemd's journal and `docker logs` collect them. Never pass secrets to a logger.
//
// Thread-safe: loggers are created once and shared.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace mcpmqtt::log {

// The logger of a component, created on first use with the current level.
std::shared_ptr<spdlog::logger> get(const std::string& component);

// The components' loggers, looked up once.
inline const std::shared_ptr<spdlog::logger>& bridge() {
  static const auto l = get("bridge");
  return l;
}
inline const std::shared_ptr<spdlog::logger>& mqtt() {
  static const auto l = get("mqtt");
  return l;
}
inline const std::shared_ptr<spdlog::logger>& http() {
  static const auto l = get("http");
  return l;
}
inline const std::shared_ptr<spdlog::logger>& stdio() {
  static const auto l = get("stdio");
  return l;
}
inline const std::shared_ptr<spdlog::logger>& daemon() {
  static const auto l = get("daemon");
  return l;
}

// Sets the level of every logger, existing and future. Returns false for an unknown level name.
bool set_level(const std::string& level);

// Filters what reaches stderr without changing the loggers' levels (tests keep loggers at debug
// for log captures and show only warnings on the terminal).
bool set_stderr_level(const std::string& level);

// Timestamps are left out when stderr goes to the journal, which adds its own.
void configure_format(bool journal);

// A duration as messages and log lines say it: "2 s" when whole seconds, else "1500 ms".
std::string duration_text(std::chrono::milliseconds d);

// One line per interval for a warning a peer can repeat at will (a flood of refused messages):
// the rest are counted and the next line that gets through says how many were held back.
// Not thread-safe: one per strand.
class Throttle {
 public:
  explicit Throttle(std::chrono::steady_clock::duration every = std::chrono::seconds(1))
      : every_(every) {}
  // True when a line may be written now; `held_back` is then how many were not since the last.
  bool allow(std::size_t& held_back) {
    const auto now = std::chrono::steady_clock::now();
    if (last_ != std::chrono::steady_clock::time_point{} && now - last_ < every_) {
      ++held_back_;
      return false;
    }
    last_ = now;
    held_back = held_back_;
    held_back_ = 0;
    return true;
  }

 private:
  std::chrono::steady_clock::duration every_;
  std::chrono::steady_clock::time_point last_{};
  std::size_t held_back_ = 0;
};

}  // namespace mcpmqtt::log

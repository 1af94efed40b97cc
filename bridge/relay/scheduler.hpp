// Timers for the protocol core, which has no I/O library of its own. The daemon supplies one
// backed by Asio timers on the session's strand; tests supply a manual clock.
//
// Contract: callbacks run on the same executor as the code that scheduled them; a cancelled
// timer's callback never runs. Not thread-safe: one strand.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace mcpmqtt::bridge {

class Scheduler {
 public:
  using Clock = std::chrono::steady_clock;
  using TimerId = std::uint64_t;

  virtual ~Scheduler() = default;
  virtual TimerId schedule(std::chrono::milliseconds delay, std::function<void()> fn) = 0;
  virtual void cancel(TimerId id) = 0;
  virtual Clock::time_point now() const = 0;
};

}  // namespace mcpmqtt::bridge

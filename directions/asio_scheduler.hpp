// bridge::Scheduler on Asio timers, for one session's strand.
// One strand; not thread-safe: schedule/cancel on the strand given at construction.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "bridge/relay/scheduler.hpp"

namespace mcpmqtt::directions {

class AsioScheduler : public bridge::Scheduler {
 public:
  explicit AsioScheduler(boost::asio::any_io_executor strand) : strand_(std::move(strand)) {}
  ~AsioScheduler() override;
  AsioScheduler(const AsioScheduler&) = delete;
  AsioScheduler& operator=(const AsioScheduler&) = delete;

  TimerId schedule(std::chrono::milliseconds delay, std::function<void()> fn) override;
  void cancel(TimerId id) override;
  Clock::time_point now() const override { return Clock::now(); }

 private:
  boost::asio::any_io_executor strand_;
  // Shared with the wait handlers so that a timer firing after the scheduler is gone is a no-op.
  // A session's scheduler holds a timer or two at a time, scheduled and cancelled once per
  // request (the splice's deadline): a few slots searched in order, and the timers of ended
  // ones kept for the next schedule instead of allocated again.
  struct Slot {
    TimerId id;
    std::unique_ptr<boost::asio::steady_timer> timer;
  };
  struct State {
    std::vector<Slot> armed;
    std::vector<std::unique_ptr<boost::asio::steady_timer>> spare;
    bool alive = true;
    // The armed slot `id`, or end().
    std::vector<Slot>::iterator find(TimerId id);
    // Ends slot `it`: its timer becomes a spare (at most a few are kept).
    void release(std::vector<Slot>::iterator it);
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
  TimerId next_ = 1;
};

// Calls `done` on `ex` once `ready()` holds (checked every `every`) or `timeout` has passed.
void poll_until(boost::asio::any_io_executor ex, std::function<bool()> ready,
                std::chrono::milliseconds timeout, std::function<void()> done,
                std::chrono::milliseconds every = std::chrono::milliseconds(20));

}  // namespace mcpmqtt::directions

// One Asio timer for the per-connection and per-session deadlines of an io_context (issue 34):
// the native MQTT links' keep-alives (on a grid of whole seconds) and connect deadlines, the HTTP
// sessions' idle checks. Each deadline is an entry listed with every other entry due at the same
// instant: an ingress holding 10,000 idle sessions wakes once a second for the ~167 PINGREQs due
// then and takes them from one list. Left on Asio's own timer heap, each of those would be popped
// from among 20,000 timers, every pop (and every push of a short timer, such as the daemon's
// readiness poll) touching a dozen other sessions' timers on pages long unused — which a VM that
// reclaims idle memory makes costly (bench/README.md, "Idle sessions").
//
// A target has at most one entry: arming again moves it, cancelling removes it (the target's
// destructor must cancel). A call already on its way when the target arms again or cancels still
// arrives; the generation it carries tells the target it is stale.
//
// Thread-safe (a mutex): targets on different strands arm it. A target's call runs on the
// timer's thread, outside the lock; the target posts it to its own strand.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

namespace mcpmqtt::loop {

class TimerList final : public boost::asio::execution_context::service {
 public:
  using Clock = std::chrono::steady_clock;

  class Target {
   public:
    virtual ~Target() = default;
    // The entry armed with `generation` is due. Called on the timer's thread: post to the
    // target's strand, and there ignore a generation that is not the latest armed.
    virtual void on_due(std::uint64_t generation) = 0;

   private:
    friend class TimerList;
    std::optional<Clock::time_point> entry_at_;  // guarded by the TimerList's mutex
  };

  static boost::asio::execution_context::id id;

  explicit TimerList(boost::asio::io_context& io);
  ~TimerList() override;

  // The service of the io_context behind `ex` (everything in the daemon and its tests runs on
  // an io_context).
  static TimerList& of(const boost::asio::any_io_executor& ex);
  static TimerList& of(boost::asio::io_context& io) {
    return boost::asio::use_service<TimerList>(io);
  }

  // At `at`, or as soon after as the loop gets to it: target->on_due(generation), unless the
  // target armed again, cancelled or is gone by then. Replaces the target's entry.
  void arm(const std::shared_ptr<Target>& target, std::uint64_t generation, Clock::time_point at);
  // Removes the target's entry, if any.
  void cancel(Target& target);

  // Entries waiting, and the timer's wakes so far (tests).
  std::size_t entries() const;
  std::uint64_t wakes() const;

 private:
  struct Entry {
    Target* target;  // identity, for cancel(); used only while the target holds an entry
    std::weak_ptr<Target> alive;
    std::uint64_t generation;
  };

  void shutdown() override;
  void remove_locked(Target& target);
  // The timer at the earliest entry, unless it is armed for that or sooner already.
  void rearm_locked();
  void on_timer(const boost::system::error_code& ec);

  mutable std::mutex mu_;
  std::map<Clock::time_point, std::vector<Entry>> due_;
  std::size_t entries_ = 0;
  std::uint64_t wakes_ = 0;
  boost::asio::steady_timer timer_;
  std::optional<Clock::time_point> armed_at_;
  bool shut_down_ = false;
};

}  // namespace mcpmqtt::loop

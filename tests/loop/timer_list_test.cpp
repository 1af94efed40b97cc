// One timer for the per-connection and per-session deadlines of an io_context
// (loop/timer_list.hpp): entries due at one instant are taken in one wake, a target's entry moves
// when it arms again and goes when it cancels, and a target that is gone is never called.
#include "loop/timer_list.hpp"

#include <chrono>
#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

using mcpmqtt::loop::TimerList;
using namespace std::chrono_literals;

namespace {

struct Target : TimerList::Target {
  explicit Target(TimerList& t) : timers(t) {}
  ~Target() override { timers.cancel(*this); }
  void on_due(std::uint64_t generation) override {
    calls.push_back(generation);
    called_at.push_back(TimerList::Clock::now());
  }
  TimerList& timers;
  std::vector<std::uint64_t> calls;
  std::vector<TimerList::Clock::time_point> called_at;
};

}  // namespace

TEST_CASE(
    "timer list (issue 34): entries due at one instant are taken in one wake, each target "
    "called once with the generation it armed",
    "[loop][timer_list]") {
  boost::asio::io_context io;
  auto& timers = TimerList::of(io.get_executor());
  std::vector<std::shared_ptr<Target>> targets;
  const auto at = TimerList::Clock::now() + 30ms;
  for (int i = 0; i < 300; ++i) {
    targets.push_back(std::make_shared<Target>(timers));
    timers.arm(targets.back(), static_cast<std::uint64_t>(i), at);
  }
  CHECK(timers.entries() == 300);
  io.run();
  CHECK(timers.wakes() == 1);
  CHECK(timers.entries() == 0);
  for (int i = 0; i < 300; ++i) {
    REQUIRE(targets[i]->calls.size() == 1);
    CHECK(targets[i]->calls[0] == static_cast<std::uint64_t>(i));
    CHECK(targets[i]->called_at[0] >= at);
  }
}

TEST_CASE(
    "timer list: arming again moves a target's one entry (sooner or later), cancelling removes "
    "it, and a target that is gone is not called",
    "[loop][timer_list]") {
  boost::asio::io_context io;
  auto& timers = TimerList::of(io.get_executor());
  const auto now = TimerList::Clock::now();
  auto later = std::make_shared<Target>(timers);
  auto sooner = std::make_shared<Target>(timers);
  auto cancelled = std::make_shared<Target>(timers);
  auto gone = std::make_shared<Target>(timers);

  timers.arm(later, 1, now + 20ms);
  timers.arm(later, 2, now + 60ms);  // moved later: the 20 ms entry goes
  timers.arm(sooner, 1, now + 200ms);
  timers.arm(sooner, 2, now + 40ms);  // moved sooner: the timer wakes for it
  timers.arm(cancelled, 1, now + 30ms);
  timers.cancel(*cancelled);
  timers.arm(gone, 1, now + 30ms);
  CHECK(timers.entries() == 3);
  gone.reset();  // its destructor cancels
  CHECK(timers.entries() == 2);

  io.run();
  CHECK(later->calls == std::vector<std::uint64_t>{2});
  CHECK(later->called_at.at(0) >= now + 60ms);
  CHECK(sooner->calls == std::vector<std::uint64_t>{2});
  CHECK(sooner->called_at.at(0) >= now + 40ms);
  CHECK(sooner->called_at.at(0) < now + 200ms);
  CHECK(cancelled->calls.empty());
  CHECK(timers.entries() == 0);

  // A target may arm again from its call: the next entry is taken in a later wake.
  struct Rearming : Target {
    using Target::Target;
    void on_due(std::uint64_t generation) override {
      Target::on_due(generation);
      if (generation < 3) {
        timers.arm(std::shared_ptr<TimerList::Target>(self), generation + 1,
                   TimerList::Clock::now() + 5ms);
      }
    }
    std::shared_ptr<Rearming> self;
  };
  auto again = std::make_shared<Rearming>(timers);
  again->self = again;
  timers.arm(again, 1, TimerList::Clock::now() + 5ms);
  io.restart();
  io.run();
  CHECK(again->calls == std::vector<std::uint64_t>{1, 2, 3});
  again->self.reset();
}

TEST_CASE(
    "timer list: once its last entry is cancelled no wait stays pending, so an io_context with "
    "nothing else to do returns from run()",
    "[loop][timer_list]") {
  boost::asio::io_context io;
  auto& timers = TimerList::of(io.get_executor());
  auto target = std::make_shared<Target>(timers);
  timers.arm(target, 1, TimerList::Clock::now() + std::chrono::hours(1));
  timers.cancel(*target);
  const auto start = TimerList::Clock::now();
  io.run();  // would wait an hour with the wait still pending
  CHECK(TimerList::Clock::now() - start < std::chrono::seconds(10));
  CHECK(target->calls.empty());
}

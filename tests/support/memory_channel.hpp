// In-memory channels and a manual clock, for testing the protocol core without I/O.
// Not thread-safe: tests drive them from one thread.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bridge/relay/channel.hpp"
#include "bridge/relay/scheduler.hpp"

namespace mcpmqtt::test {

// A channel whose peer is the test: `inject` plays a message arriving from the peer, `sent`
// holds what the owner sent to the peer.
class MemoryChannel : public bridge::Channel {
 public:
  explicit MemoryChannel(std::string name = "mem") : name_(std::move(name)) {}

  void start(Receiver r) override {
    receiver_ = std::move(r);
    started = true;
  }
  void send(jsonrpc::Message m) override {
    if (!closed) sent.push_back(std::move(m));
  }
  void close(const bridge::CloseReason& why) override {
    if (closed) return;
    closed = true;
    closed_by_owner = why;
  }
  std::string describe() const override { return "[" + name_ + "]"; }

  // The peer sends a message (text must be valid JSON-RPC).
  void inject(const std::string& text);
  // The peer goes away.
  void peer_close(bridge::CloseReason why);
  // The transport to the peer was cut and came back (Receiver::on_interrupted).
  void peer_interrupted(const std::string& detail) {
    if (!closed && receiver_.on_interrupted) receiver_.on_interrupted(detail);
  }

  // Sent messages as texts, and clears them.
  std::vector<std::string> take();

  bool started = false;
  bool closed = false;
  std::optional<bridge::CloseReason> closed_by_owner;
  std::vector<jsonrpc::Message> sent;

 private:
  std::string name_;
  Receiver receiver_;
};

// A scheduler whose clock moves only when the test says so.
class ManualScheduler : public bridge::Scheduler {
 public:
  TimerId schedule(std::chrono::milliseconds delay, std::function<void()> fn) override;
  void cancel(TimerId id) override { timers_.erase(id); }
  Clock::time_point now() const override { return now_; }
  // Moves the clock forward, running every timer that falls due, in order.
  void advance(std::chrono::milliseconds by);
  std::size_t armed() const { return timers_.size(); }

 private:
  Clock::time_point now_{};
  TimerId next_ = 1;
  struct Timer {
    Clock::time_point due;
    std::function<void()> fn;
  };
  std::map<TimerId, Timer> timers_;
};

}  // namespace mcpmqtt::test

#include "tests/support/memory_channel.hpp"

#include <stdexcept>

namespace mcpmqtt::test {

void MemoryChannel::inject(const std::string& text) {
  auto m = jsonrpc::Message::parse(text);
  if (!m) throw std::invalid_argument("MemoryChannel::inject: " + m.error().error.message);
  if (receiver_.on_message && !closed) receiver_.on_message(*m);
}

void MemoryChannel::peer_close(bridge::CloseReason why) {
  if (closed) return;
  closed = true;
  if (receiver_.on_close) receiver_.on_close(why);
}

std::vector<std::string> MemoryChannel::take() {
  std::vector<std::string> out;
  for (const auto& m : sent)
    out.emplace_back(m.text());
  sent.clear();
  return out;
}

bridge::Scheduler::TimerId ManualScheduler::schedule(std::chrono::milliseconds delay,
                                                     std::function<void()> fn) {
  const TimerId id = next_++;
  timers_.emplace(id, Timer{now_ + delay, std::move(fn)});
  return id;
}

void ManualScheduler::advance(std::chrono::milliseconds by) {
  const auto target = now_ + by;
  for (;;) {
    auto next = timers_.end();
    for (auto it = timers_.begin(); it != timers_.end(); ++it) {
      if (it->second.due <= target &&
          (next == timers_.end() || it->second.due < next->second.due)) {
        next = it;
      }
    }
    if (next == timers_.end()) break;
    now_ = next->second.due;
    auto fn = std::move(next->second.fn);
    timers_.erase(next);
    fn();
  }
  now_ = target;
}

}  // namespace mcpmqtt::test

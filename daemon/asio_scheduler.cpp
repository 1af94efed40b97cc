#include "daemon/asio_scheduler.hpp"

namespace mcpmqtt::daemon {

AsioScheduler::~AsioScheduler() {
  state_->alive = false;
  for (auto& [id, t] : state_->timers)
    t->cancel();
  state_->timers.clear();
}

bridge::Scheduler::TimerId AsioScheduler::schedule(std::chrono::milliseconds delay,
                                                   std::function<void()> fn) {
  const TimerId id = next_++;
  auto timer = std::make_unique<boost::asio::steady_timer>(strand_, delay);
  timer->async_wait([state = state_, id, fn = std::move(fn)](const boost::system::error_code& ec) {
    if (ec || !state->alive) return;
    if (state->timers.erase(id) == 0) return;  // cancelled meanwhile
    fn();
  });
  state_->timers.emplace(id, std::move(timer));
  return id;
}

void AsioScheduler::cancel(TimerId id) {
  auto it = state_->timers.find(id);
  if (it == state_->timers.end()) return;
  it->second->cancel();
  state_->timers.erase(it);
}

}  // namespace mcpmqtt::daemon

#include "directions/asio_scheduler.hpp"

#include <boost/asio/post.hpp>

namespace mcpmqtt::directions {

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

namespace {
struct Poller : std::enable_shared_from_this<Poller> {
  Poller(boost::asio::any_io_executor ex, std::function<bool()> r, std::function<void()> d,
         std::chrono::steady_clock::time_point dl, std::chrono::milliseconds e)
      : timer(std::move(ex)), ready(std::move(r)), done(std::move(d)), deadline(dl), every(e) {}
  void run() {
    if (ready() || std::chrono::steady_clock::now() >= deadline) {
      if (done) done();
      return;
    }
    timer.expires_after(every);
    timer.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) self->run();
    });
  }
  boost::asio::steady_timer timer;
  std::function<bool()> ready;
  std::function<void()> done;
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds every;
};
}  // namespace

void poll_until(boost::asio::any_io_executor ex, std::function<bool()> ready,
                std::chrono::milliseconds timeout, std::function<void()> done,
                std::chrono::milliseconds every) {
  auto p = std::make_shared<Poller>(ex, std::move(ready), std::move(done),
                                    std::chrono::steady_clock::now() + timeout, every);
  boost::asio::post(ex, [p] { p->run(); });
}

}  // namespace mcpmqtt::directions

#include "directions/asio_scheduler.hpp"

#include <algorithm>

#include <boost/asio/post.hpp>

namespace mcpmqtt::directions {

AsioScheduler::~AsioScheduler() {
  state_->alive = false;
  for (auto& slot : state_->armed)
    slot.timer->cancel();
  state_->armed.clear();
  state_->spare.clear();
}

std::vector<AsioScheduler::Slot>::iterator AsioScheduler::State::find(TimerId id) {
  return std::find_if(armed.begin(), armed.end(), [id](const Slot& s) { return s.id == id; });
}

void AsioScheduler::State::release(std::vector<Slot>::iterator it) {
  constexpr std::size_t kSpares = 2;
  if (spare.size() < kSpares) spare.push_back(std::move(it->timer));
  *it = std::move(armed.back());
  armed.pop_back();
}

bridge::Scheduler::TimerId AsioScheduler::schedule(std::chrono::milliseconds delay,
                                                   std::function<void()> fn) {
  const TimerId id = next_++;
  auto& st = *state_;
  std::unique_ptr<boost::asio::steady_timer> timer;
  if (!st.spare.empty()) {
    // A cancelled wait of this timer may still be queued: its handler sees operation_aborted,
    // or (had it fired first) an id no longer armed, and does nothing.
    timer = std::move(st.spare.back());
    st.spare.pop_back();
  } else {
    timer = std::make_unique<boost::asio::steady_timer>(strand_);
  }
  timer->expires_after(delay);
  timer->async_wait([state = state_, id, fn = std::move(fn)](const boost::system::error_code& ec) {
    if (ec || !state->alive) return;
    const auto it = state->find(id);
    if (it == state->armed.end()) return;  // cancelled meanwhile
    state->release(it);
    fn();
  });
  st.armed.push_back({id, std::move(timer)});
  return id;
}

void AsioScheduler::cancel(TimerId id) {
  const auto it = state_->find(id);
  if (it == state_->armed.end()) return;
  it->timer->cancel();
  state_->release(it);
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

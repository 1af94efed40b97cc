#include "loop/timer_list.hpp"

#include <algorithm>

#include <boost/asio/execution/context.hpp>
#include <boost/asio/query.hpp>

namespace mcpmqtt::loop {

boost::asio::execution_context::id TimerList::id;

TimerList::TimerList(boost::asio::io_context& io)
    : boost::asio::execution_context::service(io), timer_(io) {}

TimerList::~TimerList() = default;

TimerList& TimerList::of(const boost::asio::any_io_executor& ex) {
  auto& context = boost::asio::query(ex, boost::asio::execution::context);
  return boost::asio::use_service<TimerList>(static_cast<boost::asio::io_context&>(context));
}

void TimerList::arm(const std::shared_ptr<Target>& target, std::uint64_t generation,
                    Clock::time_point at) {
  std::lock_guard lock(mu_);
  if (shut_down_) return;
  remove_locked(*target);
  due_[at].push_back({target.get(), target, generation});
  target->entry_at_ = at;
  ++entries_;
  rearm_locked();
}

void TimerList::cancel(Target& target) {
  std::lock_guard lock(mu_);
  remove_locked(target);
}

void TimerList::remove_locked(Target& target) {
  if (!target.entry_at_) return;
  const auto it = due_.find(*target.entry_at_);
  target.entry_at_.reset();
  if (it == due_.end()) return;
  auto& list = it->second;
  const auto e =
      std::find_if(list.begin(), list.end(), [&](const Entry& x) { return x.target == &target; });
  if (e == list.end()) return;
  // Order within one instant does not matter: the last entry takes the removed one's place.
  *e = std::move(list.back());
  list.pop_back();
  --entries_;
  if (!list.empty()) return;
  due_.erase(it);  // the timer, if armed for that instant, wakes once for nothing
  if (due_.empty() && armed_at_) {
    // Nothing left to wait for: no wait stays pending, so that an io_context whose work is
    // done returns from run() (a test's server stopping, the daemon's last session ending).
    timer_.cancel();
    armed_at_.reset();
  }
}

void TimerList::rearm_locked() {
  if (due_.empty()) return;
  const auto first = due_.begin()->first;
  if (armed_at_ && *armed_at_ <= first) return;
  armed_at_ = first;
  // A new expiry aborts the wait armed before (its handler sees operation_aborted). The service
  // lives as long as its io_context, whose destruction drops the handler uncalled: `this` holds.
  timer_.expires_at(first);
  timer_.async_wait([this](const boost::system::error_code& ec) { on_timer(ec); });
}

void TimerList::on_timer(const boost::system::error_code& ec) {
  if (ec == boost::asio::error::operation_aborted) return;
  std::vector<Entry> fire;
  {
    std::lock_guard lock(mu_);
    if (shut_down_) return;
    ++wakes_;
    armed_at_.reset();
    const auto now = Clock::now();
    while (!due_.empty() && due_.begin()->first <= now) {
      auto& list = due_.begin()->second;
      for (auto& e : list)
        e.target->entry_at_.reset();  // alive: its destructor would have removed the entry
      if (fire.empty())
        fire.swap(list);
      else
        std::move(list.begin(), list.end(), std::back_inserter(fire));
      due_.erase(due_.begin());
    }
    entries_ -= fire.size();
    rearm_locked();
  }
  // Outside the lock: a target may arm again at once.
  for (auto& e : fire) {
    if (auto target = e.alive.lock()) target->on_due(e.generation);
  }
}

std::size_t TimerList::entries() const {
  std::lock_guard lock(mu_);
  return entries_;
}

std::uint64_t TimerList::wakes() const {
  std::lock_guard lock(mu_);
  return wakes_;
}

void TimerList::shutdown() {
  std::lock_guard lock(mu_);
  shut_down_ = true;
  for (auto& [at, list] : due_)
    for (auto& e : list)
      e.target->entry_at_.reset();
  due_.clear();
  entries_ = 0;
}

}  // namespace mcpmqtt::loop

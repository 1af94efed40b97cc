#include "http/client_send_queue.hpp"

#include <algorithm>

namespace mcpmqtt::http {

bool SendQueue::is_urgent(const jsonrpc::Message& m) {
  return m.is_response() || (m.is_notification() && (m.method() == "notifications/cancelled" ||
                                                     m.method() == "notifications/progress"));
}

void SendQueue::push(jsonrpc::Message m) {
  (is_urgent(m) ? urgent_ : ordered_).push_back(std::move(m));
}

bool SendQueue::remove_request(const jsonrpc::Id& id) {
  const auto queued =
      std::find_if(ordered_.begin(), ordered_.end(),
                   [&](const jsonrpc::Message& q) { return q.is_request() && q.id() == id; });
  if (queued == ordered_.end()) return false;
  ordered_.erase(queued);
  return true;
}

std::optional<jsonrpc::Message> SendQueue::pop() {
  if (!urgent_.empty() && short_in_flight_ < max_short_) {
    jsonrpc::Message m = std::move(urgent_.front());
    urgent_.pop_front();
    return m;
  }
  if (ordered_.empty() || barrier_) return std::nullopt;
  const jsonrpc::Message& next = ordered_.front();
  if (next.is_request() ? requests_in_flight_ >= max_requests_ : short_in_flight_ >= max_short_)
    return std::nullopt;
  jsonrpc::Message m = std::move(ordered_.front());
  ordered_.pop_front();
  return m;
}

void SendQueue::clear() {
  ordered_.clear();
  urgent_.clear();
}

void SendQueue::occupy(Slot slot) {
  if (slot == Slot::request) ++requests_in_flight_;
  if (slot == Slot::short_message) ++short_in_flight_;
}

void SendQueue::release(Slot slot) {
  if (slot == Slot::request) --requests_in_flight_;
  if (slot == Slot::short_message) --short_in_flight_;
}

}  // namespace mcpmqtt::http

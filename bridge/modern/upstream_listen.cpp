#include <algorithm>

#include "bridge/modern/upstream.hpp"
#include "bridge/modern/upstream_detail.hpp"

namespace mcpmqtt::bridge {

using jsonrpc::Id;
using jsonrpc::Message;
using namespace modern_upstream_detail;

// ---- listen ----------------------------------------------------------------------------------

ModernUpstream::Listen* ModernUpstream::find_listen(const Id& id) {
  for (auto& l : listens_)
    if (l.id == id) return &l;
  return nullptr;
}

void ModernUpstream::update_listen() {
  const std::vector<std::string> uris(uris_.begin(), uris_.end());
  const auto filter = modern::honoured_filter(discovered_.capabilities_json, uris);
  if (!listens_.empty() && listens_.back().filter == filter) return;
  if (filter.empty()) {
    auto all = std::move(listens_);
    listens_.clear();
    for (auto& l : all)
      close_listen(l, "nothing to listen to");
    active_listen_.reset();
    return;
  }
  open_listen();
}

void ModernUpstream::open_listen() {
  if (phase_ != Phase::modern || listen_unsupported_) return;
  if (listen_retry_timer_) scheduler_.cancel(listen_retry_timer_);
  listen_retry_timer_ = 0;
  const std::vector<std::string> uris(uris_.begin(), uris_.end());
  const auto filter = modern::honoured_filter(discovered_.capabilities_json, uris);
  if (filter.empty()) return;
  // A newer listen supersedes one that is not acknowledged yet; the active one stays until the
  // new one is acknowledged, so nothing is missed in between.
  for (auto it = listens_.begin(); it != listens_.end();) {
    if (!it->acknowledged && (!active_listen_ || it->seq != *active_listen_)) {
      auto l = *it;
      it = listens_.erase(it);
      close_listen(l, "superseded by a listen with other filters");
    } else {
      ++it;
    }
  }
  Listen l;
  l.seq = next_listen_seq_++;
  l.id = next_upstream_id(Own::listen, {}, l.seq);
  l.filter = filter;
  std::weak_ptr<ModernUpstream> weak = weak_from_this();
  const Id id = l.id;
  l.ack_timer = scheduler_.schedule(options_.discover_timeout, [weak, id] {
    auto self = weak.lock();
    if (!self) return;
    if (auto* found = self->find_listen(id)) found->ack_timer = 0;
    self->on_listen_end(
        id, "no acknowledgement within " + log::duration_text(self->options_.discover_timeout),
        false);
  });
  listens_.push_back(l);
  to_upstream(
      Message::request(id, "subscriptions/listen", modern::listen_params(filter, envelope(false))));
}

void ModernUpstream::on_listen_notification(Message m) {
  const auto sid = m.subscription_id();
  Listen* l = sid ? find_listen(*sid) : nullptr;
  if (!l) return;
  if (m.method() == "notifications/subscriptions/acknowledged") {
    if (!l->acknowledged) on_listen_ack(*l);
    return;
  }
  // Only the active listen speaks: around a switch the old and the new one may both carry an
  // event, and the client gets it once.
  if (!active_listen_ || l->seq != *active_listen_) return;
  if (m.method() == "notifications/tools/list_changed" && options_.tool_headers)
    options_.tool_headers->forget();  // the annotations may have changed with the tools
  auto params = modern::without_subscription_id(m.params());
  if (params == "{}") params.clear();
  to_client(Message::notification(m.method(), params));
}

void ModernUpstream::on_listen_ack(const Listen& acked) {
  const std::uint64_t seq = acked.seq;
  if (auto* l = find_listen(acked.id)) {
    l->acknowledged = true;
    l->acknowledged_at = scheduler_.now();
    if (l->ack_timer) scheduler_.cancel(l->ack_timer);
    l->ack_timer = 0;
  }
  listen_failures_ = 0;
  if (!active_listen_ || *active_listen_ < seq) {
    active_listen_ = seq;
    for (auto it = listens_.begin(); it != listens_.end();) {
      if (it->seq < seq) {
        auto old = *it;
        it = listens_.erase(it);
        close_listen(old, "replaced by a listen with other filters");
      } else {
        ++it;
      }
    }
  }
  std::vector<Id> ready;
  std::erase_if(subscribe_waiters_, [&](const SubscribeWaiter& w) {
    if (w.listen_seq > seq) return false;
    ready.push_back(w.client_id);
    return true;
  });
  for (const auto& id : ready)
    answer(id, "{}");
}

void ModernUpstream::close_listen(const Listen& l, const std::string& reason) {
  if (l.ack_timer) scheduler_.cancel(l.ack_timer);
  if (own_.erase(l.id)) cancel_upstream(l.id, reason);
}

void ModernUpstream::on_listen_end(const Id& id, const std::string& why, bool refused) {
  const auto it =
      std::find_if(listens_.begin(), listens_.end(), [&](const Listen& l) { return l.id == id; });
  if (it == listens_.end()) return;
  const Listen ended = *it;
  listens_.erase(it);
  if (ended.ack_timer) scheduler_.cancel(ended.ack_timer);
  if (own_.erase(id)) cancel_upstream(id, "not acknowledged in time");
  const bool was_active = active_listen_ && *active_listen_ == ended.seq;
  if (was_active) active_listen_.reset();
  const bool newest = ended.seq + 1 == next_listen_seq_;
  log::bridge()->log(refused ? spdlog::level::warn : spdlog::level::info,
                     "{} subscriptions/listen ended: {}", options_.log_prefix, why);
  if (refused && !ended.acknowledged) {
    // A server that refuses listens will not carry updates: say so to whoever waits.
    listen_unsupported_ = true;
    std::vector<Id> waiting;
    for (const auto& w : subscribe_waiters_)
      waiting.push_back(w.client_id);
    subscribe_waiters_.clear();
    for (const auto& wid : waiting)
      answer_error(wid, internal_error,
                   "the server refused subscriptions/listen, which carries resource updates in "
                   "2026-07-28: " +
                       why);
    uris_.clear();
    return;
  }
  // A listen that served for a while is replaced at once (an idle stream the HTTP client gave
  // up on, say); one that failed young backs off, so a server that ends every listen at once is
  // not asked again and again.
  const bool served =
      ended.acknowledged && scheduler_.now() - ended.acknowledged_at >= options_.listen_retry_max;
  if ((was_active || newest) && phase_ == Phase::modern) schedule_listen_retry(served);
}

void ModernUpstream::schedule_listen_retry(bool at_once) {
  if (listen_retry_timer_ || listen_unsupported_) return;
  auto delay = options_.listen_retry_min;
  for (unsigned i = 0; i < listen_failures_ && delay < options_.listen_retry_max; ++i)
    delay *= 2;
  delay = at_once ? std::chrono::milliseconds(0) : std::min(delay, options_.listen_retry_max);
  ++listen_failures_;
  std::weak_ptr<ModernUpstream> weak = weak_from_this();
  listen_retry_timer_ = scheduler_.schedule(delay, [weak] {
    auto self = weak.lock();
    if (!self) return;
    self->listen_retry_timer_ = 0;
    self->open_listen();
  });
}

}  // namespace mcpmqtt::bridge

#include "bridge/relay/splice.hpp"

#include <algorithm>

#include "common/log.hpp"
#include "common/metrics.hpp"

namespace mcpmqtt::bridge {

namespace {

// The requestId of notifications/cancelled (string or integer), if well formed.
std::optional<jsonrpc::Id> cancelled_id(const jsonrpc::Message& m) {
  const auto* p = m.params();
  if (!p || !p->IsObject()) return std::nullopt;
  auto it = p->FindMember("requestId");
  if (it == p->MemberEnd()) return std::nullopt;
  if (it->value.IsString()) {
    return jsonrpc::Id::string(std::string(it->value.GetString(), it->value.GetStringLength()));
  }
  if (it->value.IsInt64()) return jsonrpc::Id::integer(it->value.GetInt64());
  return std::nullopt;
}

constexpr int kProgressCapFactor = 10;
// A session whose next request came within this long after it had nothing in flight keeps the
// timeouts' timer when it has nothing in flight again.
constexpr auto kKeepTimerGap = std::chrono::seconds(1);

metrics::Gauge& sessions_gauge(const std::string& direction) {
  return metrics::registry().gauge("mcpmqtt_sessions", "MCP sessions open, by direction.",
                                   {"direction"}, {direction});
}

}  // namespace

std::shared_ptr<Splice> Splice::create(std::shared_ptr<Channel> client,
                                       std::shared_ptr<Channel> server, Scheduler& scheduler,
                                       Options options, Hooks hooks) {
  return std::shared_ptr<Splice>(new Splice(std::move(client), std::move(server), scheduler,
                                            std::move(options), std::move(hooks)));
}

Splice::Splice(std::shared_ptr<Channel> client, std::shared_ptr<Channel> server,
               Scheduler& scheduler, Options options, Hooks hooks)
    : client_(std::move(client)),
      server_(std::move(server)),
      scheduler_(scheduler),
      options_(std::move(options)),
      hooks_(std::move(hooks)) {
  if (!options_.metrics_direction.empty()) meters_ = &RequestMeters::of(options_.metrics_direction);
}

Splice::~Splice() {
  count_session_end();
  for (auto& [id, p] : from_bridge_)
    if (p.timer) scheduler_.cancel(p.timer);
  cancel_deadline_timer();
}

void Splice::start() {
  if (started_) return;
  started_ = true;
  if (!options_.metrics_direction.empty() && !closed_) {
    counted_ = true;
    sessions_gauge(options_.metrics_direction).inc();
    metrics::registry()
        .counter("mcpmqtt_sessions_total", "MCP sessions started, by direction.", {"direction"},
                 {options_.metrics_direction})
        .inc();
  }
  std::weak_ptr<Splice> weak = weak_from_this();
  auto receiver = [weak](Side side) {
    return Channel::Receiver{[weak, side](jsonrpc::Message m) {
                               if (auto self = weak.lock()) self->on_message(side, std::move(m));
                             },
                             [weak, side](const CloseReason& why) {
                               if (auto self = weak.lock()) self->on_side_closed(side, why);
                             },
                             [weak, side](const std::string& detail) {
                               if (auto self = weak.lock()) self->on_interrupted(side, detail);
                             }};
  };
  server_->start(receiver(Side::server));
  client_->start(receiver(Side::client));
}

std::size_t Splice::pending(Side requester) const {
  return requester == Side::client ? from_client_.size() : from_server_.size();
}

void Splice::count(Side requester, const std::string& method, RequestMeters::Outcome outcome,
                   const PendingRequest* p) {
  if (!meters_) return;
  meters_->count(
      requester == Side::client ? RequestMeters::Origin::client : RequestMeters::Origin::server,
      method, outcome);
  if (p && requester == Side::client)
    meters_->observe(method, std::chrono::duration<double>(scheduler_.now() - p->started).count());
}

void Splice::count_session_end() {
  if (!counted_) return;
  counted_ = false;
  sessions_gauge(options_.metrics_direction).dec();
}

void Splice::send_to(Side to, jsonrpc::Message m) {
  if (!closed_) channel(to).send(std::move(m));
}

void Splice::deliver_held(Side from, jsonrpc::Message m) {
  if (!closed_) dispatch(from, std::move(m));
}

void Splice::dispatch(Side from, jsonrpc::Message m) {
  switch (m.kind()) {
    case jsonrpc::Kind::request:
      on_request(from, std::move(m));
      break;
    case jsonrpc::Kind::result:
    case jsonrpc::Kind::error:
      on_response(from, std::move(m));
      break;
    case jsonrpc::Kind::notification:
      on_notification(from, std::move(m));
      break;
  }
}

void Splice::on_message(Side from, jsonrpc::Message m) {
  if (closed_) return;
  if (hooks_.on_message && hooks_.on_message(from, m) == Verdict::drop) return;
  dispatch(from, std::move(m));
}

void Splice::on_request(Side from, jsonrpc::Message m) {
  auto& map = pending_from(from);
  if (map.count(m.id())) {
    count(from, m.method(), RequestMeters::Outcome::refused);
    channel(from).send(jsonrpc::Message::error(
        m.id(), jsonrpc::code::invalid_request,
        "request id " + m.id().to_string() + " is already in use by a request in flight"));
    return;
  }
  if (map.size() >= options_.max_pending) {
    count(from, m.method(), RequestMeters::Outcome::refused);
    channel(from).send(jsonrpc::Message::error(m.id(), jsonrpc::code::connection_closed,
                                               "too many requests in flight (" +
                                                   std::to_string(map.size()) +
                                                   "); wait for responses before sending more"));
    return;
  }
  PendingRequest p;
  p.method = m.method();
  p.progress_token = m.progress_token();
  p.timeout = options_.timeout_for ? options_.timeout_for(p.method) : std::chrono::milliseconds{0};
  p.started = scheduler_.now();
  if (idle_since_) {
    quick_return_ = p.started - *idle_since_ < kKeepTimerGap;
    idle_since_.reset();
  }
  if (p.timeout.count() > 0) {
    p.deadline_cap = p.started + p.timeout * kProgressCapFactor;
    arm(p, p.started + p.timeout);
  }
  map.emplace(m.id(), std::move(p));
  channel(other(from)).send(std::move(m));
}

void Splice::arm(PendingRequest& p, Scheduler::Clock::time_point deadline) {
  p.deadline = deadline;
  p.deadline_seq = next_deadline_seq_++;
  arm_deadline_timer(deadline);
}

void Splice::arm_deadline_timer(Scheduler::Clock::time_point at) {
  if (deadline_timer_) {
    if (deadline_timer_at_ <= at) return;  // it fires sooner and re-arms for the rest
    scheduler_.cancel(deadline_timer_);
  }
  const auto wait = std::max(at - scheduler_.now(), Scheduler::Clock::duration::zero());
  deadline_timer_at_ = at;
  std::weak_ptr<Splice> weak = weak_from_this();
  // Rounded up: a timer never fires before the deadline it is armed for.
  deadline_timer_ = scheduler_.schedule(std::chrono::ceil<std::chrono::milliseconds>(wait), [weak] {
    if (auto self = weak.lock()) self->on_deadline();
  });
}

void Splice::cancel_deadline_timer() {
  if (deadline_timer_) scheduler_.cancel(deadline_timer_);
  deadline_timer_ = 0;
}

void Splice::drop_idle_deadline_timer() {
  if (!from_client_.empty() || !from_server_.empty()) return;
  idle_since_ = scheduler_.now();
  // With nothing in flight the timer can only fire to find nothing due: a daemon holding
  // thousands of quiet sessions would pay each of those wake-ups, on memory long unused (issue
  // 34). A session that came back within moments last time (one call after another) keeps it
  // for its next request instead: cancelling and arming per request costs every call.
  if (deadline_timer_ && !quick_return_) cancel_deadline_timer();
}

void Splice::on_deadline() {
  deadline_timer_ = 0;
  if (closed_) return;
  const auto now = scheduler_.now();
  struct Due {
    Scheduler::Clock::time_point at;
    std::uint64_t seq;
    Side requester;
    jsonrpc::Id id;
  };
  std::vector<Due> due;
  std::optional<Scheduler::Clock::time_point> next;
  for (Side side : {Side::client, Side::server}) {
    for (const auto& [id, p] : pending_from(side)) {
      if (p.timeout.count() <= 0) continue;
      if (p.deadline <= now)
        due.push_back({p.deadline, p.deadline_seq, side, id});
      else if (!next || p.deadline < *next)
        next = p.deadline;
    }
  }
  // In the order they fell due, as separate timers would have fired.
  std::sort(due.begin(), due.end(),
            [](const Due& a, const Due& b) { return a.at != b.at ? a.at < b.at : a.seq < b.seq; });
  for (const auto& d : due) {
    if (closed_) return;
    on_timeout(d.requester, d.id);
  }
  if (next && !closed_) arm_deadline_timer(*next);
}

void Splice::on_response(Side from, jsonrpc::Message m) {
  if (auto it = from_bridge_.find(m.id()); it != from_bridge_.end() && it->second.to == from) {
    auto p = std::move(it->second);
    from_bridge_.erase(it);
    if (p.timer) scheduler_.cancel(p.timer);
    if (p.done) p.done(m);
    return;
  }
  const Side requester = other(from);
  if (m.id().is_null()) {
    // An error the responder could not tie to a request (it could not parse it): pass it on.
    channel(requester).send(std::move(m));
    return;
  }
  auto& map = pending_from(requester);
  auto it = map.find(m.id());
  if (it == map.end()) {
    log::bridge()->debug(
        "{} dropped a response from the {} to id {}: no such request in flight "
        "(cancelled, timed out or never sent)",
        options_.log_prefix, side_name(from), m.id().to_string());
    return;
  }
  count(requester, it->second.method,
        m.kind() == jsonrpc::Kind::result ? RequestMeters::Outcome::result
                                          : RequestMeters::Outcome::error,
        &it->second);
  map.erase(it);
  drop_idle_deadline_timer();
  channel(requester).send(std::move(m));
}

void Splice::on_notification(Side from, jsonrpc::Message m) {
  if (m.method() == "notifications/cancelled") {
    // 002 §Cancellation: the requester gives up; the response that may still come is dropped.
    auto id = cancelled_id(m);
    auto& map = pending_from(from);
    auto it = id ? map.find(*id) : map.end();
    if (it == map.end()) {
      log::bridge()->debug("{} cancellation from the {} for a request not in flight; dropped",
                           options_.log_prefix, side_name(from));
      return;
    }
    count(from, it->second.method, RequestMeters::Outcome::cancelled);
    map.erase(it);
    drop_idle_deadline_timer();
    channel(other(from)).send(std::move(m));
    return;
  }
  if (m.method() == "notifications/progress" && m.progress_token()) {
    // Progress from the responder restarts the requester's clock, within a cap.
    auto& map = pending_from(other(from));
    for (auto& [id, p] : map) {
      if (p.progress_token != m.progress_token() || p.timeout.count() <= 0) continue;
      const auto now = scheduler_.now();
      arm(p, std::min(now + p.timeout, std::max(p.deadline_cap, now)));
      break;
    }
  }
  channel(other(from)).send(std::move(m));
}

void Splice::on_bridge_timeout(const jsonrpc::Id& id) {
  auto it = from_bridge_.find(id);
  if (closed_ || it == from_bridge_.end()) return;
  auto p = std::move(it->second);
  from_bridge_.erase(it);
  channel(p.to).send(jsonrpc::Message::notification(
      "notifications/cancelled",
      R"({"requestId":)" + id.to_json() + R"(,"reason":"timed out in )" + options_.name + "\"}"));
  if (p.done) {
    p.done(jsonrpc::Message::error(id, jsonrpc::code::request_timeout,
                                   "request timed out: no response to " + p.method + " from the " +
                                       side_name(p.to) + " within " +
                                       log::duration_text(p.timeout)));
  }
}

void Splice::on_timeout(Side requester, const jsonrpc::Id& id) {
  if (closed_) return;
  auto& map = pending_from(requester);
  auto it = map.find(id);
  if (it == map.end()) return;
  auto p = std::move(it->second);
  map.erase(it);
  count(requester, p.method, RequestMeters::Outcome::timeout);
  const Side responder = other(requester);
  log::bridge()->info("{} {} {} timed out after {}", options_.log_prefix, p.method, id.to_string(),
                      log::duration_text(p.timeout));
  channel(requester).send(jsonrpc::Message::error(
      id, jsonrpc::code::request_timeout,
      "request timed out: no response to " + p.method + " from the " + side_name(responder) +
          " within " + log::duration_text(p.timeout) + " (" + options_.name + ")"));
  channel(responder).send(jsonrpc::Message::notification(
      "notifications/cancelled",
      R"({"requestId":)" + id.to_json() + R"(,"reason":"request timed out after )" +
          log::duration_text(p.timeout) + " in " + options_.name + "\"}"));
  if (requester == Side::client && p.method == "initialize") {
    finish({CloseReason::Kind::timeout,
            "the server did not answer initialize within " + log::duration_text(p.timeout)});
  }
}

void Splice::request_to(Side to, const std::string& method, const std::string& params_json,
                        ResponseFn done, std::optional<std::chrono::milliseconds> timeout) {
  const auto id = jsonrpc::Id::string("mcpmqtt-bridge-" + std::to_string(next_bridge_id_++));
  if (closed_) {
    if (done)
      done(jsonrpc::Message::error(id, jsonrpc::code::connection_closed, "the session is closed"));
    return;
  }
  PendingRequest p;
  p.method = method;
  p.done = std::move(done);
  p.to = to;
  if (timeout)
    p.timeout = *timeout;
  else
    p.timeout = options_.timeout_for ? options_.timeout_for(method) : std::chrono::milliseconds{0};
  auto [it, inserted] = from_bridge_.emplace(id, std::move(p));
  if (it->second.timeout.count() > 0) {
    std::weak_ptr<Splice> weak = weak_from_this();
    it->second.timer = scheduler_.schedule(it->second.timeout, [weak, id] {
      if (auto self = weak.lock()) self->on_bridge_timeout(id);
    });
  }
  channel(to).send(jsonrpc::Message::request(id, method, params_json));
}

void Splice::on_interrupted(Side side, const std::string& detail) {
  if (closed_) return;
  const Side requester = other(side);
  auto& map = pending_from(requester);
  std::vector<std::pair<jsonrpc::Id, PendingRequest>> lost;
  for (auto it = map.begin(); it != map.end();) {
    // initialize is the channel's to redo (it has no effect to repeat); it stays pending.
    if (it->second.method == "initialize") {
      ++it;
      continue;
    }
    lost.emplace_back(it->first, std::move(it->second));
    it = map.erase(it);
  }
  for (auto it = from_bridge_.begin(); it != from_bridge_.end();) {
    if (it->second.to != side) {
      ++it;
      continue;
    }
    lost.emplace_back(it->first, std::move(it->second));
    it = from_bridge_.erase(it);
  }
  if (lost.empty()) {
    log::bridge()->debug("{} the {} was interrupted, nothing in flight: {}", options_.log_prefix,
                         side_name(side), detail);
    return;
  }
  log::bridge()->info("{} {} request(s) in flight to the {} answered at once: {}",
                      options_.log_prefix, lost.size(), side_name(side), detail);
  const std::string data = R"({"retriable":true})";
  for (auto& [id, p] : lost) {
    auto error = jsonrpc::Message::error(
        id, jsonrpc::Error{jsonrpc::code::connection_closed,
                           p.method + " may not have reached the " + side_name(side) +
                               ", or its answer was lost: " + detail + "; retry it",
                           data});
    if (p.done) {
      // The bridge's own request: its timer is moot.
      if (p.timer) scheduler_.cancel(p.timer);
      p.done(error);
    } else {
      count(requester, p.method, RequestMeters::Outcome::interrupted);
      channel(requester).send(std::move(error));
    }
    if (closed_) return;
    channel(side).send(jsonrpc::Message::notification(
        "notifications/cancelled",
        R"({"requestId":)" + id.to_json() + R"(,"reason":"the connection was interrupted"})"));
  }
}

void Splice::answer_all(Side requester, const CloseReason& why, bool send) {
  auto& map = pending_from(requester);
  auto pending = std::move(map);
  map.clear();
  for (auto& [id, p] : pending) {
    count(requester, p.method, RequestMeters::Outcome::closed);
    if (!send) continue;
    channel(requester).send(jsonrpc::Message::error(id, jsonrpc::code::connection_closed,
                                                    p.method + " was not answered: " + why.detail));
  }
}

void Splice::on_side_closed(Side side, const CloseReason& why) {
  if (closed_) return;
  log::bridge()->info("{} the {} closed the session: {}", options_.log_prefix, side_name(side),
                      why.detail);
  const Side survivor = other(side);
  closed_ = true;
  if (survivor == Side::client) last_words(why);
  // Requests the survivor sent will never be answered: tell it, naming why.
  answer_all(survivor, why, /*send=*/true);
  // Requests the closed side sent have nobody to answer to.
  answer_all(side, why, /*send=*/false);
  cancel_deadline_timer();
  auto bridge = std::move(from_bridge_);
  from_bridge_.clear();
  for (auto& [id, p] : bridge) {
    if (p.timer) scheduler_.cancel(p.timer);
    if (p.done) p.done(jsonrpc::Message::error(id, jsonrpc::code::connection_closed, why.detail));
  }
  channel(survivor).close(why);
  count_session_end();
  if (hooks_.on_closed) hooks_.on_closed(why);
}

void Splice::last_words(const CloseReason& why) {
  if (!hooks_.on_closing) return;
  for (auto& m : hooks_.on_closing(why))
    client_->send(std::move(m));
}

void Splice::close(const CloseReason& why) {
  finish(why);
}

void Splice::finish(const CloseReason& why) {
  if (closed_) return;
  closed_ = true;
  last_words(why);
  answer_all(Side::client, why, /*send=*/true);
  answer_all(Side::server, why, /*send=*/true);
  cancel_deadline_timer();
  auto bridge = std::move(from_bridge_);
  from_bridge_.clear();
  for (auto& [id, p] : bridge) {
    if (p.timer) scheduler_.cancel(p.timer);
    if (p.done) p.done(jsonrpc::Message::error(id, jsonrpc::code::connection_closed, why.detail));
  }
  client_->close(why);
  server_->close(why);
  count_session_end();
  if (hooks_.on_closed) hooks_.on_closed(why);
}

}  // namespace mcpmqtt::bridge

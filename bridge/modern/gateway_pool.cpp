#include <algorithm>

#include "bridge/modern/gateway.hpp"
#include "bridge/modern/gateway_parts.hpp"

namespace mcpmqtt::bridge {

using namespace gateway_detail;

ModernGateway::Session* ModernGateway::find_idle(const std::string& key) {
  auto k = by_key_.find(key);
  if (k == by_key_.end()) return nullptr;
  // The most recently opened idle session: the oldest ones are left to close when idle.
  for (auto serial = k->second.rbegin(); serial != k->second.rend(); ++serial) {
    auto it = sessions_.find(*serial);
    if (it != sessions_.end() && it->second->state == Session::State::idle) return it->second.get();
  }
  return nullptr;
}

std::size_t ModernGateway::count_key(const std::string& key) const {
  auto k = by_key_.find(key);
  return k == by_key_.end() ? 0 : k->second.size();
}

void ModernGateway::unindex(const Session& s) {
  auto k = by_key_.find(s.key);
  if (k == by_key_.end()) return;
  k->second.erase(s.serial);
  if (k->second.empty()) by_key_.erase(k);
}

std::size_t ModernGateway::pooled_count() const {
  return sessions_.size();
}

bool ModernGateway::evict_idle_other_than(const std::string& key) {
  for (auto& [serial, s] : sessions_) {  // oldest first
    if (s->state == Session::State::idle && s->key != key) {
      log::bridge()->debug("{} session {} closed to make room (ingress.modern.max_sessions {})",
                           options_.log_prefix, serial, options_.max_sessions);
      drop_session(serial, {CloseReason::Kind::normal,
                            "closed to make room for a request of another client"});
      return true;
    }
  }
  return false;
}

bool ModernGateway::evict_oldest_parked(const std::string* key) {
  const Run* oldest = nullptr;
  for (const auto& [id, r] : runs_) {
    if (r->state == RunState::running || !r->session || (key && r->key != *key)) continue;
    if (!oldest || r->id < oldest->id) oldest = r.get();
  }
  if (!oldest) return false;
  log::bridge()->info(
      "{} a request waiting for input responses is given up to make room (ingress.modern "
      "max_sessions {}, max_sessions_per_key {}); its requestState is no longer valid",
      options_.log_prefix, options_.max_sessions, options_.max_sessions_per_key);
  cancel_run(oldest->id, "the bridge needed its session for another request");
  return true;
}

bool ModernGateway::acquire(CallId id) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return true;
  Pending& p = *it->second;
  if (Session* s = find_idle(p.key)) {
    start_on(*s, p);
    return true;
  }
  const bool listen = p.kind == Pending::Kind::listen;
  auto can_open = [&] {
    return pooled_count() < options_.max_sessions &&
           (listen || count_key(p.key) < options_.max_sessions_per_key);
  };
  if (!can_open()) {
    if (pooled_count() >= options_.max_sessions && !evict_idle_other_than(p.key))
      evict_oldest_parked(nullptr);
    if (!listen && count_key(p.key) >= options_.max_sessions_per_key) evict_oldest_parked(&p.key);
  }
  if (!can_open()) return false;
  open_session(p);
  return true;
}

void ModernGateway::enqueue(CallId id) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  Pending& p = *it->second;
  std::size_t waiting = 0, waiting_bytes = 0;
  for (CallId w : waiting_) {
    if (auto c = calls_.find(w); c != calls_.end()) {
      ++waiting;
      waiting_bytes += c->second->call.message.size();
    }
  }
  const std::string limits = "ingress.modern.max_sessions " +
                             std::to_string(options_.max_sessions) + ", max_sessions_per_key " +
                             std::to_string(options_.max_sessions_per_key);
  if (waiting >= options_.max_waiting) {
    log::bridge()->warn("{} a {} request refused: {} requests wait for a session already ({})",
                        options_.log_prefix, p.call.message.method(), waiting, limits);
    refuse(p,
           {jsonrpc::code::connection_closed,
            "Service Unavailable: every MQTT session the bridge may hold for this client is busy "
            "and " +
                std::to_string(waiting) +
                " requests wait already (ingress.modern.max_waiting); try again later",
            {}},
           503);
    return;
  }
  if (waiting > 0 && waiting_bytes + p.call.message.size() > options_.max_waiting_bytes) {
    if (std::size_t held_back = 0; waiting_log_.allow(held_back))
      log::bridge()->warn(
          "{} a {} request refused: the requests waiting for a session hold {} bytes "
          "(ingress.modern.max_waiting_bytes {}){}",
          options_.log_prefix, p.call.message.method(), waiting_bytes, options_.max_waiting_bytes,
          held_back ? " (" + std::to_string(held_back) + " more since the last)" : std::string());
    refuse(p,
           {jsonrpc::code::connection_closed,
            "Service Unavailable: every MQTT session the bridge may hold for this client is busy "
            "and the requests waiting already hold " +
                std::to_string(waiting_bytes) +
                " bytes (ingress.modern.max_waiting_bytes); try again later",
            {}},
           503);
    return;
  }
  p.where = Pending::Where::waiting;
  waiting_.erase(
      std::remove_if(waiting_.begin(), waiting_.end(), [&](CallId w) { return !calls_.count(w); }),
      waiting_.end());
  waiting_.push_back(id);
  std::weak_ptr<ModernGateway> weak = weak_from_this();
  p.wait_timer =
      scheduler_.schedule(options_.queue_timeout, [weak, id, limits, t = options_.queue_timeout] {
        auto self = weak.lock();
        if (!self) return;
        auto c = self->calls_.find(id);
        if (c == self->calls_.end() || c->second->where != Pending::Where::waiting) return;
        c->second->wait_timer = 0;
        self->refuse(*c->second,
                     {jsonrpc::code::connection_closed,
                      "Service Unavailable: no MQTT session of the bridge became free within " +
                          log::duration_text(t) + " (" + limits + "); try again later",
                      {}},
                     503);
      });
}

void ModernGateway::pump_waiting() {
  if (waiting_.empty()) return;
  std::deque<CallId> still;
  auto queue = std::move(waiting_);
  waiting_.clear();
  for (CallId id : queue) {
    auto it = calls_.find(id);
    if (it == calls_.end() || it->second->where != Pending::Where::waiting) continue;
    it->second->where = Pending::Where::admitted;
    const bool started = acquire(id);
    auto again = calls_.find(id);  // a request may be answered at once (discover)
    if (again == calls_.end()) continue;
    if (started) {
      // Its wait ends; the timer armed by enqueue() (which keeps the original deadline while it
      // waits on) is no longer needed.
      if (again->second->wait_timer) {
        scheduler_.cancel(again->second->wait_timer);
        again->second->wait_timer = 0;
      }
      continue;
    }
    again->second->where = Pending::Where::waiting;
    still.push_back(id);
  }
  for (CallId id : waiting_)  // queued while pumping
    still.push_back(id);
  waiting_ = std::move(still);
}

void ModernGateway::open_session(Pending& p) {
  const std::uint64_t serial = next_serial_++;
  auto owned = std::make_unique<Session>();
  Session& s = *owned;
  s.serial = serial;
  s.key = p.key;
  s.server_name = p.call.server_name;
  s.caps_json = p.envelope.client_capabilities_json;
  s.client_info_json =
      p.envelope.client_info_json.empty() ? options_.client_info_json : p.envelope.client_info_json;
  s.reserved = p.id;
  p.where = Pending::Where::opening;
  p.session = serial;
  std::weak_ptr<ModernGateway> weak = weak_from_this();
  LocalChannel::Peer peer;
  peer.on_message = [weak, serial](jsonrpc::Message m) {
    if (auto self = weak.lock()) self->on_upstream(serial, std::move(m));
  };
  peer.on_closed = [weak, serial](const CloseReason& why) {
    if (auto self = weak.lock()) self->on_session_closed(serial, why);
  };
  s.channel = LocalChannel::create(
      options_.log_prefix + "[M" + std::to_string(serial) + " " + s.server_name + "]",
      std::move(peer));
  auto channel = s.channel;
  const std::string server_name = s.server_name;
  const Principal principal = p.call.principal;
  // 002 §Initialization, with exactly the capabilities this request declared.
  channel->deliver(jsonrpc::Message::request(
      init_id(), "initialize",
      R"({"protocolVersion":)" + jsonrpc::quote(options_.legacy_version) + R"(,"capabilities":)" +
          s.caps_json + R"(,"clientInfo":)" + s.client_info_json + R"(,"_meta":{)" +
          jsonrpc::quote(modern::bridge_key::reads_input_keys) + ":true}}"));
  by_key_[s.key].insert(serial);
  sessions_.emplace(serial, std::move(owned));
  log::bridge()->debug("{} opening MQTT session {} for {}", options_.log_prefix, serial,
                       server_name);
  opener_(server_name, principal, channel);  // may report back at once
}

void ModernGateway::start_on(Session& s, Pending& p) {
  if (s.idle_timer) {
    scheduler_.cancel(s.idle_timer);
    s.idle_timer = 0;
  }
  switch (p.kind) {
    case Pending::Kind::discover:
      answer_discover(s.info, p);
      make_idle(s);
      break;
    case Pending::Kind::listen:
      start_listen(s, p);
      break;
    case Pending::Kind::run:
      start_run(s, p);
      break;
  }
}

void ModernGateway::make_idle(Session& s) {
  const auto serial = s.serial;
  s.state = Session::State::idle;
  s.run = 0;
  if (s.idle_timer) scheduler_.cancel(s.idle_timer);
  std::weak_ptr<ModernGateway> weak = weak_from_this();
  s.idle_timer = scheduler_.schedule(options_.idle_timeout, [weak, serial] {
    auto self = weak.lock();
    if (!self) return;
    auto it = self->sessions_.find(serial);
    if (it == self->sessions_.end() || it->second->state != Session::State::idle) return;
    it->second->idle_timer = 0;
    self->drop_session(serial, {CloseReason::Kind::timeout,
                                "idle for " + log::duration_text(self->options_.idle_timeout) +
                                    " (ingress.modern.idle_timeout_ms)"});
  });
  pump_waiting();
}

void ModernGateway::release(Session& s) {
  s.run = 0;
  if (s.channel->closed()) return;
  make_idle(s);
}

void ModernGateway::end_session(std::uint64_t serial, const CloseReason& why, SessionEnd how) {
  auto it = sessions_.find(serial);
  if (it == sessions_.end()) return;
  auto s = std::move(it->second);
  sessions_.erase(it);
  unindex(*s);
  if (s->idle_timer) scheduler_.cancel(s->idle_timer);
  if (why.kind == CloseReason::Kind::peer_gone || why.kind == CloseReason::Kind::exited)
    discover_cache_.forget(s->server_name);
  if (s->reserved) {
    const CallId reserved = s->reserved;
    s->reserved = 0;
    if (auto c = calls_.find(reserved); c != calls_.end())
      refuse(*c->second, {jsonrpc::code::connection_closed, why.detail, {}},
             unavailable(why.kind) ? 503 : 200, "closed");
  }
  if (auto r = runs_.find(s->run); s->run && r != runs_.end()) {
    Run& run = *r->second;
    run.session = 0;
    if (run.state == RunState::running) {
      const CallId call = run.call;
      const std::string method = run.method;
      erase_run(run.id);
      if (auto c = calls_.find(call); call && c != calls_.end())
        refuse(*c->second,
               {jsonrpc::code::connection_closed, method + " was not answered: " + why.detail, {}},
               200, "closed");
    } else if (run.state == RunState::parked && transition(run, RunEvent::upstream_done)) {
      // The retry hears of it (a settled run keeps the outcome it had).
      run.outcome = jsonrpc::Message::error(
          run.upstream_id, jsonrpc::code::connection_closed,
          run.method + " was not answered: the MQTT session ended (" + why.detail + ")");
    }
  }
  if (s->listen_call) end_listen_gracefully(*s);
  log::bridge()->debug("{} MQTT session {} for {} {}: {}", options_.log_prefix, serial,
                       s->server_name, how == SessionEnd::dropped ? "closed" : "ended", why.detail);
  if (how == SessionEnd::dropped) s->channel->hang_up(why);
  pump_waiting();
}

std::int64_t ModernGateway::s_next_id(Session& s) {
  return s.next_id++;
}

void ModernGateway::deliver(Session& s, jsonrpc::Message m) {
  s.channel->deliver(std::move(m));
}

}  // namespace mcpmqtt::bridge

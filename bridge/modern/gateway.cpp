#include "bridge/modern/gateway.hpp"

#include <algorithm>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "common/log.hpp"
#include "common/metrics.hpp"

namespace mcpmqtt::bridge {

namespace {

using rapidjson::Value;
using Clock = Scheduler::Clock;

auto logger() {
  static auto l = log::get("bridge");
  return l;
}

const jsonrpc::Id& init_id() {
  static const jsonrpc::Id id = jsonrpc::Id::string("mcpmqtt-gateway-initialize");
  return id;
}

const Value* member(const Value* v, const char* name) {
  if (!v || !v->IsObject()) return nullptr;
  auto it = v->FindMember(name);
  return it == v->MemberEnd() ? nullptr : &it->value;
}

std::string to_json(const Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return {buf.GetString(), buf.GetSize()};
}

std::string hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::int64_t to_ms(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// The digest a requestState binds the original request by (mrtr §Server Requirements 5): its
// params without what changes between rounds (_meta, inputResponses, requestState).
std::string params_digest(const jsonrpc::Message& m) {
  const Value* params = m.params();
  if (!params || !params->IsObject()) return sha256_hex("");
  rapidjson::Document d;
  d.CopyFrom(*params, d.GetAllocator());
  d.RemoveMember("_meta");
  d.RemoveMember("inputResponses");
  d.RemoveMember("requestState");
  return sha256_hex(modern::canonical_json(static_cast<const Value&>(d)));
}

bool unavailable(CloseReason::Kind k) {
  using K = CloseReason::Kind;
  return k == K::peer_gone || k == K::timeout || k == K::exited || k == K::shutdown;
}

metrics::Counter& requests_counter(const std::string& direction, const std::string& method,
                                   const char* outcome) {
  return metrics::registry().counter(
      "mcpmqtt_modern_requests_total",
      "Requests of MCP revision 2026-07-28 served by the modern gateway, by direction, method and "
      "outcome (result, error, input_required, refused, cancelled, closed).",
      {"direction", "method", "outcome"},
      {direction, std::string(metrics::method_label(method)), outcome});
}

}  // namespace

// ---- state -----------------------------------------------------------------------------------

struct ModernGateway::Pending {
  Pending(Call c, Responder r) : call(std::move(c)), responder(std::move(r)) {}
  CallId id = 0;
  Call call;
  Responder responder;
  modern::Envelope envelope;
  std::string key;  // the pool key
  enum class Kind { run, discover, listen } kind = Kind::run;
  enum class Where { admitted, waiting, opening, running, listening } where = Where::admitted;
  std::uint64_t session = 0;
  std::uint64_t run = 0;
  Scheduler::TimerId wait_timer = 0;
};

struct ModernGateway::Run {
  std::uint64_t id = 0;
  std::uint64_t session = 0;  // 0 once the session is released or gone
  CallId call = 0;            // the downstream request answered next; 0 while parked
  std::string method;
  std::string key;
  std::string server_name;
  std::string principal;
  std::string params_digest;                 // computed when a round first needs it
  std::optional<jsonrpc::Message> original;  // the first request, for that digest
  std::string server_info_json;
  std::string uri;  // resources/read: for -32002 → -32602 data.uri
  jsonrpc::Id upstream_id;
  std::optional<jsonrpc::Id> upstream_token;  // the progressToken sent upstream
  std::optional<jsonrpc::Id> progress_token;  // the current downstream request's
  std::optional<int> log_rank;                // the current downstream request's logLevel
  bool allows_input = false;
  std::vector<InputRequest> gathering;  // this round, not yet asked
  std::vector<InputRequest> asked;      // the round the client was asked (parked)
  std::vector<InputRequest> late;       // arrived while parked: asked in the next round
  std::optional<std::size_t> round_size;
  Scheduler::TimerId round_timer = 0;
  Scheduler::TimerId park_timer = 0;
  std::uint32_t round = 0;
  std::string nonce;
  bool parked = false;
  std::optional<jsonrpc::Message> final_response;  // came while parked
  std::map<std::string, unsigned> counters;        // invented keys per kind
};

struct ModernGateway::Session {
  std::uint64_t serial = 0;
  std::string key;
  std::string server_name;
  std::string caps_json;
  std::string client_info_json;
  std::shared_ptr<LocalChannel> channel;
  enum class State { opening, idle, busy, listening } state = State::opening;
  DiscoverInfo info;
  bool has_logging = false;
  std::optional<std::string> log_level;  // as set with logging/setLevel
  std::int64_t next_id = 1;
  std::vector<jsonrpc::Id> own;  // the gateway's own requests (logging/setLevel)
  std::uint64_t run = 0;
  CallId reserved = 0;  // the request an opening session is for
  CallId listen_call = 0;
  std::optional<jsonrpc::Id> listen_id;
  bool listen_acked = false;
  Scheduler::TimerId idle_timer = 0;
};

std::int64_t ModernGateway::s_next_id(Session& s) {
  return s.next_id++;
}

// ---- life ------------------------------------------------------------------------------------

std::shared_ptr<ModernGateway> ModernGateway::create(Options options, Scheduler& scheduler,
                                                     Opener opener) {
  return std::shared_ptr<ModernGateway>(
      new ModernGateway(std::move(options), scheduler, std::move(opener)));
}

ModernGateway::ModernGateway(Options options, Scheduler& scheduler, Opener opener)
    : options_(std::move(options)),
      scheduler_(scheduler),
      opener_(std::move(opener)),
      codec_(options_.state_secret) {}

ModernGateway::~ModernGateway() {
  for (auto& [id, p] : calls_)
    if (p->wait_timer) scheduler_.cancel(p->wait_timer);
  for (auto& [id, r] : runs_) {
    if (r->round_timer) scheduler_.cancel(r->round_timer);
    if (r->park_timer) scheduler_.cancel(r->park_timer);
  }
  for (auto& [serial, s] : sessions_)
    if (s->idle_timer) scheduler_.cancel(s->idle_timer);
}

ModernGateway::Stats ModernGateway::stats() const {
  Stats st;
  for (const auto& [serial, s] : sessions_) {
    switch (s->state) {
      case Session::State::opening:
        ++st.opening;
        break;
      case Session::State::idle:
        ++st.idle;
        break;
      case Session::State::busy: {
        auto r = runs_.find(s->run);
        if (r != runs_.end() && r->second->parked)
          ++st.parked;
        else
          ++st.busy;
        break;
      }
      case Session::State::listening:
        ++st.listening;
        break;
    }
  }
  for (const auto& [id, p] : calls_)
    if (p->where == Pending::Where::waiting) ++st.waiting;
  return st;
}

// ---- requests --------------------------------------------------------------------------------

ModernGateway::CallId ModernGateway::handle(Call call, Responder responder) {
  const CallId id = next_call_++;
  auto owned = std::make_unique<Pending>(std::move(call), std::move(responder));
  owned->id = id;
  Pending& p = *owned;
  calls_.emplace(id, std::move(owned));
  const auto& m = p.call.message;
  if (closed_) {
    refuse(p, {jsonrpc::code::connection_closed, "Service Unavailable: the bridge is stopping", {}},
           503);
    return id;
  }
  if (!m.is_request()) {
    refuse(p, {jsonrpc::code::invalid_request, "Invalid Request: not a request", {}}, 400);
    return id;
  }
  auto admitted = modern::admit(m, p.call.headers ? &*p.call.headers : nullptr);
  if (!admitted) {
    refuse(p, admitted.error().error, admitted.error().status);
    return id;
  }
  p.envelope = std::move(*admitted);
  p.key = p.call.server_name + '\n' + p.call.principal + '\n' +
          modern::canonical_json(p.envelope.client_capabilities_json);
  if (p.call.origin) by_origin_[p.call.origin].push_back(id);

  const auto& method = m.method();
  const Value* params = m.params();
  if (method == "tools/call" && p.call.headers) {
    // streamable-http §Standard Request Headers (SEP-2243): the Mcp-Param-{Name} headers of a
    // tool the bridge has seen listed.
    auto server = param_headers_.find(p.call.server_name);
    const Value* name = member(params, "name");
    if (server != param_headers_.end() && name && name->IsString()) {
      auto tool = server->second.find(std::string(name->GetString(), name->GetStringLength()));
      if (tool != server->second.end()) {
        if (auto e = modern::check_param_headers(m, tool->second, p.call.param_headers)) {
          refuse(p, *e, 400);
          return id;
        }
      }
    }
  }
  if (method == "server/discover") {
    p.kind = Pending::Kind::discover;
    if (auto it = discover_cache_.find(p.call.server_name); it != discover_cache_.end()) {
      answer_discover(it->second, p);
      return id;
    }
  } else if (method == "subscriptions/listen") {
    p.kind = Pending::Kind::listen;
    // schema SubscriptionsListenRequestParams: notifications is required (the v2 SDK answers
    // in-band, before any acknowledgement).
    const Value* n = member(params, "notifications");
    if (!n || !n->IsObject()) {
      refuse(p,
             {jsonrpc::code::invalid_params,
              "Invalid params: 'notifications' is required and must be a valid SubscriptionFilter",
              {}},
             200);
      return id;
    }
    std::size_t listening = 0;
    for (const auto& [other, q] : calls_)
      if (other != id && q->kind == Pending::Kind::listen) ++listening;
    if (listening >= options_.max_listens) {
      refuse(p,
             {jsonrpc::code::internal_error,
              "Subscription limit reached: the bridge holds " + std::to_string(listening) +
                  " subscriptions/listen streams (ingress.modern.max_listens)",
              {}},
             200);
      return id;
    }
  } else if (const Value* state = member(params, "requestState")) {
    if (!state->IsString()) {
      refuse(p,
             {jsonrpc::code::invalid_params,
              "Invalid params: requestState must be the string of an input_required result",
              {}},
             200);
      return id;
    }
    resume(id, std::string(state->GetString(), state->GetStringLength()));
    return id;
  }
  if (!acquire(id)) enqueue(id);
  return id;
}

void ModernGateway::finish(Pending& p, const jsonrpc::Message& m, unsigned status,
                           const char* outcome) {
  if (!options_.metrics_direction.empty())
    requests_counter(options_.metrics_direction, p.call.message.method(), outcome).inc();
  auto fn = std::move(p.responder.finish);
  forget(p.id);  // `p` is gone
  if (fn) fn(m, status);
}

void ModernGateway::refuse(Pending& p, const jsonrpc::Error& e, unsigned status,
                           const char* outcome) {
  finish(p, jsonrpc::Message::error(p.call.message.id(), e), status, outcome);
}

void ModernGateway::forget(CallId id) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  auto& p = *it->second;
  if (p.wait_timer) scheduler_.cancel(p.wait_timer);
  if (p.call.origin) {
    auto o = by_origin_.find(p.call.origin);
    if (o != by_origin_.end()) {
      auto& v = o->second;
      v.erase(std::remove(v.begin(), v.end(), id), v.end());
      if (v.empty()) by_origin_.erase(o);
    }
  }
  calls_.erase(it);
}

void ModernGateway::cancel(CallId id) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  Pending& p = *it->second;
  if (!options_.metrics_direction.empty())
    requests_counter(options_.metrics_direction, p.call.message.method(), "cancelled").inc();
  const auto where = p.where;
  const auto session = p.session;
  const auto run = p.run;
  forget(id);
  switch (where) {
    case Pending::Where::admitted:
    case Pending::Where::waiting:
      break;
    case Pending::Where::opening:
      if (auto s = sessions_.find(session); s != sessions_.end() && s->second->reserved == id)
        s->second->reserved = 0;  // it joins the pool once open
      break;
    case Pending::Where::running:
      if (auto r = runs_.find(run); r != runs_.end()) {
        r->second->call = 0;
        cancel_run(run, "the client cancelled the request (its stream closed)");
      }
      break;
    case Pending::Where::listening:
      if (auto s = sessions_.find(session); s != sessions_.end()) s->second->listen_call = 0;
      drop_session(session, {CloseReason::Kind::normal, "the client ended subscriptions/listen"});
      break;
  }
}

void ModernGateway::cancel_request(std::uint64_t origin, const jsonrpc::Id& request_id) {
  auto o = by_origin_.find(origin);
  if (o == by_origin_.end()) return;
  for (CallId id : o->second) {
    auto it = calls_.find(id);
    if (it != calls_.end() && it->second->call.message.id() == request_id) {
      cancel(id);
      return;
    }
  }
}

void ModernGateway::close_all(const CloseReason& why) {
  closed_ = true;
  std::vector<CallId> ids;
  for (const auto& [id, p] : calls_)
    ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (CallId id : ids) {
    auto it = calls_.find(id);
    if (it == calls_.end()) continue;
    Pending& p = *it->second;
    if (p.where == Pending::Where::listening) {
      if (auto s = sessions_.find(p.session); s != sessions_.end()) {
        end_listen_gracefully(*s->second);
        continue;
      }
    }
    const bool before = p.where != Pending::Where::running;
    refuse(p,
           {jsonrpc::code::connection_closed,
            before ? "Service Unavailable: " + why.detail
                   : p.call.message.method() + " was not answered: " + why.detail,
            {}},
           before ? 503 : 200, "closed");
  }
  waiting_.clear();
  for (auto& [id, r] : runs_) {
    if (r->round_timer) scheduler_.cancel(r->round_timer);
    if (r->park_timer) scheduler_.cancel(r->park_timer);
  }
  runs_.clear();
  std::vector<std::uint64_t> serials;
  for (const auto& [serial, s] : sessions_)
    serials.push_back(serial);
  for (auto serial : serials) {
    if (auto s = sessions_.find(serial); s != sessions_.end()) {
      s->second->run = 0;
      s->second->reserved = 0;
      s->second->listen_call = 0;
    }
    drop_session(serial, why);
  }
}

// ---- the pool --------------------------------------------------------------------------------

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
      logger()->debug("{} session {} closed to make room (ingress.modern.max_sessions {})",
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
    if (!r->parked || !r->session || (key && r->key != *key)) continue;
    if (!oldest || r->id < oldest->id) oldest = r.get();
  }
  if (!oldest) return false;
  logger()->info(
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
    logger()->warn("{} a {} request refused: {} requests wait for a session already ({})",
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
      logger()->warn(
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
  const std::string principal = p.call.principal;
  // 002 §Initialization, with exactly the capabilities this request declared.
  channel->deliver(jsonrpc::Message::request(
      init_id(), "initialize",
      R"({"protocolVersion":)" + jsonrpc::quote(options_.legacy_version) + R"(,"capabilities":)" +
          s.caps_json + R"(,"clientInfo":)" + s.client_info_json + R"(,"_meta":{)" +
          jsonrpc::quote(modern::bridge_key::reads_input_keys) + ":true}}"));
  by_key_[s.key].insert(serial);
  sessions_.emplace(serial, std::move(owned));
  logger()->debug("{} opening MQTT session {} for {}", options_.log_prefix, serial, server_name);
  opener_(server_name, principal, channel);  // may report back at once
}

void ModernGateway::start_on(Session& s, Pending& p) {
  if (s.idle_timer) {
    scheduler_.cancel(s.idle_timer);
    s.idle_timer = 0;
  }
  switch (p.kind) {
    case Pending::Kind::discover:
      answer_discover(s, p);
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

void ModernGateway::drop_session(std::uint64_t serial, const CloseReason& why) {
  auto it = sessions_.find(serial);
  if (it == sessions_.end()) return;
  auto s = std::move(it->second);
  sessions_.erase(it);
  unindex(*s);
  if (s->idle_timer) scheduler_.cancel(s->idle_timer);
  if (s->reserved) {
    if (auto c = calls_.find(s->reserved); c != calls_.end())
      refuse(*c->second, {jsonrpc::code::connection_closed, why.detail, {}}, 503, "closed");
  }
  if (s->run) {
    if (auto r = runs_.find(s->run); r != runs_.end()) {
      r->second->session = 0;
      if (r->second->call) {
        if (auto c = calls_.find(r->second->call); c != calls_.end())
          refuse(*c->second,
                 {jsonrpc::code::connection_closed,
                  c->second->call.message.method() + " was not answered: " + why.detail,
                  {}},
                 200, "closed");
        runs_.erase(r);
      } else if (!r->second->final_response) {
        r->second->final_response =
            jsonrpc::Message::error(r->second->upstream_id, jsonrpc::code::connection_closed,
                                    r->second->method + " was not answered: " + why.detail);
      }
    }
  }
  if (s->listen_call) end_listen_gracefully(*s);
  logger()->debug("{} MQTT session {} for {} closed: {}", options_.log_prefix, serial,
                  s->server_name, why.detail);
  s->channel->hang_up(why);
  pump_waiting();
}

void ModernGateway::deliver(Session& s, jsonrpc::Message m) {
  s.channel->deliver(std::move(m));
}

// ---- messages from sessions ------------------------------------------------------------------

void ModernGateway::on_upstream(std::uint64_t serial, jsonrpc::Message m) {
  auto it = sessions_.find(serial);
  if (it == sessions_.end()) return;
  Session& s = *it->second;
  if (m.is_response()) {
    if (s.state == Session::State::opening && m.id() == init_id()) {
      on_initialized(s, m);
      return;
    }
    if (auto own = std::find(s.own.begin(), s.own.end(), m.id()); own != s.own.end()) {
      s.own.erase(own);
      if (m.kind() == jsonrpc::Kind::error)
        logger()->debug("{} the server refused logging/setLevel: {}", options_.log_prefix,
                        m.error().message);
      return;
    }
    if (s.state == Session::State::listening) {
      on_listen_message(s, m);
      return;
    }
    if (auto r = runs_.find(s.run); s.run && r != runs_.end() && m.id() == r->second->upstream_id) {
      on_final(s, *r->second, m);
      return;
    }
    logger()->debug("{} a response to {} on session {} answers nothing in flight; dropped",
                    options_.log_prefix, m.id().to_string(), serial);
    return;
  }
  if (m.is_request()) {
    on_server_request(s, m);
    return;
  }
  if (s.state == Session::State::listening) {
    on_listen_message(s, m);
    return;
  }
  on_server_notification(s, m);
}

void ModernGateway::on_session_closed(std::uint64_t serial, const CloseReason& why) {
  auto it = sessions_.find(serial);
  if (it == sessions_.end()) return;
  Session& s = *it->second;
  if (why.kind == CloseReason::Kind::peer_gone || why.kind == CloseReason::Kind::exited)
    discover_cache_.erase(s.server_name);
  if (s.reserved) {
    const CallId reserved = s.reserved;
    s.reserved = 0;
    if (auto c = calls_.find(reserved); c != calls_.end())
      refuse(*c->second, {jsonrpc::code::connection_closed, why.detail, {}},
             unavailable(why.kind) ? 503 : 200, "closed");
  }
  if (auto r = runs_.find(s.run); s.run && r != runs_.end()) {
    Run& run = *r->second;
    run.session = 0;
    if (run.call) {
      if (auto c = calls_.find(run.call); c != calls_.end())
        refuse(
            *c->second,
            {jsonrpc::code::connection_closed, run.method + " was not answered: " + why.detail, {}},
            200, "closed");
      if (run.round_timer) scheduler_.cancel(run.round_timer);
      if (run.park_timer) scheduler_.cancel(run.park_timer);
      runs_.erase(r);
    } else if (!run.final_response) {
      run.final_response = jsonrpc::Message::error(
          run.upstream_id, jsonrpc::code::connection_closed,
          run.method + " was not answered: the MQTT session ended (" + why.detail + ")");
    }
  }
  if (s.listen_call) end_listen_gracefully(s);
  auto owned = std::move(it->second);
  sessions_.erase(serial);
  unindex(*owned);
  if (owned->idle_timer) scheduler_.cancel(owned->idle_timer);
  logger()->debug("{} MQTT session {} for {} ended: {}", options_.log_prefix, serial,
                  owned->server_name, why.detail);
  pump_waiting();
}

void ModernGateway::on_initialized(Session& s, const jsonrpc::Message& m) {
  if (m.kind() == jsonrpc::Kind::error) {
    // The Ingress refuses with -32000 when no instance is online: the server is unavailable.
    const auto& e = m.error();
    const CallId reserved = s.reserved;
    s.reserved = 0;
    if (auto c = calls_.find(reserved); c != calls_.end()) {
      const unsigned status =
          e.code == jsonrpc::code::connection_closed ? 503 : modern::http_status_for(e.code);
      refuse(*c->second, e, status, "error");
    }
    drop_session(s.serial, {CloseReason::Kind::normal, "initialize failed: " + e.message});
    return;
  }
  const Value* result = m.result_value();
  if (const Value* caps = member(result, "capabilities"); caps && caps->IsObject()) {
    rapidjson::Document d;
    d.CopyFrom(*caps, d.GetAllocator());
    d.RemoveMember("tasks");  // not a 2026-07-28 server capability (schema ServerCapabilities)
    s.info.capabilities_json = to_json(d);
    s.has_logging = d.HasMember("logging");
  }
  if (const Value* info = member(result, "serverInfo"); info && info->IsObject())
    s.info.server_info_json = to_json(*info);
  if (const Value* text = member(result, "instructions"); text && text->IsString())
    s.info.instructions_json = to_json(*text);
  deliver(s, jsonrpc::Message::notification("notifications/initialized"));
  if (discover_cache_.size() >= 1024 && !discover_cache_.count(s.server_name))
    discover_cache_.erase(discover_cache_.begin());
  discover_cache_[s.server_name] = s.info;
  const CallId reserved = s.reserved;
  s.reserved = 0;
  logger()->debug("{} MQTT session {} for {} initialized", options_.log_prefix, s.serial,
                  s.server_name);
  if (auto c = calls_.find(reserved); c != calls_.end()) {
    s.state = Session::State::idle;
    start_on(s, *c->second);
  } else {
    make_idle(s);
  }
}

void ModernGateway::on_server_request(Session& s, const jsonrpc::Message& m) {
  const auto& method = m.method();
  if (method == "ping") {
    deliver(s, jsonrpc::Message::result(m.id(), "{}"));
    return;
  }
  const auto capability = modern::capability_for_input(method);
  Run* run = nullptr;
  if (auto r = runs_.find(s.run); s.run && r != runs_.end()) run = r->second.get();
  if (!capability.empty() && run && run->allows_input) {
    if (!modern::declares_capability(s.caps_json, capability)) {
      // mrtr §Server Requirements 7: no input request of a kind the request did not declare.
      const auto error = modern::missing_client_capability(
          capability, "the server asked for " + method + " during " + run->method +
                          ", and the request's clientCapabilities do not declare it");
      deliver(s, jsonrpc::Message::error(
                     m.id(), jsonrpc::code::method_not_found,
                     "the client did not declare the " + std::string(capability) + " capability"));
      const std::uint64_t run_id = run->id;
      if (run->call) {
        if (auto c = calls_.find(run->call); c != calls_.end()) {
          run->call = 0;
          refuse(*c->second, error, 400, "error");
        }
        cancel_run(run_id, "the request cannot go on without the " + std::string(capability) +
                               " capability");
      } else {
        // Parked: the retry will hear of it.
        run->final_response = jsonrpc::Message::error(run->upstream_id, error);
      }
      return;
    }
    gather(s, *run, m);
    return;
  }
  deliver(s, jsonrpc::Message::error(
                 m.id(), jsonrpc::code::method_not_found,
                 "Method not found: " + method +
                     " cannot be answered here: the client is an MCP 2026-07-28 client of "
                     "mcp-mqtt-bridge, which takes elicitation/create, sampling/createMessage "
                     "and roots/list only while a tools/call, prompts/get or resources/read runs"));
}

void ModernGateway::on_server_notification(Session& s, const jsonrpc::Message& m) {
  const auto& method = m.method();
  Run* run = nullptr;
  if (auto r = runs_.find(s.run); s.run && r != runs_.end()) run = r->second.get();
  if (!run) return;  // list changes, resource updates: only on subscriptions/listen
  if (method == "notifications/cancelled") {
    // The server withdrew one of its input requests.
    const Value* rid = member(m.params(), "requestId");
    if (!rid) return;
    std::optional<jsonrpc::Id> id;
    if (rid->IsString())
      id = jsonrpc::Id::string(std::string(rid->GetString(), rid->GetStringLength()));
    if (rid->IsInt64()) id = jsonrpc::Id::integer(rid->GetInt64());
    if (!id) return;
    for (auto* list : {&run->gathering, &run->asked, &run->late})
      list->erase(std::remove_if(list->begin(), list->end(),
                                 [&](const InputRequest& in) { return in.server_id == *id; }),
                  list->end());
    return;
  }
  if (run->parked || !run->call) return;
  auto c = calls_.find(run->call);
  if (c == calls_.end()) return;
  Pending& p = *c->second;
  if (method == "notifications/progress") {
    // 2026-07-28 progress: on the originating request's stream only, with its token.
    const auto& token = m.progress_token();
    if (!token || !run->upstream_token || *token != *run->upstream_token || !run->progress_token)
      return;
    if (*run->progress_token == *run->upstream_token) {
      if (p.responder.notify) p.responder.notify(m);
      return;
    }
    rapidjson::Document d;
    d.CopyFrom(*m.params(), d.GetAllocator());
    auto& t = d["progressToken"];
    const auto& want = *run->progress_token;
    if (want.is_integer())
      t.SetInt64(want.as_integer());
    else
      t.SetString(want.as_string().c_str(),
                  static_cast<rapidjson::SizeType>(want.as_string().size()), d.GetAllocator());
    if (p.responder.notify)
      p.responder.notify(jsonrpc::Message::notification("notifications/progress", to_json(d)));
    return;
  }
  if (method == "notifications/message") {
    // basic/utilities/logging (2026-07-28): none without the request's logLevel, and only at or
    // above it.
    if (!run->log_rank) return;
    const Value* level = member(m.params(), "level");
    if (!level || !level->IsString()) return;
    const auto rank =
        modern::log_level_rank(std::string_view(level->GetString(), level->GetStringLength()));
    if (rank && *rank >= *run->log_rank && p.responder.notify) p.responder.notify(m);
    return;
  }
  // Anything else (list changes, resource updates, unknown notifications) is not request-scoped.
}

// ---- running a request -----------------------------------------------------------------------

void ModernGateway::answer_discover(Session& s, Pending& p) {
  answer_discover(s.info, p);
}

void ModernGateway::answer_discover(const DiscoverInfo& info, Pending& p) {
  // schema DiscoverResult: supportedVersions, capabilities, instructions; serverInfo in _meta;
  // ttlMs and cacheScope (CacheableResult) added by complete_result.
  std::string versions;
  for (const auto& v : modern::supported_versions())
    versions += (versions.empty() ? "" : ",") + jsonrpc::quote(v);
  std::string body =
      R"({"supportedVersions":[)" + versions + R"(],"capabilities":)" + info.capabilities_json;
  if (!info.instructions_json.empty()) body += R"(,"instructions":)" + info.instructions_json;
  body += "}";
  rapidjson::Document d;
  d.Parse(body.data(), body.size());
  const auto json = modern::complete_result(d, "server/discover", info.server_info_json);
  finish(p, jsonrpc::Message::result(p.call.message.id(), json), 200, "result");
}

void ModernGateway::start_run(Session& s, Pending& p) {
  const auto& m = p.call.message;
  auto owned = std::make_unique<Run>();
  Run& run = *owned;
  run.id = next_run_++;
  run.session = s.serial;
  run.call = p.id;
  run.method = m.method();
  run.key = p.key;
  run.server_name = p.call.server_name;
  run.principal = p.call.principal;
  run.original = m;  // shares its text; the digest waits for a round that needs it
  run.server_info_json = s.info.server_info_json;
  if (run.method == "resources/read") {
    if (const Value* uri = member(m.params(), "uri"); uri && uri->IsString())
      run.uri.assign(uri->GetString(), uri->GetStringLength());
  }
  run.upstream_id = jsonrpc::Id::integer(s_next_id(s));
  run.upstream_token = p.envelope.progress_token;
  run.progress_token = p.envelope.progress_token;
  if (p.envelope.log_level) run.log_rank = modern::log_level_rank(*p.envelope.log_level);
  run.allows_input = modern::allows_input_required(run.method);
  s.state = Session::State::busy;
  s.run = run.id;
  p.where = Pending::Where::running;
  p.session = s.serial;
  p.run = run.id;
  const auto upstream =
      jsonrpc::Message::request(run.upstream_id, run.method, modern::without_envelope(m.params()));
  runs_.emplace(run.id, std::move(owned));
  set_log_level(s, p.envelope.log_level);
  deliver(s, upstream);
}

void ModernGateway::set_log_level(Session& s, const std::optional<std::string>& level) {
  // With a logLevel, the server is told the level first, so it sends less (the filter applies
  // anyway); without one the session's level stays and every message is dropped.
  if (!level || !s.has_logging || s.log_level == level) return;
  const auto id = jsonrpc::Id::integer(s_next_id(s));
  s.own.push_back(id);
  s.log_level = level;
  deliver(s, jsonrpc::Message::request(id, "logging/setLevel",
                                       R"({"level":)" + jsonrpc::quote(*level) + "}"));
}

jsonrpc::Message ModernGateway::to_downstream(const Run& run, const jsonrpc::Id& id,
                                              const jsonrpc::Message& upstream,
                                              unsigned& status) const {
  if (upstream.kind() == jsonrpc::Kind::result) {
    status = 200;
    const Value* result = upstream.result_value();
    static const Value kEmpty(rapidjson::kObjectType);
    return jsonrpc::Message::result(
        id, modern::complete_result(result ? *result : kEmpty, run.method, run.server_info_json));
  }
  const auto e = modern::modern_error(upstream.error(), run.uri);
  status = modern::http_status_for(e.code);
  return jsonrpc::Message::error(id, e);
}

void ModernGateway::on_final(Session& s, Run& run, const jsonrpc::Message& m) {
  if (run.round_timer) {
    scheduler_.cancel(run.round_timer);
    run.round_timer = 0;
  }
  answer_inputs_with_error(&s, run, "the request they belong to has ended");
  run.session = 0;
  s.run = 0;
  if (!run.call) {
    // Parked: the answer waits for the retry (or the end of the state's life).
    run.final_response = m;
    release(s);
    return;
  }
  if (run.method == "tools/list" && m.kind() == jsonrpc::Kind::result && m.result_value())
    learn_param_headers(run.server_name, *m.result_value());
  auto c = calls_.find(run.call);
  unsigned status = 200;
  const std::uint64_t run_id = run.id;
  if (c != calls_.end()) {
    const auto out = to_downstream(run, c->second->call.message.id(), m, status);
    const char* outcome = out.kind() == jsonrpc::Kind::result ? "result" : "error";
    if (run.park_timer) scheduler_.cancel(run.park_timer);
    runs_.erase(run_id);
    finish(*c->second, out, status, outcome);
  } else {
    runs_.erase(run_id);
  }
  release(s);
}

void ModernGateway::learn_param_headers(const std::string& server_name,
                                        const rapidjson::Value& result) {
  constexpr std::size_t kMaxServers = 1024;
  constexpr std::size_t kMaxTools = 4096;
  auto tools = modern::param_headers_of(result);
  if (tools.empty()) return;
  if (param_headers_.size() >= kMaxServers && !param_headers_.count(server_name))
    param_headers_.erase(param_headers_.begin());
  auto& known = param_headers_[server_name];
  for (auto& [tool, params] : tools) {
    if (known.size() >= kMaxTools && !known.count(tool)) continue;
    known[tool] = std::move(params);
  }
}

// ---- MRTR ------------------------------------------------------------------------------------

void ModernGateway::gather(Session& s, Run& run, const jsonrpc::Message& m) {
  InputRequest in;
  in.server_id = m.id();
  in.method = m.method();
  std::string wanted_key;
  std::optional<std::size_t> round_size;
  if (const Value* params = m.params(); params && params->IsObject()) {
    rapidjson::Document d;
    d.CopyFrom(*params, d.GetAllocator());
    if (d.HasMember("_meta") && d["_meta"].IsObject()) {
      auto& meta = d["_meta"];
      if (const Value* k = member(&meta, modern::bridge_key::input_key); k && k->IsString())
        wanted_key.assign(k->GetString(), k->GetStringLength());
      if (const Value* size = member(member(&meta, modern::bridge_key::input_round), "size");
          size && size->IsUint64() && size->GetUint64() > 0 && size->GetUint64() <= 1024)
        round_size = static_cast<std::size_t>(size->GetUint64());
      meta.RemoveMember(modern::bridge_key::input_key);
      meta.RemoveMember(modern::bridge_key::input_round);
      if (meta.MemberCount() == 0) d.RemoveMember("_meta");
    }
    in.params_json = to_json(d);
  }
  auto used = [&](const std::string& k) {
    for (const auto* list : {&run.gathering, &run.asked, &run.late})
      for (const auto& x : *list)
        if (x.key == k) return true;
    return false;
  };
  if (!wanted_key.empty() && !used(wanted_key)) {
    in.key = std::move(wanted_key);
  } else {
    // Keys a 2025 server cannot send: invented, unique within the request (mrtr: keys are the
    // server's choice, opaque to the client).
    const std::string kind(modern::capability_for_input(in.method));
    do {
      in.key = kind + "-" + std::to_string(++run.counters[kind]);
    } while (used(in.key));
  }
  if (run.parked || !run.call) {
    run.late.push_back(std::move(in));
    return;
  }
  run.gathering.push_back(std::move(in));
  if (round_size) run.round_size = round_size;
  if (run.round_size && run.gathering.size() >= *run.round_size) {
    close_round(run.id);
    return;
  }
  if (run.round_timer) scheduler_.cancel(run.round_timer);
  // Without the egress's round size, a round closes after a quiet window (the v2 SDK's legacy
  // shim sends a round's requests at once); with it, the window is only a fallback.
  const auto wait = run.round_size ? std::max(options_.round_quiet, std::chrono::milliseconds(1000))
                                   : options_.round_quiet;
  std::weak_ptr<ModernGateway> weak = weak_from_this();
  run.round_timer = scheduler_.schedule(wait, [weak, id = run.id] {
    auto self = weak.lock();
    if (!self) return;
    if (auto r = self->runs_.find(id); r != self->runs_.end()) r->second->round_timer = 0;
    self->close_round(id);
  });
  (void)s;
}

void ModernGateway::close_round(std::uint64_t run_id) {
  auto r = runs_.find(run_id);
  if (r == runs_.end()) return;
  Run& run = *r->second;
  if (run.round_timer) {
    scheduler_.cancel(run.round_timer);
    run.round_timer = 0;
  }
  if (run.gathering.empty() || !run.call) return;
  auto c = calls_.find(run.call);
  if (c == calls_.end()) return;
  run.asked = std::move(run.gathering);
  run.gathering.clear();
  run.round_size.reset();
  ask(run, *c->second);
}

std::string ModernGateway::mint_state(Run& run) const {
  if (run.params_digest.empty() && run.original) {
    run.params_digest = params_digest(*run.original);
    run.original.reset();
  }
  const auto expiry = to_ms(scheduler_.now()) + options_.input_timeout.count();
  const std::string payload =
      R"({"run":)" + std::to_string(run.id) + R"(,"n":)" + jsonrpc::quote(run.nonce) + R"(,"r":)" +
      std::to_string(run.round) + R"(,"p":)" + jsonrpc::quote(sha256_hex(run.principal)) +
      R"(,"k":)" + jsonrpc::quote(sha256_hex(run.key)) + R"(,"m":)" + jsonrpc::quote(run.method) +
      R"(,"d":)" + jsonrpc::quote(run.params_digest) + R"(,"e":)" + std::to_string(expiry) + "}";
  return codec_.mint(payload);
}

void ModernGateway::ask(Run& run, Pending& p) {
  run.parked = true;
  ++run.round;
  auto nonce = random_bytes(12);
  run.nonce = nonce ? hex(*nonce) : std::to_string(run.id) + "-" + std::to_string(run.round);
  if (run.park_timer) scheduler_.cancel(run.park_timer);
  std::weak_ptr<ModernGateway> weak = weak_from_this();
  run.park_timer =
      scheduler_.schedule(options_.input_timeout, [weak, id = run.id, round = run.round] {
        if (auto self = weak.lock()) self->on_park_timeout(id, round);
      });
  // basic/patterns/mrtr: {resultType: input_required, inputRequests: {key: {method, params}},
  // requestState}; the embedded requests carry no jsonrpc or id.
  std::string requests;
  for (const auto& in : run.asked) {
    requests += (requests.empty() ? "" : ",") + jsonrpc::quote(in.key) + R"(:{"method":)" +
                jsonrpc::quote(in.method) +
                (in.params_json.empty() ? "" : R"(,"params":)" + in.params_json) + "}";
  }
  const std::string body = R"({"resultType":"input_required","inputRequests":{)" + requests +
                           R"(},"requestState":)" + jsonrpc::quote(mint_state(run)) + "}";
  rapidjson::Document d;
  d.Parse(body.data(), body.size());
  const auto json = modern::complete_result(d, run.method, run.server_info_json);
  run.call = 0;
  if (!options_.metrics_direction.empty())
    metrics::registry()
        .counter("mcpmqtt_modern_input_rounds_total",
                 "input_required results the modern gateway answered (one per round of "
                 "server→client requests).",
                 {"direction"}, {options_.metrics_direction})
        .inc();
  logger()->debug("{} {} asks the client for input (round {}, {} request(s))", options_.log_prefix,
                  run.method, run.round, run.asked.size());
  finish(p, jsonrpc::Message::result(p.call.message.id(), json), 200, "input_required");
}

void ModernGateway::resume(CallId id, const std::string& state) {
  auto c = calls_.find(id);
  if (c == calls_.end()) return;
  Pending& p = *c->second;
  const auto& m = p.call.message;
  auto fail = [&](const std::string& why) {
    logger()->debug("{} requestState of {} {} refused: {}", options_.log_prefix, m.method(),
                    m.id().to_string(), why);
    refuse(p, modern::invalid_request_state(), 200, "error");
  };
  const auto payload = codec_.open(state);
  if (!payload) return fail("not minted by this bridge, or altered");
  rapidjson::Document d;
  d.Parse(payload->data(), payload->size());
  auto str = [&](const char* k) -> std::string {
    const Value* v = member(&d, k);
    return v && v->IsString() ? std::string(v->GetString(), v->GetStringLength()) : std::string();
  };
  auto num = [&](const char* k) -> std::optional<std::int64_t> {
    const Value* v = member(&d, k);
    if (v && v->IsInt64()) return v->GetInt64();
    return std::nullopt;
  };
  const auto run_id = num("run");
  const auto round = num("r");
  const auto expiry = num("e");
  if (d.HasParseError() || !d.IsObject() || !run_id || !round || !expiry)
    return fail("malformed payload");
  if (*expiry <= to_ms(scheduler_.now())) return fail("expired");
  if (str("p") != sha256_hex(p.call.principal)) return fail("minted for another principal");
  if (str("k") != sha256_hex(p.key)) return fail("minted for another server or capabilities");
  if (str("m") != m.method()) return fail("minted for " + str("m"));
  if (str("d") != params_digest(m)) return fail("minted for a request with other params");
  auto r = runs_.find(static_cast<std::uint64_t>(*run_id));
  if (r == runs_.end() || !r->second->parked || r->second->nonce != str("n") ||
      r->second->round != static_cast<std::uint32_t>(*round))
    return fail("the request it belongs to no longer waits for it");
  Run& run = *r->second;

  // mrtr §Error Handling: malformed InputResponses get a JSON-RPC error; the state stays good.
  const Value* responses = member(m.params(), "inputResponses");
  if (responses && !responses->IsNull() && !responses->IsObject()) {
    refuse(p,
           {jsonrpc::code::invalid_params,
            "Invalid params: inputResponses must be an object keyed like the inputRequests",
            {}},
           200, "error");
    return;
  }
  if (!responses || responses->IsNull()) responses = nullptr;
  for (const auto& in : run.asked) {
    const Value* v = member(responses, in.key.c_str());
    if (v && !v->IsObject()) {
      refuse(p,
             {jsonrpc::code::invalid_params,
              "Invalid params: inputResponses[" + jsonrpc::quote(in.key) +
                  "] must be the result object of " + in.method,
              {}},
             200, "error");
      return;
    }
  }
  if (run.final_response) {
    // The request ended while it waited (the server gave up, the session went away).
    unsigned status = 200;
    const auto out = to_downstream(run, m.id(), *run.final_response, status);
    if (run.park_timer) scheduler_.cancel(run.park_timer);
    runs_.erase(r);
    finish(p, out, status, out.kind() == jsonrpc::Kind::result ? "result" : "error");
    return;
  }
  auto si = sessions_.find(run.session);
  if (si == sessions_.end()) return fail("its MQTT session is gone");
  Session& s = *si->second;
  std::vector<InputRequest> remaining;
  for (auto& in : run.asked) {
    if (const Value* v = member(responses, in.key.c_str())) {
      deliver(s, jsonrpc::Message::result(in.server_id, to_json(*v)));
    } else {
      remaining.push_back(std::move(in));  // mrtr §Error Handling: asked again
    }
  }
  for (auto& in : run.late)
    remaining.push_back(std::move(in));
  run.late.clear();
  run.asked.clear();
  if (run.final_response || !sessions_.count(run.session)) {
    // The session ended under the deliveries: the retry hears how.
    unsigned status = 200;
    const auto out =
        run.final_response
            ? to_downstream(run, m.id(), *run.final_response, status)
            : jsonrpc::Message::error(m.id(), jsonrpc::code::connection_closed,
                                      m.method() + " was not answered: the MQTT session ended");
    if (run.park_timer) scheduler_.cancel(run.park_timer);
    runs_.erase(run.id);
    finish(p, out, status, out.kind() == jsonrpc::Kind::result ? "result" : "closed");
    return;
  }
  p.where = Pending::Where::running;
  p.session = run.session;
  p.run = run.id;
  if (!remaining.empty()) {
    run.asked = std::move(remaining);
    run.call = p.id;
    ask(run, p);
    return;
  }
  run.parked = false;
  if (run.park_timer) {
    scheduler_.cancel(run.park_timer);
    run.park_timer = 0;
  }
  run.call = p.id;
  run.progress_token = p.envelope.progress_token;
  run.log_rank.reset();
  if (p.envelope.log_level) run.log_rank = modern::log_level_rank(*p.envelope.log_level);
  set_log_level(s, p.envelope.log_level);
}

void ModernGateway::answer_inputs_with_error(Session* s, Run& run, const std::string& why) {
  for (auto* list : {&run.gathering, &run.asked, &run.late}) {
    for (const auto& in : *list) {
      if (s)
        deliver(*s, jsonrpc::Message::error(in.server_id, jsonrpc::code::internal_error,
                                            in.method + " was not answered: " + why));
    }
    list->clear();
  }
}

void ModernGateway::cancel_run(std::uint64_t run_id, const std::string& why) {
  auto r = runs_.find(run_id);
  if (r == runs_.end()) return;
  auto run = std::move(r->second);
  runs_.erase(r);
  if (run->round_timer) scheduler_.cancel(run->round_timer);
  if (run->park_timer) scheduler_.cancel(run->park_timer);
  auto si = sessions_.find(run->session);
  if (!run->session || si == sessions_.end()) return;
  Session& s = *si->second;
  s.run = 0;
  // 002 §Cancellation; then the session is closed rather than reused, since a 2025 server may
  // still send messages of the cancelled request.
  deliver(s, jsonrpc::Message::notification("notifications/cancelled",
                                            R"({"requestId":)" + run->upstream_id.to_json() +
                                                R"(,"reason":)" + jsonrpc::quote(why) + "}"));
  answer_inputs_with_error(&s, *run, why);
  drop_session(s.serial, {CloseReason::Kind::normal, "request cancelled: " + why});
}

void ModernGateway::on_park_timeout(std::uint64_t run_id, std::uint32_t round) {
  auto r = runs_.find(run_id);
  if (r == runs_.end() || !r->second->parked || r->second->round != round) return;
  r->second->park_timer = 0;
  logger()->info("{} {} waited {} for the client's input responses; cancelled", options_.log_prefix,
                 r->second->method, log::duration_text(options_.input_timeout));
  if (!r->second->session) {
    runs_.erase(r);
    return;
  }
  cancel_run(run_id, "no retry with the input responses within " +
                         log::duration_text(options_.input_timeout) +
                         " (ingress.modern.input_timeout_ms)");
}

// ---- subscriptions/listen --------------------------------------------------------------------

void ModernGateway::start_listen(Session& s, Pending& p) {
  s.state = Session::State::listening;
  unindex(s);  // a listen's session is not the pool's
  s.listen_call = p.id;
  s.listen_id = p.call.message.id();
  s.listen_acked = false;
  p.where = Pending::Where::listening;
  p.session = s.serial;
  // The ingress's SubscriptionHub answers it on this session (with this id, so subscriptionId
  // is the request's id with its JSON type); the server never sees it.
  deliver(s, jsonrpc::Message::request(*s.listen_id, "subscriptions/listen",
                                       modern::without_envelope(p.call.message.params())));
}

void ModernGateway::on_listen_message(Session& s, const jsonrpc::Message& m) {
  auto c = calls_.find(s.listen_call);
  if (!s.listen_call || c == calls_.end()) return;
  Pending& p = *c->second;
  if (m.is_notification()) {
    const auto& sid = m.subscription_id();
    if (!sid || *sid != *s.listen_id) return;  // untagged list changes of the session
    if (m.method() == "notifications/subscriptions/acknowledged") {
      s.listen_acked = true;
      if (p.responder.notify) p.responder.notify(m);
      // Nothing honoured: the acknowledgement and the result at once, as the v2 SDK does.
      const Value* n = member(m.params(), "notifications");
      if (n && n->IsObject() && n->MemberCount() == 0) {
        const auto serial = s.serial;
        end_listen_gracefully(s);
        drop_session(serial, {CloseReason::Kind::normal, "nothing to listen to"});
      }
      return;
    }
    if (s.listen_acked && p.responder.notify) p.responder.notify(m);
    return;
  }
  if (!m.is_response() || m.id() != *s.listen_id) return;
  if (m.kind() == jsonrpc::Kind::error && !s.listen_acked) {
    // Refused before the acknowledgement (a bad filter): in-band, and the session is done.
    const auto serial = s.serial;
    s.listen_call = 0;
    finish(p, jsonrpc::Message::error(m.id(), m.error()), 200, "error");
    drop_session(serial, {CloseReason::Kind::normal, "subscriptions/listen refused"});
    return;
  }
  // The session is ending (server gone, shutdown): a graceful end of the listen either way.
  end_listen_gracefully(s);
}

void ModernGateway::end_listen_gracefully(Session& s) {
  auto c = calls_.find(s.listen_call);
  s.listen_call = 0;
  if (c == calls_.end() || !s.listen_id) return;
  // schema SubscriptionsListenResult: the empty result with _meta.subscriptionId.
  std::string json = R"({"resultType":"complete","_meta":{)" +
                     jsonrpc::quote(modern::key::subscription_id) + ":" + s.listen_id->to_json();
  if (!s.info.server_info_json.empty())
    json += "," + jsonrpc::quote(modern::key::server_info) + ":" + s.info.server_info_json;
  json += "}}";
  finish(*c->second, jsonrpc::Message::result(*s.listen_id, json), 200, "result");
}

}  // namespace mcpmqtt::bridge

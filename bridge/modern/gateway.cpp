// The modern gateway: MCP 2026-07-28 clients (no sessions, a `_meta` envelope on every request)
// served by MQTT-hosted servers, whose transport stays session-based (004: initialize on the
// control topic, per-client RPC topics, server→client requests). No I/O: the transports hand it
// admitted-or-not requests with a Responder, and it opens MQTT sessions through an Opener that
// gives it a bridge::LocalChannel to play the 2025 client on (the daemon joins that channel to
// an MQTT client session with directions::Ingress::attach, so presence wait, instance pick and
// the splice's timeouts apply as for any ingress session).
//
// What the gateway does (revision 2026-07-28, cited per rule):
// - admission: modern::admit (envelope -32602, header mismatch -32020, version -32022, missing
//   headers -32020, removed methods 404/-32601), the request's id echoed in every error;
// - the pool: a request runs on an MQTT session checked out for it alone, keyed by (server-name,
//   principal, canonical JSON of the declared clientCapabilities) and initialized with exactly
//   those capabilities (basic/index §Statelessness: capabilities are never inferred from other
//   requests); bounded per key and in all, with a bounded FIFO of requests waiting for one;
//   idle sessions close after `idle_timeout`; when the pool is full an idle session of another
//   key, or else the oldest parked one, makes room;
// - `server/discover`: answered from the MQTT server's initialize result (cached per
//   server-name until a session of it ends because the server went away), supportedVersions =
//   modern::supported_versions(), capabilities without `tasks`, instructions, serverInfo in
//   `_meta`, ttlMs/cacheScope (schema DiscoverResult);
// - results: resultType, cache fields and serverInfo added (modern::complete_result); -32002 →
//   -32602 (with data.uri); -32601 → HTTP 404; -32021 → 400; other errors in-band;
// - progress (its token restored to the current request's) and `notifications/message` at or
//   above the request's logLevel, none without one (basic/utilities/logging), go to the request's
//   own stream; list-changed and resource updates never do;
// - MRTR (basic/patterns/mrtr): server→client requests (elicitation/create,
//   sampling/createMessage, roots/list) arriving while a tools/call, prompts/get or
//   resources/read runs are gathered into one round — its size from the bridge's
//   `mcp-mqtt-bridge/inputRound` _meta key when the egress set it, else a quiet window after the
//   last one — and answered downstream as `input_required` with `inputRequests` (keys from
//   `mcp-mqtt-bridge/inputKey`, else invented) and a `requestState` minted by a
//   RequestStateCodec; the session is parked, the upstream request still pending. The retry
//   (a new request id) with `inputResponses` and that state resumes it: the state must verify
//   (MAC, expiry, principal, server-name and capabilities, method, digest of the params) or the
//   retry gets -32602 "Invalid or expired requestState"; present answers go to the server,
//   missing ones are asked again in a new round, extra ones are ignored, malformed ones get
//   -32602. A parked run whose retry does not come within `input_timeout` is cancelled upstream;
//   a run whose upstream request ends while parked keeps that answer for the retry;
// - `subscriptions/listen` (final form, 000 and schema SubscriptionsListenRequest): a dedicated
//   MQTT session per listen, initialized with the request's capabilities, on which the ingress's
//   SubscriptionHub answers the listen: the acknowledgement first with the honoured subset, every
//   notification tagged with the listen's id as its JSON value; an empty honoured set ends at
//   once; the session's end (server gone, shutdown) is the graceful listen result
//   `{"resultType":"complete","_meta":{subscriptionId, serverInfo}}`; cancel() (stream closed,
//   notifications/cancelled on stdio) ends it without one.
// A session whose request was cancelled (client gone, timeout, parked too long) is closed, not
// reused: a 2025 server may still send messages of the cancelled request.
#include "bridge/modern/gateway.hpp"

#include <algorithm>

#include "bridge/modern/gateway_parts.hpp"

namespace mcpmqtt::bridge {

using namespace gateway_detail;

namespace gateway_detail {

const jsonrpc::Id& init_id() {
  static const jsonrpc::Id id = jsonrpc::Id::string("mcpmqtt-gateway-initialize");
  return id;
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

}  // namespace gateway_detail

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
  for (auto& [id, r] : runs_)
    cancel_timers(*r);
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
        if (r != runs_.end() && r->second->state != RunState::running)
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
  p.key = p.call.server_name + '\n' + p.call.principal.key + '\n' +
          modern::canonical_json(p.envelope.client_capabilities_json);
  if (p.call.origin) by_origin_[p.call.origin].push_back(id);

  const auto& method = m.method();
  const Value* params = m.params();
  if (method == "tools/call" && p.call.headers) {
    // streamable-http §Standard Request Headers (SEP-2243): the Mcp-Param-{Name} headers of a
    // tool the bridge has seen listed.
    const Value* name = member(params, "name");
    if (name && name->IsString()) {
      const auto* tool = param_headers_.find(
          p.call.server_name, std::string(name->GetString(), name->GetStringLength()));
      if (tool) {
        if (auto e = modern::check_param_headers(m, *tool, p.call.param_headers)) {
          refuse(p, *e, 400);
          return id;
        }
      }
    }
  }
  if (method == "server/discover") {
    p.kind = Pending::Kind::discover;
    if (const auto* info = discover_cache_.find(p.call.server_name)) {
      answer_discover(*info, p);
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
  for (auto& [id, r] : runs_)
    cancel_timers(*r);
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

}  // namespace mcpmqtt::bridge

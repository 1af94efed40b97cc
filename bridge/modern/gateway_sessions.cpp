#include <algorithm>

#include "bridge/modern/gateway.hpp"
#include "bridge/modern/gateway_parts.hpp"

namespace mcpmqtt::bridge {

using namespace gateway_detail;

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
        log::bridge()->debug("{} the server refused logging/setLevel: {}", options_.log_prefix,
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
    log::bridge()->debug("{} a response to {} on session {} answers nothing in flight; dropped",
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
  s.info = discover_info_of(m.result_value());
  deliver(s, jsonrpc::Message::notification("notifications/initialized"));
  discover_cache_.put(s.server_name, s.info);
  const CallId reserved = s.reserved;
  s.reserved = 0;
  log::bridge()->debug("{} MQTT session {} for {} initialized", options_.log_prefix, s.serial,
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
      if (run->state == RunState::running) {
        if (auto c = calls_.find(run->call); run->call && c != calls_.end()) {
          run->call = 0;
          refuse(*c->second, error, 400, "error");
        }
        cancel_run(run_id, "the request cannot go on without the " + std::string(capability) +
                               " capability");
      } else if (transition(*run, RunEvent::upstream_done)) {
        // Parked: the retry will hear of it.
        run->outcome = jsonrpc::Message::error(run->upstream_id, error);
      }
      return;
    }
    gather(*run, m);
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
  if (run->state != RunState::running || !run->call) return;
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
      p.responder.notify(
          jsonrpc::Message::notification("notifications/progress", jsonrpc::to_json(d)));
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

}  // namespace mcpmqtt::bridge

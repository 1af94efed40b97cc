#include "http/server_mcp_dispatch.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>
#include <string>

#include "bridge/jsonrpc/json_access.hpp"
#include "bridge/modern/protocol.hpp"
#include "bridge/modern/round_state.hpp"
#include "common/log.hpp"
#include "http/server_modern.hpp"
#include "http/server_relay.hpp"
#include "http/server_session.hpp"

namespace mcpmqtt::http {

namespace bhttp = boost::beast::http;
using jsonrpc::Message;

namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// The fields of a request the MCP endpoint reads, which a relayed request carries.
bool relayed_field(std::string_view name) {
  static constexpr std::string_view kFields[] = {
      "mcp-session-id", "mcp-protocol-version", "last-event-id", "accept",
      "content-type",   "mcp-method",           "mcp-name"};
  auto lower_equal = [](std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return x == static_cast<char>(std::tolower(static_cast<unsigned char>(y)));
           });
  };
  for (auto f : kFields)
    if (lower_equal(f, name)) return true;
  constexpr std::string_view kParam = "mcp-param-";
  return name.size() > kParam.size() && lower_equal(kParam, name.substr(0, kParam.size()));
}

// To the replica that holds the request's session or parked request (replicas.md).
void relay(Request& req, std::string owner, const bridge::Principal& principal, ServerState& state,
           RequestSink& sink, bool modern, std::string body) {
  RelayedRequest r;
  r.owner = std::move(owner);
  r.method = req.method();
  r.target = std::string(req.target());
  r.principal = principal;
  r.modern = modern;
  r.body = std::move(body);
  for (const auto& f : req) {
    const auto name = f.name_string();
    if (relayed_field(std::string_view(name.data(), name.size())))
      r.headers.emplace_back(std::string(name), std::string(f.value()));
  }
  state.relay->forward(std::move(r), sink.hand_over());
}

// A request or notification of MCP 2026-07-28 (no session): to the backend's gateway.
void dispatch_modern(Request& req, const std::string& server, const bridge::Principal& principal,
                     Message message, ServerState& state, RequestSink& sink, bool relayed) {
  modern::Headers headers;
  if (auto v = req.find("MCP-Protocol-Version"); v != req.end())
    headers.protocol_version = std::string(v->value());
  if (auto v = req.find("Mcp-Method"); v != req.end()) headers.method = std::string(v->value());
  if (auto v = req.find("Mcp-Name"); v != req.end()) headers.name = std::string(v->value());
  if (!message.is_request()) {
    // A notification (the v2 client cancels a listen with one): accepted or refused here; on
    // HTTP the cancellation itself is the stream's closing (streamable-http §Cancellation).
    if (auto refused = modern::admit_notification(message, &headers))
      return sink.respond(
          modern_error_response(refused->status, Message::error({}, refused->error)));
    Response res{bhttp::status::accepted, 11};
    return sink.respond(std::move(res));
  }
  if (state.stopping)
    return sink.respond(
        modern_error_response(503, Message::error(message.id(), jsonrpc::code::connection_closed,
                                                  "Service Unavailable: the bridge is stopping")));
  if (!relayed && state.relay && state.ids) {
    // basic/patterns/mrtr: a retry names its parked request by requestState, which names the
    // replica holding it.
    const auto* params = message.params();
    const auto* token =
        params && params->IsObject() ? jsonrpc::member(params, "requestState") : nullptr;
    if (token && token->IsString()) {
      auto owner = bridge::round_state_replica(
          std::string_view(token->GetString(), token->GetStringLength()));
      if (!owner.empty() && owner != state.ids->replica())
        return relay(req, std::move(owner), principal, state, sink, true,
                     std::string(message.text()));
    }
  }
  ModernRequest request{server, principal, std::move(message), std::move(headers), {}};
  constexpr std::string_view kParam = "mcp-param-";
  for (const auto& field : req) {
    std::string name(field.name_string());
    if (name.size() <= kParam.size()) continue;
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (name.compare(0, kParam.size(), kParam) != 0) continue;
    if (request.param_headers.size() >= 64) break;  // bounded, as the headers themselves are
    request.param_headers.emplace_back(name.substr(kParam.size()), std::string(field.value()));
  }
  state.backend.handle_modern(std::move(request),
                              std::make_shared<ExchangeModernReply>(sink.hand_over()));
}

// The id an answer about a relayed request carries (JSON-RPC 2.0 §5), read again from its body.
jsonrpc::Id relayed_id(const RelayedRequest& r) {
  if (r.body.empty()) return {};
  auto body = jsonrpc::parse_body(std::string(r.body), jsonrpc::Limits{});
  if (!body) return body.error().id;
  if (r.modern && body->messages.size() == 1) return body->messages.front().id();
  return reply_id(*body);
}

}  // namespace

Response relay_owner_gone(const RelayedRequest& r) {
  const auto id = relayed_id(r);
  if (r.modern)
    return modern_error_response(200, Message::error(id, modern::invalid_request_state()));
  return error_response(404, jsonrpc::code::request_timeout,
                        "Session not found: the replica that held it is gone; send initialize "
                        "without Mcp-Session-Id to start a new session",
                        id);
}

std::string relay_stream_error(const RelayedRequest& r, const std::string& why) {
  if (r.method != bhttp::verb::post) return {};
  const auto id = relayed_id(r);
  if (id.is_null()) return {};
  return std::string(
      Message::error(id, jsonrpc::code::connection_closed, "Connection closed: " + why).text());
}

Response relay_unavailable(const RelayedRequest& r, const std::string& why) {
  const auto id = relayed_id(r);
  if (r.modern)
    return modern_error_response(
        503, Message::error(id, jsonrpc::code::connection_closed, "Service Unavailable: " + why));
  return error_response(503, jsonrpc::code::connection_closed, "Service Unavailable: " + why, id);
}

void dispatch_mcp(Request& req, const Route& route, const bridge::Principal& principal,
                  const std::shared_ptr<ServerState>& shared_state, std::string_view label,
                  RequestSink& sink, bool relayed) {
  ServerState& state = *shared_state;
  const std::string server = route.server_name.empty() ? state.default_server : route.server_name;
  const std::string session_id(req["Mcp-Session-Id"]);
  const std::string version(req["MCP-Protocol-Version"]);
  // A session another replica holds: to it, with the body as received (replicas.md).
  if (!relayed && state.relay && state.ids && !session_id.empty() &&
      !state.sessions.find(session_id)) {
    if (auto owner = state.ids->owner(session_id); owner && *owner != state.ids->replica())
      return relay(req, std::move(*owner), principal, state, sink, false, std::move(req.body()));
  }

  std::shared_ptr<ServerSession> session;
  // JSON-RPC 2.0 §5: an error about a POSTed request carries its id (once the body is read).
  jsonrpc::Id answer_id;
  auto check_session = [&]() -> bool {
    if (session_id.empty()) {
      sink.respond(error_response(400, jsonrpc::code::connection_closed,
                                  "Bad Request: Mcp-Session-Id header is required (send "
                                  "initialize first to get one)",
                                  answer_id));
      return false;
    }
    session = state.sessions.find(session_id);
    if (!session || session->server_name() != server) {
      sink.respond(error_response(404, jsonrpc::code::request_timeout,
                                  "Session not found: send initialize without "
                                  "Mcp-Session-Id to start a new session",
                                  answer_id));
      return false;
    }
    // MCP security best practices §Session Hijacking: a session opened with an access token
    // serves only requests of the same principal (issuer and subject).
    if (session->principal().is_oauth() && session->principal().key != principal.key) {
      sink.respond(error_response(403, jsonrpc::code::connection_closed,
                                  "Forbidden: this session was opened by another principal; send "
                                  "initialize without Mcp-Session-Id to start one of your own",
                                  answer_id));
      return false;
    }
    if (!version.empty() && !is_supported_protocol_version(version)) {
      sink.respond(
          error_response(400, jsonrpc::code::connection_closed,
                         "Bad Request: Unsupported protocol version: " + version +
                             " (supported versions: " + supported_protocol_versions_text() + ")",
                         answer_id));
      return false;
    }
    return true;
  };

  const bool modern_on = state.backend.serves_modern();
  std::optional<std::string> version_header;
  if (auto v = req.find("MCP-Protocol-Version"); v != req.end())
    version_header = std::string(v->value());
  // streamable-http §Backward Compatibility: a 2026-07-28 endpoint answers GET and DELETE with
  // 405 — here only those that carry a modern MCP-Protocol-Version and no session, since the
  // same endpoint serves 2025 sessions their GET stream and DELETE.
  if (modern_on && req.method() != bhttp::verb::post && session_id.empty() && version_header &&
      modern::is_modern_version_string(trimmed(*version_header))) {
    auto res = error_response(405, jsonrpc::code::connection_closed, "Method not allowed.");
    res.set(bhttp::field::allow, "POST");
    return sink.respond(std::move(res));
  }

  if (req.method() == bhttp::verb::get) {
    if (!check_session()) return;
    session->handle_get(sink.hand_over(), std::string(req["Last-Event-ID"]), version);
    return;
  }
  if (req.method() == bhttp::verb::delete_) {
    if (!check_session()) return;
    session->handle_delete(sink.hand_over());
    return;
  }

  auto body = jsonrpc::parse_body(std::move(req.body()), state.limits);
  if (!body) {
    const auto& f = body.error();
    return sink.respond(error_response(
        400, f.error.code,
        (f.error.code == jsonrpc::code::parse_error ? "Parse error: " : "Invalid Request: ") +
            f.error.message,
        f.id));
  }
  answer_id = reply_id(*body);
  if (modern_on) {
    // basic/versioning §Compatibility Matrix: the body's claim decides the era, whatever
    // Mcp-Session-Id says.
    auto era = modern::classify_post(*body, version_header);
    if (era.era == modern::PostEra::refused) {
      const auto id =
          !body->batch && body->messages.size() == 1 ? body->messages.front().id() : jsonrpc::Id{};
      return sink.respond(
          modern_error_response(era.refusal->status, Message::error(id, era.refusal->error)));
    }
    if (era.era == modern::PostEra::modern)
      return dispatch_modern(req, server, principal, std::move(body->messages.front()), state, sink,
                             relayed);
  }
  const Message* initialize = nullptr;
  for (const auto& m : body->messages)
    if (m.is_request() && m.method() == "initialize") initialize = &m;
  if (initialize) {
    if (body->batch || body->messages.size() > 1)
      return sink.respond(
          error_response(400, jsonrpc::code::invalid_request,
                         "Invalid Request: initialize must be sent alone, not in a batch"));
    if (!session_id.empty() && state.sessions.find(session_id))
      return sink.respond(
          error_response(400, jsonrpc::code::invalid_request,
                         "Invalid Request: Server already initialized: this session is "
                         "established; send initialize without Mcp-Session-Id for a new one",
                         answer_id));
    if (state.stopping)
      return sink.respond(error_response(503, jsonrpc::code::connection_closed,
                                         "Service Unavailable: the bridge is stopping", answer_id));
    auto id = state.ids ? state.ids->mint() : new_session_id();
    if (id.empty())
      return sink.respond(error_response(503, jsonrpc::code::connection_closed,
                                         "Service Unavailable: no random source for a session id",
                                         answer_id));
    auto fresh = std::make_shared<ServerSession>(shared_state, id, server);
    fresh->set_principal(principal);
    std::shared_ptr<ServerSession> evicted;
    const auto floor = std::chrono::milliseconds(state.http.limits.idle_floor_ms);
    if (!state.sessions.insert(id, fresh, state.http.limits.max_sessions, floor, &evicted)) {
      state.log->warn(
          "{} initialize refused: {} MCP sessions are open "
          "(http.limits.max_sessions)",
          label, state.http.limits.max_sessions);
      return sink.respond(
          error_response(503, jsonrpc::code::connection_closed,
                         "Service Unavailable: the bridge holds its maximum of " +
                             std::to_string(state.http.limits.max_sessions) +
                             " MCP sessions (http.limits.max_sessions); try again later",
                         answer_id));
    }
    if (evicted) {
      ++state.sessions_evicted;
      const auto idle = evicted->idle_since();
      const auto quiet = idle ? std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::steady_clock::now() - *idle)
                              : std::chrono::milliseconds(0);
      evicted->evict("closed to make room for a new session (http.limits.max_sessions " +
                     std::to_string(state.http.limits.max_sessions) +
                     "): the least recently active with nothing in flight and no open stream, "
                     "quiet for " +
                     log::duration_text(quiet));
    }
    ++state.sessions_created;
    state.log->debug("{} initialize for {} → session {}", label, server, short_id(id));
    fresh->begin(sink.hand_over(), *initialize);
    return;
  }
  if (!check_session()) return;
  session->handle_post(sink.hand_over(), std::move(*body), version);
}

}  // namespace mcpmqtt::http

// Serves one request to an MCP endpoint once it passed the checks: to its session (GET, DELETE,
// POST), to a new session (initialize), or to the backend's gateway (a request of MCP 2026-07-28,
// which has no session); or answers the error itself (no such session, a bad body, the session
// limit). Called on the connection's strand.
#pragma once

#include <memory>
#include <string_view>

#include "http/server_exchange.hpp"
#include "http/server_precheck.hpp"
#include "http/server_rules.hpp"
#include "http/server_state.hpp"

namespace mcpmqtt::http {

// The connection that carries the request, as the dispatch sees it. Exactly one of its
// functions is called, once.
class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // Answers the request at once.
  virtual void respond(Response response) = 0;
  // Hands the request over: the exchange its session (or the gateway) answers through.
  virtual std::shared_ptr<Exchange> hand_over() = 0;
};

// `principal`: who sent it (Authenticator). A request for a session (Mcp-Session-Id) or a
// parked 2026-07-28 request (its requestState) that another replica holds goes to that replica
// through state.relay, unless it was `relayed` here already.
void dispatch_mcp(Request& req, const Route& route, const bridge::Principal& principal,
                  const std::shared_ptr<ServerState>& shared_state, std::string_view label,
                  RequestSink& sink, bool relayed = false);

}  // namespace mcpmqtt::http

// The checks every request to the HTTP server passes before its route serves it: Host and
// Origin (002 §Security Warning), CORS preflight, then (after the Authenticator, http/server_auth)
// the method and the media types of the MCP endpoint; and the health and protected resource
// metadata routes, answered here. No I/O; called on the connection's strand.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/ip/address.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "http/server_exchange.hpp"
#include "http/server_rules.hpp"
#include "http/server_state.hpp"

namespace mcpmqtt::http {

using Request = boost::beast::http::request<boost::beast::http::string_body>;

// Beast 1.74 uses boost::string_view.
inline std::string_view sv(boost::beast::string_view s) {
  return {s.data(), s.size()};
}

// What a 404 lists.
inline constexpr const char* kRoutesHint =
    "the MCP endpoints are /mcp (the default server) and /servers/{server-name}/mcp; also "
    "GET /servers, /healthz, /readyz and /metrics";

// A JSON-RPC error as the response; `id` is the request's when the body was one request.
Response error_response(unsigned status, int code, const std::string& message,
                        const jsonrpc::Id& id = {});

// The answer to `req` (to `route`, received on the address `local`) when it is refused before
// anyone is authenticated (Host, Origin, unknown routes), or when the route is answered without
// more (health, CORS preflight, the protected resource metadata); nullopt when it goes on.
// `cors`: its Origin is listed in http.allowed_origins.
std::optional<Response> precheck(const Request& req, const Route& route,
                                 const boost::asio::ip::address& local, bool cors,
                                 ServerState& state, std::string_view label);
// After the caller was authenticated (Authenticator): the route's methods, media types and
// protocol version; nullopt when the request goes on to its route.
std::optional<Response> precheck_route(const Request& req, const Route& route, ServerState& state);

}  // namespace mcpmqtt::http

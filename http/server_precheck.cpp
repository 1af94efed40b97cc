#include "http/server_precheck.hpp"

#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>

namespace mcpmqtt::http {

namespace bhttp = boost::beast::http;

Response error_response(unsigned status, int code, const std::string& message,
                        const jsonrpc::Id& id) {
  Response res{static_cast<bhttp::status>(status), 11};
  res.set(bhttp::field::content_type, "application/json");
  res.body() = error_body(code, message, id);
  return res;
}

std::optional<Response> precheck(const Request& req, const Route& route,
                                 const boost::asio::ip::address& local, bool cors,
                                 ServerState& state, std::string_view label) {
  using K = Route::Kind;
  const auto method = req.method();
  const bool get_like = method == bhttp::verb::get || method == bhttp::verb::head;

  if (route.kind == K::healthz) {
    // Liveness only: no secret in it, so probes need neither a token nor a Host name.
    if (!get_like) {
      auto res = error_response(405, jsonrpc::code::connection_closed, "Method not allowed");
      res.set(bhttp::field::allow, "GET, HEAD");
      return res;
    }
    Response res{bhttp::status::ok, 11};
    res.set(bhttp::field::content_type, "text/plain; charset=utf-8");
    res.body() = "ok";
    return res;
  }
  if (route.kind == K::not_found) {
    return error_response(404, jsonrpc::code::connection_closed,
                          "Not Found: no endpoint at " +
                              std::string(req.target().substr(0, req.target().find('?'))) + "; " +
                              kRoutesHint);
  }

  // 002 §Security Warning: DNS rebinding protection.
  const auto host = sv(req[bhttp::field::host]);
  if (!host_allowed(host, local, state.http.allowed_hosts)) {
    state.log->info("{} refused Host \"{}\"", label, std::string(host));
    return error_response(403, jsonrpc::code::connection_closed,
                          "Forbidden: Host header \"" + std::string(host) +
                              "\" is not accepted (DNS rebinding protection); list it in "
                              "http.allowed_hosts");
  }
  if (auto o = req.find(bhttp::field::origin);
      o != req.end() && !origin_allowed(sv(o->value()), local, state.http.allowed_origins)) {
    state.log->info("{} refused Origin \"{}\"", label, std::string(o->value()));
    return error_response(403, jsonrpc::code::connection_closed,
                          "Forbidden: Origin \"" + std::string(o->value()) +
                              "\" is not accepted; list it in http.allowed_origins");
  }

  if (method == bhttp::verb::options) {
    // CORS preflight: browsers send it without credentials.
    Response res{bhttp::status::no_content, 11};
    const bool mcp = route.kind == K::mcp || route.kind == K::bad_server_name;
    res.set(bhttp::field::allow, mcp ? "GET, POST, DELETE, OPTIONS" : "GET, HEAD, OPTIONS");
    if (cors) {
      res.set(bhttp::field::access_control_allow_methods,
              mcp ? "GET, POST, DELETE, OPTIONS" : "GET, HEAD, OPTIONS");
      res.set(bhttp::field::access_control_allow_headers,
              "Content-Type, Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, Mcp-Name, "
              "Last-Event-ID, Authorization");
      res.set(bhttp::field::access_control_max_age, "600");
    }
    return res;
  }

  if (route.kind == K::resource_metadata) {
    // RFC 9728 §3: public, like the authorization server's own metadata.
    auto doc = state.auth.oauth() ? state.auth.resource_metadata(route.resource_path, host)
                                  : std::string();
    if (doc.empty())
      return error_response(
          404, jsonrpc::code::connection_closed,
          state.auth.oauth()
              ? "Not Found: no protected resource at " + route.resource_path + "; " + kRoutesHint
              : std::string("Not Found: the bridge is not an OAuth resource "
                            "server (http.oauth is not set)"));
    if (!get_like) {
      auto res = error_response(405, jsonrpc::code::connection_closed, "Method not allowed");
      res.set(bhttp::field::allow, "GET, HEAD");
      return res;
    }
    Response res{bhttp::status::ok, 11};
    res.set(bhttp::field::content_type, "application/json");
    res.set(bhttp::field::cache_control, "max-age=300");
    res.body() = std::move(doc);
    return res;
  }
  return std::nullopt;
}

std::optional<Response> precheck_route(const Request& req, const Route& route, ServerState& state) {
  using K = Route::Kind;
  const auto method = req.method();
  const bool get_like = method == bhttp::verb::get || method == bhttp::verb::head;
  if (route.kind == K::bad_server_name)
    return error_response(400, jsonrpc::code::connection_closed,
                          "Bad Request: " + route.problem +
                              " (write it as /servers/{server-name}/mcp, slashes as path "
                              "segments or as %2F)");

  if (route.kind != K::mcp) {
    if (!get_like) {
      auto res = error_response(405, jsonrpc::code::connection_closed, "Method not allowed");
      res.set(bhttp::field::allow, "GET, HEAD");
      return res;
    }
    return std::nullopt;
  }

  // The MCP endpoint.
  if (method != bhttp::verb::post && method != bhttp::verb::get && method != bhttp::verb::delete_) {
    auto res = error_response(405, jsonrpc::code::connection_closed, "Method not allowed");
    res.set(bhttp::field::allow, "GET, POST, DELETE");
    return res;
  }
  if (route.server_name.empty() && state.default_server.empty()) {
    return error_response(
        404, jsonrpc::code::connection_closed,
        "Not Found: no default server is configured (ingress.default_server), so /mcp has "
        "nothing behind it; use /servers/{server-name}/mcp, for example "
        "/servers/demo%2Feverything/mcp or /servers/demo/everything/mcp");
  }
  if (req.version() != 11) {
    return error_response(505, jsonrpc::code::connection_closed,
                          "HTTP Version Not Supported: the MCP endpoint needs HTTP/1.1");
  }
  if (method == bhttp::verb::post) {
    const auto accept = sv(req[bhttp::field::accept]);
    if (!accept_lists(accept, "application/json") || !accept_lists(accept, "text/event-stream"))
      return error_response(406, jsonrpc::code::connection_closed,
                            "Not Acceptable: Client must accept both application/json and "
                            "text/event-stream");
    if (!is_json_content_type(sv(req[bhttp::field::content_type])))
      return error_response(415, jsonrpc::code::connection_closed,
                            "Unsupported Media Type: Content-Type must be application/json");
  } else if (method == bhttp::verb::get) {
    if (!accept_lists(sv(req[bhttp::field::accept]), "text/event-stream"))
      return error_response(406, jsonrpc::code::connection_closed,
                            "Not Acceptable: Client must accept text/event-stream");
  }
  return std::nullopt;
}

}  // namespace mcpmqtt::http

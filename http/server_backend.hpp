// The seam between the Streamable HTTP server and the rest of the daemon.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "bridge/modern/protocol.hpp"
#include "bridge/protocol/principal.hpp"
#include "bridge/relay/channel.hpp"

namespace mcpmqtt::http {

// One request of MCP revision 2026-07-28 ("modern": no session, the `_meta` envelope on the
// request; classified by modern::classify_post), as the HTTP server hands it to the backend.
struct ModernRequest {
  std::string server_name;
  // Who sent it, for pooling and binding requestState (its key: a SHA-256 digest of a static
  // bearer token, an OAuth issuer and subject, or "anonymous") and for what it may reach.
  bridge::Principal principal;
  jsonrpc::Message message;
  modern::Headers headers;  // MCP-Protocol-Version, Mcp-Method, Mcp-Name as received
  // Mcp-Param-{Name} headers: {Name} in lowercase → the value as received (SEP-2243).
  std::vector<std::pair<std::string, std::string>> param_headers;
};

// How the backend answers a modern request. Every method may be called from any strand.
class ModernReply {
 public:
  virtual ~ModernReply() = default;
  // A notification related to the request (progress, log, a listen's notifications): the first
  // one makes the response an SSE stream (streamable-http §Sending Messages: no event ids, no
  // priming event).
  virtual void notify(const jsonrpc::Message& message) = 0;
  // The final message: application/json with `status` when nothing was streamed, else the last
  // event of the stream. Nothing is sent after it.
  virtual void finish(const jsonrpc::Message& message, unsigned status) = 0;
  // `on_gone` runs once if the client goes away before finish() (streamable-http
  // §Cancellation: closing the stream cancels the request).
  virtual void watch(std::function<void()> on_gone) = 0;
};

// What the HTTP server needs from the daemon. Called on the session's strand unless noted.
// Implementations must outlive every handler the server started on its io_context.
class Backend {
 public:
  virtual ~Backend() = default;
  // A new MCP session for `server_name` was created by an initialize POST. The backend takes
  // the session (a bridge::Channel: messages from the HTTP client come out of it, messages sent
  // into it go to the HTTP client), calls session->start(...) and joins it to an upstream. If it
  // cannot serve the server-name it answers the initialize request with a JSON-RPC error through
  // session->send() and closes it (session->close) — possibly later, after waiting for presence.
  //
  // How the HTTP client sees a failed initialize (no Mcp-Session-Id is returned and the session
  // is not kept): the POST is answered with the JSON-RPC error as application/json, with HTTP
  // 503 when the session was closed with Kind peer_gone, timeout, exited or shutdown (the
  // upstream is unavailable; retrying later may work) and HTTP 200 otherwise (the upstream
  // answered and refused, as a direct MCP server would). A close without an error response
  // gets a synthesized -32000 error carrying the close detail. An error response that is not
  // followed by a close in the same strand turn ends the session with on_close(normal).
  // `strand` is the session's strand: whatever the backend joins to the session runs there.
  virtual void attach(const std::string& server_name, std::shared_ptr<bridge::Channel> session,
                      boost::asio::any_io_executor strand) = 0;
  // attach() with who opened the session: the principal of its initialize POST. The HTTP server
  // calls this one.
  virtual void attach_session(const std::string& server_name,
                              std::shared_ptr<bridge::Channel> session,
                              boost::asio::any_io_executor strand,
                              const bridge::Principal& principal) {
    (void)principal;
    attach(server_name, std::move(session), std::move(strand));
  }
  // Whether modern requests are served (ingress.modern.enabled); otherwise they get the 2025
  // handling as before. (any thread)
  virtual bool serves_modern() { return false; }
  // A modern request, admitted or not (the backend checks its envelope and headers). Called on
  // the connection's strand.
  virtual void handle_modern(ModernRequest request, std::shared_ptr<ModernReply> reply) {
    reply->finish(jsonrpc::Message::error(request.message.id(), jsonrpc::code::method_not_found,
                                          "MCP 2026-07-28 requests are not served here"),
                  404);
  }
  // Body of GET /servers: the servers `principal` may reach (any thread).
  virtual std::string servers_json(const bridge::Principal& principal) = 0;
  virtual bool ready() = 0;  // GET /readyz: 200 when true, else 503 (any thread)
  // Why not ready, for the body of a 503 from /readyz (any thread).
  virtual std::string not_ready_reason() { return {}; }
  virtual std::string metrics_text() = 0;  // body of GET /metrics (Prometheus text) (any thread)
};

}  // namespace mcpmqtt::http

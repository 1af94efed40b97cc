// The seam between the Streamable HTTP server and the rest of the daemon.
#pragma once

#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>

#include "bridge/channel.hpp"

namespace mcpmqtt::http {

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
  virtual std::string servers_json() = 0;  // body of GET /servers (any thread)
  virtual bool ready() = 0;                // GET /readyz: 200 when true, else 503 (any thread)
  virtual std::string metrics_text() = 0;  // body of GET /metrics (Prometheus text) (any thread)
};

}  // namespace mcpmqtt::http

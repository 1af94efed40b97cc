// The Streamable HTTP server (HTTP ingress): a Beast listener on http.listen whose connections
// serve the MCP endpoint, discovery, health and metrics routes, with one MCP ServerSession per
// initialize handed to the Backend. Routes and rules: http/server_rules.hpp.
//
// Thread-safe: start(), stop() and the queries may be called from any thread. The io_context
// (run by any number of threads) and the backend must outlive every handler the server starts:
// call stop(), then let run() return. Sessions handed to the backend hold Asio timers of that
// io_context: release them before the io_context is destroyed.
#pragma once

#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "common/error.hpp"
#include "common/expected.hpp"
#include "http/server_backend.hpp"
#include "http/server_options.hpp"

namespace mcpmqtt::http {

struct ServerState;
class Listener;
class KeySource;
class Introspector;
class SessionIds;
class Relay;
struct RelayedRequest;
class Exchange;

class Server {
 public:
  // `default_server` is ingress.default_server, the server-name behind /mcp (may be empty).
  Server(boost::asio::io_context& ioc, ServerOptions http, std::string default_server,
         Backend& backend);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds http.listen_host:http.listen_port (port 0 picks a free port) and starts accepting.
  // Returns the bound endpoint, or the failure's kind (in_use, permission_denied, ...) and a
  // message naming the address and the reason.
  Expected<boost::asio::ip::tcp::endpoint, Error> start();
  // Stops accepting, ends every MCP session with on_close(shutdown, why) and closes every
  // connection. Idempotent.
  void stop(const std::string& why = "the bridge is stopping");

  // Where the OAuth issuer's keys come from (http.oauth); before start().
  void set_key_source(std::shared_ptr<KeySource> source);
  // What opaque tokens are introspected with (http.oauth.introspection); before start().
  void set_introspector(std::shared_ptr<Introspector> introspector);
  // Replicas (http/server_relay.hpp): session ids naming this replica, and the relay that
  // forwards requests for other replicas' sessions; before start(). The relay may be null.
  void set_replica(std::shared_ptr<const SessionIds> ids, std::shared_ptr<Relay> relay);
  // A request another replica relayed here (its checks — Host, Origin, authorization, body
  // bounds — passed there): served as if it had arrived on a connection of this server, through
  // `exchange`. Never relayed again. Any thread.
  void serve_relayed(RelayedRequest request, std::shared_ptr<Exchange> exchange);
  // Why access tokens cannot be checked now (no usable keys, no introspection endpoint), or
  // empty; for /readyz.
  std::string auth_problem() const;

  boost::asio::ip::tcp::endpoint local_endpoint() const;
  std::size_t session_count() const;
  std::size_t connection_count() const;
  // The server's own counters in Prometheus text format (also appended to GET /metrics).
  std::string metrics_text() const;

 private:
  std::shared_ptr<ServerState> state_;
  std::shared_ptr<Listener> listener_;
  boost::asio::ip::tcp::endpoint endpoint_;
};

}  // namespace mcpmqtt::http

// The HTTP ingress's listener: the Streamable HTTP server on http.listen, whose MCP sessions go
// to the Ingress and whose 2026-07-28 requests go to the ModernIngress; the directory listing,
// readiness and metrics it serves come from its owner (Hooks).
//
// start() and stop() on the owner's strand; the hooks are called from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "common/error.hpp"
#include "common/expected.hpp"
#include "config/config.hpp"
#include "directions/ingress.hpp"
#include "directions/modern_ingress.hpp"
#include "directions/replica_relay.hpp"

namespace mcpmqtt::http {
class Server;
class IssuerKeys;
class TokenIntrospection;
}  // namespace mcpmqtt::http

namespace mcpmqtt::directions {

class HttpIngress {
 public:
  struct Hooks {
    std::function<std::string(const bridge::Principal&)> servers_json;  // GET /servers
    std::function<bool()> ready;                                        // GET /readyz
    std::function<std::string()> not_ready_reason;                      // its body when not ready
    std::function<std::string()> metrics_text;  // GET /metrics, before the server's own
  };
  // `modern` may be null (ingress.modern.enabled false). `replica`: this replica's name and
  // secret (resolve_replica); with a shared secret, requests for other replicas' sessions are
  // relayed to them (ReplicaRelay).
  HttpIngress(boost::asio::io_context& ioc, const config::Config& cfg,
              std::shared_ptr<Ingress> ingress, std::shared_ptr<ModernIngress> modern, Hooks hooks,
              const ReplicaIdentity& replica);
  ~HttpIngress();
  HttpIngress(const HttpIngress&) = delete;
  HttpIngress& operator=(const HttpIngress&) = delete;

  // Binds http.listen; the base URL ("http://127.0.0.1:8080"), or a message naming the address
  // and why it cannot be bound.
  Expected<std::string, Error> start();
  // Stops accepting and ends every MCP session with `why`. Idempotent.
  void stop(const std::string& why);
  // Why access tokens cannot be checked now (http.oauth: no usable keys of the issuer), or empty.
  std::string auth_problem() const;
  // Why requests for other replicas' sessions cannot be relayed now, or empty.
  std::string relay_problem() const;

 private:
  class Backend;
  boost::asio::io_context& ioc_;
  const config::OAuthConfig oauth_;
  std::shared_ptr<http::IssuerKeys> issuer_keys_;
  std::shared_ptr<http::TokenIntrospection> introspection_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<http::Server> server_;
  std::shared_ptr<ReplicaRelay> relay_;
};

}  // namespace mcpmqtt::directions

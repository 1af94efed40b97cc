// What the Streamable HTTP server is told: where to listen, whom to trust, and its bounds. The
// HTTP side's own options, filled by the wiring (directions/options.hpp) from the configuration's
// http section; messages name the configuration keys (http.limits.*) users set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mcpmqtt::http {

struct ServerLimits {
  std::size_t max_body_bytes = 4 * 1024 * 1024;
  std::size_t max_sessions = 1024;
  std::size_t max_connections = 4096;
  int session_idle_timeout_ms = 600000;
  // At max_sessions, the least recently active session with no request, no open stream and
  // nothing pending is closed to make room for a new one before anyone is refused; one active
  // within this floor is spared (0: however recently it was used).
  int idle_floor_ms = 0;
  int request_header_timeout_ms = 30000;
  std::size_t stream_queue_messages = 1024;    // per SSE stream: past this the stream is closed
  std::size_t session_backlog_messages = 256;  // server messages held while no stream is open
  std::size_t replay_buffer_events = 256;      // per stream, for Last-Event-ID
  // The same three bounds in bytes of JSON (whichever is reached first applies); one message
  // alone may exceed them.
  std::size_t stream_queue_bytes = 16u << 20;
  std::size_t session_backlog_bytes = 4u << 20;
  std::size_t replay_buffer_bytes = 4u << 20;
  int keepalive_interval_ms = 15000;  // SSE comment lines on idle streams
};

// The resource-server side of MCP authorization (http.oauth): access tokens of one issuer.
struct OAuthOptions {
  std::string issuer;                                      // empty: off
  std::map<std::string, std::vector<std::string>> scopes;  // scope -> server-name filters
  std::vector<std::string> algorithms{"RS256", "PS256", "ES256", "EdDSA"};
  int clock_skew_s = 60;
  bool require_at_jwt = true;
  int jwks_max_stale_s = 86400;
  std::string ca_file;
  bool tls_verify = true;
  // Keep the access token in the request's Principal (mqtt.session_credentials "token": it is
  // the password of the principal's MQTT sessions). Off: the token is never kept.
  bool keep_access_token = false;
  // Opaque tokens (not a JWS) are introspected at the issuer (RFC 7662; http.oauth.introspection)
  // and an active answer used at most this long; 0: introspection off, such tokens refused.
  int introspection_cache_max_s = 0;
  bool enabled() const { return !issuer.empty(); }
  bool introspects() const { return enabled() && introspection_cache_max_s > 0; }
};

struct ServerOptions {
  std::string listen_host = "127.0.0.1";
  std::uint16_t listen_port = 8080;
  std::vector<std::string> allowed_origins;  // Origin values accepted besides localhost ones
  std::vector<std::string> allowed_hosts;    // Host values accepted besides localhost ones
  std::vector<std::string> bearer_tokens;    // empty: no authentication; never logged
  // Answer POSTed requests with one JSON body instead of an SSE stream.
  bool json_response = false;
  ServerLimits limits;
  // scheme://host[:port] clients reach the bridge at; empty: http:// and each request's Host.
  std::string public_url;
  OAuthOptions oauth;
};

}  // namespace mcpmqtt::http

// The client end of one Streamable HTTP MCP session with a remote server (HTTP egress: one
// upstream session per MQTT client session), as a bridge::Channel.
//
// Messages of protocol revision 2026-07-28 (a `_meta` envelope claiming it) are sent the way
// that revision wants, whatever the session: POSTed without Mcp-Session-Id, with
// MCP-Protocol-Version, Mcp-Method and Mcp-Name taken from the body; a 4xx carrying a JSON-RPC
// error is that error; a stream cut before its response is not resumed; notifications/cancelled
// is not posted but closes the stream of the request it names (streamable-http §Cancellation).
// A long-lived subscriptions/listen is such a request whose stream stays open.
//
// send() POSTs each message on its own request (002 §Sending Messages to the Server; one message
// per POST, as batching left the wire in 2025-06-18). Responses come back as JSON or as an SSE
// stream whose server requests and notifications are delivered as they arrive. The initialize
// response gives the session id and the protocol version sent on every later request; then a GET
// stream carries server-initiated messages, reconnected with Last-Event-ID when it drops. A POST
// stream cut before its response is resumed the same way when the server gave event ids.
// close() ends the session with DELETE.
//
// Every request gets exactly one response: the server's, or a JSON-RPC error naming the upstream
// URL and the cause (unreachable, TLS rejected, HTTP status, timeout, stream cut, session
// expired). When the session cannot go on (initialize failed, server unreachable, session
// expired) the channel closes itself after answering what is pending.
//
// One strand (the executor given to create()); not thread-safe. The owner ends the channel with
// close(); until then its connections keep it alive.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "bridge/modern/protocol.hpp"
#include "bridge/relay/channel.hpp"
#include "common/expected.hpp"
#include "http/client_url.hpp"

namespace mcpmqtt::http {

// Where the access token of a protected upstream comes from (ClientCredentials: the OAuth client
// credentials grant), for `Authorization: Bearer` on every request of its sessions.
// Thread-safe; shared by the sessions with one upstream.
class BearerSource {
 public:
  virtual ~BearerSource() = default;
  // The token, or a sentence saying why there is none (naming the authorization server). `done`
  // may run on any thread, and at once.
  using Done = std::function<void(const Expected<std::string, std::string>&)>;
  virtual void bearer(Done done) = 0;
  // The upstream answered 401 to `token` (RFC 6750 §3.1 invalid_token): if it is still the one
  // in use, the next bearer() gets another.
  virtual void refused(const std::string& token) = 0;
  // "OAuth client \"ID\" of ISSUER": for messages, never a secret.
  virtual std::string describe() const = 0;
  // Ends a token request under way (its waiters get an error).
  virtual void stop() = 0;
};

// What an upstream session connects to and the bounds it keeps.
struct UpstreamSpec {
  std::string name;  // the server-name, for logs
  Url url;
  std::vector<std::pair<std::string, std::string>> headers;  // values are secrets: never logged
  bool tls_verify = true;  // verify the certificate chain and the host name
  std::string ca_file;     // PEM bundle to trust; empty: the system's store

  std::chrono::milliseconds connect_timeout{10'000};  // resolve + connect + TLS handshake
  // From a request written to its response header, and between pieces of a JSON body. The
  // bridge's per-method timeouts normally end a slow request well before this.
  std::chrono::milliseconds response_timeout{300'000};
  // An SSE stream silent this long is treated as cut (the GET stream is then reopened).
  std::chrono::milliseconds stream_idle_timeout{300'000};
  std::chrono::milliseconds delete_timeout{2'000};  // the DELETE sent by close()
  // Idle keep-alive connections older than this are not reused (common servers close theirs
  // after 5 s).
  std::chrono::milliseconds idle_keepalive{4'000};
  std::chrono::milliseconds reconnect_min{500};  // GET stream reconnect backoff, doubling
  std::chrono::milliseconds reconnect_max{30'000};

  std::size_t max_body_bytes = 16 * 1024 * 1024;   // a JSON response
  std::size_t max_event_bytes = 16 * 1024 * 1024;  // one SSE event
  std::size_t max_concurrent_requests = 8;  // requests awaiting a response, one connection each
  std::size_t max_concurrent_short = 4;     // notifications and responses being POSTed
  std::size_t max_idle_connections = 4;
  std::size_t max_queued_messages = 1024;  // waiting for a free connection
  unsigned max_resume_attempts = 5;        // consecutive resumptions that bring nothing
  unsigned max_connect_failures = 5;       // of the GET stream before the server is unreachable
  // The owner speaks 2026-07-28 to a server that refuses initialize with -32022: then that
  // refusal is delivered as the answer and the channel stays open (no session was made), instead
  // of ending the channel as any other failed initialize does.
  bool modern_fallback = false;
  // 2026-07-28 tools/call: the Mcp-Param-{Name} headers of the tool's x-mcp-header annotations
  // (SEP-2243), as the owner learnt them from tools/list; null: none sent.
  std::shared_ptr<const modern::ToolHeaders> tool_headers;
  // A protected upstream's access token (sent as Authorization: Bearer, fetched again once
  // after a 401); null: only the configured headers.
  std::shared_ptr<BearerSource> bearer;
};

// Builds the spec of a Streamable HTTP server named `name` at `url`, sent `headers` on every
// request. The error names the part at fault: `url: unsupported scheme "ftp"; ...` or
// `headers: ...` (the caller prefixes where it came from).
Expected<UpstreamSpec, std::string> make_upstream_spec(
    const std::string& name, const std::string& url,
    const std::vector<std::pair<std::string, std::string>>& headers, bool tls_verify);

class ClientChannel : public bridge::Channel {
 public:
  static std::shared_ptr<ClientChannel> create(boost::asio::any_io_executor executor,
                                               UpstreamSpec spec);

  // Mcp-Session-Id from the initialize response; empty before, or when the server has none.
  virtual const std::string& session_id() const = 0;
  // The protocol version of the initialize result; empty before.
  virtual const std::string& protocol_version() const = 0;
};

}  // namespace mcpmqtt::http

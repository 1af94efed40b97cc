// The configuration model, loading and validation.
//
// Sources, later ones winning: built-in defaults < the configuration file (JSON with comments
// and trailing commas) < environment variables < command-line flags. Secrets (the MQTT password,
// bearer tokens) come from files or the environment, never from the command line.
//
// Not thread-safe; a Config is built once and then read (copied into the daemon on reload).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mcpmqtt::config {

struct TlsConfig {
  bool enabled = false;     // derived: the URL is mqtts:// (or ssl://)
  bool configured = false;  // the file has an mqtt.tls section
  std::string ca_file;      // CA bundle to verify the broker; empty: the system's default store
  std::string cert_file;    // client certificate (PEM), for brokers that require one
  std::string key_file;     // client private key (PEM)
  bool verify = true;       // verify the broker's certificate and host name

  bool operator==(const TlsConfig&) const = default;
};

// The MQTT client engine (mqtt.client): the bridge's own, on its event loop, or Eclipse Paho.
enum class MqttClient { native, paho };

// Whose credentials an ingress session's MQTT connection presents (mqtt.session_credentials), so
// that the broker's own authentication and ACLs decide per caller. Sessions without an OAuth
// principal (anonymous, static bearer tokens, stdio) always use the shared ones.
enum class SessionCredentials {
  shared,     // mqtt.username and the configured password, for every session
  token,      // user name: the principal's `sub`; password: its OAuth access token (JWT brokers)
  principal,  // user name: the principal's `sub`; password: the configured one
};

// One broker of mqtt.url, split into its parts.
struct BrokerAddress {
  std::string host;
  std::uint16_t port = 1883;
  bool tls = false;
  bool websocket = false;
  std::string ws_path = "/mqtt";
  bool operator==(const BrokerAddress&) const = default;
};

struct MqttConfig {
  // One broker url, or several separated by commas (an array of them in the file): the first is
  // used first; when a connection cannot be made or is lost, the next is tried (docs/brokers.md).
  std::string url = "mqtt://127.0.0.1:1883";
  MqttClient client = MqttClient::native;
  std::string client_id_prefix = "mcp-bridge";
  // What every MCP topic begins with (004 §Message Topics: "$mcp-"); another one for brokers
  // that refuse topics beginning with '$' (ejabberd, some cloud brokers) or a tenant's ACL
  // namespace. Every participant on the broker must use the same one.
  std::string topic_prefix = "$mcp-";
  std::string username;
  std::string password_file;
  std::string password;  // resolved from password_file or MCPMQTT_MQTT_PASSWORD; never logged
  SessionCredentials session_credentials = SessionCredentials::shared;
  TlsConfig tls;
  int keepalive_s = 30;
  // The keep-alive of each ingress session's own connection (one per MCP session): an ingress
  // holding thousands of idle sessions pings the broker for each (issue 34, bench/README.md).
  int session_keepalive_s = 60;
  // QoS of everything the bridge publishes and subscribes to: 1 (the broker acknowledges each
  // publication and paces them by its Receive Maximum) or 0 (no acknowledgements: half the
  // packets per message). Sessions never resume (clean start, no expiry), so QoS 1 redelivers
  // nothing a lost connection dropped; the peers accept either.
  int qos = 1;
  int connect_timeout_ms = 10000;
  int reconnect_min_ms = 500;
  int reconnect_max_ms = 30000;
  // The largest MQTT packet the bridge accepts, announced in CONNECT as Maximum Packet Size
  // (MQTT 5.0 §3.1.2.11.4): a JSON-RPC message is at most 16 MiB (jsonrpc::Limits), plus room
  // for the topic and properties. The broker drops larger messages for us instead of sending them.
  std::uint32_t max_packet_bytes = (16u << 20) + (64u << 10);

  // Derived from url by validation.
  std::string host;
  std::uint16_t port = 1883;
  bool websocket = false;         // ws:// or wss://
  std::string ws_path = "/mqtt";  // the path of a ws:// or wss:// url
  // The second and later brokers of url, in order.
  std::vector<BrokerAddress> fallbacks;

  bool operator==(const MqttConfig&) const = default;
};

struct HttpLimits {
  std::size_t max_body_bytes = 4 * 1024 * 1024;
  std::size_t max_sessions = 1024;
  std::size_t max_connections = 4096;
  int session_idle_timeout_ms = 600000;
  // At max_sessions, the least recently active session with no request in flight and no open
  // stream is closed to make room for a new one before anyone is refused; a session active
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

  bool operator==(const HttpLimits&) const = default;
};

// Opaque access tokens checked at the issuer's introspection endpoint (http.oauth.introspection;
// RFC 7662), the bridge authenticating as a confidential client (client_secret_basic).
struct IntrospectionConfig {
  std::string client_id;           // empty: no introspection
  std::string client_secret_file;  // read at load
  std::string client_secret;       // resolved from the file; never logged
  int cache_max_s = 300;           // an active answer is used at most this long (and until exp)

  bool enabled() const { return !client_id.empty() || !client_secret_file.empty(); }
  bool operator==(const IntrospectionConfig&) const = default;
};

// The HTTP ingress as an OAuth 2.1 resource server (http.oauth; MCP authorization, RFC 9728,
// RFC 9068): access tokens of one issuer, checked against its keys; scopes grant server-names.
struct OAuthConfig {
  std::string issuer;  // empty: OAuth off
  // scope -> server-name filters it grants (MQTT filter syntax); empty: every valid token
  // reaches every server.
  std::map<std::string, std::vector<std::string>> scopes;
  std::vector<std::string> algorithms{"RS256", "PS256", "ES256", "EdDSA"};
  int clock_skew_s = 60;
  bool require_at_jwt = true;    // RFC 9068 §4: typ at+jwt
  int jwks_max_stale_s = 86400;  // how long the last keys serve while the issuer is unreachable
  std::string ca_file;           // for an https issuer with a private CA
  bool tls_verify = true;
  IntrospectionConfig introspection;  // opaque tokens; off unless set

  bool enabled() const { return !issuer.empty(); }
  bool operator==(const OAuthConfig&) const = default;
};

struct HttpConfig {
  bool enabled = true;
  std::string listen = "127.0.0.1:8080";
  std::vector<std::string> allowed_origins;  // Origin values accepted besides localhost ones
  std::vector<std::string> allowed_hosts;    // Host values accepted besides localhost ones
  std::string bearer_tokens_file;
  std::vector<std::string> bearer_tokens;  // resolved from the file; never logged
  // Answer POSTed requests with one JSON body instead of an SSE stream (server-initiated
  // messages then travel only on the GET stream).
  bool json_response = false;
  HttpLimits limits;
  // The origin clients reach the bridge at (scheme://host[:port], no path), where resource URIs
  // (RFC 8707, RFC 9728) derive from; empty: from each request's Host (plain http).
  std::string public_url;
  OAuthConfig oauth;

  // Derived from listen by validation.
  std::string listen_host = "127.0.0.1";
  std::uint16_t listen_port = 8080;

  bool operator==(const HttpConfig&) const = default;
};

enum class Pick { random, round_robin };

// MCP 2026-07-28 ("modern", sessionless) clients at the ingress: the gateway that runs their
// requests on MQTT sessions it holds (ingress.modern; README "MCP 2026-07-28 at the ingress").
struct ModernIngressConfig {
  bool enabled = true;                        // off: such requests get today's 2025 handling
  std::size_t max_sessions = 256;             // MQTT sessions held for modern requests, in all
  std::size_t max_sessions_per_key = 16;      // per server-name, principal and capabilities
  std::size_t max_listens = 64;               // open subscriptions/listen streams
  std::size_t max_waiting = 256;              // requests waiting for a session
  std::size_t max_waiting_bytes = 32u << 20;  // ... and their bytes
  int queue_timeout_ms = 10000;               // how long one may wait
  int idle_timeout_ms = 60000;                // an idle pooled session closes after this
  int input_timeout_ms = 300000;              // requestState lifetime: a parked request's wait
  int input_round_quiet_ms = 20;              // a round of server→client requests ends after this
  // The old name of ingress.replicas.secret_file (the key of requestState and session ids).
  std::string state_secret_file;
  std::string state_secret;  // ingress.replicas.secret, resolved; never logged

  bool operator==(const ModernIngressConfig&) const = default;
};

// Several replicas of the ingress behind one load balancer (ingress.replicas; docs/replicas.md):
// each names itself on the broker, seals its session ids and requestState with the secret they
// share, and relays a request for a session another replica holds to that one over MQTT 5
// request/response.
struct ReplicasConfig {
  std::string id;                 // this replica's name; empty: the host name and a random suffix
  std::string secret_file;        // the secret every replica shares (32+ bytes); alias
                                  // ingress.modern.state_secret_file. Unset: a key of this process
  std::string secret;             // resolved from the file; never logged
  int relay_timeout_ms = 0;       // the owner's first answer to a relayed request; 0: the longest
                                  // request timeout (timeouts) and 5 s
  std::size_t max_relays = 1024;  // relayed requests in flight, each way

  bool shared() const { return !secret_file.empty(); }  // else ids serve this process only
  bool operator==(const ReplicasConfig&) const = default;
};

struct IngressConfig {
  std::string default_server;
  std::vector<std::string> server_name_filters = {"#"};
  Pick pick = Pick::random;
  int presence_wait_ms = 5000;  // how long a new session waits for a server-name to appear
  ModernIngressConfig modern;
  ReplicasConfig replicas;

  bool operator==(const IngressConfig&) const = default;
};

// Per-method request timeouts (004 §Timeouts recommends these defaults).
struct Timeouts {
  int default_ms = 30000;
  std::map<std::string, int> method_ms = {
      {"initialize", 30000},
      {"ping", 10000},
      {"sampling/createMessage", 60000},
      {"tools/call", 60000},
      {"completion/complete", 60000},
      {"elicitation/create", 600000},
  };
  int for_method(const std::string& method) const {
    auto it = method_ms.find(method);
    return it == method_ms.end() ? default_ms : it->second;
  }

  bool operator==(const Timeouts&) const = default;
};

// The protocol era an mcpServers entry is spoken to in (MCP basic/versioning §Terminology).
enum class ServerProtocol {
  automatic,  // "auto": server/discover first, initialize as the fallback; the verdict is kept
  legacy,     // "legacy": initialize only (2025-11-25 and earlier), no probe
  modern,     // "modern": 2026-07-28 only, never initialize
};

// A Streamable HTTP server's access token by the OAuth 2.1 client credentials grant (RFC 6749
// §4.4): the token endpoint from the issuer's metadata (RFC 8414, then OpenID discovery), the
// bridge authenticated as a confidential client, `resource` naming the upstream (RFC 8707 §2).
struct UpstreamOAuthConfig {
  std::string issuer;  // empty: none (only the configured headers)
  std::string client_id;
  std::string client_secret_file;
  std::string client_secret;        // resolved from client_secret_file; never logged
  std::string scope;                // space-separated; empty: none asked for
  std::string resource;             // empty: the entry's url
  bool client_secret_post = false;  // auth_method "client_secret_post"; else HTTP Basic
  std::string ca_file;              // for an https issuer with a private CA
  bool tls_verify = true;

  bool enabled() const { return !issuer.empty(); }
  bool operator==(const UpstreamOAuthConfig&) const = default;
};

struct ServerEntry {
  std::string name;  // the MQTT server-name (the key under mcpServers)
  std::string description;
  std::string meta_json;  // optional JSON object published as presence "meta"
  // stdio servers
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::string cwd;
  // Streamable HTTP servers
  std::string url;
  std::map<std::string, std::string> headers;  // ${VAR} already expanded; values never logged
  bool tls_verify = true;
  UpstreamOAuthConfig oauth;
  // Sessions served at once; 0 until resolved from the egress default of the entry's kind.
  std::size_t max_sessions = 0;
  // stdio: the resident memory (RSS) of all its children together, in MiB; 0 for no bound.
  std::size_t max_memory_mb = 0;
  ServerProtocol protocol = ServerProtocol::automatic;

  bool is_stdio() const { return !command.empty(); }
  bool is_http() const { return !url.empty(); }

  bool operator==(const ServerEntry&) const = default;
};

struct EgressConfig {
  // Default max_sessions of each published server, by what a session costs: a stdio session is a
  // process, an HTTP one a few KiB here and an Mcp-Session-Id (and a GET stream) upstream.
  std::size_t max_sessions_per_stdio_server = 32;
  std::size_t max_sessions_per_http_server = 256;
  // Default max_memory_mb of each stdio server: the RSS of its children together, in MiB
  // (0: no bound). Past it a new session first makes room as at max_sessions.
  std::size_t max_memory_per_stdio_server_mb = 4096;
  // A server at its limit closes the least recently active session with no request in flight
  // and no resource subscription to make room before it refuses anyone; a session active within
  // this floor is spared (0: however recently it was used).
  int idle_floor_ms = 0;
  int terminate_after_ms = 2000;  // stdin closed → SIGTERM after this long
  int kill_after_ms = 3000;       // SIGTERM → SIGKILL after this long
  // Servers whose era is not known yet: how long server/discover may take before the session
  // falls back to initialize (and how long a subscriptions/listen may take to be acknowledged).
  int discover_timeout_ms = 10000;
  // input_required rounds of one request of a 2026-07-28 server before the bridge gives up.
  int max_input_rounds = 10;

  bool operator==(const EgressConfig&) const = default;
};

struct LogConfig {
  std::string level = "info";  // trace, debug, info, warn, error, critical, off
  bool level_set = false;      // given by the file, the environment or a flag (not the default)

  bool operator==(const LogConfig&) const = default;
};

struct DaemonConfig {
  int threads = 1;
  int shutdown_grace_ms = 5000;

  bool operator==(const DaemonConfig&) const = default;
};

// SEP-1803 webhooks served by the bridge for MQTT-hosted servers with in-band events
// (events.webhooks; README "Events and webhooks").
struct WebhooksConfig {
  bool enabled = false;
  std::string database;     // SQLite file of registrations and the outbox (required when enabled)
  bool allow_http = false;  // accept http:// targets (https only otherwise)
  // Targets allowed although they resolve to loopback, link-local or private addresses: IP
  // addresses or networks ("127.0.0.1", "10.0.0.0/8", "::1/128").
  std::vector<std::string> allow_targets;
  int timeout_ms = 10000;      // one POST: connect, send, response
  int retry_min_ms = 1000;     // first retry after this, doubling…
  int retry_max_ms = 300000;   // …up to this (±25 % jitter)
  int retry_window_s = 86400;  // an event not delivered within this is dead-lettered
  std::size_t max_in_flight = 64;
  // Threads of their own for the POSTs (a burst of deliveries never holds up MCP traffic on
  // the daemon's loop); each keeps the connections of the targets that hash to it.
  int threads = 1;
  std::size_t max_outbox = 100000;
  std::size_t max_registrations = 10000;
  std::size_t max_uris = 64;

  bool operator==(const WebhooksConfig&) const = default;
};

struct EventsConfig {
  WebhooksConfig webhooks;

  bool operator==(const EventsConfig&) const = default;
};

struct Config {
  MqttConfig mqtt;
  EventsConfig events;
  HttpConfig http;
  IngressConfig ingress;
  EgressConfig egress;
  Timeouts timeouts;
  std::vector<ServerEntry> servers;  // mcpServers, in file order
  LogConfig log;
  DaemonConfig daemon;

  const ServerEntry* find_server(const std::string& name) const;
  // One line for humans: what this configuration will do.
  std::string summary() const;
};

// An entry's max_sessions when it sets none: the egress default of its kind (stdio or HTTP).
std::size_t default_max_sessions(const ServerEntry& entry, const EgressConfig& egress);

// Values from the command line; each set one replaces the file's value.
struct Overrides {
  std::optional<std::string> broker_url;
  std::optional<std::string> topic_prefix;
  std::optional<std::string> http_listen;
  std::optional<std::string> log_level;
  std::optional<std::string> default_server;
  std::optional<int> presence_wait_ms;
};

// One problem found in a configuration: where, and what to do about it.
struct Problem {
  std::string path;  // key path such as mqtt.url or mcpServers."demo/x".command; empty: whole file
  std::string message;
};

struct LoadResult {
  std::optional<Config> config;  // set when there are no problems
  std::vector<Problem> problems;
  bool ok() const { return config.has_value(); }
};

// Environment lookups go through this, so tests can supply their own.
using GetEnv = const char* (*)(const char*);

// Parses and validates a configuration text. `origin` names the source in messages.
LoadResult parse(const std::string& text, const std::string& origin, GetEnv getenv_fn = nullptr);
// Every key of the model, as a path ("mqtt.tls.ca_file", "mcpServers.NAME.command",
// "timeouts.METHOD"): what mcp-mqtt-bridge.conf(5) must document. The older keys that still
// read (`*_s` beside `*_ms`) are not listed.
std::vector<std::string> key_paths();
// Reads and parses a file.
LoadResult load_file(const std::string& path, GetEnv getenv_fn = nullptr);
// Defaults only (no file), with environment overrides applied.
LoadResult defaults(GetEnv getenv_fn = nullptr);
// Applies command-line overrides and re-validates what they touch.
void apply_overrides(LoadResult& result, const Overrides& overrides);

// Formats problems one per line: "origin: path: message" (control characters escaped).
std::string format_problems(const std::vector<Problem>& problems, const std::string& origin);

// Validation helpers shared with the command line.
bool parse_host_port(const std::string& text, std::string& host, std::uint16_t& port,
                     std::string& why);
bool is_log_level(const std::string& level);
// The closest of `candidates` to `word`, or empty when none is close enough to suggest.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace mcpmqtt::config

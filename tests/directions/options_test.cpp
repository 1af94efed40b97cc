// The configuration mapped onto the transports' options (directions/options.hpp).
#include "directions/options.hpp"

#include <catch2/catch.hpp>

namespace mcpmqtt::directions {
namespace {

TEST_CASE("child_spec takes the server entry and the egress settings", "[directions]") {
  config::ServerEntry server;
  server.name = "demo/everything";
  server.command = "npx";
  server.args = {"-y", "@modelcontextprotocol/server-everything"};
  server.env = {{"DEBUG", "1"}};
  server.cwd = "/srv/mcp";
  config::EgressConfig egress;
  egress.terminate_after_ms = 1500;
  egress.kill_after_ms = 2500;
  const stdio::ChildSpec spec = child_spec(server, egress, "[egress demo/everything C c7] ");
  CHECK(spec.name == "demo/everything");
  CHECK(spec.command == "npx");
  CHECK(spec.args == server.args);
  CHECK(spec.env == server.env);
  CHECK(spec.cwd == "/srv/mcp");
  CHECK(spec.terminate_after == std::chrono::milliseconds(1500));
  CHECK(spec.kill_after == std::chrono::milliseconds(2500));
  CHECK(spec.log_prefix == "[egress demo/everything C c7] ");
  CHECK(spec.limits.max_bytes == jsonrpc::Limits{}.max_bytes);
  CHECK(spec.exit_watch == stdio::ExitWatch::automatic);
}

TEST_CASE("upstream_spec: built from an mcpServers entry", "[directions]") {
  config::ServerEntry e;
  e.name = "tools/weather";
  e.url = "https://weather.example:8443/mcp?tenant=1";
  e.headers = {{"Authorization", "Bearer abc"}};
  e.tls_verify = false;
  auto spec = upstream_spec(e);
  REQUIRE(spec);
  CHECK(spec->name == "tools/weather");
  CHECK(spec->url.tls);
  CHECK(spec->url.host == "weather.example");
  CHECK(spec->url.port == 8443);
  CHECK(spec->url.target == "/mcp?tenant=1");
  REQUIRE(spec->headers.size() == 1);
  CHECK(spec->headers[0].first == "Authorization");
  CHECK(spec->headers[0].second == "Bearer abc");
  CHECK_FALSE(spec->tls_verify);
  CHECK(spec->ca_file.empty());
}

TEST_CASE(
    "modern_upstream_options and upstream_spec: the entry's protocol and egress.* (discover "
    "timeout, input rounds)",
    "[directions][modern]") {
  config::ServerEntry e;
  e.name = "tools/weather";
  e.url = "http://127.0.0.1:9/mcp";
  config::EgressConfig egress;
  egress.discover_timeout_ms = 1234;
  egress.max_input_rounds = 4;
  auto o = modern_upstream_options(e, egress);
  CHECK(o.mode == bridge::ModernUpstream::Mode::automatic);
  CHECK(o.discover_timeout == std::chrono::milliseconds(1234));
  CHECK(o.max_input_rounds == 4);
  CHECK(o.server_name == "tools/weather");
  CHECK(upstream_spec(e)->modern_fallback);
  e.protocol = config::ServerProtocol::modern;
  CHECK(modern_upstream_options(e, egress).mode == bridge::ModernUpstream::Mode::modern);
  CHECK_FALSE(upstream_spec(e)->modern_fallback);
  e.protocol = config::ServerProtocol::legacy;
  CHECK_FALSE(upstream_spec(e)->modern_fallback);
}

TEST_CASE("upstream_spec: mistakes name the configuration key", "[directions]") {
  config::ServerEntry e;
  e.name = "tools/x";
  e.url = "http://user:pw@h/mcp";
  auto bad_url = upstream_spec(e);
  REQUIRE_FALSE(bad_url);
  CHECK(bad_url.error().rfind("mcpServers.\"tools/x\".url: credentials in the URL", 0) == 0);

  e.url = "http://h/mcp";
  e.headers = {{"Host", "other"}};
  auto bad_header = upstream_spec(e);
  REQUIRE_FALSE(bad_header);
  CHECK(bad_header.error() ==
        "mcpServers.\"tools/x\".headers: header \"Host\" is set by the Streamable HTTP "
        "transport and cannot be configured");
}

TEST_CASE("broker_options: every mqtt key reaches the MQTT side", "[directions]") {
  config::Overrides o;
  o.broker_url = "wss://broker.example:9443/ws";
  auto loaded = config::defaults();
  config::apply_overrides(loaded, o);
  REQUIRE(loaded.ok());
  auto m = loaded.config->mqtt;
  m.client = config::MqttClient::paho;
  m.username = "u";
  m.password = "p";
  m.tls.ca_file = "/ca.pem";
  m.tls.verify = false;
  m.keepalive_s = 7;
  m.qos = 0;
  m.connect_timeout_ms = 3000;
  m.reconnect_min_ms = 11;
  m.reconnect_max_ms = 22;
  m.max_packet_bytes = 1234;
  const auto b = broker_options(m);
  CHECK(b.host == "broker.example");
  CHECK(b.port == 9443);
  CHECK(b.websocket);
  CHECK(b.ws_path == "/ws");
  CHECK(b.tls.enabled);
  CHECK(b.tls.ca_file == "/ca.pem");
  CHECK_FALSE(b.tls.verify);
  CHECK(b.engine == mqtt::EngineKind::paho);
  CHECK(b.username == "u");
  CHECK(b.password == "p");
  CHECK(b.keepalive_s == 7);
  // Each ingress session's connection: mqtt.session_keepalive_s, the rest alike.
  m.session_keepalive_s = 90;
  const auto s = session_connection_options(m);
  CHECK(s.keepalive_s == 90);
  CHECK(s.host == b.host);
  CHECK(s.username == b.username);
  CHECK(b.qos == 0);
  CHECK(b.connect_timeout_ms == 3000);
  CHECK(b.reconnect_min_ms == 11);
  CHECK(b.reconnect_max_ms == 22);
  CHECK(b.max_packet_bytes == 1234);
}

TEST_CASE("http_server_options: the listener, its checks and its limits", "[directions]") {
  config::HttpConfig h;
  h.listen_host = "::1";
  h.listen_port = 9000;
  h.allowed_origins = {"https://app.example"};
  h.allowed_hosts = {"bridge.lan"};
  h.bearer_tokens = {"t1"};
  h.json_response = true;
  h.limits.max_sessions = 5;
  h.limits.keepalive_interval_ms = 3000;
  h.limits.idle_floor_ms = 7;
  h.limits.stream_queue_bytes = 100000;
  h.limits.session_backlog_bytes = 2000;
  h.limits.replay_buffer_bytes = 3000;
  const auto o = http_server_options(h);
  CHECK(o.listen_host == "::1");
  CHECK(o.listen_port == 9000);
  CHECK(o.allowed_origins == h.allowed_origins);
  CHECK(o.allowed_hosts == h.allowed_hosts);
  CHECK(o.bearer_tokens == h.bearer_tokens);
  CHECK(o.json_response);
  CHECK(o.limits.max_sessions == 5);
  CHECK(o.limits.keepalive_interval_ms == 3000);
  CHECK(o.limits.idle_floor_ms == 7);
  CHECK(o.limits.stream_queue_bytes == 100000);
  CHECK(o.limits.session_backlog_bytes == 2000);
  CHECK(o.limits.replay_buffer_bytes == 3000);
  CHECK(o.limits.max_body_bytes == h.limits.max_body_bytes);
}

TEST_CASE(
    "http_server_options: http.oauth reaches the server, and the access token is kept only for "
    "mqtt.session_credentials token",
    "[directions]") {
  config::HttpConfig h;
  h.public_url = "https://bridge.example";
  h.oauth.issuer = "https://auth.example";
  h.oauth.scopes = {{"mcp:weather", {"weather/#"}}};
  h.oauth.clock_skew_s = 5;
  config::MqttConfig m;
  auto o = http_server_options(h, m);
  CHECK(o.public_url == "https://bridge.example");
  CHECK(o.oauth.issuer == "https://auth.example");
  CHECK(o.oauth.scopes.at("mcp:weather") == std::vector<std::string>{"weather/#"});
  CHECK(o.oauth.clock_skew_s == 5);
  CHECK_FALSE(o.oauth.keep_access_token);
  m.session_credentials = config::SessionCredentials::principal;
  CHECK_FALSE(http_server_options(h, m).oauth.keep_access_token);
  m.session_credentials = config::SessionCredentials::token;
  CHECK(http_server_options(h, m).oauth.keep_access_token);
}

}  // namespace
}  // namespace mcpmqtt::directions

namespace mcpmqtt::directions {
namespace {

bridge::Principal oauth_principal(const std::string& sub, const std::string& token = {}) {
  bridge::Principal p;
  p.key = "oauth:https://auth.example|" + sub;
  p.issuer = "https://auth.example";
  p.subject = sub;
  p.client_id = "desktop-app";
  if (!token.empty()) p.access_token = std::make_shared<const std::string>(token);
  return p;
}

mqtt::BrokerOptions shared_credentials() {
  mqtt::BrokerOptions b;
  b.host = "broker.example";
  b.username = "bridge";
  b.password = "shared-secret";
  return b;
}

TEST_CASE("mqtt.session_credentials shared: every session presents the configured credentials",
          "[directions][credentials]") {
  const auto shared = shared_credentials();
  for (const auto& principal :
       {std::optional<bridge::Principal>{}, std::optional(bridge::Principal::keyed("stdio")),
        std::optional(oauth_principal("alice", "tok-alice"))}) {
    auto b = session_broker_options(shared, config::SessionCredentials::shared, principal);
    REQUIRE(b);
    CHECK(b->username == "bridge");
    CHECK(b->password == "shared-secret");
    CHECK(b->credentials_source.empty());
    CHECK(b->host == "broker.example");
  }
}

TEST_CASE(
    "mqtt.session_credentials token: the OAuth subject and its access token, and shared "
    "credentials for callers without an OAuth principal",
    "[directions][credentials]") {
  const auto shared = shared_credentials();
  const auto mode = config::SessionCredentials::token;
  auto b = session_broker_options(shared, mode, oauth_principal("alice", "tok-alice"));
  REQUIRE(b);
  CHECK(b->username == "alice");
  CHECK(b->password == "tok-alice");
  CHECK(b->host == "broker.example");
  // The hint for a refused CONNECT names the user and the mode, never the token.
  CHECK(b->credentials_source.find("\"alice\"") != std::string::npos);
  CHECK(b->credentials_source.find("\"token\"") != std::string::npos);
  CHECK(b->credentials_source.find("tok-alice") == std::string::npos);

  for (const auto& principal : {std::optional<bridge::Principal>{},
                                std::optional(bridge::Principal::keyed("token:0123abcd")),
                                std::optional(bridge::Principal{})}) {
    auto s = session_broker_options(shared, mode, principal);
    REQUIRE(s);
    CHECK(s->username == "bridge");
    CHECK(s->password == "shared-secret");
  }
}

TEST_CASE(
    "mqtt.session_credentials token: an OAuth principal without its token is refused, never "
    "given the shared credentials",
    "[directions][credentials]") {
  const auto shared = shared_credentials();
  auto b =
      session_broker_options(shared, config::SessionCredentials::token, oauth_principal("alice"));
  REQUIRE_FALSE(b);
  CHECK(b.error().find("\"alice\"") != std::string::npos);
  CHECK(b.error().find("no access token") != std::string::npos);

  auto empty = oauth_principal("alice");
  empty.access_token = std::make_shared<const std::string>();
  CHECK_FALSE(session_broker_options(shared, config::SessionCredentials::token, empty));

  auto huge = session_broker_options(shared, config::SessionCredentials::token,
                                     oauth_principal("alice", std::string(65536, 'x')));
  REQUIRE_FALSE(huge);
  CHECK(huge.error().find("65536 bytes") != std::string::npos);
  CHECK(huge.error().find("xxxx") == std::string::npos);
  CHECK(session_broker_options(shared, config::SessionCredentials::token,
                               oauth_principal("alice", std::string(65535, 'x'))));
}

TEST_CASE(
    "mqtt.session_credentials principal: the OAuth subject with the configured password, never "
    "the token",
    "[directions][credentials]") {
  const auto shared = shared_credentials();
  const auto mode = config::SessionCredentials::principal;
  auto b = session_broker_options(shared, mode, oauth_principal("alice", "tok-alice"));
  REQUIRE(b);
  CHECK(b->username == "alice");
  CHECK(b->password == "shared-secret");
  CHECK(b->credentials_source.find("\"principal\"") != std::string::npos);
  auto anonymous = session_broker_options(shared, mode, bridge::Principal{});
  REQUIRE(anonymous);
  CHECK(anonymous->username == "bridge");
  // A subject MQTT cannot carry as a user name (MQTT 5.0 §1.5.4: no U+0000).
  auto nul = session_broker_options(shared, mode, oauth_principal(std::string("al\0ice", 6)));
  REQUIRE_FALSE(nul);
  CHECK(nul.error().find("not a valid MQTT user name") != std::string::npos);
}

}  // namespace
}  // namespace mcpmqtt::directions

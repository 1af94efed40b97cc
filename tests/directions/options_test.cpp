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

}  // namespace
}  // namespace mcpmqtt::directions

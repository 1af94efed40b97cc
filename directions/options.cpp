#include "directions/options.hpp"

namespace mcpmqtt::directions {

mqtt::BrokerOptions broker_options(const config::MqttConfig& m) {
  mqtt::BrokerOptions b;
  b.host = m.host;
  b.port = m.port;
  b.websocket = m.websocket;
  b.ws_path = m.ws_path;
  b.tls.enabled = m.tls.enabled;
  b.tls.ca_file = m.tls.ca_file;
  b.tls.cert_file = m.tls.cert_file;
  b.tls.key_file = m.tls.key_file;
  b.tls.verify = m.tls.verify;
  b.engine =
      m.client == config::MqttClient::paho ? mqtt::EngineKind::paho : mqtt::EngineKind::native;
  b.username = m.username;
  b.password = m.password;
  b.keepalive_s = m.keepalive_s;
  b.qos = m.qos;
  b.connect_timeout_ms = m.connect_timeout_ms;
  b.reconnect_min_ms = m.reconnect_min_ms;
  b.reconnect_max_ms = m.reconnect_max_ms;
  b.max_packet_bytes = m.max_packet_bytes;
  b.topic_prefix = m.topic_prefix;
  for (const auto& f : m.fallbacks)
    b.fallbacks.push_back({f.host, f.port, f.tls, f.websocket, f.ws_path});
  return b;
}

mqtt::BrokerOptions session_connection_options(const config::MqttConfig& m) {
  auto b = broker_options(m);
  b.keepalive_s = m.session_keepalive_s;
  return b;
}

Expected<mqtt::BrokerOptions, std::string> session_broker_options(
    const mqtt::BrokerOptions& shared, config::SessionCredentials mode,
    const std::optional<bridge::Principal>& principal) {
  using config::SessionCredentials;
  if (mode == SessionCredentials::shared || !principal || !principal->is_oauth()) return shared;
  const auto& sub = principal->subject;
  const std::string mode_name = mode == SessionCredentials::token ? "token" : "principal";
  // MQTT 5.0 §1.5.4, §3.1.3.5: a UTF-8 string of at most 65,535 bytes, without U+0000.
  constexpr std::size_t kMaxField = 65535;
  if (sub.size() > kMaxField || sub.find('\0') != std::string::npos) {
    return unexpected(
        "the bridge cannot present this caller to the MQTT broker: its OAuth subject "
        "is not a valid MQTT user name (at most 65535 bytes, no NUL) and "
        "mqtt.session_credentials is \"" +
        mode_name + "\"");
  }
  mqtt::BrokerOptions b = shared;
  b.username = sub;
  if (mode == SessionCredentials::token) {
    const auto& token = principal->access_token;
    if (!token || token->empty()) {
      return unexpected(
          "the bridge cannot open an MQTT session as \"" + sub +
          "\": mqtt.session_credentials is \"token\" but no access token was kept for this "
          "session (the HTTP ingress keeps it only for OAuth requests)");
    }
    if (token->size() > kMaxField) {
      return unexpected("the bridge cannot open an MQTT session as \"" + sub +
                        "\": its access token is " + std::to_string(token->size()) +
                        " bytes and an MQTT password holds at most 65535 "
                        "(mqtt.session_credentials \"token\")");
    }
    b.password = *token;
    b.credentials_source = "the session's credentials: user name \"" + sub +
                           "\" (the OAuth subject) and the caller's access token as password, "
                           "mqtt.session_credentials \"token\"; check the broker's JWT "
                           "authentication";
  } else {
    b.credentials_source = "the session's credentials: user name \"" + sub +
                           "\" (the OAuth subject) and the password of mqtt.password_file, "
                           "mqtt.session_credentials \"principal\"; check the broker knows "
                           "that user";
  }
  return b;
}

http::ServerOptions http_server_options(const config::HttpConfig& h, const config::MqttConfig& m) {
  http::ServerOptions o;
  o.listen_host = h.listen_host;
  o.listen_port = h.listen_port;
  o.allowed_origins = h.allowed_origins;
  o.allowed_hosts = h.allowed_hosts;
  o.bearer_tokens = h.bearer_tokens;
  o.json_response = h.json_response;
  o.public_url = h.public_url;
  o.oauth.issuer = h.oauth.issuer;
  o.oauth.scopes = h.oauth.scopes;
  o.oauth.algorithms = h.oauth.algorithms;
  o.oauth.clock_skew_s = h.oauth.clock_skew_s;
  o.oauth.require_at_jwt = h.oauth.require_at_jwt;
  o.oauth.jwks_max_stale_s = h.oauth.jwks_max_stale_s;
  o.oauth.ca_file = h.oauth.ca_file;
  o.oauth.tls_verify = h.oauth.tls_verify;
  if (h.oauth.introspection.enabled())
    o.oauth.introspection_cache_max_s = h.oauth.introspection.cache_max_s;
  // mqtt.session_credentials "token": the access token is the password of the principal's MQTT
  // sessions, so the principal keeps it; otherwise it is never kept.
  o.oauth.keep_access_token = m.session_credentials == config::SessionCredentials::token;
  const auto& l = h.limits;
  o.limits.max_body_bytes = l.max_body_bytes;
  o.limits.max_sessions = l.max_sessions;
  o.limits.max_connections = l.max_connections;
  o.limits.session_idle_timeout_ms = l.session_idle_timeout_ms;
  o.limits.idle_floor_ms = l.idle_floor_ms;
  o.limits.request_header_timeout_ms = l.request_header_timeout_ms;
  o.limits.stream_queue_messages = l.stream_queue_messages;
  o.limits.session_backlog_messages = l.session_backlog_messages;
  o.limits.replay_buffer_events = l.replay_buffer_events;
  o.limits.stream_queue_bytes = l.stream_queue_bytes;
  o.limits.session_backlog_bytes = l.session_backlog_bytes;
  o.limits.replay_buffer_bytes = l.replay_buffer_bytes;
  o.limits.keepalive_interval_ms = l.keepalive_interval_ms;
  return o;
}

stdio::ChildSpec child_spec(const config::ServerEntry& server, const config::EgressConfig& egress,
                            std::string log_prefix) {
  stdio::ChildSpec spec;
  spec.name = server.name;
  spec.command = server.command;
  spec.args = server.args;
  spec.env = server.env;
  spec.cwd = server.cwd;
  spec.terminate_after = std::chrono::milliseconds(egress.terminate_after_ms);
  spec.kill_after = std::chrono::milliseconds(egress.kill_after_ms);
  spec.log_prefix = std::move(log_prefix);
  return spec;
}

bridge::ModernUpstream::Options modern_upstream_options(const config::ServerEntry& server,
                                                        const config::EgressConfig& egress) {
  bridge::ModernUpstream::Options o;
  o.mode = server.protocol == config::ServerProtocol::modern
               ? bridge::ModernUpstream::Mode::modern
               : bridge::ModernUpstream::Mode::automatic;
  o.discover_timeout = std::chrono::milliseconds(egress.discover_timeout_ms);
  o.max_input_rounds = static_cast<std::size_t>(egress.max_input_rounds);
  o.server_name = server.name;
  return o;
}

Expected<http::UpstreamSpec, std::string> upstream_spec(const config::ServerEntry& server) {
  auto spec = http::make_upstream_spec(
      server.name, server.url, {server.headers.begin(), server.headers.end()}, server.tls_verify);
  if (!spec) return unexpected("mcpServers.\"" + server.name + "\"." + spec.error());
  // "auto": a 2026-only server's -32022 on initialize is the signal to switch, not the end.
  spec->modern_fallback = server.protocol == config::ServerProtocol::automatic;
  return spec;
}

}  // namespace mcpmqtt::directions

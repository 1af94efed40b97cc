// The configuration mapped onto the transports' own options: the one place where config::
// types meet mqtt::, http:: and stdio:: ones (transports never include config/).
//
// Thread-safe (no state).
#pragma once

#include <optional>
#include <string>

#include "bridge/modern/upstream.hpp"
#include "bridge/protocol/principal.hpp"
#include "common/expected.hpp"
#include "config/config.hpp"
#include "http/client_channel.hpp"
#include "http/server_options.hpp"
#include "mqtt/broker_options.hpp"
#include "stdio/child_channel.hpp"

namespace mcpmqtt::directions {

// mqtt.*: where the broker is, the engine, credentials, keep-alive, QoS, backoff.
mqtt::BrokerOptions broker_options(const config::MqttConfig& mqtt);
// The same for the connection of each ingress session: mqtt.session_keepalive_s.
mqtt::BrokerOptions session_connection_options(const config::MqttConfig& mqtt);

// mqtt.session_credentials: the broker options of one ingress session opened for `principal`
// (none: unknown, as for stdio) — `shared` (the configuration's, broker_options()) with the user
// name and password `mode` gives. An OAuth principal in "token" mode: its `sub` and access token;
// in "principal" mode: its `sub` and the configured password; anyone else, or "shared": the
// configured ones. An error (a sentence the client gets) when the mode needs what the principal
// lacks: "token" without an access token kept, or credentials MQTT cannot carry.
Expected<mqtt::BrokerOptions, std::string> session_broker_options(
    const mqtt::BrokerOptions& shared, config::SessionCredentials mode,
    const std::optional<bridge::Principal>& principal);

// http.*: the listener's address, Host/Origin/bearer checks and limits.
// `mqtt`: whether principals keep their access token (mqtt.session_credentials "token").
http::ServerOptions http_server_options(const config::HttpConfig& http,
                                        const config::MqttConfig& mqtt = {});

// One session of a `command` entry of mcpServers, with egress.* termination delays.
stdio::ChildSpec child_spec(const config::ServerEntry& server, const config::EgressConfig& egress,
                            std::string log_prefix = {});

// How an egress session of `server` finds out and speaks its MCP era (its "protocol" and
// egress.*); the caller adds the scheduler-free parts it owns (memory, probe channel, prefix).
// Meaningless for "protocol": "legacy", which gets no adapter.
bridge::ModernUpstream::Options modern_upstream_options(const config::ServerEntry& server,
                                                        const config::EgressConfig& egress);

// A `url` entry of mcpServers (for "protocol": "auto", a -32022 to initialize keeps the channel
// open: modern_fallback). The error names the key:
// `mcpServers."tools/x".url: unsupported scheme "ftp"; ...`.
Expected<http::UpstreamSpec, std::string> upstream_spec(const config::ServerEntry& server);

}  // namespace mcpmqtt::directions

// The configuration mapped onto the transports' own options: the one place where config::
// types meet mqtt::, http:: and stdio:: ones (transports never include config/).
//
// Thread-safe (no state).
#pragma once

#include <string>

#include "bridge/modern/upstream.hpp"
#include "common/expected.hpp"
#include "config/config.hpp"
#include "http/client_channel.hpp"
#include "http/server_options.hpp"
#include "mqtt/broker_options.hpp"
#include "stdio/child_channel.hpp"

namespace mcpmqtt::directions {

// mqtt.*: where the broker is, the engine, credentials, keep-alive, QoS, backoff.
mqtt::BrokerOptions broker_options(const config::MqttConfig& mqtt);

// http.*: the listener's address, Host/Origin/bearer checks and limits.
http::ServerOptions http_server_options(const config::HttpConfig& http);

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

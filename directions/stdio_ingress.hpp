// `mcp-mqtt-bridge stdio --server NAME`: the bridge as a stdio MCP server for a host that
// launches commands (desktop apps, IDEs, the MCP Inspector), relaying one MCP session to an
// instance of an MQTT-hosted server.
//
// stdout carries nothing but JSON-RPC (logs go to stderr, warnings only unless a level is
// asked for). The host's initialize waits up to ingress.presence_wait_ms for the server-name
// to come online, then fails with a JSON-RPC error. When stdin closes, or on SIGTERM/SIGINT, the
// bridge publishes `disconnected`, leaves the broker and exits 0; when the MQTT side ends the
// session (server gone, broker lost), it exits 1 after answering what was pending.
#pragma once

#include <string>

#include "config/config.hpp"

namespace mcpmqtt::directions {

// Runs the session until it ends; the process's exit status.
int run_stdio_ingress(config::Config cfg, const std::string& server_name);

}  // namespace mcpmqtt::directions

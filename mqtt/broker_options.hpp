// Where a connection of the bridge finds its broker and how it talks to it: the MQTT side's own
// options, filled by the wiring (directions/options.hpp) from the configuration's mqtt section.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mcpmqtt::mqtt {

// Which MQTT v5 client runs a connection: the bridge's own on its event loop, or Eclipse Paho.
enum class EngineKind { native, paho };

struct BrokerTls {
  bool enabled = false;   // mqtts:// or wss://
  std::string ca_file;    // CA bundle to verify the broker; empty: the system's default store
  std::string cert_file;  // client certificate (PEM)
  std::string key_file;   // client private key (PEM)
  bool verify = true;     // verify the broker's certificate and host name
};

// Another broker to fail over to: where it is and how it is reached; everything else (TLS files,
// credentials, timeouts) is the first broker's.
struct BrokerAddress {
  std::string host;
  std::uint16_t port = 1883;
  bool tls = false;
  bool websocket = false;
  std::string ws_path = "/mqtt";
};

struct BrokerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 1883;
  bool websocket = false;         // MQTT over WebSocket (ws:// or wss://)
  std::string ws_path = "/mqtt";  // the WebSocket's path
  BrokerTls tls;
  EngineKind engine = EngineKind::native;
  std::string username;
  std::string password;  // never logged
  // Where username and password came from, for the hint when the broker refuses them; empty:
  // the configuration's mqtt.username and mqtt.password_file (or MCPMQTT_MQTT_PASSWORD).
  std::string credentials_source;
  int keepalive_s = 30;
  int qos = 1;  // of everything published and subscribed to: 0 or 1
  int connect_timeout_ms = 10000;
  int reconnect_min_ms = 500;  // backoff of reconnect attempts, doubled each time up to max
  int reconnect_max_ms = 30000;
  // Brokers tried after this one, in order, when a connection cannot be made or is lost
  // (mqtt.url as a list); a connection stays on the broker that took it until it loses it.
  std::vector<BrokerAddress> fallbacks;
  // What every topic of the MCP scheme and the bridge's own begins with (mqtt.topic_prefix,
  // bridge/protocol/topics.hpp); the same for every participant on the broker.
  std::string topic_prefix = "$mcp-";
  // Maximum Packet Size announced in CONNECT (MQTT 5.0 §3.1.2.11.4); 0: none announced.
  std::uint32_t max_packet_bytes = 0;
};

}  // namespace mcpmqtt::mqtt

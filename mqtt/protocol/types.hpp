// The values the MQTT engines and the native engine's protocol machine share: what a connect
// attempt needs, what the broker's CONNACK said, the outcome of each operation, a publication
// both ways. A publication carries, besides its user properties, the request/response
// properties of MQTT 5.0 §4.10 (Response Topic 0x08, Correlation Data 0x09) both ways; every
// engine sends them at any QoS and hands them up on receipt. Plain data, standard C++ only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mcpmqtt::mqtt {

struct UserProperty {
  std::string key;
  std::string value;
  bool operator==(const UserProperty&) const = default;
};
using UserProperties = std::vector<UserProperty>;

// A user property of a received packet; the views live as long as the callback runs.
struct UserPropertyView {
  std::string_view key;
  std::string_view value;
};

// Everything one connect attempt needs.
struct EngineConnect {
  enum class Transport { tcp, tls, websocket, websocket_tls };
  Transport transport = Transport::tcp;
  std::string host;
  std::uint16_t port = 1883;
  std::string ws_path = "/mqtt";  // the HTTP path of the WebSocket upgrade

  // TLS (Transport::tls and ::websocket_tls)
  std::string ca_file;    // empty: the system's default store
  std::string cert_file;  // client certificate (PEM), optional
  std::string key_file;   // its private key (PEM)
  bool verify = true;     // the broker's certificate chain and host name

  std::string client_id;
  std::optional<std::string> username;
  std::optional<std::string> password;
  std::uint16_t keep_alive_s = 30;  // 0: no keep-alive
  // The native engine's keep-alive deadlines fall on this grid of the steady clock (capped at a
  // quarter of the Keep Alive): PINGREQs go out up to one step early and a silent broker is
  // found lost up to one step late, so that the pings of thousands of idle connections leave in
  // one wake-up per step instead of one each. 0: each deadline exactly on time.
  std::chrono::milliseconds keep_alive_grid{0};
  std::chrono::milliseconds connect_timeout{10000};  // TCP, TLS, WebSocket and CONNACK together
  bool clean_start = true;
  std::uint32_t session_expiry_s = 0;
  // Limits we announce in CONNECT (MQTT 5.0 §3.1.2.11): the broker must respect them.
  std::uint16_t receive_maximum = 65535;  // QoS 1 and 2 publications it may send us at once
  std::uint32_t maximum_packet_size = 0;  // the largest packet we accept; 0: no limit
  std::uint16_t topic_alias_maximum = 0;  // topic aliases the broker may use toward us
  UserProperties user_properties;

  struct Will {
    std::string topic;
    std::string payload;
    int qos = 0;
    bool retain = false;
    UserProperties user_properties;
  };
  std::optional<Will> will;
};

// What the broker's CONNACK said (MQTT 5.0 §3.2.2.3), defaults filled in where it was silent.
struct EngineConnack {
  bool session_present = false;
  std::uint16_t receive_maximum = 65535;
  std::uint32_t maximum_packet_size = 0;  // 0: the broker announced no limit
  int maximum_qos = 2;
  bool retain_available = true;
  std::uint16_t topic_alias_maximum = 0;
  std::optional<std::string> assigned_client_id;
  std::optional<std::uint16_t> server_keep_alive;
  std::optional<std::uint32_t> session_expiry_s;
  std::optional<std::string> reason_string;
  UserProperties user_properties;
};

struct ConnectOutcome {
  bool ok = false;
  // The CONNACK's reason code when the broker refused (0x80 and above), else 0.
  std::uint8_t reason_code = 0;
  std::string why;  // why the attempt failed, in words
  EngineConnack connack;
};

// Outcome of a SUBSCRIBE, UNSUBSCRIBE or PUBLISH. `ok` is false when the operation could not be
// carried out (not connected, connection lost, packet too large for the broker, a PUBACK with a
// failure reason code); SUBACK and UNSUBACK reason codes are reported one per filter, in order,
// and a refusal among them does not clear `ok`.
struct AckOutcome {
  bool ok = false;
  std::string why;
  std::vector<std::uint8_t> reason_codes;
};

struct SubscribeRequest {
  std::string filter;
  int qos = 1;
  bool no_local = false;
};

struct PublishRequest {
  std::string topic;
  std::shared_ptr<const std::string> payload;  // sent from this buffer, not copied
  int qos = 1;
  bool retain = false;
  // Shared between publications: a connection sends the same MCP properties with every one.
  std::shared_ptr<const UserProperties> user_properties;
  // MQTT 5.0 §3.3.2.3.5 Response Topic: a topic name (no wildcards). Empty: not sent.
  std::string response_topic;
  // MQTT 5.0 §3.3.2.3.6 Correlation Data: binary, any bytes. Empty: not sent.
  std::string correlation_data;
};

// A PUBLISH from the broker, valid for the duration of the callback (the payload may be kept).
struct ReceivedMessage {
  std::string_view topic;
  std::shared_ptr<const std::string> payload;
  int qos = 0;
  bool retain = false;
  std::span<const UserPropertyView> user_properties;
  // MQTT 5.0 §4.10: set when the PUBLISH carried the property (correlation data is binary and
  // may hold any byte); views, valid for the callback like the topic.
  std::optional<std::string_view> response_topic;
  std::optional<std::string_view> correlation_data;
};

}  // namespace mcpmqtt::mqtt

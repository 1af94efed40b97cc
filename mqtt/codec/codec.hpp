// MQTT 5.0 codec for a client, with no I/O: the packets a client sends are encoded, the packets
// a broker sends are decoded. Section numbers refer to the OASIS MQTT Version 5.0 standard.
//
// Encoding appends to a caller's std::string; a PUBLISH's payload is not copied: the caller
// sends its header from that string and the payload from its own buffer after it (scatter /
// gather). Decoding hands out views into the caller's read buffer, valid as long as that buffer
// is unchanged.
//
// Input from the network never makes the decoder crash, assert or throw: anything malformed or
// against the protocol yields an Error with the DISCONNECT reason code to answer it with.
//
// Pure functions and value types; thread-safe. TopicAliases: one connection, not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace mcpmqtt::mqtt::codec {

// §2.1.2
enum class PacketType : std::uint8_t {
  connect = 1,
  connack = 2,
  publish = 3,
  puback = 4,
  pubrec = 5,
  pubrel = 6,
  pubcomp = 7,
  subscribe = 8,
  suback = 9,
  unsubscribe = 10,
  unsuback = 11,
  pingreq = 12,
  pingresp = 13,
  disconnect = 14,
  auth = 15,
};
const char* packet_name(PacketType type);  // "CONNECT", "PUBACK", …

// Reason codes (§2.4, Table 2-6).
namespace reason {
constexpr std::uint8_t success = 0x00;  // also: normal disconnection, granted QoS 0
constexpr std::uint8_t granted_qos_1 = 0x01;
constexpr std::uint8_t granted_qos_2 = 0x02;
constexpr std::uint8_t disconnect_with_will = 0x04;
constexpr std::uint8_t no_matching_subscribers = 0x10;
constexpr std::uint8_t no_subscription_existed = 0x11;
constexpr std::uint8_t continue_authentication = 0x18;
constexpr std::uint8_t re_authenticate = 0x19;
constexpr std::uint8_t unspecified_error = 0x80;
constexpr std::uint8_t malformed_packet = 0x81;
constexpr std::uint8_t protocol_error = 0x82;
constexpr std::uint8_t implementation_specific_error = 0x83;
constexpr std::uint8_t unsupported_protocol_version = 0x84;
constexpr std::uint8_t client_identifier_not_valid = 0x85;
constexpr std::uint8_t bad_user_name_or_password = 0x86;
constexpr std::uint8_t not_authorized = 0x87;
constexpr std::uint8_t server_unavailable = 0x88;
constexpr std::uint8_t server_busy = 0x89;
constexpr std::uint8_t banned = 0x8A;
constexpr std::uint8_t server_shutting_down = 0x8B;
constexpr std::uint8_t bad_authentication_method = 0x8C;
constexpr std::uint8_t keep_alive_timeout = 0x8D;
constexpr std::uint8_t session_taken_over = 0x8E;
constexpr std::uint8_t topic_filter_invalid = 0x8F;
constexpr std::uint8_t topic_name_invalid = 0x90;
constexpr std::uint8_t packet_identifier_in_use = 0x91;
constexpr std::uint8_t packet_identifier_not_found = 0x92;
constexpr std::uint8_t receive_maximum_exceeded = 0x93;
constexpr std::uint8_t topic_alias_invalid = 0x94;
constexpr std::uint8_t packet_too_large = 0x95;
constexpr std::uint8_t message_rate_too_high = 0x96;
constexpr std::uint8_t quota_exceeded = 0x97;
constexpr std::uint8_t administrative_action = 0x98;
constexpr std::uint8_t payload_format_invalid = 0x99;
constexpr std::uint8_t retain_not_supported = 0x9A;
constexpr std::uint8_t qos_not_supported = 0x9B;
constexpr std::uint8_t use_another_server = 0x9C;
constexpr std::uint8_t server_moved = 0x9D;
constexpr std::uint8_t shared_subscriptions_not_supported = 0x9E;
constexpr std::uint8_t connection_rate_exceeded = 0x9F;
constexpr std::uint8_t maximum_connect_time = 0xA0;
constexpr std::uint8_t subscription_identifiers_not_supported = 0xA1;
constexpr std::uint8_t wildcard_subscriptions_not_supported = 0xA2;
}  // namespace reason
// The standard's name of a reason code ("Not authorized"); "reason code 0xNN" when unknown.
std::string reason_text(std::uint8_t code);
// The name with the code, for people who look it up: "Not authorized (0x87)".
std::string reason_with_code(std::uint8_t code);

// Property identifiers (§2.2.2.2, Table 2-4).
enum class Property : std::uint8_t {
  payload_format_indicator = 0x01,
  message_expiry_interval = 0x02,
  content_type = 0x03,
  response_topic = 0x08,
  correlation_data = 0x09,
  subscription_identifier = 0x0B,
  session_expiry_interval = 0x11,
  assigned_client_identifier = 0x12,
  server_keep_alive = 0x13,
  authentication_method = 0x15,
  authentication_data = 0x16,
  request_problem_information = 0x17,
  will_delay_interval = 0x18,
  request_response_information = 0x19,
  response_information = 0x1A,
  server_reference = 0x1C,
  reason_string = 0x1F,
  receive_maximum = 0x21,
  topic_alias_maximum = 0x22,
  topic_alias = 0x23,
  maximum_qos = 0x24,
  retain_available = 0x25,
  user_property = 0x26,
  maximum_packet_size = 0x27,
  wildcard_subscription_available = 0x28,
  subscription_identifier_available = 0x29,
  shared_subscription_available = 0x2A,
};

// The largest Remaining Length a Variable Byte Integer can carry (§1.5.5): 268,435,455.
constexpr std::uint32_t kMaxVarint = 268'435'455;

// Why input was refused: the reason code of the DISCONNECT that answers it (malformed_packet,
// protocol_error, packet_too_large, topic_alias_invalid, receive_maximum_exceeded, …) and a
// static text naming the rule that was broken.
struct Error {
  std::uint8_t reason = reason::malformed_packet;
  const char* what = "";
};
// A decoded value, or the Error that refused the input. The codec's own (it includes nothing
// beyond the standard library), with the interface of common/expected.hpp's Expected.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  Result(Error error) : v_(std::in_place_index<1>, error) {}

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// ---- primitives (§1.5) -------------------------------------------------------------------------

// The bytes a Variable Byte Integer of `value` (at most kMaxVarint) takes.
constexpr std::size_t varint_size(std::size_t value) {
  return value < 128 ? 1 : value < 16'384 ? 2 : value < 2'097'152 ? 3 : 4;
}
// Appends a Variable Byte Integer; false (nothing appended) when value > kMaxVarint.
[[nodiscard]] bool put_varint(std::string& out, std::uint32_t value);
// Reads a Variable Byte Integer at the start of `in`. On success also tells how many bytes it
// used. nullopt inside the result: `in` ends before the integer does. Error: more than 4 bytes.
struct Varint {
  std::uint32_t value = 0;
  std::size_t size = 0;
};
Result<std::optional<Varint>> get_varint(std::string_view in);
// Well-formed UTF-8 as MQTT requires (§1.5.4): no surrogates, no overlong forms, nothing above
// U+10FFFF, and no U+0000.
bool valid_utf8(std::string_view text);
// A Topic Name a broker may send (§4.7): valid UTF-8, no wildcard characters; may be empty only
// when a Topic Alias stands for it (checked by TopicAliases).
bool valid_topic_name(std::string_view topic);

// ---- properties we receive ---------------------------------------------------------------------

struct UserPropertyRef {
  std::string_view key;
  std::string_view value;
};

// The properties of a received packet. Each property that may appear once is an optional; user
// properties and subscription identifiers, which may repeat, are read from the validated raw
// bytes when asked for (no allocation while decoding).
struct Properties {
  std::optional<std::uint8_t> payload_format_indicator;
  std::optional<std::uint32_t> message_expiry_interval;
  std::optional<std::string_view> content_type;
  std::optional<std::string_view> response_topic;
  std::optional<std::string_view> correlation_data;
  std::optional<std::uint32_t> session_expiry_interval;
  std::optional<std::string_view> assigned_client_identifier;
  std::optional<std::uint16_t> server_keep_alive;
  std::optional<std::string_view> authentication_method;
  std::optional<std::string_view> authentication_data;
  std::optional<std::string_view> response_information;
  std::optional<std::string_view> server_reference;
  std::optional<std::string_view> reason_string;
  std::optional<std::uint16_t> receive_maximum;
  std::optional<std::uint16_t> topic_alias_maximum;
  std::optional<std::uint16_t> topic_alias;
  std::optional<std::uint8_t> maximum_qos;
  std::optional<std::uint8_t> retain_available;
  std::optional<std::uint32_t> maximum_packet_size;
  std::optional<std::uint8_t> wildcard_subscription_available;
  std::optional<std::uint8_t> subscription_identifier_available;
  std::optional<std::uint8_t> shared_subscription_available;

  std::string_view raw;  // the properties' bytes, after the Property Length
  std::size_t user_property_count = 0;
  std::size_t subscription_identifier_count = 0;

  // Calls fn(UserPropertyRef) for every user property, in packet order.
  template <typename Fn>
  void for_each_user_property(Fn&& fn) const;
  // Calls fn(std::uint32_t) for every Subscription Identifier, in packet order.
  template <typename Fn>
  void for_each_subscription_identifier(Fn&& fn) const;
};

// ---- packets we receive ------------------------------------------------------------------------

struct Connack {  // §3.2
  bool session_present = false;
  std::uint8_t reason_code = 0;
  Properties properties;
};
struct Publish {  // §3.3
  int qos = 0;
  bool dup = false;
  bool retain = false;
  std::string_view topic;       // empty when a Topic Alias stands for it
  std::uint16_t packet_id = 0;  // 0 at QoS 0
  Properties properties;
  std::string_view payload;
};
struct PubAck {  // §3.4–3.7: PUBACK, PUBREC, PUBREL, PUBCOMP
  PacketType type = PacketType::puback;
  std::uint16_t packet_id = 0;
  std::uint8_t reason_code = 0;
  Properties properties;
};
struct SubAck {  // §3.9 SUBACK, §3.11 UNSUBACK
  PacketType type = PacketType::suback;
  std::uint16_t packet_id = 0;
  Properties properties;
  std::string_view reason_codes;  // one byte per filter of the (UN)SUBSCRIBE, in order
};
struct PingResp {};  // §3.13
struct Disconnect {  // §3.14
  std::uint8_t reason_code = 0;
  Properties properties;
};
struct Auth {  // §3.15
  std::uint8_t reason_code = 0;
  Properties properties;
};
using Inbound = std::variant<Connack, Publish, PubAck, SubAck, PingResp, Disconnect, Auth>;

// The fixed header at the start of a packet (§2.1.1).
struct FixedHeader {
  std::uint8_t first_byte = 0;
  std::uint32_t remaining_length = 0;
  std::size_t header_size = 0;  // 2 to 5 bytes
  PacketType type() const { return static_cast<PacketType>(first_byte >> 4); }
  std::size_t packet_size() const { return header_size + remaining_length; }
};
// Reads the fixed header at the start of `data` (which may hold less than a whole packet).
// nullopt inside the result: more bytes are needed. Errors: a Remaining Length of more than
// 4 bytes (malformed_packet); a whole packet larger than `max_packet_size` (packet_too_large,
// §3.1.2.11.4 [MQTT-3.1.2-24]), unless max_packet_size is 0.
Result<std::optional<FixedHeader>> read_fixed_header(std::string_view data,
                                                     std::uint32_t max_packet_size = 0);

// Decodes one whole packet a broker sends to a client: `body` holds the Remaining Length bytes
// that follow the fixed header. Checks the fixed header's flags, every field, every property
// (allowed in that packet, at most once unless repeatable, in range) and every string (UTF-8).
// Packets a broker never sends (CONNECT, SUBSCRIBE, UNSUBSCRIBE, PINGREQ) are protocol errors.
Result<Inbound> decode_inbound(std::uint8_t first_byte, std::string_view body);

// The topic aliases a broker set up toward this client (§3.3.2.3.4), for one connection.
class TopicAliases {
 public:
  explicit TopicAliases(std::uint16_t maximum = 0) : maximum_(maximum) {}
  // The topic of a PUBLISH: a topic with an alias (re)defines the alias; an empty topic uses it.
  // Errors (topic_alias_invalid): alias 0 or above the maximum we announced; an empty topic
  // with an alias never defined; (protocol_error) an empty topic without an alias.
  Result<std::string_view> resolve(std::string_view topic, std::optional<std::uint16_t> alias);
  void clear() { topics_.clear(); }  // a new network connection starts with none (§3.3.2.3.4)
  std::uint16_t maximum() const { return maximum_; }

 private:
  std::uint16_t maximum_;
  std::vector<std::string> topics_;  // index alias-1; grown on first use
};

// ---- packets we send ---------------------------------------------------------------------------

// The properties a client may send; unset ones are left out. Which of them a packet may carry is
// the caller's business (§2.2.2.2 lists them); encode_* write what they are given.
struct OutProperties {
  std::optional<std::uint8_t> payload_format_indicator;
  std::optional<std::uint32_t> message_expiry_interval;
  std::optional<std::string_view> content_type;
  std::optional<std::string_view> response_topic;
  std::optional<std::string_view> correlation_data;
  std::optional<std::uint32_t> subscription_identifier;
  std::optional<std::uint32_t> session_expiry_interval;
  std::optional<std::string_view> authentication_method;
  std::optional<std::string_view> authentication_data;
  std::optional<std::uint8_t> request_problem_information;
  std::optional<std::uint32_t> will_delay_interval;
  std::optional<std::uint8_t> request_response_information;
  std::optional<std::string_view> reason_string;
  std::optional<std::uint16_t> receive_maximum;
  std::optional<std::uint16_t> topic_alias_maximum;
  std::optional<std::uint16_t> topic_alias;
  std::optional<std::uint32_t> maximum_packet_size;
  std::span<const UserPropertyRef> user_properties;
};
// Appends a whole property block: the Property Length, then the properties in the order of
// Table 2-4, user properties last in the order given. False when a string is longer than
// 65,535 bytes. A PUBLISH with the same properties every time encodes them once with this.
[[nodiscard]] bool put_properties(std::string& out, const OutProperties& properties);

struct ConnectOut {  // §3.1
  std::string_view client_id;
  bool clean_start = true;
  std::uint16_t keep_alive_s = 0;
  OutProperties properties;
  struct Will {
    std::string_view topic;
    std::string_view payload;
    int qos = 0;
    bool retain = false;
    OutProperties properties;
  };
  std::optional<Will> will;
  std::optional<std::string_view> username;
  std::optional<std::string_view> password;
};
struct PublishOut {  // §3.3
  std::string_view topic;
  int qos = 0;
  bool retain = false;
  bool dup = false;
  std::uint16_t packet_id = 0;  // ignored at QoS 0
  // A whole property block from put_properties(); empty means no properties.
  std::string_view encoded_properties;
  std::size_t payload_size = 0;
};
struct SubscriptionOut {  // §3.8.3.1
  std::string_view filter;
  int qos = 0;
  bool no_local = false;
  bool retain_as_published = false;
  int retain_handling = 0;  // 0, 1 or 2
};

// Each appends one whole packet (for PUBLISH: all but the payload) to `out` and returns false,
// leaving `out` as it was, when it cannot be encoded (a string over 65,535 bytes, a packet over
// kMaxVarint bytes, a QoS or retain handling out of range, no filters).
[[nodiscard]] bool encode_connect(std::string& out, const ConnectOut& connect);
[[nodiscard]] bool encode_publish_header(std::string& out, const PublishOut& publish);
// PUBACK, PUBREC, PUBREL or PUBCOMP; the short forms of §3.4.2.1 are used when they can be.
[[nodiscard]] bool encode_ack(std::string& out, PacketType type, std::uint16_t packet_id,
                              std::uint8_t reason_code = reason::success,
                              const OutProperties& properties = {});
[[nodiscard]] bool encode_subscribe(std::string& out, std::uint16_t packet_id,
                                    std::span<const SubscriptionOut> filters,
                                    const OutProperties& properties = {});
[[nodiscard]] bool encode_unsubscribe(std::string& out, std::uint16_t packet_id,
                                      std::span<const std::string_view> filters,
                                      const OutProperties& properties = {});
void encode_pingreq(std::string& out);
[[nodiscard]] bool encode_disconnect(std::string& out, std::uint8_t reason_code = reason::success,
                                     const OutProperties& properties = {});
[[nodiscard]] bool encode_auth(std::string& out, std::uint8_t reason_code,
                               const OutProperties& properties = {});

// ---- implementation of the templates -----------------------------------------------------------

namespace detail {
// Walks validated property bytes; calls on_user(key, value) and on_subscription_id(value).
void walk_repeated(std::string_view raw, void (*on_user)(void*, UserPropertyRef),
                   void (*on_subscription_id)(void*, std::uint32_t), void* context);
}  // namespace detail

template <typename Fn>
void Properties::for_each_user_property(Fn&& fn) const {
  if (user_property_count == 0) return;
  detail::walk_repeated(
      raw, [](void* c, UserPropertyRef p) { (*static_cast<std::remove_reference_t<Fn>*>(c))(p); },
      nullptr, const_cast<void*>(static_cast<const void*>(&fn)));
}

template <typename Fn>
void Properties::for_each_subscription_identifier(Fn&& fn) const {
  if (subscription_identifier_count == 0) return;
  detail::walk_repeated(
      raw, nullptr,
      [](void* c, std::uint32_t id) { (*static_cast<std::remove_reference_t<Fn>*>(c))(id); },
      const_cast<void*>(static_cast<const void*>(&fn)));
}

}  // namespace mcpmqtt::mqtt::codec

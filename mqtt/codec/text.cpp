// Names of packet types (§2.1.2) and reason codes (§2.4, Table 2-6) for logs and errors.
#include "mqtt/codec/codec.hpp"

namespace mcpmqtt::mqtt::codec {

const char* packet_name(PacketType type) {
  switch (type) {
    case PacketType::connect:
      return "CONNECT";
    case PacketType::connack:
      return "CONNACK";
    case PacketType::publish:
      return "PUBLISH";
    case PacketType::puback:
      return "PUBACK";
    case PacketType::pubrec:
      return "PUBREC";
    case PacketType::pubrel:
      return "PUBREL";
    case PacketType::pubcomp:
      return "PUBCOMP";
    case PacketType::subscribe:
      return "SUBSCRIBE";
    case PacketType::suback:
      return "SUBACK";
    case PacketType::unsubscribe:
      return "UNSUBSCRIBE";
    case PacketType::unsuback:
      return "UNSUBACK";
    case PacketType::pingreq:
      return "PINGREQ";
    case PacketType::pingresp:
      return "PINGRESP";
    case PacketType::disconnect:
      return "DISCONNECT";
    case PacketType::auth:
      return "AUTH";
  }
  return "reserved packet type";  // 0, which §2.1.2 forbids, or a value above 15
}

namespace {

// 0x00 is also "Normal disconnection" and "Granted QoS 0"; with no packet at hand, "Success".
const char* reason_name(std::uint8_t code) {
  switch (code) {
    case 0x00:
      return "Success";
    case 0x01:
      return "Granted QoS 1";
    case 0x02:
      return "Granted QoS 2";
    case 0x04:
      return "Disconnect with Will Message";
    case 0x10:
      return "No matching subscribers";
    case 0x11:
      return "No subscription existed";
    case 0x18:
      return "Continue authentication";
    case 0x19:
      return "Re-authenticate";
    case 0x80:
      return "Unspecified error";
    case 0x81:
      return "Malformed Packet";
    case 0x82:
      return "Protocol Error";
    case 0x83:
      return "Implementation specific error";
    case 0x84:
      return "Unsupported Protocol Version";
    case 0x85:
      return "Client Identifier not valid";
    case 0x86:
      return "Bad User Name or Password";
    case 0x87:
      return "Not authorized";
    case 0x88:
      return "Server unavailable";
    case 0x89:
      return "Server busy";
    case 0x8A:
      return "Banned";
    case 0x8B:
      return "Server shutting down";
    case 0x8C:
      return "Bad authentication method";
    case 0x8D:
      return "Keep Alive timeout";
    case 0x8E:
      return "Session taken over";
    case 0x8F:
      return "Topic Filter invalid";
    case 0x90:
      return "Topic Name invalid";
    case 0x91:
      return "Packet Identifier in use";
    case 0x92:
      return "Packet Identifier not found";
    case 0x93:
      return "Receive Maximum exceeded";
    case 0x94:
      return "Topic Alias invalid";
    case 0x95:
      return "Packet too large";
    case 0x96:
      return "Message rate too high";
    case 0x97:
      return "Quota exceeded";
    case 0x98:
      return "Administrative action";
    case 0x99:
      return "Payload format invalid";
    case 0x9A:
      return "Retain not supported";
    case 0x9B:
      return "QoS not supported";
    case 0x9C:
      return "Use another server";
    case 0x9D:
      return "Server moved";
    case 0x9E:
      return "Shared Subscriptions not supported";
    case 0x9F:
      return "Connection rate exceeded";
    case 0xA0:
      return "Maximum connect time";
    case 0xA1:
      return "Subscription Identifiers not supported";
    case 0xA2:
      return "Wildcard Subscriptions not supported";
    default:
      return nullptr;
  }
}

}  // namespace

std::string reason_text(std::uint8_t code) {
  if (const char* name = reason_name(code)) return name;
  constexpr char kHex[] = "0123456789ABCDEF";
  std::string text = "reason code 0x";
  text += kHex[code >> 4];
  text += kHex[code & 0x0F];
  return text;
}

std::string reason_with_code(std::uint8_t code) {
  if (!reason_name(code)) return reason_text(code);
  constexpr char kHex[] = "0123456789ABCDEF";
  std::string text = reason_name(code);
  text += " (0x";
  text += kHex[code >> 4];
  text += kHex[code & 0x0F];
  return text + ")";
}

}  // namespace mcpmqtt::mqtt::codec

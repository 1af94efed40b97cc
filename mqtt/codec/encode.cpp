// Encoding of what a client sends (§3). Each encoder first computes the packet's size and checks
// every limit, then grows `out` once and writes through a pointer: nothing is appended unless all
// of the packet can be.
#include <cstdint>
#include <cstring>
#include <optional>

#include "mqtt/codec/codec.hpp"

namespace mcpmqtt::mqtt::codec {
namespace {

constexpr std::size_t kMaxString = 65'535;  // §1.5.4, §1.5.6: a two-byte length

// Writes into space already made; the sizes were checked before.
class Writer {
 public:
  explicit Writer(char* p) : p_(p) {}
  void u8(unsigned v) { *p_++ = static_cast<char>(v); }
  void u16(std::size_t v) {
    u8((v >> 8) & 0xFF);
    u8(v & 0xFF);
  }
  void u32(std::uint32_t v) {
    u8(v >> 24);
    u8((v >> 16) & 0xFF);
    u8((v >> 8) & 0xFF);
    u8(v & 0xFF);
  }
  void varint(std::size_t v) {
    do {
      const unsigned digit = v & 0x7F;
      v >>= 7;
      u8(v != 0 ? digit | 0x80 : digit);
    } while (v != 0);
  }
  void bytes(std::string_view s) {
    if (!s.empty()) std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void string(std::string_view s) {  // UTF-8 Encoded String or Binary Data
    u16(s.size());
    bytes(s);
  }
  // A property that is set: its identifier, then its value in the form its type has.
  void property(Property id, const std::optional<std::uint8_t>& v) {
    if (!v) return;
    u8(static_cast<unsigned>(id));
    u8(*v);
  }
  void property(Property id, const std::optional<std::uint16_t>& v) {
    if (!v) return;
    u8(static_cast<unsigned>(id));
    u16(*v);
  }
  void property(Property id, const std::optional<std::uint32_t>& v) {
    if (!v) return;
    u8(static_cast<unsigned>(id));
    u32(*v);
  }
  void property(Property id, const std::optional<std::string_view>& v) {
    if (!v) return;
    u8(static_cast<unsigned>(id));
    string(*v);
  }

 private:
  char* p_;
};

// Makes room for `n` more bytes at the end of `out` and returns a writer into it.
Writer grow(std::string& out, std::size_t n) {
  const std::size_t old = out.size();
  out.resize(old + n);
  return Writer(out.data() + old);
}

// Sums the sizes of a packet's parts and remembers whether one of them cannot be encoded.
class Size {
 public:
  void add(std::size_t n) { n_ += n; }
  void string(std::string_view s) {
    if (s.size() > kMaxString) ok_ = false;
    n_ += 2 + s.size();
  }
  void fail() { ok_ = false; }
  bool ok() const { return ok_ && n_ <= kMaxVarint; }
  std::size_t value() const { return n_; }

 private:
  std::size_t n_ = 0;
  bool ok_ = true;
};

using P = Property;

// The bytes of the properties after their Property Length.
Size properties_size(const OutProperties& p) {
  Size n;
  const auto fixed = [&n](const auto& v, std::size_t size) {
    if (v) n.add(1 + size);
  };
  const auto string = [&n](const std::optional<std::string_view>& v) {
    if (!v) return;
    n.add(1);
    n.string(*v);
  };
  fixed(p.payload_format_indicator, 1);
  fixed(p.message_expiry_interval, 4);
  string(p.content_type);
  string(p.response_topic);
  string(p.correlation_data);
  if (p.subscription_identifier) {
    if (*p.subscription_identifier > kMaxVarint) n.fail();
    n.add(1 + varint_size(*p.subscription_identifier));
  }
  fixed(p.session_expiry_interval, 4);
  string(p.authentication_method);
  string(p.authentication_data);
  fixed(p.request_problem_information, 1);
  fixed(p.will_delay_interval, 4);
  fixed(p.request_response_information, 1);
  string(p.reason_string);
  fixed(p.receive_maximum, 2);
  fixed(p.topic_alias_maximum, 2);
  fixed(p.topic_alias, 2);
  fixed(p.maximum_packet_size, 4);
  for (const UserPropertyRef& u : p.user_properties) {
    n.add(1);
    n.string(u.key);
    n.string(u.value);
  }
  return n;
}

// The Property Length, then the properties in the order of Table 2-4 (by identifier), user
// properties last in the order given.
void write_properties(Writer& w, const OutProperties& p, std::size_t length) {
  w.varint(length);
  w.property(P::payload_format_indicator, p.payload_format_indicator);
  w.property(P::message_expiry_interval, p.message_expiry_interval);
  w.property(P::content_type, p.content_type);
  w.property(P::response_topic, p.response_topic);
  w.property(P::correlation_data, p.correlation_data);
  if (p.subscription_identifier) {
    w.u8(static_cast<unsigned>(P::subscription_identifier));
    w.varint(*p.subscription_identifier);
  }
  w.property(P::session_expiry_interval, p.session_expiry_interval);
  w.property(P::authentication_method, p.authentication_method);
  w.property(P::authentication_data, p.authentication_data);
  w.property(P::request_problem_information, p.request_problem_information);
  w.property(P::will_delay_interval, p.will_delay_interval);
  w.property(P::request_response_information, p.request_response_information);
  w.property(P::reason_string, p.reason_string);
  w.property(P::receive_maximum, p.receive_maximum);
  w.property(P::topic_alias_maximum, p.topic_alias_maximum);
  w.property(P::topic_alias, p.topic_alias);
  w.property(P::maximum_packet_size, p.maximum_packet_size);
  for (const UserPropertyRef& u : p.user_properties) {
    w.u8(static_cast<unsigned>(P::user_property));
    w.string(u.key);
    w.string(u.value);
  }
}

bool is_ack(PacketType type) {
  return type == PacketType::puback || type == PacketType::pubrec || type == PacketType::pubrel ||
         type == PacketType::pubcomp;
}

}  // namespace

bool put_varint(std::string& out, std::uint32_t value) {
  if (value > kMaxVarint) return false;
  Writer w = grow(out, varint_size(value));
  w.varint(value);
  return true;
}

bool put_properties(std::string& out, const OutProperties& properties) {
  const Size content = properties_size(properties);
  if (!content.ok()) return false;
  Writer w = grow(out, varint_size(content.value()) + content.value());
  write_properties(w, properties, content.value());
  return true;
}

bool encode_connect(std::string& out, const ConnectOut& c) {  // §3.1
  const Size properties = properties_size(c.properties);
  if (!properties.ok()) return false;
  Size rl;
  rl.add(10);  // Protocol Name, Protocol Version, Connect Flags, Keep Alive (§3.1.2)
  rl.add(varint_size(properties.value()) + properties.value());
  rl.string(c.client_id);
  Size will_properties;
  if (c.will) {
    // §3.1.2.6: Will QoS 0, 1 or 2.
    if (c.will->qos < 0 || c.will->qos > 2) return false;
    will_properties = properties_size(c.will->properties);
    if (!will_properties.ok()) return false;
    rl.add(varint_size(will_properties.value()) + will_properties.value());
    rl.string(c.will->topic);
    rl.string(c.will->payload);
  }
  if (c.username) rl.string(*c.username);
  if (c.password) rl.string(*c.password);
  if (!rl.ok()) return false;

  // §3.1.2.3: User Name, Password, Will Retain, Will QoS (2 bits), Will Flag, Clean Start, 0.
  unsigned flags = 0;
  if (c.username) flags |= 0x80;
  if (c.password) flags |= 0x40;
  if (c.will) {
    flags |= 0x04 | (static_cast<unsigned>(c.will->qos) << 3);
    if (c.will->retain) flags |= 0x20;
  }
  if (c.clean_start) flags |= 0x02;

  Writer w = grow(out, 1 + varint_size(rl.value()) + rl.value());
  w.u8(0x10);
  w.varint(rl.value());
  w.string("MQTT");  // §3.1.2.1
  w.u8(5);           // §3.1.2.2
  w.u8(flags);
  w.u16(c.keep_alive_s);
  write_properties(w, c.properties, properties.value());
  w.string(c.client_id);  // §3.1.3: payload in this order
  if (c.will) {
    write_properties(w, c.will->properties, will_properties.value());
    w.string(c.will->topic);
    w.string(c.will->payload);
  }
  if (c.username) w.string(*c.username);
  if (c.password) w.string(*c.password);
  return true;
}

bool encode_publish_header(std::string& out, const PublishOut& p) {  // §3.3
  if (p.qos < 0 || p.qos > 2) return false;
  if (p.topic.size() > kMaxString || p.payload_size > kMaxVarint) return false;
  const std::size_t properties = p.encoded_properties.empty() ? 1 : p.encoded_properties.size();
  const std::size_t header = 2 + p.topic.size() + (p.qos > 0 ? 2 : 0) + properties;
  if (header > kMaxVarint - p.payload_size) return false;
  const std::size_t rl = header + p.payload_size;

  // §3.3.1: DUP (only meaningful, and only allowed [MQTT-3.3.1-2], above QoS 0), QoS, RETAIN.
  unsigned first = 0x30 | (static_cast<unsigned>(p.qos) << 1);
  if (p.dup && p.qos > 0) first |= 0x08;
  if (p.retain) first |= 0x01;
  Writer w = grow(out, 1 + varint_size(rl) + header);
  w.u8(first);
  w.varint(rl);
  w.string(p.topic);
  if (p.qos > 0) w.u16(p.packet_id);
  if (p.encoded_properties.empty()) {
    w.u8(0);
  } else {
    w.bytes(p.encoded_properties);
  }
  return true;
}

bool encode_ack(std::string& out, PacketType type, std::uint16_t packet_id,
                std::uint8_t reason_code, const OutProperties& properties) {  // §3.4-§3.7
  if (!is_ack(type)) return false;
  const Size content = properties_size(properties);
  if (!content.ok()) return false;
  // §3.4.2.1: Success without properties is the packet identifier alone; §3.4.2.2.1: without
  // properties the Property Length may be left out too.
  std::size_t rl = 2;
  if (reason_code != reason::success || content.value() != 0) rl = 3;
  if (content.value() != 0) rl += varint_size(content.value()) + content.value();
  if (rl > kMaxVarint) return false;
  Writer w = grow(out, 1 + varint_size(rl) + rl);
  // §3.6.1 [MQTT-3.6.1-1]: PUBREL's reserved flags are 0b0010.
  w.u8((static_cast<unsigned>(type) << 4) | (type == PacketType::pubrel ? 0x02 : 0x00));
  w.varint(rl);
  w.u16(packet_id);
  if (rl > 2) w.u8(reason_code);
  if (content.value() != 0) write_properties(w, properties, content.value());
  return true;
}

bool encode_subscribe(std::string& out, std::uint16_t packet_id,
                      std::span<const SubscriptionOut> filters,
                      const OutProperties& properties) {  // §3.8
  // §3.8.3 [MQTT-3.8.3-2]: at least one Topic Filter.
  if (filters.empty()) return false;
  const Size content = properties_size(properties);
  if (!content.ok()) return false;
  Size rl;
  rl.add(2 + varint_size(content.value()) + content.value());
  for (const SubscriptionOut& f : filters) {
    // §3.8.3.1: QoS 3 and Retain Handling 3 are not allowed.
    if (f.qos < 0 || f.qos > 2 || f.retain_handling < 0 || f.retain_handling > 2) return false;
    rl.string(f.filter);
    rl.add(1);
  }
  if (!rl.ok()) return false;
  Writer w = grow(out, 1 + varint_size(rl.value()) + rl.value());
  w.u8(0x82);  // §3.8.1: reserved flags 0b0010
  w.varint(rl.value());
  w.u16(packet_id);
  write_properties(w, properties, content.value());
  for (const SubscriptionOut& f : filters) {
    w.string(f.filter);
    // §3.8.3.1: bits 0-1 QoS, 2 No Local, 3 Retain As Published, 4-5 Retain Handling.
    w.u8(static_cast<unsigned>(f.qos) | (f.no_local ? 0x04u : 0u) |
         (f.retain_as_published ? 0x08u : 0u) | (static_cast<unsigned>(f.retain_handling) << 4));
  }
  return true;
}

bool encode_unsubscribe(std::string& out, std::uint16_t packet_id,
                        std::span<const std::string_view> filters,
                        const OutProperties& properties) {  // §3.10
  // §3.10.3 [MQTT-3.10.3-2]: at least one Topic Filter.
  if (filters.empty()) return false;
  const Size content = properties_size(properties);
  if (!content.ok()) return false;
  Size rl;
  rl.add(2 + varint_size(content.value()) + content.value());
  for (std::string_view f : filters) {
    rl.string(f);
  }
  if (!rl.ok()) return false;
  Writer w = grow(out, 1 + varint_size(rl.value()) + rl.value());
  w.u8(0xA2);  // §3.10.1: reserved flags 0b0010
  w.varint(rl.value());
  w.u16(packet_id);
  write_properties(w, properties, content.value());
  for (std::string_view f : filters) {
    w.string(f);
  }
  return true;
}

void encode_pingreq(std::string& out) {
  out.append("\xC0\x00", 2);
}  // §3.12

bool encode_disconnect(std::string& out, std::uint8_t reason_code,
                       const OutProperties& properties) {  // §3.14
  const Size content = properties_size(properties);
  if (!content.ok()) return false;
  // §3.14.2.1: Normal disconnection without properties is the fixed header alone;
  // §3.14.2.2.1: without properties the Property Length may be left out.
  std::size_t rl = 0;
  if (reason_code != reason::success || content.value() != 0) rl = 1;
  if (content.value() != 0) rl += varint_size(content.value()) + content.value();
  if (rl > kMaxVarint) return false;
  Writer w = grow(out, 1 + varint_size(rl) + rl);
  w.u8(0xE0);
  w.varint(rl);
  if (rl > 0) w.u8(reason_code);
  if (content.value() != 0) write_properties(w, properties, content.value());
  return true;
}

bool encode_auth(std::string& out, std::uint8_t reason_code,
                 const OutProperties& properties) {  // §3.15
  const Size content = properties_size(properties);
  if (!content.ok()) return false;
  // §3.15.2.1: Reason Code and Property Length are left out together, only for Success without
  // properties.
  std::size_t rl = 0;
  if (reason_code != reason::success || content.value() != 0) {
    rl = 1 + varint_size(content.value()) + content.value();
  }
  if (rl > kMaxVarint) return false;
  Writer w = grow(out, 1 + varint_size(rl) + rl);
  w.u8(0xF0);
  w.varint(rl);
  if (rl > 0) {
    w.u8(reason_code);
    write_properties(w, properties, content.value());
  }
  return true;
}

}  // namespace mcpmqtt::mqtt::codec

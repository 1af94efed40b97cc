// Decoding of what a broker sends (§2, §3): the fixed header, properties and every packet type a
// client receives. Views into the input, no allocation; every length is checked against the bytes
// that are left before it is used.
#include <array>
#include <cstdint>
#include <initializer_list>

#include "mqtt/codec/codec.hpp"

namespace mcpmqtt::mqtt::codec {
namespace {

constexpr Error malformed(const char* what) {
  return Error{reason::malformed_packet, what};
}
constexpr Error protocol(const char* what) {
  return Error{reason::protocol_error, what};
}

// ---- Variable Byte Integer (§1.5.5) ------------------------------------------------------------

enum class VarintStatus { ok, truncated, too_long, not_minimal };

struct VarintRead {
  VarintStatus status;
  std::uint32_t value;
  std::size_t size;
};

inline VarintRead read_varint(const unsigned char* p, std::size_t n) {
  if (n != 0 && p[0] < 0x80) return {VarintStatus::ok, p[0], 1};
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    if (i == n) return {VarintStatus::truncated, 0, 0};
    const std::uint32_t b = p[i];
    value |= (b & 0x7F) << (7 * i);
    if ((b & 0x80) == 0) {
      // [MQTT-1.5.5-1]: the fewest bytes; a last byte of 0 after the first means one too many.
      if (b == 0) return {VarintStatus::not_minimal, 0, 0};
      return {VarintStatus::ok, value, i + 1};
    }
  }
  return {VarintStatus::too_long, 0, 0};
}

constexpr const char* varint_error(VarintStatus status) {
  return status == VarintStatus::too_long ? "Variable Byte Integer longer than 4 bytes"
                                          : "Variable Byte Integer not in its shortest form";
}

// ---- which properties each packet may carry (§2.2.2.2, Table 2-4) -----------------------------

constexpr std::uint64_t bits(std::initializer_list<Property> properties) {
  std::uint64_t mask = 0;
  for (Property p : properties) {
    mask |= std::uint64_t{1} << static_cast<unsigned>(p);
  }
  return mask;
}

using P = Property;
constexpr std::uint64_t kConnackProperties =
    bits({P::session_expiry_interval, P::assigned_client_identifier, P::server_keep_alive,
          P::authentication_method, P::authentication_data, P::response_information,
          P::server_reference, P::reason_string, P::receive_maximum, P::topic_alias_maximum,
          P::maximum_qos, P::retain_available, P::user_property, P::maximum_packet_size,
          P::wildcard_subscription_available, P::subscription_identifier_available,
          P::shared_subscription_available});
constexpr std::uint64_t kPublishProperties = bits(
    {P::payload_format_indicator, P::message_expiry_interval, P::content_type, P::response_topic,
     P::correlation_data, P::subscription_identifier, P::topic_alias, P::user_property});
constexpr std::uint64_t kAckProperties = bits({P::reason_string, P::user_property});
constexpr std::uint64_t kDisconnectProperties =
    bits({P::session_expiry_interval, P::server_reference, P::reason_string, P::user_property});
constexpr std::uint64_t kAuthProperties =
    bits({P::authentication_method, P::authentication_data, P::reason_string, P::user_property});
// The two that may repeat (§3.3.2.3.8, §3.1.2.11.8 and the same text in every packet).
constexpr std::uint64_t kRepeatable = bits({P::user_property, P::subscription_identifier});

// ---- reason codes each packet may carry --------------------------------------------------------

struct CodeSet {
  std::array<std::uint64_t, 4> words{};
  constexpr CodeSet(std::initializer_list<unsigned> codes) {
    for (unsigned c : codes) {
      words[c >> 6] |= std::uint64_t{1} << (c & 63);
    }
  }
  constexpr bool has(std::uint8_t c) const { return (words[c >> 6] >> (c & 63)) & 1; }
};

// Table 3-1
constexpr CodeSet kConnackCodes{0x00, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
                                0x8A, 0x8C, 0x90, 0x95, 0x97, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9F};
// Tables 3-4 (PUBACK) and 3-5 (PUBREC)
constexpr CodeSet kPubackCodes{0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99};
// Tables 3-6 (PUBREL) and 3-7 (PUBCOMP)
constexpr CodeSet kPubrelCodes{0x00, 0x92};
// Table 3-8
constexpr CodeSet kSubackCodes{0x00, 0x01, 0x02, 0x80, 0x83, 0x87,
                               0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2};
// Table 3-9
constexpr CodeSet kUnsubackCodes{0x00, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91};
// Table 3-10, those a server may send (0x04 is the client's alone).
constexpr CodeSet kDisconnectCodes{0x00, 0x80, 0x81, 0x82, 0x83, 0x87, 0x89, 0x8B, 0x8D, 0x8E,
                                   0x8F, 0x90, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9A,
                                   0x9B, 0x9C, 0x9D, 0x9E, 0x9F, 0xA0, 0xA1, 0xA2};
// Table 3-13, those a server may send (0x19 Re-authenticate is the client's alone).
constexpr CodeSet kAuthCodes{0x00, 0x18};

// ---- reading fields ----------------------------------------------------------------------------

constexpr const char* kBadUtf8 = "string is not well-formed UTF-8 or contains U+0000";

// Why a Topic Name failed valid_topic_name(), which checks UTF-8 and wildcards in one pass.
Error topic_name_error(std::string_view topic, const char* wildcard_what) {
  return valid_utf8(topic) ? protocol(wildcard_what) : malformed(kBadUtf8);
}

// A cursor over one packet's bytes; each read checks what is left and, on failure, records why.
class Reader {
 public:
  explicit Reader(std::string_view in)
      : p_(reinterpret_cast<const unsigned char*>(in.data())), end_(p_ + in.size()) {}

  std::size_t left() const { return static_cast<std::size_t>(end_ - p_); }
  std::string_view rest() const { return view(p_, left()); }
  const Error& error() const { return error_; }
  bool fail(Error e) {
    error_ = e;
    return false;
  }

  bool u8(std::uint8_t& v, const char* short_what) {
    if (left() < 1) return fail(malformed(short_what));
    v = *p_++;
    return true;
  }
  bool u16(std::uint16_t& v, const char* short_what) {
    if (left() < 2) return fail(malformed(short_what));
    v = static_cast<std::uint16_t>((p_[0] << 8) | p_[1]);
    p_ += 2;
    return true;
  }
  bool u32(std::uint32_t& v, const char* short_what) {
    if (left() < 4) return fail(malformed(short_what));
    v = (std::uint32_t{p_[0]} << 24) | (std::uint32_t{p_[1]} << 16) | (std::uint32_t{p_[2]} << 8) |
        std::uint32_t{p_[3]};
    p_ += 4;
    return true;
  }
  bool varint(std::uint32_t& v, const char* short_what) {
    const VarintRead r = read_varint(p_, left());
    if (r.status == VarintStatus::truncated) return fail(malformed(short_what));
    if (r.status != VarintStatus::ok) return fail(malformed(varint_error(r.status)));
    v = r.value;
    p_ += r.size;
    return true;
  }
  // Binary Data (§1.5.6): a two-byte length, then that many bytes.
  bool binary(std::string_view& v, const char* short_what) {
    std::uint16_t n;
    if (!u16(n, short_what)) return false;
    if (left() < n) return fail(malformed(short_what));
    v = view(p_, n);
    p_ += n;
    return true;
  }
  // UTF-8 Encoded String (§1.5.4): Binary Data that is well-formed UTF-8 without U+0000.
  bool utf8(std::string_view& v, const char* short_what) {
    if (!binary(v, short_what)) return false;
    return valid_utf8(v) || fail(malformed(kBadUtf8));
  }
  // A packet's last field: nothing may follow it.
  bool end(const char* what = "bytes after the last field of the packet") {
    return p_ == end_ || fail(malformed(what));
  }

  bool properties(Properties& out, std::uint64_t allowed);

 private:
  static std::string_view view(const unsigned char* p, std::size_t n) {
    return {reinterpret_cast<const char*>(p), n};
  }
  bool property(Properties& out, unsigned id);

  const unsigned char* p_;
  const unsigned char* end_;
  Error error_;
};

constexpr const char* kPropertyShort = "property value runs past the end of the properties";

// Properties (§2.2.2): the Property Length, then identifier-value pairs filling exactly that
// length.
bool Reader::properties(Properties& out, std::uint64_t allowed) {
  std::uint32_t length;
  if (!varint(length, "Property Length missing or cut short")) return false;
  if (length > left()) return fail(malformed("property length runs past the end of the packet"));
  const unsigned char* const packet_end = end_;
  out.raw = view(p_, length);
  end_ = p_ + length;
  std::uint64_t seen = 0;
  while (p_ != end_) {
    // §2.2.2.2: identifiers are Variable Byte Integers, but every one defined fits in a byte;
    // anything else is no property this packet may carry.
    const unsigned id = *p_++;
    if (id >= 64 || ((allowed >> id) & 1) == 0) {
      return fail(malformed("property not allowed in this packet"));
    }
    const std::uint64_t bit = std::uint64_t{1} << id;
    if ((seen & bit & ~kRepeatable) != 0) {
      return fail(protocol("property that may appear once appears twice"));
    }
    seen |= bit;
    if (!property(out, id)) return false;
  }
  end_ = packet_end;
  return true;
}

bool Reader::property(Properties& out, unsigned id) {
  std::uint8_t b;
  std::uint16_t s;
  std::uint32_t w;
  std::string_view v;
  switch (static_cast<Property>(id)) {
    case P::payload_format_indicator:  // §3.3.2.3.2
      if (!u8(b, kPropertyShort)) return false;
      if (b > 1) return fail(protocol("Payload Format Indicator other than 0 or 1"));
      out.payload_format_indicator = b;
      return true;
    case P::message_expiry_interval:
      if (!u32(w, kPropertyShort)) return false;
      out.message_expiry_interval = w;
      return true;
    case P::content_type:
      if (!utf8(v, kPropertyShort)) return false;
      out.content_type = v;
      return true;
    case P::response_topic:
      if (!binary(v, kPropertyShort)) return false;
      // §3.3.2.3.5 [MQTT-3.3.2-14]: a Topic Name, so no wildcards.
      if (!valid_topic_name(v)) {
        return fail(topic_name_error(v, "Response Topic contains a wildcard"));
      }
      out.response_topic = v;
      return true;
    case P::correlation_data:
      if (!binary(v, kPropertyShort)) return false;
      out.correlation_data = v;
      return true;
    case P::subscription_identifier:  // §3.3.2.3.8
      if (!varint(w, kPropertyShort)) return false;
      if (w == 0) return fail(protocol("Subscription Identifier 0"));
      ++out.subscription_identifier_count;
      return true;
    case P::session_expiry_interval:
      if (!u32(w, kPropertyShort)) return false;
      out.session_expiry_interval = w;
      return true;
    case P::assigned_client_identifier:
      if (!utf8(v, kPropertyShort)) return false;
      out.assigned_client_identifier = v;
      return true;
    case P::server_keep_alive:
      if (!u16(s, kPropertyShort)) return false;
      out.server_keep_alive = s;
      return true;
    case P::authentication_method:
      if (!utf8(v, kPropertyShort)) return false;
      out.authentication_method = v;
      return true;
    case P::authentication_data:
      if (!binary(v, kPropertyShort)) return false;
      out.authentication_data = v;
      return true;
    case P::response_information:
      if (!utf8(v, kPropertyShort)) return false;
      out.response_information = v;
      return true;
    case P::server_reference:
      if (!utf8(v, kPropertyShort)) return false;
      out.server_reference = v;
      return true;
    case P::reason_string:
      if (!utf8(v, kPropertyShort)) return false;
      out.reason_string = v;
      return true;
    case P::receive_maximum:  // §3.2.2.3.3
      if (!u16(s, kPropertyShort)) return false;
      if (s == 0) return fail(protocol("Receive Maximum 0"));
      out.receive_maximum = s;
      return true;
    case P::topic_alias_maximum:
      if (!u16(s, kPropertyShort)) return false;
      out.topic_alias_maximum = s;
      return true;
    case P::topic_alias:  // 0 and values above our maximum: TopicAliases::resolve
      if (!u16(s, kPropertyShort)) return false;
      out.topic_alias = s;
      return true;
    case P::maximum_qos:  // §3.2.2.3.4
      if (!u8(b, kPropertyShort)) return false;
      if (b > 1) return fail(protocol("Maximum QoS other than 0 or 1"));
      out.maximum_qos = b;
      return true;
    case P::retain_available:  // §3.2.2.3.5
      if (!u8(b, kPropertyShort)) return false;
      if (b > 1) return fail(protocol("Retain Available other than 0 or 1"));
      out.retain_available = b;
      return true;
    case P::user_property: {  // §3.1.2.11.8: a UTF-8 String Pair, may repeat
      std::string_view value;
      if (!utf8(v, kPropertyShort) || !utf8(value, kPropertyShort)) return false;
      ++out.user_property_count;
      return true;
    }
    case P::maximum_packet_size:  // §3.2.2.3.6
      if (!u32(w, kPropertyShort)) return false;
      if (w == 0) return fail(protocol("Maximum Packet Size 0"));
      out.maximum_packet_size = w;
      return true;
    case P::wildcard_subscription_available:  // §3.2.2.3.11
      if (!u8(b, kPropertyShort)) return false;
      if (b > 1) return fail(protocol("Wildcard Subscription Available other than 0 or 1"));
      out.wildcard_subscription_available = b;
      return true;
    case P::subscription_identifier_available:  // §3.2.2.3.12
      if (!u8(b, kPropertyShort)) return false;
      if (b > 1) return fail(protocol("Subscription Identifiers Available other than 0 or 1"));
      out.subscription_identifier_available = b;
      return true;
    case P::shared_subscription_available:  // §3.2.2.3.13
      if (!u8(b, kPropertyShort)) return false;
      if (b > 1) return fail(protocol("Shared Subscription Available other than 0 or 1"));
      out.shared_subscription_available = b;
      return true;
    case P::request_problem_information:
    case P::will_delay_interval:
    case P::request_response_information:
      break;  // a client's alone: never in an allowed set
  }
  return fail(malformed("property not allowed in this packet"));
}

// ---- packets -----------------------------------------------------------------------------------

constexpr const char* kShort = "Remaining Length shorter than the packet's fields";

// §2.1.3: flags that are not PUBLISH's are reserved and fixed; anything else is malformed.
constexpr Error kBadFlags = malformed("reserved flags of the fixed header have a wrong value");

Result<Inbound> failed(const Reader& r) {
  return r.error();
}

// §2.2.1: a Packet Identifier is never 0.
bool packet_id(Reader& r, std::uint16_t& id) {
  if (!r.u16(id, kShort)) return false;
  return id != 0 || r.fail(protocol("Packet Identifier 0"));
}

Result<Inbound> decode_connack(std::string_view body) {  // §3.2
  Reader r(body);
  Connack c;
  std::uint8_t flags;
  if (!r.u8(flags, kShort) || !r.u8(c.reason_code, kShort)) return failed(r);
  // §3.2.2.1 [MQTT-3.2.2-1]: bits 7-1 of the Connect Acknowledge Flags are reserved, 0.
  if ((flags & 0xFE) != 0) return malformed("CONNACK acknowledge flags bits 7-1 set");
  c.session_present = (flags & 1) != 0;
  if (r.left() == 0) {
    // A CONNACK of MQTT 3.1.1 (§3.2.2.3 of that standard) has no properties and return codes 1-5:
    // a broker that does not speak 5.0 refusing our CONNECT.
    if (c.reason_code >= 1 && c.reason_code <= 5) {
      return malformed("CONNACK of MQTT 3.1.1: the broker does not support MQTT 5.0");
    }
    return malformed("CONNACK without a Property Length");
  }
  if (!kConnackCodes.has(c.reason_code)) {
    return protocol("reason code not valid in CONNACK");
  }
  if (!r.properties(c.properties, kConnackProperties) || !r.end()) return failed(r);
  return Inbound{c};
}

Result<Inbound> decode_publish(std::uint8_t flags, std::string_view body) {  // §3.3
  Publish p;
  p.qos = (flags >> 1) & 3;
  p.dup = (flags & 8) != 0;
  p.retain = (flags & 1) != 0;
  // §3.3.1.2 [MQTT-3.3.1-4]: QoS 3 is malformed; §3.3.1.1 [MQTT-3.3.1-2]: no DUP at QoS 0.
  if (p.qos == 3) return malformed("PUBLISH with QoS 3");
  if (p.dup && p.qos == 0) return malformed("PUBLISH with DUP set at QoS 0");
  Reader r(body);
  if (!r.binary(p.topic, kShort)) return failed(r);
  // §3.3.2.1 [MQTT-3.3.2-2]: no wildcards in a Topic Name.
  if (!valid_topic_name(p.topic)) {
    return topic_name_error(p.topic, "Topic Name contains a wildcard");
  }
  if (p.qos > 0 && !packet_id(r, p.packet_id)) return failed(r);
  if (!r.properties(p.properties, kPublishProperties)) return failed(r);
  p.payload = r.rest();
  return Inbound{p};
}

// PUBACK, PUBREC, PUBREL, PUBCOMP (§3.4-§3.7).
Result<Inbound> decode_ack(PacketType type, std::string_view body) {
  Reader r(body);
  PubAck a;
  a.type = type;
  if (!packet_id(r, a.packet_id)) return failed(r);
  // §3.4.2.1: no Reason Code means Success; §3.4.2.2.1: below 4 bytes, no Property Length.
  if (r.left() == 0) return Inbound{a};
  r.u8(a.reason_code, kShort);
  const bool valid = type == PacketType::puback || type == PacketType::pubrec
                         ? kPubackCodes.has(a.reason_code)
                         : kPubrelCodes.has(a.reason_code);
  if (!valid) return protocol("reason code not valid in this acknowledgement");
  if (r.left() == 0) return Inbound{a};
  if (!r.properties(a.properties, kAckProperties) || !r.end()) return failed(r);
  return Inbound{a};
}

// SUBACK (§3.9), UNSUBACK (§3.11).
Result<Inbound> decode_suback(PacketType type, std::string_view body) {
  Reader r(body);
  SubAck s;
  s.type = type;
  if (!packet_id(r, s.packet_id)) return failed(r);
  if (r.left() == 0) return malformed(kShort);
  if (!r.properties(s.properties, kAckProperties)) return failed(r);
  s.reason_codes = r.rest();
  // §3.9.3, §3.11.3: one Reason Code per Topic Filter, and a (UN)SUBSCRIBE has at least one.
  if (s.reason_codes.empty()) return protocol("acknowledgement without reason codes");
  const CodeSet& codes = type == PacketType::suback ? kSubackCodes : kUnsubackCodes;
  for (char c : s.reason_codes) {
    if (!codes.has(static_cast<std::uint8_t>(c))) {
      return protocol("reason code not valid in this acknowledgement");
    }
  }
  return Inbound{s};
}

Result<Inbound> decode_disconnect(std::string_view body) {  // §3.14
  Reader r(body);
  Disconnect d;
  // §3.14.2.1: no Reason Code means Normal disconnection; §3.14.2.2.1: below 2 bytes, no
  // Property Length.
  if (r.left() == 0) return Inbound{d};
  r.u8(d.reason_code, kShort);
  if (!kDisconnectCodes.has(d.reason_code)) {
    return protocol("reason code not valid in a DISCONNECT from the server");
  }
  if (r.left() == 0) return Inbound{d};
  if (!r.properties(d.properties, kDisconnectProperties) || !r.end()) return failed(r);
  // §3.14.2.2.2 [MQTT-3.14.2-2]: the Server must not send a Session Expiry Interval.
  if (d.properties.session_expiry_interval) {
    return protocol("Session Expiry Interval in a DISCONNECT from the server");
  }
  return Inbound{d};
}

Result<Inbound> decode_auth(std::string_view body) {  // §3.15
  Reader r(body);
  Auth a;
  // §3.15.2.1: Reason Code and Property Length are left out together, or both present.
  if (r.left() == 0) return Inbound{a};
  r.u8(a.reason_code, kShort);
  if (r.left() == 0) return malformed("AUTH without a Property Length");
  if (!kAuthCodes.has(a.reason_code)) {
    return protocol("reason code not valid in an AUTH from the server");
  }
  if (!r.properties(a.properties, kAuthProperties) || !r.end()) return failed(r);
  // §3.15.2.2.2: the Authentication Method may not be left out.
  if (!a.properties.authentication_method) {
    return protocol("AUTH without an Authentication Method");
  }
  return Inbound{a};
}

}  // namespace

Result<std::optional<Varint>> get_varint(std::string_view in) {
  const VarintRead r = read_varint(reinterpret_cast<const unsigned char*>(in.data()), in.size());
  switch (r.status) {
    case VarintStatus::ok:
      return std::optional<Varint>(Varint{r.value, r.size});
    case VarintStatus::truncated:
      return std::optional<Varint>();
    default:
      return malformed(varint_error(r.status));
  }
}

Result<std::optional<FixedHeader>> read_fixed_header(std::string_view data,
                                                     std::uint32_t max_packet_size) {
  if (data.empty()) return std::optional<FixedHeader>();
  const VarintRead r =
      read_varint(reinterpret_cast<const unsigned char*>(data.data()) + 1, data.size() - 1);
  switch (r.status) {
    case VarintStatus::ok:
      break;
    case VarintStatus::truncated:
      return std::optional<FixedHeader>();
    default:
      return malformed(varint_error(r.status));
  }
  FixedHeader h;
  h.first_byte = static_cast<std::uint8_t>(data[0]);
  h.remaining_length = r.value;
  h.header_size = 1 + r.size;
  // §3.1.2.11.4 [MQTT-3.1.2-24]: the whole packet counts against our Maximum Packet Size.
  if (max_packet_size != 0 && h.packet_size() > max_packet_size) {
    return Error{reason::packet_too_large, "packet larger than our Maximum Packet Size"};
  }
  return std::optional<FixedHeader>(h);
}

Result<Inbound> decode_inbound(std::uint8_t first_byte, std::string_view body) {
  const auto type = static_cast<PacketType>(first_byte >> 4);
  const unsigned flags = first_byte & 0x0F;
  if (first_byte >> 4 == 0) return malformed("reserved packet type 0");  // §2.1.2
  switch (type) {
    case PacketType::publish:
      return decode_publish(static_cast<std::uint8_t>(flags), body);
    case PacketType::connect:
    case PacketType::subscribe:
    case PacketType::unsubscribe:
    case PacketType::pingreq:
      return protocol("packet type a server never sends");
    default:
      break;
  }
  // §2.1.3 Table 2-2: PUBREL has 0b0010, every other type a server sends 0.
  if (flags != (type == PacketType::pubrel ? 2u : 0u)) return kBadFlags;
  switch (type) {
    case PacketType::connack:
      return decode_connack(body);
    case PacketType::puback:
    case PacketType::pubrec:
    case PacketType::pubrel:
    case PacketType::pubcomp:
      return decode_ack(type, body);
    case PacketType::suback:
    case PacketType::unsuback:
      return decode_suback(type, body);
    case PacketType::pingresp:
      // §3.13: no variable header, no payload.
      if (!body.empty()) {
        return malformed("PINGRESP with a Remaining Length other than 0");
      }
      return Inbound{PingResp{}};
    case PacketType::disconnect:
      return decode_disconnect(body);
    case PacketType::auth:
      return decode_auth(body);
    default:
      return protocol("packet type a server never sends");  // not reached
  }
}

namespace detail {

// The bytes were validated when the packet was decoded; the bounds are checked again anyway so
// that a hand-made Properties cannot make this read past `raw`.
void walk_repeated(std::string_view raw, void (*on_user)(void*, UserPropertyRef),
                   void (*on_subscription_id)(void*, std::uint32_t), void* context) {
  Reader r(raw);
  std::uint8_t b;
  std::uint16_t s;
  std::uint32_t w;
  std::string_view v;
  while (r.left() != 0) {
    std::uint8_t id = 0;
    r.u8(id, "");
    bool ok = true;
    switch (static_cast<Property>(id)) {
      case P::payload_format_indicator:
      case P::request_problem_information:
      case P::request_response_information:
      case P::maximum_qos:
      case P::retain_available:
      case P::wildcard_subscription_available:
      case P::subscription_identifier_available:
      case P::shared_subscription_available:
        ok = r.u8(b, "");
        break;
      case P::server_keep_alive:
      case P::receive_maximum:
      case P::topic_alias_maximum:
      case P::topic_alias:
        ok = r.u16(s, "");
        break;
      case P::message_expiry_interval:
      case P::session_expiry_interval:
      case P::will_delay_interval:
      case P::maximum_packet_size:
        ok = r.u32(w, "");
        break;
      case P::content_type:
      case P::response_topic:
      case P::correlation_data:
      case P::assigned_client_identifier:
      case P::authentication_method:
      case P::authentication_data:
      case P::response_information:
      case P::server_reference:
      case P::reason_string:
        ok = r.binary(v, "");
        break;
      case P::subscription_identifier:
        ok = r.varint(w, "");
        if (ok && on_subscription_id != nullptr) on_subscription_id(context, w);
        break;
      case P::user_property: {
        UserPropertyRef u;
        ok = r.binary(u.key, "") && r.binary(u.value, "");
        if (ok && on_user != nullptr) on_user(context, u);
        break;
      }
      default:
        ok = false;
    }
    if (!ok) return;
  }
}

}  // namespace detail

}  // namespace mcpmqtt::mqtt::codec

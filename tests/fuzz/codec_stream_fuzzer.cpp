// Arbitrary bytes as what a broker sends on one connection: fixed headers are read, whole packets
// decoded one after another, PUBLISH topics resolved through the connection's topic aliases, and
// everything a decoded packet hands out is read (user properties, subscription identifiers,
// views). The first byte sets what the client would have announced in CONNECT: its Maximum
// Packet Size (high nibble n: 2^n bytes, 0: none) and Topic Alias Maximum (low nibble, 15: 300).
// (A larger maximum finds nothing more: aliases are stored by index, and growing that storage to
// tens of thousands of entries would only slow every run down; the unit tests use 65535.)
#include <cstdint>
#include <string_view>
#include <variant>

#include "mqtt/codec/codec.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace codec = mcpmqtt::mqtt::codec;
using mcpmqtt::fuzz::check;
using mcpmqtt::fuzz::within;

namespace {

bool utf8_or_absent(const std::optional<std::string_view>& s, std::string_view body) {
  return !s || (within(*s, body) && codec::valid_utf8(*s));
}

void check_properties(const codec::Properties& p, std::string_view body) {
  check(within(p.raw, body), "properties' raw bytes outside the packet");
  for (const auto& s :
       {p.content_type, p.response_topic, p.assigned_client_identifier, p.authentication_method,
        p.response_information, p.server_reference, p.reason_string}) {
    check(utf8_or_absent(s, body), "a UTF-8 property is not valid UTF-8 or outside the packet");
  }
  check(!p.correlation_data || within(*p.correlation_data, body), "correlation data outside");
  check(!p.authentication_data || within(*p.authentication_data, body), "auth data outside");
  check(!p.response_topic || codec::valid_topic_name(*p.response_topic), "wildcard response");
  check(!p.payload_format_indicator || *p.payload_format_indicator <= 1, "PFI above 1");
  check(!p.receive_maximum || *p.receive_maximum != 0, "Receive Maximum 0");
  check(!p.maximum_packet_size || *p.maximum_packet_size != 0, "Maximum Packet Size 0");
  check(!p.maximum_qos || *p.maximum_qos <= 1, "Maximum QoS above 1");
  for (const auto& b : {p.retain_available, p.wildcard_subscription_available,
                        p.subscription_identifier_available, p.shared_subscription_available}) {
    check(!b || *b <= 1, "a boolean property above 1");
  }

  std::size_t users = 0;
  p.for_each_user_property([&](codec::UserPropertyRef u) {
    ++users;
    check(within(u.key, p.raw) && within(u.value, p.raw), "user property outside the properties");
    check(codec::valid_utf8(u.key) && codec::valid_utf8(u.value), "user property not UTF-8");
  });
  check(users == p.user_property_count, "user properties iterated != counted");

  std::size_t ids = 0;
  p.for_each_subscription_identifier([&](std::uint32_t id) {
    ++ids;
    check(id >= 1 && id <= codec::kMaxVarint, "subscription identifier out of range");
  });
  check(ids == p.subscription_identifier_count, "subscription identifiers iterated != counted");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned shift = data[0] >> 4;
  const std::uint32_t max_packet_size = shift == 0 ? 0 : std::uint32_t{1} << shift;
  const unsigned alias_nibble = data[0] & 0x0F;
  codec::TopicAliases aliases(alias_nibble == 15 ? 300 : static_cast<std::uint16_t>(alias_nibble));

  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  while (true) {
    auto header = codec::read_fixed_header(rest, max_packet_size);
    if (!header) {
      const auto reason = header.error().reason;
      check(reason == codec::reason::malformed_packet || reason == codec::reason::packet_too_large,
            "read_fixed_header: unexpected reason code");
      check(*header.error().what != '\0', "an error without a text");
      return 0;  // the connection would be closed
    }
    if (!header->has_value()) return 0;  // waiting for more bytes
    const codec::FixedHeader h = **header;
    check(h.header_size >= 2 && h.header_size <= 5, "fixed header size");
    check(max_packet_size == 0 || h.packet_size() <= max_packet_size, "too large yet accepted");
    if (h.packet_size() > rest.size()) return 0;  // waiting for the rest of the packet
    const std::string_view body = rest.substr(h.header_size, h.remaining_length);

    auto packet = codec::decode_inbound(h.first_byte, body);
    if (!packet) {
      const auto reason = packet.error().reason;
      check(reason == codec::reason::malformed_packet || reason == codec::reason::protocol_error,
            "decode_inbound: unexpected reason code");
      check(*packet.error().what != '\0', "an error without a text");
      return 0;
    }
    bool stop = false;
    std::visit(
        [&](const auto& p) {
          using T = std::decay_t<decltype(p)>;
          if constexpr (std::is_same_v<T, codec::PingResp>) {
            check(body.empty(), "PINGRESP with a body");
          } else {
            check_properties(p.properties, body);
          }
          if constexpr (std::is_same_v<T, codec::Publish>) {
            check(h.type() == codec::PacketType::publish, "PUBLISH of another type");
            check(p.qos >= 0 && p.qos <= 2, "QoS out of range");
            check((p.packet_id != 0) == (p.qos > 0), "packet id and QoS disagree");
            check(!p.dup || p.qos > 0, "DUP at QoS 0");
            check(within(p.topic, body) && codec::valid_topic_name(p.topic), "bad topic");
            check(within(p.payload, body), "payload outside the packet");
            check(p.payload.data() + p.payload.size() == body.data() + body.size() ||
                      p.payload.empty(),
                  "payload does not end the packet");
            auto topic = aliases.resolve(p.topic, p.properties.topic_alias);
            if (!topic) {
              const auto reason = topic.error().reason;
              check(reason == codec::reason::topic_alias_invalid ||
                        reason == codec::reason::protocol_error,
                    "resolve: unexpected reason code");
              stop = true;
            } else {
              check(!topic->empty() && codec::valid_topic_name(*topic), "resolved a bad topic");
              check(p.topic.empty() || *topic == p.topic, "resolve changed a given topic");
            }
          } else if constexpr (std::is_same_v<T, codec::SubAck>) {
            check(!p.reason_codes.empty() && within(p.reason_codes, body), "reason codes");
            check(p.packet_id != 0, "packet id 0");
          } else if constexpr (std::is_same_v<T, codec::PubAck>) {
            check(p.packet_id != 0, "packet id 0");
            check(p.type == h.type(), "acknowledgement of another type");
          } else if constexpr (std::is_same_v<T, codec::Disconnect>) {
            check(!p.properties.session_expiry_interval, "Session Expiry in DISCONNECT");
          } else if constexpr (std::is_same_v<T, codec::Auth>) {
            check(body.empty() || p.properties.authentication_method, "AUTH without a method");
          }
          if constexpr (requires { p.reason_code; }) {
            check(!codec::reason_text(p.reason_code).empty(), "a reason code without a text");
          }
        },
        *packet);
    if (stop) return 0;
    rest.remove_prefix(h.packet_size());
  }
}

// Encoder against decoder: packets built from fuzzed fields are encoded, then decoded as a broker
// would send them. Whether the decoder must accept them is worked out here from the standard's
// rules (with an independent UTF-8 validator); accepted packets must give back every field.
// Packets only a client sends (CONNECT, SUBSCRIBE, UNSUBSCRIBE) are encoded too: their Remaining
// Length must match their size, and the decoder must refuse them as a client would.
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#include "mqtt/codec/codec.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace codec = mcpmqtt::mqtt::codec;
using mcpmqtt::fuzz::check;
using mcpmqtt::fuzz::reference_topic_name;
using mcpmqtt::fuzz::reference_utf8;

namespace {

class Fields {
 public:
  explicit Fields(FuzzedDataProvider& fdp) : fdp_(fdp) {}

  std::string_view text(std::size_t max = 24) {
    strings_.push_back(fdp_.ConsumeRandomLengthString(max));
    return strings_.back();
  }
  template <typename T>
  std::optional<T> maybe() {
    if (!fdp_.ConsumeBool()) return std::nullopt;
    return fdp_.ConsumeIntegral<T>();
  }
  std::optional<std::string_view> maybe_text() {
    if (!fdp_.ConsumeBool()) return std::nullopt;
    return text();
  }
  std::span<const codec::UserPropertyRef> users() {
    auto& list = user_lists_.emplace_back();
    const int n = fdp_.ConsumeIntegralInRange(0, 4);
    for (int i = 0; i < n; ++i)
      list.push_back({text(8), text(8)});
    return list;
  }
  FuzzedDataProvider& fdp() { return fdp_; }

 private:
  FuzzedDataProvider& fdp_;
  std::deque<std::string> strings_;  // stable addresses for the views
  std::deque<std::vector<codec::UserPropertyRef>> user_lists_;
};

bool utf8_or_absent(const std::optional<std::string_view>& s) {
  return !s || reference_utf8(*s);
}

bool users_utf8(std::span<const codec::UserPropertyRef> users) {
  for (const auto& u : users) {
    if (!reference_utf8(u.key) || !reference_utf8(u.value)) return false;
  }
  return true;
}

void check_users(const codec::Properties& p, std::span<const codec::UserPropertyRef> sent) {
  std::size_t i = 0;
  p.for_each_user_property([&](codec::UserPropertyRef u) {
    check(i < sent.size() && u.key == sent[i].key && u.value == sent[i].value, "user property");
    ++i;
  });
  check(i == sent.size() && p.user_property_count == sent.size(), "user property count");
}

// Decodes one whole packet; nullopt when refused (with a reason a client would use).
std::optional<codec::Inbound> decode(const std::string& packet) {
  auto h = codec::read_fixed_header(packet);
  check(h && h->has_value(), "the encoder's fixed header does not read back");
  check((*h)->packet_size() == packet.size(), "Remaining Length does not match the size");
  auto p =
      codec::decode_inbound((*h)->first_byte, std::string_view(packet).substr((*h)->header_size));
  if (p) return std::move(*p);
  const auto reason = p.error().reason;
  check(reason == codec::reason::malformed_packet || reason == codec::reason::protocol_error,
        "refused with an unexpected reason code");
  return std::nullopt;
}

bool one_of(std::uint8_t code, std::initializer_list<unsigned> codes) {
  for (unsigned c : codes) {
    if (c == code) return true;
  }
  return false;
}

void publish(Fields& f) {
  codec::PublishOut p;
  p.topic = f.text();
  p.qos = f.fdp().ConsumeIntegralInRange(0, 2);
  p.retain = f.fdp().ConsumeBool();
  p.dup = f.fdp().ConsumeBool();
  p.packet_id = f.fdp().ConsumeIntegral<std::uint16_t>();
  codec::OutProperties props;
  props.payload_format_indicator = f.maybe<std::uint8_t>();
  props.message_expiry_interval = f.maybe<std::uint32_t>();
  props.content_type = f.maybe_text();
  props.response_topic = f.maybe_text();
  props.correlation_data = f.maybe_text();
  props.subscription_identifier = f.maybe<std::uint32_t>();
  if (props.subscription_identifier && f.fdp().ConsumeBool())
    *props.subscription_identifier &= 0xFFFF;
  props.topic_alias = f.maybe<std::uint16_t>();
  props.user_properties = f.users();
  std::string block;
  const bool encodable =
      !props.subscription_identifier || *props.subscription_identifier <= codec::kMaxVarint;
  check(codec::put_properties(block, props) == encodable, "put_properties");
  if (!encodable) {
    check(block.empty(), "refused properties were written");
    return;
  }
  if (f.fdp().ConsumeBool()) p.encoded_properties = block;  // else: none
  const bool with_properties = !p.encoded_properties.empty();
  const std::string_view payload = f.text(64);
  p.payload_size = payload.size();

  std::string packet;
  check(codec::encode_publish_header(packet, p), "encode_publish_header refused");
  packet += payload;

  bool valid = reference_topic_name(p.topic) && (p.qos == 0 || p.packet_id != 0);
  if (with_properties) {
    valid = valid && (!props.payload_format_indicator || *props.payload_format_indicator <= 1) &&
            utf8_or_absent(props.content_type) && users_utf8(props.user_properties) &&
            (!props.response_topic || reference_topic_name(*props.response_topic)) &&
            (!props.subscription_identifier || *props.subscription_identifier != 0);
  }
  auto in = decode(packet);
  check(in.has_value() == valid, "PUBLISH accepted or refused against the rules");
  if (!in) return;
  const auto& d = std::get<codec::Publish>(*in);
  check(d.topic == p.topic && d.qos == p.qos && d.retain == p.retain &&
            d.dup == (p.dup && p.qos > 0) && d.packet_id == (p.qos > 0 ? p.packet_id : 0) &&
            d.payload == payload,
        "PUBLISH fields");
  if (!with_properties) {
    check(d.properties.raw.empty(), "properties from nowhere");
    return;
  }
  const auto& q = d.properties;
  check(q.payload_format_indicator == props.payload_format_indicator &&
            q.message_expiry_interval == props.message_expiry_interval &&
            q.content_type == props.content_type && q.response_topic == props.response_topic &&
            q.correlation_data == props.correlation_data && q.topic_alias == props.topic_alias,
        "PUBLISH properties");
  check_users(q, props.user_properties);
  std::vector<std::uint32_t> ids;
  q.for_each_subscription_identifier([&](std::uint32_t id) { ids.push_back(id); });
  check(ids.size() == (props.subscription_identifier ? 1u : 0u) &&
            (ids.empty() || ids[0] == *props.subscription_identifier),
        "subscription identifiers");
}

void ack(Fields& f) {
  constexpr codec::PacketType kTypes[] = {codec::PacketType::puback, codec::PacketType::pubrec,
                                          codec::PacketType::pubrel, codec::PacketType::pubcomp};
  const codec::PacketType type = kTypes[f.fdp().ConsumeIntegralInRange(0, 3)];
  const auto id = f.fdp().ConsumeIntegral<std::uint16_t>();
  const auto code = f.fdp().ConsumeIntegral<std::uint8_t>();
  codec::OutProperties props;
  props.reason_string = f.maybe_text();
  props.user_properties = f.users();
  std::string packet;
  check(codec::encode_ack(packet, type, id, code, props), "encode_ack refused");

  const bool rel = type == codec::PacketType::pubrel || type == codec::PacketType::pubcomp;
  // Tables 3-4 to 3-7.
  const bool code_ok = rel ? one_of(code, {0x00, 0x92})
                           : one_of(code, {0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99});
  const bool valid = id != 0 && code_ok && utf8_or_absent(props.reason_string) &&
                     users_utf8(props.user_properties);
  auto in = decode(packet);
  check(in.has_value() == valid, "acknowledgement accepted or refused against the rules");
  if (!in) return;
  const auto& d = std::get<codec::PubAck>(*in);
  check(d.type == type && d.packet_id == id && d.reason_code == code, "acknowledgement fields");
  check(d.properties.reason_string == props.reason_string, "reason string");
  check_users(d.properties, props.user_properties);
}

void disconnect(Fields& f) {
  const auto code = f.fdp().ConsumeIntegral<std::uint8_t>();
  codec::OutProperties props;
  props.reason_string = f.maybe_text();
  props.session_expiry_interval = f.maybe<std::uint32_t>();
  props.user_properties = f.users();
  std::string packet;
  check(codec::encode_disconnect(packet, code, props), "encode_disconnect refused");
  // Table 3-10 without the client's 0x04; §3.14.2.2.2: no Session Expiry Interval.
  const bool code_ok =
      code == 0x00 || (code >= 0x80 && code <= 0xA2 &&
                       !one_of(code, {0x84, 0x85, 0x86, 0x88, 0x8A, 0x8C, 0x91, 0x92}));
  const bool valid = code_ok && !props.session_expiry_interval &&
                     utf8_or_absent(props.reason_string) && users_utf8(props.user_properties);
  auto in = decode(packet);
  check(in.has_value() == valid, "DISCONNECT accepted or refused against the rules");
  if (!in) return;
  const auto& d = std::get<codec::Disconnect>(*in);
  check(d.reason_code == code && d.properties.reason_string == props.reason_string,
        "DISCONNECT fields");
  check_users(d.properties, props.user_properties);
}

void auth(Fields& f) {
  const auto code =
      f.fdp().ConsumeBool() ? f.fdp().ConsumeIntegral<std::uint8_t>() : std::uint8_t{0x18};
  codec::OutProperties props;
  props.authentication_method = f.maybe_text();
  props.authentication_data = f.maybe_text();
  props.reason_string = f.maybe_text();
  props.user_properties = f.users();
  std::string packet;
  check(codec::encode_auth(packet, code, props), "encode_auth refused");
  const bool short_form = packet.size() == 2;
  // Table 3-13 without the client's 0x19; §3.15.2.2.2: the method is required.
  const bool valid =
      short_form || (one_of(code, {0x00, 0x18}) && props.authentication_method &&
                     utf8_or_absent(props.authentication_method) &&
                     utf8_or_absent(props.reason_string) && users_utf8(props.user_properties));
  auto in = decode(packet);
  check(in.has_value() == valid, "AUTH accepted or refused against the rules");
  if (!in) return;
  const auto& d = std::get<codec::Auth>(*in);
  check(d.reason_code == code &&
            d.properties.authentication_method == props.authentication_method &&
            d.properties.authentication_data == props.authentication_data &&
            d.properties.reason_string == props.reason_string,
        "AUTH fields");
  check_users(d.properties, props.user_properties);
}

// What only a client sends: encoded with a consistent Remaining Length, refused by the decoder.
void client_only(Fields& f) {
  std::string packet;
  switch (f.fdp().ConsumeIntegralInRange(0, 2)) {
    case 0: {
      codec::ConnectOut c;
      c.client_id = f.text();
      c.clean_start = f.fdp().ConsumeBool();
      c.keep_alive_s = f.fdp().ConsumeIntegral<std::uint16_t>();
      c.properties.session_expiry_interval = f.maybe<std::uint32_t>();
      c.properties.receive_maximum = f.maybe<std::uint16_t>();
      c.properties.authentication_method = f.maybe_text();
      c.properties.user_properties = f.users();
      if (f.fdp().ConsumeBool()) {
        codec::ConnectOut::Will w;
        w.topic = f.text();
        w.payload = f.text();
        w.qos = f.fdp().ConsumeIntegralInRange(-1, 3);
        w.retain = f.fdp().ConsumeBool();
        w.properties.will_delay_interval = f.maybe<std::uint32_t>();
        w.properties.user_properties = f.users();
        c.will = w;
      }
      c.username = f.maybe_text();
      c.password = f.maybe_text();
      const bool ok = codec::encode_connect(packet, c);
      check(ok == (!c.will || (c.will->qos >= 0 && c.will->qos <= 2)), "encode_connect");
      if (!ok) {
        check(packet.empty(), "a refused CONNECT was written");
        return;
      }
      break;
    }
    case 1: {
      std::vector<codec::SubscriptionOut> filters(f.fdp().ConsumeIntegralInRange(0, 3));
      bool encodable = !filters.empty();
      for (auto& s : filters) {
        s.filter = f.text();
        s.qos = f.fdp().ConsumeIntegralInRange(0, 3);
        s.no_local = f.fdp().ConsumeBool();
        s.retain_as_published = f.fdp().ConsumeBool();
        s.retain_handling = f.fdp().ConsumeIntegralInRange(0, 3);
        encodable = encodable && s.qos <= 2 && s.retain_handling <= 2;
      }
      codec::OutProperties props;
      props.subscription_identifier = f.maybe<std::uint32_t>();
      if (props.subscription_identifier) *props.subscription_identifier &= 0x0FFF'FFFF;
      const auto id = f.fdp().ConsumeIntegral<std::uint16_t>();
      check(codec::encode_subscribe(packet, id, filters, props) == encodable, "encode_subscribe");
      if (!encodable) {
        check(packet.empty(), "a refused SUBSCRIBE was written");
        return;
      }
      break;
    }
    default: {
      std::vector<std::string_view> filters(f.fdp().ConsumeIntegralInRange(0, 3));
      for (auto& s : filters)
        s = f.text();
      const auto id = f.fdp().ConsumeIntegral<std::uint16_t>();
      check(codec::encode_unsubscribe(packet, id, filters) == !filters.empty(),
            "encode_unsubscribe");
      if (filters.empty()) return;
      break;
    }
  }
  auto in = decode(packet);
  check(!in.has_value(), "a packet only a client sends was accepted");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider fdp(data, size);
  Fields fields(fdp);
  while (fdp.remaining_bytes() > 0) {
    switch (fdp.ConsumeIntegralInRange(0, 4)) {
      case 0:
        publish(fields);
        break;
      case 1:
        ack(fields);
        break;
      case 2:
        disconnect(fields);
        break;
      case 3:
        auth(fields);
        break;
      default:
        client_only(fields);
        break;
    }
  }
  return 0;
}

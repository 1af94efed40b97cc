// The MQTT 5.0 codec against the byte layouts of the OASIS standard. Expected bytes are written by
// hand from the standard, never produced by the encoder under test; decoder inputs are built with
// the small helpers below, which know nothing of the codec.
#include "mqtt/codec/codec.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/support/fake_broker.hpp"

using namespace mcpmqtt::mqtt::codec;

namespace {

// "10 0F 00 04" -> those bytes.
std::string bin(std::string_view hex_text) {
  std::string out;
  int nibbles = 0;
  unsigned byte = 0;
  for (char c : hex_text) {
    unsigned v;
    if (c >= '0' && c <= '9') {
      v = static_cast<unsigned>(c - '0');
    } else if (c >= 'A' && c <= 'F') {
      v = static_cast<unsigned>(c - 'A' + 10);
    } else if (c >= 'a' && c <= 'f') {
      v = static_cast<unsigned>(c - 'a' + 10);
    } else {
      continue;
    }
    byte = (byte << 4) | v;
    if (++nibbles == 2) {
      out += static_cast<char>(byte);
      nibbles = 0;
      byte = 0;
    }
  }
  return out;
}

// Bytes -> "10 0F 00 04", so that a failed comparison shows where the bytes differ.
std::string hex(std::string_view bytes) {
  constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    if (!out.empty()) out += ' ';
    out += kDigits[b >> 4];
    out += kDigits[b & 0x0F];
  }
  return out;
}

// A two-byte length, then the text (§1.5.4, §1.5.6).
std::string s16(std::string_view text) {
  std::string out;
  out += static_cast<char>(text.size() >> 8);
  out += static_cast<char>(text.size() & 0xFF);
  out += text;
  return out;
}

// A Variable Byte Integer, written out the way §1.5.5 describes it.
std::string vbi(std::uint32_t v) {
  std::string out;
  do {
    unsigned digit = v % 128;
    v /= 128;
    if (v > 0) digit |= 0x80;
    out += static_cast<char>(digit);
  } while (v > 0);
  return out;
}

// A property block: Property Length, then the properties.
std::string props(const std::string& content) {
  return vbi(static_cast<std::uint32_t>(content.size())) + content;
}

// A whole packet: first byte, Remaining Length, body.
using mcpmqtt::test::wire::packet;

std::string user_property(std::string_view key, std::string_view value) {
  return bin("26") + s16(key) + s16(value);
}

Result<Inbound> decode(const std::string& whole) {
  auto header = read_fixed_header(whole);
  REQUIRE(header.has_value());
  REQUIRE(header->has_value());
  const FixedHeader h = **header;
  REQUIRE(h.packet_size() == whole.size());
  return decode_inbound(h.first_byte, std::string_view(whole).substr(h.header_size));
}

template <typename T>
T decoded(const std::string& whole) {
  auto result = decode(whole);
  if (!result) FAIL_CHECK("refused: " << result.error().what << " in " << hex(whole));
  REQUIRE(result.has_value());
  REQUIRE(std::holds_alternative<T>(*result));
  return std::get<T>(*result);
}

// The reason code a packet is refused with (and that the refusal names its rule).
int refusal(const std::string& whole) {
  auto result = decode(whole);
  if (result) FAIL_CHECK("accepted: " << hex(whole));
  REQUIRE_FALSE(result.has_value());
  CHECK(std::string(result.error().what).size() > 5);
  return result.error().reason;
}

std::vector<std::pair<std::string, std::string>> user_properties(const Properties& p) {
  std::vector<std::pair<std::string, std::string>> all;
  p.for_each_user_property(
      [&](UserPropertyRef u) { all.emplace_back(std::string(u.key), std::string(u.value)); });
  return all;
}

std::vector<std::uint32_t> subscription_ids(const Properties& p) {
  std::vector<std::uint32_t> all;
  p.for_each_subscription_identifier([&](std::uint32_t id) { all.push_back(id); });
  return all;
}

using Pairs = std::vector<std::pair<std::string, std::string>>;

}  // namespace

// ---- primitives
// ----------------------------------------------------------------------------------

TEST_CASE("§1.5.5 Table 1-1: Variable Byte Integer boundaries encode to the standard's bytes",
          "[mqtt][codec]") {
  const std::vector<std::pair<std::uint32_t, std::string>> table = {
      {0, "00"},
      {127, "7F"},
      {128, "80 01"},
      {16'383, "FF 7F"},
      {16'384, "80 80 01"},
      {2'097'151, "FF FF 7F"},
      {2'097'152, "80 80 80 01"},
      {268'435'455, "FF FF FF 7F"},
  };
  for (const auto& [value, bytes] : table) {
    INFO(value);
    std::string out = "x";
    REQUIRE(put_varint(out, value));
    CHECK(hex(out) == hex("x" + bin(bytes)));

    auto read = get_varint(bin(bytes) + "rest");
    REQUIRE(read.has_value());
    REQUIRE(read->has_value());
    CHECK((*read)->value == value);
    CHECK((*read)->size == bin(bytes).size());
  }
  std::string out = "x";
  CHECK_FALSE(put_varint(out, 268'435'456));
  CHECK_FALSE(put_varint(out, 0xFFFF'FFFF));
  CHECK(out == "x");
}

TEST_CASE("§1.5.5: a Variable Byte Integer cut short needs more bytes", "[mqtt][codec]") {
  for (const char* cut : {"", "80", "FF FF", "80 80 80"}) {
    INFO(cut);
    auto read = get_varint(bin(cut));
    REQUIRE(read.has_value());
    CHECK_FALSE(read->has_value());
  }
}

TEST_CASE("§1.5.5: more than 4 bytes, or more bytes than needed, is malformed (0x81)",
          "[mqtt][codec]") {
  for (const char* bad : {"80 80 80 80 01", "FF FF FF FF 7F", "80 80 80 80",  // 5th byte needed
                          "80 00", "FF 00", "80 80 00", "FF FF 80 00", "80 80 80 00"}) {
    INFO(bad);
    auto read = get_varint(bin(bad));
    REQUIRE_FALSE(read.has_value());
    CHECK(read.error().reason == reason::malformed_packet);
  }
}

TEST_CASE("§2.1.1: read_fixed_header on every prefix of a packet", "[mqtt][codec]") {
  // PUBLISH QoS 0, Remaining Length 200: two bytes of Remaining Length (C8 01).
  const std::string whole = bin("30 C8 01") + s16("t") + bin("00") + std::string(196, 'p');
  REQUIRE(whole.size() == 203);
  for (std::size_t n = 0; n <= whole.size(); ++n) {
    INFO(n);
    auto h = read_fixed_header(std::string_view(whole).substr(0, n));
    REQUIRE(h.has_value());
    if (n < 3) {
      CHECK_FALSE(h->has_value());
      continue;
    }
    REQUIRE(h->has_value());
    CHECK((*h)->first_byte == 0x30);
    CHECK((*h)->type() == PacketType::publish);
    CHECK((*h)->remaining_length == 200);
    CHECK((*h)->header_size == 3);
    CHECK((*h)->packet_size() == 203);
  }
  // The smallest and the largest fixed header.
  auto h = read_fixed_header(bin("D0 00"));
  REQUIRE(h.has_value());
  REQUIRE(h->has_value());
  CHECK((*h)->header_size == 2);
  CHECK((*h)->packet_size() == 2);
  h = read_fixed_header(bin("30 FF FF FF 7F"));
  REQUIRE(h.has_value());
  REQUIRE(h->has_value());
  CHECK((*h)->header_size == 5);
  CHECK((*h)->packet_size() == 268'435'460);
}

TEST_CASE("§2.1.4: a Remaining Length of 5 bytes or in a longer form than needed is malformed",
          "[mqtt][codec]") {
  for (const char* bad : {"30 80 80 80 80 01", "30 FF FF FF FF", "30 80 00", "D0 80 80 00"}) {
    INFO(bad);
    auto h = read_fixed_header(bin(bad));
    REQUIRE_FALSE(h.has_value());
    CHECK(h.error().reason == reason::malformed_packet);
  }
}

TEST_CASE("§3.1.2.11.4: a packet larger than our Maximum Packet Size is refused (0x95)",
          "[mqtt][codec]") {
  // Told from the fixed header alone, before the body arrives.
  const std::string start = bin("30 C8 01");  // 203 bytes in all
  auto h = read_fixed_header(start, 203);
  REQUIRE(h.has_value());
  CHECK(h->has_value());
  h = read_fixed_header(start, 202);
  REQUIRE_FALSE(h.has_value());
  CHECK(h.error().reason == reason::packet_too_large);
  h = read_fixed_header(start, 0);  // no limit
  REQUIRE(h.has_value());
  CHECK(h->has_value());
  h = read_fixed_header(bin("30 FF FF FF 7F"), 0xFFFF'FFFF);
  REQUIRE(h.has_value());
  CHECK(h->has_value());
}

TEST_CASE("§1.5.4: valid_utf8 accepts every encoding length up to U+10FFFF", "[mqtt][codec]") {
  for (const char* ok : {
           "",
           "plain ascii text, longer than eight bytes",
           "\x01\x7F",  // controls other than U+0000 are allowed (SHOULD NOT)
           "\xC2\x80",
           "\xDF\xBF",  // U+0080, U+07FF
           "\xE0\xA0\x80",
           "\xED\x9F\xBF",  // U+0800, U+D7FF
           "\xEE\x80\x80",
           "\xEF\xBF\xBF",      // U+E000, U+FFFF
           "\xF0\x90\x80\x80",  // U+10000
           "\xF4\x8F\xBF\xBF",  // U+10FFFF
           "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80",
       }) {
    INFO(hex(ok));
    CHECK(valid_utf8(ok));
  }
}

TEST_CASE(
    "§1.5.4: valid_utf8 refuses overlong forms, surrogates, values above U+10FFFF, "
    "cut sequences and U+0000",
    "[mqtt][codec]") {
  const std::vector<std::string> bad = {
      std::string(1, '\0'),  // U+0000 [MQTT-1.5.4-2]
      "\xC0\x80",
      "\xC1\xBF",  // overlong 2-byte
      "\xE0\x80\x80",
      "\xE0\x9F\xBF",  // overlong 3-byte
      "\xF0\x80\x80\x80",
      "\xF0\x8F\xBF\xBF",  // overlong 4-byte
      "\xED\xA0\x80",
      "\xED\xBF\xBF",  // UTF-16 surrogates [MQTT-1.5.4-1]
      "\xF4\x90\x80\x80",
      "\xF5\x80\x80\x80",
      "\xF7\xBF\xBF\xBF",  // above U+10FFFF
      "\xF8\x88\x80\x80\x80",
      "\xFE",
      "\xFF",  // no such lead bytes
      "\x80",
      "\xBF",  // continuation without a lead
      "\xC2",
      "\xE0\xA0",
      "\xF0\x90\x80",  // cut short at the end
      "\xC2\x41",
      "\xE2\x82\x41",
      "\xF0\x9F\x98\x41",  // cut short by an ASCII byte
      "\xE2\x28\xA1",
  };
  for (const std::string& b : bad) {
    INFO(hex(b));
    CHECK_FALSE(valid_utf8(b));
    CHECK_FALSE(valid_utf8("ab" + b));
  }
}

TEST_CASE("§1.5.4: UTF-8 checks find every sequence at every offset of an 8-byte word",
          "[mqtt][codec]") {
  const std::vector<std::string> valid = {"\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
                                          "\xF4\x8F\xBF\xBF", "\x7F"};
  const std::vector<std::string> invalid = {std::string(1, '\0'), "\xC0\x80", "\xED\xA0\x80",
                                            "\xF4\x90\x80\x80",   "\x80",     "\xFF"};
  const std::vector<std::string> cut = {"\xC3", "\xE2\x82", "\xF0\x9F\x98"};
  for (std::size_t offset = 0; offset < 17; ++offset) {
    INFO(offset);
    const std::string before(offset, 'a');
    const std::string after(23 - offset, 'b');
    for (const std::string& v : valid) {
      CHECK(valid_utf8(before + v + after));
      CHECK(valid_utf8(before + v));
      CHECK(valid_topic_name(before + v + after));
    }
    for (const std::string& i : invalid) {
      CHECK_FALSE(valid_utf8(before + i + after));
      CHECK_FALSE(valid_utf8(before + i));
      CHECK_FALSE(valid_topic_name(before + i + after));
    }
    for (const std::string& c : cut) {
      CHECK_FALSE(valid_utf8(before + c));
      CHECK_FALSE(valid_utf8(before + c + after));
    }
    for (const char* wildcard : {"+", "#"}) {
      CHECK(valid_utf8(before + wildcard + after));
      CHECK_FALSE(valid_topic_name(before + wildcard + after));
      CHECK_FALSE(valid_topic_name(before + wildcard));
    }
  }
}

TEST_CASE("§4.7: valid_topic_name refuses wildcards and bad UTF-8, nothing else", "[mqtt][codec]") {
  for (const char* ok : {"a/b", "$SYS/broker", "/", "a//b", " ", "sport/tennis/player1/ranking",
                         "\xE2\x82\xAC/x", ""}) {
    INFO(ok);
    CHECK(valid_topic_name(ok));
  }
  for (const char* bad : {"+", "#", "sport/+/player", "sport/#", "a+b", "a#", "\xC0\x80"}) {
    INFO(bad);
    CHECK_FALSE(valid_topic_name(bad));
  }
}

// ---- encoding
// ------------------------------------------------------------------------------------

TEST_CASE("§3.1.2.12: CONNECT of the standard's variable header example", "[mqtt][codec]") {
  // Figure 3-6 shows the variable header: User Name, Password, Will QoS 1, Will Flag and Clean
  // Start set, Keep Alive 10, Session Expiry Interval 10.
  ConnectOut c;
  c.client_id = "";
  c.clean_start = true;
  c.keep_alive_s = 10;
  c.properties.session_expiry_interval = 10;
  c.will = ConnectOut::Will{"w", "p", 1, false, {}};
  c.username = "u";
  c.password = "pw";
  std::string out;
  REQUIRE(encode_connect(out, c));
  CHECK(hex(out) == hex(bin("10 20"
                            "00 04 4D 51 54 54 05 CE 00 0A 05 11 00 00 00 0A"  // variable header
                            "00 00"                                            // Client Identifier
                            "00 00 01 77 00 01 70"  // will properties, topic, payload
                            "00 01 75"              // User Name
                            "00 02 70 77")));       // Password
}

TEST_CASE("§3.1: CONNECT without will, user name or properties", "[mqtt][codec]") {
  ConnectOut c;
  c.client_id = "c1";
  c.clean_start = false;
  c.keep_alive_s = 60;
  std::string out = "before";
  REQUIRE(encode_connect(out, c));
  CHECK(hex(out) == hex("before" + bin("10 0F 00 04 4D 51 54 54 05 00 00 3C 00 00 02 63 31")));
}

TEST_CASE(
    "§3.1.2.5-§3.1.3.2: CONNECT with a retained QoS 2 will, will properties and a password "
    "alone",
    "[mqtt][codec]") {
  const std::array<UserPropertyRef, 1> will_user{{{"k", "v"}}};
  ConnectOut c;
  c.client_id = "id";
  c.keep_alive_s = 0;
  ConnectOut::Will w;
  w.topic = "t/w";
  w.payload = std::string_view("\x00\x01", 2);
  w.qos = 2;
  w.retain = true;
  w.properties.will_delay_interval = 5;
  w.properties.payload_format_indicator = 1;
  w.properties.message_expiry_interval = 60;
  w.properties.content_type = "text/plain";
  w.properties.response_topic = "r";
  w.properties.correlation_data = "c";
  w.properties.user_properties = will_user;
  c.will = w;
  c.password = "secret";
  std::string out;
  REQUIRE(encode_connect(out, c));
  // Flags 0x76: Password, Will Retain, Will QoS 2, Will Flag, Clean Start; no User Name.
  CHECK(hex(out) == hex(bin("10 49 00 04 4D 51 54 54 05 76 00 00 00"
                            "00 02 69 64"  // "id"
                            "28"           // will properties, Table 2-4 order
                            "01 01"
                            "02 00 00 00 3C"
                            "03 00 0A 74 65 78 74 2F 70 6C 61 69 6E"
                            "08 00 01 72"
                            "09 00 01 63"
                            "18 00 00 00 05"
                            "26 00 01 6B 00 01 76"
                            "00 03 74 2F 77"               // will topic
                            "00 02 00 01"                  // will payload
                            "00 06 73 65 63 72 65 74")));  // password
}

TEST_CASE(
    "§3.1.2.11: CONNECT carries every client property in Table 2-4 order, user properties "
    "last in the order given",
    "[mqtt][codec]") {
  const std::array<UserPropertyRef, 2> users{{{"region", "eu"}, {"app", "x"}}};
  ConnectOut c;
  c.client_id = "c";
  c.keep_alive_s = 30;
  c.properties.user_properties = users;
  c.properties.maximum_packet_size = 1'048'576;
  c.properties.topic_alias_maximum = 16;
  c.properties.receive_maximum = 100;
  c.properties.request_response_information = 1;
  c.properties.request_problem_information = 0;
  c.properties.authentication_data = std::string_view("\x01\x02\x03");
  c.properties.authentication_method = "SCRAM-SHA-1";
  c.properties.session_expiry_interval = 0xFFFF'FFFF;
  c.username = "user";
  std::string out;
  REQUIRE(encode_connect(out, c));
  CHECK(hex(out) == hex(bin("10 52 00 04 4D 51 54 54 05 82 00 1E"
                            "3E"
                            "11 FF FF FF FF"
                            "15 00 0B 53 43 52 41 4D 2D 53 48 41 2D 31"
                            "16 00 03 01 02 03"
                            "17 00"
                            "19 01"
                            "21 00 64"
                            "22 00 10"
                            "27 00 10 00 00"
                            "26 00 06 72 65 67 69 6F 6E 00 02 65 75"
                            "26 00 03 61 70 70 00 01 78"
                            "00 01 63"
                            "00 04 75 73 65 72")));
}

TEST_CASE("§3.1: CONNECT that cannot be encoded leaves the buffer as it was", "[mqtt][codec]") {
  const std::string long_text(65'536, 'x');
  const std::string max_text(65'535, 'x');
  auto refused = [](const ConnectOut& c) {
    std::string out = "kept";
    const bool ok = encode_connect(out, c);
    CHECK(out == "kept");
    return !ok;
  };
  ConnectOut c;
  c.client_id = long_text;
  CHECK(refused(c));
  c.client_id = "ok";
  c.username = long_text;
  CHECK(refused(c));
  c.username.reset();
  c.password = long_text;
  CHECK(refused(c));
  c.password = max_text;  // the longest Binary Data is fine
  std::string out;
  CHECK(encode_connect(out, c));
  c.password.reset();
  c.will = ConnectOut::Will{"t", "p", 3, false, {}};
  CHECK(refused(c));
  c.will->qos = -1;
  CHECK(refused(c));
  c.will->qos = 0;
  c.will->payload = long_text;
  CHECK(refused(c));
  c.will->payload = "p";
  c.will->properties.reason_string = long_text;
  CHECK(refused(c));
  c.will->properties.reason_string.reset();
  c.properties.content_type = long_text;
  CHECK(refused(c));
}

TEST_CASE("§2.2.2: put_properties writes every property in Table 2-4 order", "[mqtt][codec]") {
  const std::array<UserPropertyRef, 2> users{{{"a", "b"}, {"a", "c"}}};
  OutProperties p;
  p.user_properties = users;
  p.maximum_packet_size = 65'536;
  p.topic_alias = 3;
  p.topic_alias_maximum = 2;
  p.receive_maximum = 1;
  p.reason_string = "why";
  p.request_response_information = 0;
  p.will_delay_interval = 7;
  p.request_problem_information = 1;
  p.authentication_data = "d";
  p.authentication_method = "m";
  p.session_expiry_interval = 0;
  p.subscription_identifier = 268'435'455;
  p.correlation_data = std::string_view("\x00\xFF", 2);
  p.response_topic = "r/t";
  p.content_type = "ct";
  p.message_expiry_interval = 3600;
  p.payload_format_indicator = 1;
  std::string out;
  REQUIRE(put_properties(out, p));
  CHECK(hex(out) == hex(bin("54"
                            "01 01"
                            "02 00 00 0E 10"
                            "03 00 02 63 74"
                            "08 00 03 72 2F 74"
                            "09 00 02 00 FF"
                            "0B FF FF FF 7F"
                            "11 00 00 00 00"
                            "15 00 01 6D"
                            "16 00 01 64"
                            "17 01"
                            "18 00 00 00 07"
                            "19 00"
                            "1F 00 03 77 68 79"
                            "21 00 01"
                            "22 00 02"
                            "23 00 03"
                            "27 00 01 00 00"
                            "26 00 01 61 00 01 62"
                            "26 00 01 61 00 01 63")));
}

TEST_CASE(
    "§2.2.2.1: put_properties with none is a Property Length of 0, a long block has a "
    "longer length, and what cannot be encoded leaves the buffer as it was",
    "[mqtt][codec]") {
  std::string out = "x";
  REQUIRE(put_properties(out, {}));
  CHECK(hex(out) == hex("x" + bin("00")));

  const std::string value(200, 'v');
  const std::array<UserPropertyRef, 1> users{{{"k", value}}};
  OutProperties p;
  p.user_properties = users;
  out.clear();
  REQUIRE(put_properties(out, p));
  CHECK(hex(out.substr(0, 7)) == hex(bin("CE 01 26 00 01 6B 00")));  // 206 bytes follow
  CHECK(out.size() == 208);

  const std::string long_text(65'536, 'x');
  const std::array<UserPropertyRef, 1> long_key{{{long_text, "v"}}};
  OutProperties bad;
  bad.user_properties = long_key;
  out = "kept";
  CHECK_FALSE(put_properties(out, bad));
  bad = {};
  bad.correlation_data = long_text;
  CHECK_FALSE(put_properties(out, bad));
  bad = {};
  bad.subscription_identifier = 268'435'456;
  CHECK_FALSE(put_properties(out, bad));
  CHECK(out == "kept");
}

TEST_CASE(
    "§3.3.1: PUBLISH header with each QoS, DUP and RETAIN, the payload counted but not "
    "copied",
    "[mqtt][codec]") {
  PublishOut p;
  p.topic = "a/b";
  p.payload_size = 5;
  std::string out;
  REQUIRE(encode_publish_header(out, p));
  CHECK(hex(out) == hex(bin("30 0B 00 03 61 2F 62 00")));

  p.qos = 1;
  p.dup = true;
  p.retain = true;
  p.packet_id = 0x1234;
  const std::string block = bin("05 01 01 23 00 07");  // Payload Format Indicator, Topic Alias 7
  p.encoded_properties = block;
  p.payload_size = 3;
  out.clear();
  REQUIRE(encode_publish_header(out, p));
  CHECK(hex(out) == hex(bin("3B 10 00 03 61 2F 62 12 34 05 01 01 23 00 07")));

  p.qos = 2;
  p.dup = false;
  p.retain = false;
  p.encoded_properties = {};
  p.payload_size = 0;
  out.clear();
  REQUIRE(encode_publish_header(out, p));
  CHECK(hex(out) == hex(bin("34 08 00 03 61 2F 62 12 34 00")));

  // No DUP at QoS 0 [MQTT-3.3.1-2], and no Packet Identifier [MQTT-2.2.1-2].
  p.qos = 0;
  p.dup = true;
  out.clear();
  REQUIRE(encode_publish_header(out, p));
  CHECK(hex(out) == hex(bin("30 06 00 03 61 2F 62 00")));

  // An empty Topic Name, standing for a Topic Alias (§3.3.2.3.4).
  const std::string alias_block = bin("03 23 00 01");
  PublishOut aliased;
  aliased.encoded_properties = alias_block;
  aliased.payload_size = 1;
  out.clear();
  REQUIRE(encode_publish_header(out, aliased));
  CHECK(hex(out) == hex(bin("30 07 00 00 03 23 00 01")));
}

TEST_CASE("§3.3: PUBLISH header at the largest Remaining Length, and what cannot be encoded",
          "[mqtt][codec]") {
  PublishOut p;
  p.topic = "t";
  p.payload_size = 268'435'455 - 4;
  std::string out;
  REQUIRE(encode_publish_header(out, p));
  CHECK(hex(out) == hex(bin("30 FF FF FF 7F 00 01 74 00")));

  out = "kept";
  p.payload_size += 1;
  CHECK_FALSE(encode_publish_header(out, p));
  p.payload_size = static_cast<std::size_t>(-1);
  CHECK_FALSE(encode_publish_header(out, p));
  p.payload_size = 0;
  p.qos = 3;
  CHECK_FALSE(encode_publish_header(out, p));
  p.qos = -1;
  CHECK_FALSE(encode_publish_header(out, p));
  p.qos = 0;
  const std::string long_topic(65'536, 't');
  p.topic = long_topic;
  CHECK_FALSE(encode_publish_header(out, p));
  CHECK(out == "kept");
}

TEST_CASE("§3.4-§3.7: acknowledgements use the short forms of §3.4.2.1, PUBREL has flags 0010",
          "[mqtt][codec]") {
  std::string out;
  REQUIRE(encode_ack(out, PacketType::puback, 0x1234));
  CHECK(hex(out) == hex(bin("40 02 12 34")));
  out.clear();
  REQUIRE(encode_ack(out, PacketType::pubrec, 0x1234, reason::no_matching_subscribers));
  CHECK(hex(out) == hex(bin("50 03 12 34 10")));
  out.clear();
  REQUIRE(encode_ack(out, PacketType::pubrel, 1));
  CHECK(hex(out) == hex(bin("62 02 00 01")));
  out.clear();
  REQUIRE(encode_ack(out, PacketType::pubrel, 1, reason::packet_identifier_not_found));
  CHECK(hex(out) == hex(bin("62 03 00 01 92")));

  OutProperties why;
  why.reason_string = "x";
  out.clear();
  REQUIRE(encode_ack(out, PacketType::pubcomp, 5, reason::success, why));
  CHECK(hex(out) == hex(bin("70 08 00 05 00 04 1F 00 01 78")));

  const std::array<UserPropertyRef, 1> users{{{"k", "v"}}};
  OutProperties user;
  user.user_properties = users;
  out.clear();
  REQUIRE(encode_ack(out, PacketType::puback, 1, reason::success, user));
  CHECK(hex(out) == hex(bin("40 0B 00 01 00 07 26 00 01 6B 00 01 76")));

  out = "kept";
  CHECK_FALSE(encode_ack(out, PacketType::publish, 1));
  CHECK_FALSE(encode_ack(out, PacketType::suback, 1));
  CHECK_FALSE(encode_ack(out, PacketType::connect, 1));
  const std::string long_text(65'536, 'x');
  why.reason_string = long_text;
  CHECK_FALSE(encode_ack(out, PacketType::puback, 1, reason::success, why));
  CHECK(out == "kept");
}

TEST_CASE("§3.8: SUBSCRIBE has flags 0010 and the options byte of §3.8.3.1", "[mqtt][codec]") {
  const std::array<SubscriptionOut, 2> filters{{
      {"a/+", 1, true, false, 0},  // QoS 1, No Local
      {"b", 2, false, true, 2},    // QoS 2, Retain As Published, Retain Handling 2
  }};
  OutProperties p;
  p.subscription_identifier = 1000;
  std::string out;
  REQUIRE(encode_subscribe(out, 10, filters, p));
  CHECK(hex(out) == hex(bin("82 10 00 0A 03 0B E8 07 00 03 61 2F 2B 05 00 01 62 2A")));

  const std::array<SubscriptionOut, 1> one{{{"x", 0, false, false, 1}}};
  out.clear();
  REQUIRE(encode_subscribe(out, 0xFFFF, one));
  CHECK(hex(out) == hex(bin("82 07 FF FF 00 00 01 78 10")));
}

TEST_CASE("§3.8.3: SUBSCRIBE that cannot be encoded leaves the buffer as it was", "[mqtt][codec]") {
  std::string out = "kept";
  CHECK_FALSE(encode_subscribe(out, 1, {}));
  std::array<SubscriptionOut, 2> filters{{{"a", 0, false, false, 0}, {"b", 3, false, false, 0}}};
  CHECK_FALSE(encode_subscribe(out, 1, filters));
  filters[1].qos = -1;
  CHECK_FALSE(encode_subscribe(out, 1, filters));
  filters[1].qos = 0;
  filters[1].retain_handling = 3;
  CHECK_FALSE(encode_subscribe(out, 1, filters));
  filters[1].retain_handling = -1;
  CHECK_FALSE(encode_subscribe(out, 1, filters));
  filters[1].retain_handling = 0;
  const std::string long_filter(65'536, 'f');
  filters[1].filter = long_filter;
  CHECK_FALSE(encode_subscribe(out, 1, filters));
  CHECK(out == "kept");
}

TEST_CASE("§3.10: UNSUBSCRIBE has flags 0010 and one string per filter", "[mqtt][codec]") {
  const std::array<std::string_view, 2> filters{"a/#", "b"};
  std::string out;
  REQUIRE(encode_unsubscribe(out, 2, filters));
  CHECK(hex(out) == hex(bin("A2 0B 00 02 00 00 03 61 2F 23 00 01 62")));

  const std::array<UserPropertyRef, 1> users{{{"k", "v"}}};
  OutProperties p;
  p.user_properties = users;
  const std::array<std::string_view, 1> one{"c"};
  out.clear();
  REQUIRE(encode_unsubscribe(out, 3, one, p));
  CHECK(hex(out) == hex(bin("A2 0D 00 03 07 26 00 01 6B 00 01 76 00 01 63")));

  out = "kept";
  CHECK_FALSE(encode_unsubscribe(out, 1, {}));
  const std::string long_filter(65'536, 'f');
  const std::array<std::string_view, 1> too_long{long_filter};
  CHECK_FALSE(encode_unsubscribe(out, 1, too_long));
  CHECK(out == "kept");
}

TEST_CASE("§3.12, §3.14, §3.15: PINGREQ, DISCONNECT and AUTH with their short forms",
          "[mqtt][codec]") {
  std::string out;
  encode_pingreq(out);
  CHECK(hex(out) == hex(bin("C0 00")));

  out.clear();
  REQUIRE(encode_disconnect(out));
  CHECK(hex(out) == hex(bin("E0 00")));
  out.clear();
  REQUIRE(encode_disconnect(out, reason::disconnect_with_will));
  CHECK(hex(out) == hex(bin("E0 01 04")));
  OutProperties expiry;
  expiry.session_expiry_interval = 0;
  out.clear();
  REQUIRE(encode_disconnect(out, reason::success, expiry));
  CHECK(hex(out) == hex(bin("E0 07 00 05 11 00 00 00 00")));
  OutProperties why;
  why.reason_string = "x";
  out.clear();
  REQUIRE(encode_disconnect(out, reason::unspecified_error, why));
  CHECK(hex(out) == hex(bin("E0 06 80 04 1F 00 01 78")));

  out.clear();
  REQUIRE(encode_auth(out, reason::success));
  CHECK(hex(out) == hex(bin("F0 00")));
  OutProperties method;
  method.authentication_method = "M";
  method.authentication_data = "d";
  out.clear();
  REQUIRE(encode_auth(out, reason::continue_authentication, method));
  CHECK(hex(out) == hex(bin("F0 0A 18 08 15 00 01 4D 16 00 01 64")));
  out.clear();
  REQUIRE(encode_auth(out, reason::re_authenticate));
  CHECK(hex(out) == hex(bin("F0 02 19 00")));

  const std::string long_text(65'536, 'x');
  why.reason_string = long_text;
  out = "kept";
  CHECK_FALSE(encode_disconnect(out, reason::success, why));
  CHECK_FALSE(encode_auth(out, reason::success, why));
  CHECK(out == "kept");
}

// ---- decoding
// --------------------------------------------------------------------------------------

TEST_CASE("§3.2: CONNACK with every property it may carry", "[mqtt][codec]") {
  const std::string whole =
      packet(0x20, bin("01 00") + props(bin("11 00 00 00 78")       // Session Expiry Interval
                                        + bin("21 00 14")           // Receive Maximum
                                        + bin("24 01")              // Maximum QoS
                                        + bin("25 00")              // Retain Available
                                        + bin("27 00 00 10 00")     // Maximum Packet Size
                                        + bin("12") + s16("cid")    // Assigned Client Identifier
                                        + bin("22 00 0A")           // Topic Alias Maximum
                                        + bin("1F") + s16("ok")     // Reason String
                                        + user_property("a", "1")   //
                                        + bin("28 00")              // Wildcard Subscription Av.
                                        + bin("29 01")              // Subscription Identifiers Av.
                                        + bin("2A 00")              // Shared Subscription Av.
                                        + bin("13 00 1E")           // Server Keep Alive
                                        + bin("1A") + s16("resp")   // Response Information
                                        + bin("1C") + s16("srv")    // Server Reference
                                        + bin("15") + s16("SCRAM")  // Authentication Method
                                        + bin("16 00 02 01 02")     // Authentication Data
                                        + user_property("b", "2")));
  const Connack c = decoded<Connack>(whole);
  CHECK(c.session_present);
  CHECK(c.reason_code == 0);
  const Properties& p = c.properties;
  CHECK(p.session_expiry_interval == 120u);
  CHECK(p.receive_maximum == 20);
  CHECK(p.maximum_qos == 1);
  CHECK(p.retain_available == 0);
  CHECK(p.maximum_packet_size == 4096u);
  CHECK(p.assigned_client_identifier == "cid");
  CHECK(p.topic_alias_maximum == 10);
  CHECK(p.reason_string == "ok");
  CHECK(p.wildcard_subscription_available == 0);
  CHECK(p.subscription_identifier_available == 1);
  CHECK(p.shared_subscription_available == 0);
  CHECK(p.server_keep_alive == 30);
  CHECK(p.response_information == "resp");
  CHECK(p.server_reference == "srv");
  CHECK(p.authentication_method == "SCRAM");
  CHECK(p.authentication_data == bin("01 02"));
  CHECK(p.user_property_count == 2);
  CHECK(user_properties(p) == Pairs{{"a", "1"}, {"b", "2"}});
  CHECK(p.subscription_identifier_count == 0);
  CHECK(subscription_ids(p).empty());
  CHECK_FALSE(p.topic_alias);
  CHECK_FALSE(p.payload_format_indicator);
}

TEST_CASE("§3.2: CONNACK refusing the connection, without properties", "[mqtt][codec]") {
  const std::string whole = bin("20 03 00 87 00");
  const Connack c = decoded<Connack>(whole);
  CHECK_FALSE(c.session_present);
  CHECK(c.reason_code == reason::not_authorized);
  CHECK(c.properties.raw.empty());
  CHECK(c.properties.user_property_count == 0);
  CHECK(user_properties(c.properties).empty());
}

TEST_CASE("§3.2: CONNACK against the rules is refused with the right reason code",
          "[mqtt][codec]") {
  const std::string none = bin("00");
  // §2.1.3: reserved flags
  CHECK(refusal(packet(0x21, bin("00 00") + none)) == 0x81);
  // §3.2.2.1 [MQTT-3.2.2-1]: acknowledge flags bits 7-1
  CHECK(refusal(packet(0x20, bin("02 00") + none)) == 0x81);
  CHECK(refusal(packet(0x20, bin("80 00") + none)) == 0x81);
  // Remaining Length shorter than the fixed fields; no Property Length (MQTT 3.1.1's form)
  CHECK(refusal(bin("20 00")) == 0x81);
  CHECK(refusal(bin("20 01 00")) == 0x81);
  CHECK(refusal(bin("20 02 00 00")) == 0x81);
  CHECK(refusal(bin("20 02 00 05")) == 0x81);
  // Table 3-1: reason codes not in it
  for (unsigned code : {0x01u, 0x04u, 0x10u, 0x18u, 0x8Bu, 0x8Du, 0x8Eu, 0x93u, 0xA2u, 0xFFu}) {
    INFO(code);
    CHECK(refusal(packet(0x20, bin("00") + std::string(1, static_cast<char>(code)) + none)) ==
          0x82);
  }
  // trailing bytes after the properties
  CHECK(refusal(packet(0x20, bin("00 00 00 00"))) == 0x81);
  // Property Length past the end of the packet, or cut short
  CHECK(refusal(packet(0x20, bin("00 00 05 21 00 01"))) == 0x81);
  CHECK(refusal(packet(0x20, bin("00 00 80"))) == 0x81);
  CHECK(refusal(packet(0x20, bin("00 00 80 00"))) == 0x81);  // not in its shortest form
  // a property value running past the end of the properties
  CHECK(refusal(packet(0x20, bin("00 00 02 21 00 01"))) == 0x81);
  CHECK(refusal(packet(0x20, bin("00 00") + props(bin("12 00 05 61")))) == 0x81);
}

TEST_CASE(
    "§2.2.2.2: properties a packet may not carry are malformed (0x81), twice what may "
    "appear once is a protocol error (0x82)",
    "[mqtt][codec]") {
  auto connack = [](const std::string& content) {
    return packet(0x20, bin("00 00") + props(content));
  };
  for (const char* other :
       {"01 00", "02 00 00 00 01", "03 00 00", "08 00 00", "09 00 00", "0B 01", "17 00",
        "18 00 00 00 00", "19 00", "23 00 01", "00", "04 00", "2B 00", "7F 00", "80 01", "FF"}) {
    INFO(other);
    CHECK(refusal(connack(bin(other))) == 0x81);
  }
  for (const char* once : {"11 00 00 00 01", "21 00 01", "24 00", "25 01", "27 00 00 00 01",
                           "12 00 00", "22 00 01", "1F 00 00", "28 01", "29 01", "2A 01",
                           "13 00 01", "1A 00 00", "1C 00 00", "15 00 00", "16 00 00"}) {
    INFO(once);
    CHECK(refusal(connack(bin(once) + bin(once))) == 0x82);
    CHECK(refusal(connack(bin(once) + user_property("k", "v") + bin(once))) == 0x82);
  }
  // User Property may repeat anywhere.
  const std::string twice = connack(user_property("k", "v") + user_property("k", "v"));
  CHECK(user_properties(decoded<Connack>(twice).properties) == Pairs{{"k", "v"}, {"k", "v"}});
}

TEST_CASE("§3.2.2.3: property values out of range are protocol errors (0x82)", "[mqtt][codec]") {
  auto connack = [](const char* content) {
    return packet(0x20, bin("00 00") + props(bin(content)));
  };
  CHECK(refusal(connack("21 00 00")) == 0x82);        // Receive Maximum 0, §3.2.2.3.3
  CHECK(refusal(connack("27 00 00 00 00")) == 0x82);  // Maximum Packet Size 0, §3.2.2.3.6
  CHECK(refusal(connack("24 02")) == 0x82);           // Maximum QoS 2, §3.2.2.3.4
  CHECK(refusal(connack("25 02")) == 0x82);           // Retain Available, §3.2.2.3.5
  CHECK(refusal(connack("28 02")) == 0x82);           // §3.2.2.3.11
  CHECK(refusal(connack("29 FF")) == 0x82);           // §3.2.2.3.12
  CHECK(refusal(connack("2A 02")) == 0x82);           // §3.2.2.3.13
  // The edges that are fine.
  const std::string edges = connack("21 FF FF 27 FF FF FF FF 24 00 22 00 00 13 00 00");
  const Connack c = decoded<Connack>(edges);
  CHECK(c.properties.receive_maximum == 65535);
  CHECK(c.properties.maximum_packet_size == 0xFFFF'FFFFu);
  CHECK(c.properties.maximum_qos == 0);
  CHECK(c.properties.topic_alias_maximum == 0);
  CHECK(c.properties.server_keep_alive == 0);
}

TEST_CASE("§1.5.4: a string that is not well-formed UTF-8 or holds U+0000 is malformed (0x81)",
          "[mqtt][codec]") {
  for (const std::string& bad :
       {std::string("a\0b", 3), std::string("\xC0\x80"), std::string("\xED\xA0\x80")}) {
    INFO(hex(bad));
    CHECK(refusal(packet(0x20, bin("00 00") + props(bin("12") + s16(bad)))) == 0x81);
    CHECK(refusal(packet(0x20, bin("00 00") + props(bin("1F") + s16(bad)))) == 0x81);
    CHECK(refusal(packet(0x20, bin("00 00") + props(user_property(bad, "v")))) == 0x81);
    CHECK(refusal(packet(0x20, bin("00 00") + props(user_property("k", bad)))) == 0x81);
    CHECK(refusal(packet(0x30, s16(bad) + bin("00"))) == 0x81);
    CHECK(refusal(packet(0x30, s16("t") + props(bin("03") + s16(bad)))) == 0x81);
    CHECK(refusal(packet(0x30, s16("t") + props(bin("08") + s16(bad)))) == 0x81);
    CHECK(refusal(packet(0xE0, bin("00") + props(bin("1C") + s16(bad)))) == 0x81);
  }
  // Binary Data is not UTF-8 and may hold anything.
  const std::string binary = packet(0x30, s16("t") + props(bin("09 00 03 00 C0 FF")));
  CHECK(decoded<Publish>(binary).properties.correlation_data == bin("00 C0 FF"));
}

TEST_CASE("§3.3: PUBLISH at QoS 0 without properties", "[mqtt][codec]") {
  const std::string whole = packet(0x31, s16("a/b") + bin("00") + "hello");
  const Publish p = decoded<Publish>(whole);
  CHECK(p.qos == 0);
  CHECK_FALSE(p.dup);
  CHECK(p.retain);
  CHECK(p.topic == "a/b");
  CHECK(p.packet_id == 0);
  CHECK(p.payload == "hello");
  CHECK(p.properties.raw.empty());

  const std::string empty = packet(0x30, s16("t") + bin("00"));
  CHECK(decoded<Publish>(empty).payload.empty());
}

TEST_CASE("§3.3.2.3: PUBLISH at QoS 1 and 2 with every property it may carry", "[mqtt][codec]") {
  const std::string whole =
      packet(0x3A, s16("r/1") + bin("00 07") +
                       props(bin("01 01")                   // Payload Format Indicator
                             + bin("02 00 00 00 3C")        // Message Expiry Interval
                             + bin("23 00 05")              // Topic Alias
                             + bin("08") + s16("reply/to")  // Response Topic
                             + bin("09 00 02 AB CD")        // Correlation Data
                             + user_property("x", "y")      //
                             + bin("0B 01")                 // Subscription Identifier
                             + bin("0B FF FF FF 7F")        // and another one
                             + bin("03") + s16("application/json")) +
                       "{}");
  const Publish p = decoded<Publish>(whole);
  CHECK(p.qos == 1);
  CHECK(p.dup);
  CHECK_FALSE(p.retain);
  CHECK(p.topic == "r/1");
  CHECK(p.packet_id == 7);
  CHECK(p.payload == "{}");
  const Properties& q = p.properties;
  CHECK(q.payload_format_indicator == 1);
  CHECK(q.message_expiry_interval == 60u);
  CHECK(q.topic_alias == 5);
  CHECK(q.response_topic == "reply/to");
  CHECK(q.correlation_data == bin("AB CD"));
  CHECK(q.content_type == "application/json");
  CHECK(q.user_property_count == 1);
  CHECK(user_properties(q) == Pairs{{"x", "y"}});
  CHECK(q.subscription_identifier_count == 2);
  CHECK(subscription_ids(q) == std::vector<std::uint32_t>{1, 268'435'455});

  const std::string qos2 = packet(0x34, s16("t") + bin("FF FF 00"));
  const Publish p2 = decoded<Publish>(qos2);
  CHECK(p2.qos == 2);
  CHECK(p2.packet_id == 0xFFFF);
}

TEST_CASE("§3.3: PUBLISH against the rules is refused with the right reason code",
          "[mqtt][codec]") {
  const std::string none = bin("00");
  CHECK(refusal(packet(0x36, s16("t") + bin("00 01") + none)) == 0x81);  // QoS 3, §3.3.1.2
  CHECK(refusal(packet(0x37, s16("t") + bin("00 01") + none)) == 0x81);
  CHECK(refusal(packet(0x38, s16("t") + none)) == 0x81);  // DUP at QoS 0, [MQTT-3.3.1-2]
  CHECK(refusal(packet(0x32, s16("t") + bin("00 00") + none)) == 0x82);  // id 0, §2.2.1
  CHECK(refusal(packet(0x34, s16("t") + bin("00 00") + none)) == 0x82);
  // Wildcards in the Topic Name, [MQTT-3.3.2-2]
  CHECK(refusal(packet(0x30, s16("a/+") + none)) == 0x82);
  CHECK(refusal(packet(0x30, s16("#") + none)) == 0x82);
  CHECK(refusal(packet(0x30, s16("t") + props(bin("08") + s16("r/#")))) == 0x82);
  // Cut short: topic length, packet id, Property Length missing
  CHECK(refusal(packet(0x30, bin(""))) == 0x81);
  CHECK(refusal(packet(0x30, bin("00"))) == 0x81);
  CHECK(refusal(packet(0x30, bin("00 05 61"))) == 0x81);
  CHECK(refusal(packet(0x32, s16("t") + bin("01"))) == 0x81);
  CHECK(refusal(packet(0x32, s16("t") + bin("00 01"))) == 0x81);
  CHECK(refusal(packet(0x30, s16("t"))) == 0x81);
  // Properties: out of range, twice, not allowed in PUBLISH, past the end
  CHECK(refusal(packet(0x30, s16("t") + props(bin("01 02")))) == 0x82);  // §3.3.2.3.2
  CHECK(refusal(packet(0x30, s16("t") + props(bin("0B 00")))) == 0x82);  // §3.3.2.3.8
  CHECK(refusal(packet(0x30, s16("t") + props(bin("0B 80 00")))) == 0x81);
  CHECK(refusal(packet(0x30, s16("t") + props(bin("0B 80 80 80 80 01")))) == 0x81);
  CHECK(refusal(packet(0x30, s16("t") + props(bin("0B 80")))) == 0x81);
  CHECK(refusal(packet(0x30, s16("t") + props(bin("23 00 01 23 00 02")))) == 0x82);
  CHECK(refusal(packet(0x30, s16("t") + props(bin("01 00 01 01")))) == 0x82);
  CHECK(refusal(packet(0x30, s16("t") + props(bin("11 00 00 00 01")))) == 0x81);
  CHECK(refusal(packet(0x30, s16("t") + props(bin("21 00 01")))) == 0x81);
  CHECK(refusal(packet(0x30, s16("t") + props(bin("1F 00 00")))) == 0x81);
  CHECK(refusal(packet(0x30, s16("t") + bin("06 02 00 00"))) == 0x81);
  CHECK(refusal(packet(0x30, s16("t") + bin("02 02 00 00 00"))) == 0x81);
}

TEST_CASE("§3.3.2.3.4: the Topic Alias is read as sent and TopicAliases judges it",
          "[mqtt][codec]") {
  const std::string alias0 = packet(0x30, s16("") + props(bin("23 00 00")));
  const Publish p = decoded<Publish>(alias0);
  CHECK(p.topic.empty());
  CHECK(p.properties.topic_alias == 0);
  TopicAliases aliases(10);
  auto r = aliases.resolve(p.topic, p.properties.topic_alias);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().reason == reason::topic_alias_invalid);
}

TEST_CASE("§3.4-§3.7: PUBACK, PUBREC, PUBREL and PUBCOMP in their long and short forms",
          "[mqtt][codec]") {
  const std::string short_form = bin("40 02 12 34");
  PubAck a = decoded<PubAck>(short_form);
  CHECK(a.type == PacketType::puback);
  CHECK(a.packet_id == 0x1234);
  CHECK(a.reason_code == 0);

  const std::string reason_only = bin("50 03 00 01 10");
  a = decoded<PubAck>(reason_only);
  CHECK(a.type == PacketType::pubrec);
  CHECK(a.reason_code == reason::no_matching_subscribers);

  const std::string empty_properties = bin("62 04 00 02 92 00");
  a = decoded<PubAck>(empty_properties);
  CHECK(a.type == PacketType::pubrel);
  CHECK(a.packet_id == 2);
  CHECK(a.reason_code == reason::packet_identifier_not_found);

  const std::string with_properties =
      packet(0x70, bin("00 03 00") + props(bin("1F") + s16("done") + user_property("k1", "v1") +
                                           user_property("k2", "v2")));
  a = decoded<PubAck>(with_properties);
  CHECK(a.type == PacketType::pubcomp);
  CHECK(a.packet_id == 3);
  CHECK(a.properties.reason_string == "done");
  CHECK(user_properties(a.properties) == Pairs{{"k1", "v1"}, {"k2", "v2"}});

  for (unsigned code : {0x00u, 0x10u, 0x80u, 0x83u, 0x87u, 0x90u, 0x91u, 0x97u, 0x99u}) {
    INFO(code);
    const std::string puback = bin("40 03 00 01") + std::string(1, static_cast<char>(code));
    CHECK(decoded<PubAck>(puback).reason_code == code);
    const std::string pubrec = bin("50 03 00 01") + std::string(1, static_cast<char>(code));
    CHECK(decoded<PubAck>(pubrec).reason_code == code);
  }
  const std::string pubcomp = bin("70 03 00 01 92");
  CHECK(decoded<PubAck>(pubcomp).reason_code == 0x92);
}

TEST_CASE("§3.4-§3.7: acknowledgements against the rules are refused with the right reason code",
          "[mqtt][codec]") {
  // §2.1.3: PUBREL's flags are 0010, the others' 0000
  CHECK(refusal(bin("60 02 00 01")) == 0x81);
  CHECK(refusal(bin("63 02 00 01")) == 0x81);
  CHECK(refusal(bin("42 02 00 01")) == 0x81);
  CHECK(refusal(bin("51 02 00 01")) == 0x81);
  CHECK(refusal(bin("78 02 00 01")) == 0x81);
  // Packet Identifier 0 or cut short
  CHECK(refusal(bin("40 02 00 00")) == 0x82);
  CHECK(refusal(bin("40 00")) == 0x81);
  CHECK(refusal(bin("40 01 01")) == 0x81);
  // Reason codes of another packet type (Tables 3-4 to 3-7)
  CHECK(refusal(bin("40 03 00 01 92")) == 0x82);
  CHECK(refusal(bin("50 03 00 01 01")) == 0x82);
  CHECK(refusal(bin("62 03 00 01 10")) == 0x82);
  CHECK(refusal(bin("70 03 00 01 80")) == 0x82);
  CHECK(refusal(bin("40 03 00 01 81")) == 0x82);
  // Properties: not allowed, past the end, trailing bytes
  CHECK(refusal(packet(0x40, bin("00 01 00") + props(bin("03") + s16("x")))) == 0x81);
  CHECK(refusal(packet(0x40, bin("00 01 00") + props(bin("26") + s16("k")))) == 0x81);
  CHECK(refusal(bin("40 05 00 01 00 04 1F")) == 0x81);
  CHECK(refusal(bin("40 05 00 01 00 00 00")) == 0x81);
}

TEST_CASE("§3.9, §3.11: SUBACK and UNSUBACK with their reason codes in order", "[mqtt][codec]") {
  const std::string suback = packet(0x90, bin("00 0A") + props(bin("1F") + s16("partly")) +
                                              bin("00 01 02 80 83 87 8F 91 97 9E A1 A2"));
  SubAck s = decoded<SubAck>(suback);
  CHECK(s.type == PacketType::suback);
  CHECK(s.packet_id == 10);
  CHECK(s.properties.reason_string == "partly");
  CHECK(hex(s.reason_codes) == "00 01 02 80 83 87 8F 91 97 9E A1 A2");

  const std::string unsuback =
      packet(0xB0, bin("00 0B") + props(user_property("k", "v")) + bin("00 11 80 83 87 8F 91"));
  s = decoded<SubAck>(unsuback);
  CHECK(s.type == PacketType::unsuback);
  CHECK(s.packet_id == 11);
  CHECK(user_properties(s.properties) == Pairs{{"k", "v"}});
  CHECK(hex(s.reason_codes) == "00 11 80 83 87 8F 91");
}

TEST_CASE(
    "§3.9, §3.11: SUBACK and UNSUBACK against the rules are refused with the right reason "
    "code",
    "[mqtt][codec]") {
  CHECK(refusal(bin("90 03 00 01 00")) == 0x82);  // no reason codes
  CHECK(refusal(bin("B0 03 00 01 00")) == 0x82);
  CHECK(refusal(bin("90 04 00 01 00 11")) == 0x82);     // UNSUBACK's code in a SUBACK
  CHECK(refusal(bin("90 05 00 01 00 00 03")) == 0x82);  // Table 3-8 has no 0x03
  CHECK(refusal(bin("B0 04 00 01 00 01")) == 0x82);     // SUBACK's code in an UNSUBACK
  CHECK(refusal(bin("B0 04 00 01 00 A2")) == 0x82);
  CHECK(refusal(bin("90 04 00 00 00 00")) == 0x82);  // Packet Identifier 0
  CHECK(refusal(bin("90 02 00 01")) == 0x81);        // no Property Length
  CHECK(refusal(bin("90 01 00")) == 0x81);
  CHECK(refusal(bin("92 04 00 01 00 00")) == 0x81);  // §2.1.3 flags
  CHECK(refusal(bin("B2 04 00 01 00 00")) == 0x81);
  CHECK(refusal(packet(0x90, bin("00 01") + props(bin("23 00 01")) + bin("00"))) == 0x81);
}

TEST_CASE("§3.13: PINGRESP has no body", "[mqtt][codec]") {
  const std::string ok = bin("D0 00");
  decoded<PingResp>(ok);
  CHECK(refusal(bin("D0 01 00")) == 0x81);
  CHECK(refusal(bin("D1 00")) == 0x81);
  CHECK(refusal(bin("D8 00")) == 0x81);
}

TEST_CASE("§3.14: DISCONNECT from the server in its short and long forms", "[mqtt][codec]") {
  const std::string empty = bin("E0 00");
  CHECK(decoded<Disconnect>(empty).reason_code == 0);
  const std::string reason_only = bin("E0 01 8B");
  CHECK(decoded<Disconnect>(reason_only).reason_code == reason::server_shutting_down);
  const std::string full =
      packet(0xE0, bin("9C") + props(bin("1F") + s16("moving") + bin("1C") + s16("other:1883") +
                                     user_property("k", "v")));
  const Disconnect d = decoded<Disconnect>(full);
  CHECK(d.reason_code == reason::use_another_server);
  CHECK(d.properties.reason_string == "moving");
  CHECK(d.properties.server_reference == "other:1883");
  CHECK(user_properties(d.properties) == Pairs{{"k", "v"}});
}

TEST_CASE("§3.14: DISCONNECT against the rules is refused with the right reason code",
          "[mqtt][codec]") {
  // §3.14.2.2.2 [MQTT-3.14.2-2]: no Session Expiry Interval from the server
  CHECK(refusal(packet(0xE0, bin("00") + props(bin("11 00 00 00 00")))) == 0x82);
  // Table 3-10: 0x04 is the client's; 0x05 is nothing
  CHECK(refusal(bin("E0 01 04")) == 0x82);
  CHECK(refusal(bin("E0 01 05")) == 0x82);
  CHECK(refusal(bin("E0 01 84")) == 0x82);
  CHECK(refusal(bin("E1 00")) == 0x81);           // §2.1.3 flags
  CHECK(refusal(bin("E0 03 00 00 00")) == 0x81);  // trailing byte
  CHECK(refusal(packet(0xE0, bin("00") + props(bin("15") + s16("m")))) == 0x81);
}

TEST_CASE("§3.15: AUTH from the server", "[mqtt][codec]") {
  const std::string empty = bin("F0 00");
  CHECK(decoded<Auth>(empty).reason_code == 0);
  const std::string full =
      packet(0xF0, bin("18") + props(bin("15") + s16("SCRAM-SHA-1") + bin("16 00 03 01 02 03") +
                                     bin("1F") + s16("more") + user_property("k", "v")));
  const Auth a = decoded<Auth>(full);
  CHECK(a.reason_code == reason::continue_authentication);
  CHECK(a.properties.authentication_method == "SCRAM-SHA-1");
  CHECK(a.properties.authentication_data == bin("01 02 03"));
  CHECK(a.properties.reason_string == "more");
  CHECK(user_properties(a.properties) == Pairs{{"k", "v"}});

  CHECK(refusal(packet(0xF0, bin("18") + props(bin("16 00 00")))) == 0x82);       // no method
  CHECK(refusal(packet(0xF0, bin("19") + props(bin("15") + s16("m")))) == 0x82);  // client's
  CHECK(refusal(packet(0xF0, bin("87") + props(bin("15") + s16("m")))) == 0x82);
  CHECK(refusal(bin("F0 01 18")) == 0x81);  // §3.15.2.1: reason code without Property Length
  CHECK(refusal(bin("F2 00")) == 0x81);
  CHECK(refusal(packet(0xF0, bin("18") + props(bin("15") + s16("m") + bin("11 00 00 00 00")))) ==
        0x81);
}

TEST_CASE(
    "§2.1.2: packet type 0 is malformed (0x81), packets only a client sends are protocol "
    "errors (0x82)",
    "[mqtt][codec]") {
  CHECK(refusal(bin("00 00")) == 0x81);
  CHECK(refusal(bin("0F 01 00")) == 0x81);
  CHECK(refusal(packet(0x10, bin("00 04 4D 51 54 54 05 02 00 00 00 00 00"))) == 0x82);
  CHECK(refusal(packet(0x82, bin("00 01 00 00 01 61 00"))) == 0x82);
  CHECK(refusal(packet(0xA2, bin("00 01 00 00 01 61"))) == 0x82);
  CHECK(refusal(bin("C0 00")) == 0x82);
}

TEST_CASE("§3.3.2.3: user properties and subscription identifiers are iterated in packet order",
          "[mqtt][codec]") {
  const std::string whole = packet(
      0x30,
      s16("t") + props(user_property("a", "1") + bin("0B 05") + user_property("b", "") +
                       bin("02 00 00 00 01") + bin("0B FF FF FF 7F") + user_property("", "3") +
                       bin("0B 80 01") + user_property("\xE2\x82\xAC", "\xF0\x9F\x98\x80")));
  const Publish p = decoded<Publish>(whole);
  CHECK(p.properties.user_property_count == 4);
  CHECK(user_properties(p.properties) ==
        Pairs{{"a", "1"}, {"b", ""}, {"", "3"}, {"\xE2\x82\xAC", "\xF0\x9F\x98\x80"}});
  CHECK(p.properties.subscription_identifier_count == 3);
  CHECK(subscription_ids(p.properties) == std::vector<std::uint32_t>{5, 268'435'455, 128});

  // A named callable, const or not, is called through a reference to it.
  std::size_t count = 0;
  const auto count_ids = [&count](std::uint32_t) { ++count; };
  p.properties.for_each_subscription_identifier(count_ids);
  auto count_users = [&count](UserPropertyRef) { ++count; };
  p.properties.for_each_user_property(count_users);
  CHECK(count == 7);
}

TEST_CASE("§4.2: packets read one after another from one stream", "[mqtt][codec]") {
  const std::string stream = bin("20 03 00 00 00") + packet(0x30, s16("a") + bin("00") + "x") +
                             bin("D0 00") + bin("40 02 00 07");
  std::string_view rest = stream;
  std::vector<std::size_t> kinds;
  while (!rest.empty()) {
    auto h = read_fixed_header(rest);
    REQUIRE(h.has_value());
    REQUIRE(h->has_value());
    REQUIRE((*h)->packet_size() <= rest.size());
    auto p =
        decode_inbound((*h)->first_byte, rest.substr((*h)->header_size, (*h)->remaining_length));
    REQUIRE(p.has_value());
    kinds.push_back(p->index());
    rest.remove_prefix((*h)->packet_size());
  }
  CHECK(kinds == std::vector<std::size_t>{0, 1, 4, 2});
}

// ---- topic aliases -----------------------------------------------------------------------------

TEST_CASE("§3.3.2.3.4: a Topic Alias is defined by a topic with it and used by an empty topic",
          "[mqtt][codec]") {
  TopicAliases aliases(3);
  CHECK(aliases.maximum() == 3);
  auto r = aliases.resolve("plain/topic", std::nullopt);
  REQUIRE(r.has_value());
  CHECK(*r == "plain/topic");

  r = aliases.resolve("first", 1);
  REQUIRE(r.has_value());
  CHECK(*r == "first");
  r = aliases.resolve("third", 3);
  REQUIRE(r.has_value());
  r = aliases.resolve("", 1);
  REQUIRE(r.has_value());
  CHECK(*r == "first");
  r = aliases.resolve("", 3);
  REQUIRE(r.has_value());
  CHECK(*r == "third");

  // Redefined (§3.3.2.3.4: the receiver replaces the mapping).
  const std::string long_topic(100, 'l');
  r = aliases.resolve(long_topic, 1);
  REQUIRE(r.has_value());
  r = aliases.resolve("", 1);
  REQUIRE(r.has_value());
  CHECK(*r == long_topic);

  // An alias never defined, alias 0, above the maximum.
  r = aliases.resolve("", 2);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().reason == reason::topic_alias_invalid);
  r = aliases.resolve("x", 0);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().reason == reason::topic_alias_invalid);
  r = aliases.resolve("x", 4);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().reason == reason::topic_alias_invalid);
  r = aliases.resolve("", 4);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().reason == reason::topic_alias_invalid);
  // No topic and no alias [MQTT-3.3.2-1]
  r = aliases.resolve("", std::nullopt);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().reason == reason::protocol_error);

  // A new network connection starts with none.
  aliases.clear();
  r = aliases.resolve("", 1);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().reason == reason::topic_alias_invalid);
}

TEST_CASE(
    "§3.1.2.11.5: with Topic Alias Maximum 0 every alias is invalid, the largest maximum "
    "reaches alias 65535",
    "[mqtt][codec]") {
  TopicAliases none;
  CHECK(none.maximum() == 0);
  for (std::uint16_t alias : {0, 1, 65535}) {
    auto r = none.resolve("t", alias);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().reason == reason::topic_alias_invalid);
  }
  TopicAliases all(65535);
  REQUIRE(all.resolve("last", 65535).has_value());
  REQUIRE(all.resolve("first", 1).has_value());
  auto r = all.resolve("", 65535);
  REQUIRE(r.has_value());
  CHECK(*r == "last");
  r = all.resolve("", 1);
  REQUIRE(r.has_value());
  CHECK(*r == "first");
}

// ---- names
// ----------------------------------------------------------------------------------------

TEST_CASE("§2.4 Table 2-6: reason codes by the standard's names", "[mqtt][codec]") {
  CHECK(reason_text(0x00) == "Success");
  CHECK(reason_text(0x01) == "Granted QoS 1");
  CHECK(reason_text(0x04) == "Disconnect with Will Message");
  CHECK(reason_text(0x10) == "No matching subscribers");
  CHECK(reason_text(0x18) == "Continue authentication");
  CHECK(reason_text(0x81) == "Malformed Packet");
  CHECK(reason_text(0x82) == "Protocol Error");
  CHECK(reason_text(0x86) == "Bad User Name or Password");
  CHECK(reason_text(0x87) == "Not authorized");
  CHECK(reason_text(0x8E) == "Session taken over");
  CHECK(reason_text(0x94) == "Topic Alias invalid");
  CHECK(reason_text(0x95) == "Packet too large");
  CHECK(reason_text(0x9E) == "Shared Subscriptions not supported");
  CHECK(reason_text(0xA2) == "Wildcard Subscriptions not supported");
  CHECK(reason_text(0x03) == "reason code 0x03");
  CHECK(reason_text(0x8F) == "Topic Filter invalid");
  CHECK(reason_text(0xA3) == "reason code 0xA3");
  CHECK(reason_text(0xFF) == "reason code 0xFF");
  // Every code the standard names has a name.
  for (unsigned c : {0x00u, 0x01u, 0x02u, 0x04u, 0x10u, 0x11u, 0x18u, 0x19u}) {
    CHECK(reason_text(static_cast<std::uint8_t>(c)).rfind("reason code", 0) != 0);
  }
  for (unsigned c = 0x80; c <= 0xA2; ++c) {
    INFO(c);
    CHECK(reason_text(static_cast<std::uint8_t>(c)).rfind("reason code", 0) != 0);
  }
}

TEST_CASE("§2.1.2: packet names", "[mqtt][codec]") {
  const std::vector<std::string> names = {"CONNECT",  "CONNACK",     "PUBLISH",  "PUBACK",
                                          "PUBREC",   "PUBREL",      "PUBCOMP",  "SUBSCRIBE",
                                          "SUBACK",   "UNSUBSCRIBE", "UNSUBACK", "PINGREQ",
                                          "PINGRESP", "DISCONNECT",  "AUTH"};
  for (unsigned t = 1; t <= 15; ++t) {
    CHECK(packet_name(static_cast<PacketType>(t)) == names[t - 1]);
  }
  CHECK(std::string(packet_name(static_cast<PacketType>(0))) != "CONNECT");
}

// ---- round trips
// ---------------------------------------------------------------------------------

TEST_CASE("what the encoder writes for acknowledgements, DISCONNECT and AUTH decodes back",
          "[mqtt][codec]") {
  const std::array<UserPropertyRef, 2> users{{{"k", "v"}, {"k", "w"}}};
  OutProperties p;
  p.reason_string = "r";
  p.user_properties = users;
  for (PacketType type :
       {PacketType::puback, PacketType::pubrec, PacketType::pubrel, PacketType::pubcomp}) {
    for (std::uint8_t code : {std::uint8_t{0}, std::uint8_t{0x80}, std::uint8_t{0x92}}) {
      const bool rel_or_comp = type == PacketType::pubrel || type == PacketType::pubcomp;
      if (rel_or_comp ? code == 0x80 : code == 0x92) continue;  // not in that packet's table
      for (bool with_properties : {false, true}) {
        std::string out;
        REQUIRE(encode_ack(out, type, 42, code, with_properties ? p : OutProperties{}));
        const PubAck a = decoded<PubAck>(out);
        CHECK(a.type == type);
        CHECK(a.packet_id == 42);
        CHECK(a.reason_code == code);
        CHECK(a.properties.user_property_count == (with_properties ? 2u : 0u));
      }
    }
  }
  std::string out;
  REQUIRE(encode_disconnect(out, reason::server_busy, p));
  const Disconnect d = decoded<Disconnect>(out);
  CHECK(d.reason_code == reason::server_busy);
  CHECK(user_properties(d.properties) == Pairs{{"k", "v"}, {"k", "w"}});
}

// The codec's primitives against independent definitions: Variable Byte Integers (§1.5.5) read
// and written back, UTF-8 (§1.5.4) and Topic Names (§4.7) against a validator that decodes code
// points, and the fixed header against get_varint.
#include <cstdint>
#include <string>
#include <string_view>

#include "mqtt/codec/codec.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace codec = mcpmqtt::mqtt::codec;
using mcpmqtt::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);

  // A Variable Byte Integer: up to 4 bytes, the last without the continuation bit and, after the
  // first, not 0 (shortest form). Written back it gives the same bytes.
  auto v = codec::get_varint(in);
  std::size_t continued = 0;
  while (continued < in.size() && continued < 4 &&
         (static_cast<unsigned char>(in[continued]) & 0x80) != 0) {
    ++continued;
  }
  if (continued == 4) {
    check(!v && v.error().reason == codec::reason::malformed_packet, "5-byte integer accepted");
  } else if (continued == in.size()) {
    check(v && !v->has_value(), "a cut integer is not 'need more'");
  } else if (continued > 0 && in[continued] == 0) {
    check(!v && v.error().reason == codec::reason::malformed_packet, "longer form accepted");
  } else {
    check(v && v->has_value(), "a valid integer refused");
    const codec::Varint read = **v;
    check(read.size == continued + 1 && read.value <= codec::kMaxVarint, "integer size or value");
    std::string out;
    check(codec::put_varint(out, read.value), "put_varint refused a read value");
    check(out == in.substr(0, read.size), "integer written back differs");
  }

  // A fixed header is a first byte and a Remaining Length; here with a Maximum Packet Size of 1000.
  auto h = codec::read_fixed_header(in, 1000);
  if (in.empty()) {
    check(h && !h->has_value(), "empty input is not 'need more'");
  } else {
    auto rl = codec::get_varint(in.substr(1));
    if (!rl) {
      check(!h && h.error().reason == codec::reason::malformed_packet, "bad Remaining Length");
    } else if (!rl->has_value()) {
      check(h && !h->has_value(), "a cut Remaining Length is not 'need more'");
    } else if (1 + (*rl)->size + (*rl)->value > 1000) {
      check(!h && h.error().reason == codec::reason::packet_too_large, "too large yet accepted");
    } else {
      check(h && h->has_value(), "a good fixed header refused");
      check((*h)->first_byte == static_cast<unsigned char>(in[0]) &&
                (*h)->remaining_length == (*rl)->value && (*h)->header_size == 1 + (*rl)->size,
            "fixed header fields");
    }
  }

  // UTF-8 and Topic Names, on the whole input and on a part that starts at an odd offset (the
  // ASCII fast path reads 8 bytes at a time).
  for (std::string_view s : {in, in.substr(in.empty() ? 0 : 1), in.substr(0, in.size() / 2)}) {
    check(codec::valid_utf8(s) == mcpmqtt::fuzz::reference_utf8(s), "valid_utf8 vs reference");
    check(codec::valid_topic_name(s) == mcpmqtt::fuzz::reference_topic_name(s),
          "valid_topic_name vs reference");
  }
  return 0;
}

// UTF-8 validation (§1.5.4) and Topic Name checks (§4.7) with an ASCII fast path: most topics,
// keys and values are ASCII, so eight bytes are checked at once while none needs a closer look.
#include <cstdint>
#include <cstring>

#include "mqtt/codec/codec.hpp"

namespace mcpmqtt::mqtt::codec {
namespace {

constexpr std::uint64_t kOnes = 0x0101'0101'0101'0101;
constexpr std::uint64_t kHighBits = 0x8080'8080'8080'8080;

// Non-zero exactly when one of the eight bytes of `w` is 0 (exact, no false positives).
constexpr std::uint64_t zero_byte(std::uint64_t w) {
  return (w - kOnes) & ~w & kHighBits;
}

constexpr bool continuation(unsigned char b) {
  return (b & 0xC0) == 0x80;
}

// kTopic: also refuse the wildcard characters '+' and '#' (§4.7.1).
template <bool kTopic>
bool validate(const unsigned char* p, const unsigned char* end) {
  while (p != end) {
    // Eight ASCII bytes at a time while none is >= 0x80, U+0000 or (in a topic) a wildcard.
    while (end - p >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p, sizeof w);
      std::uint64_t look = (w & kHighBits) | zero_byte(w);
      if constexpr (kTopic) {
        look |= zero_byte(w ^ (kOnes * '+')) | zero_byte(w ^ (kOnes * '#'));
      }
      if (look != 0) break;
      p += 8;
    }
    if (p == end) return true;
    const unsigned char c = *p;
    if (c < 0x80) {
      // §1.5.4 [MQTT-1.5.4-2]: no U+0000.
      if (c == 0) return false;
      if constexpr (kTopic) {
        if (c == '+' || c == '#') return false;
      }
      ++p;
      continue;
    }
    // Well-formed sequences of Unicode Table 3-7: no overlong forms (C0, C1, E0 80..9F,
    // F0 80..8F), no surrogates (ED A0..BF, [MQTT-1.5.4-1]), nothing above U+10FFFF (F4 90..,
    // F5..FF).
    const auto left = end - p;
    if (c < 0xC2) return false;
    if (c < 0xE0) {
      if (left < 2 || !continuation(p[1])) return false;
      p += 2;
    } else if (c < 0xF0) {
      if (left < 3) return false;
      const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80;
      const unsigned char hi = c == 0xED ? 0x9F : 0xBF;
      if (p[1] < lo || p[1] > hi || !continuation(p[2])) return false;
      p += 3;
    } else if (c < 0xF5) {
      if (left < 4) return false;
      const unsigned char lo = c == 0xF0 ? 0x90 : 0x80;
      const unsigned char hi = c == 0xF4 ? 0x8F : 0xBF;
      if (p[1] < lo || p[1] > hi || !continuation(p[2]) || !continuation(p[3])) return false;
      p += 4;
    } else {
      return false;
    }
  }
  return true;
}

const unsigned char* bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

}  // namespace

bool valid_utf8(std::string_view text) {
  return validate<false>(bytes(text), bytes(text) + text.size());
}

bool valid_topic_name(std::string_view topic) {
  return validate<true>(bytes(topic), bytes(topic) + topic.size());
}

}  // namespace mcpmqtt::mqtt::codec

// What the fuzz targets share: a check that stops the run with a message, and an independent
// UTF-8 validator (decoding code points, unlike the codec's table of byte ranges) to compare with.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "mqtt/codec/codec.hpp"

namespace mcpmqtt::fuzz {

// libFuzzer keeps the input that made the process abort.
inline void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz check failed: %s\n", what);
  std::abort();
}

// Well-formed UTF-8 without U+0000 (§1.5.4), by decoding each code point.
inline bool reference_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    std::uint32_t cp;
    std::size_t n;
    if (lead < 0x80) {
      cp = lead;
      n = 1;
    } else if ((lead & 0xE0) == 0xC0) {
      cp = lead & 0x1Fu;
      n = 2;
    } else if ((lead & 0xF0) == 0xE0) {
      cp = lead & 0x0Fu;
      n = 3;
    } else if ((lead & 0xF8) == 0xF0) {
      cp = lead & 0x07u;
      n = 4;
    } else {
      return false;
    }
    if (s.size() - i < n) return false;
    for (std::size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3Fu);
    }
    constexpr std::uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kSmallest[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0) {
      return false;
    }
    i += n;
  }
  return true;
}

inline bool reference_topic_name(std::string_view s) {
  return reference_utf8(s) && s.find_first_of("+#") == std::string_view::npos;
}

// `inner` lies within `outer` (a view handed out by the decoder points into its input).
inline bool within(std::string_view inner, std::string_view outer) {
  if (inner.empty()) return true;
  const auto b = reinterpret_cast<std::uintptr_t>(outer.data());
  const auto i = reinterpret_cast<std::uintptr_t>(inner.data());
  return i >= b && i - b <= outer.size() && inner.size() <= outer.size() - (i - b);
}

}  // namespace mcpmqtt::fuzz

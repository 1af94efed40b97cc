// Bytes as lowercase hexadecimal, two digits per byte (RFC 4648 §8 "base16", lowercase): digests,
// random ids, MACs in logs and headers.
#pragma once

#include <string>
#include <string_view>

namespace mcpmqtt {

inline std::string hex_encode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

}  // namespace mcpmqtt

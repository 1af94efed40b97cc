#include "bridge/jsonrpc/wire.hpp"

#include <algorithm>
#include <charconv>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace mcpmqtt::jsonrpc {

namespace detail {

bool all_ascii(std::string_view s) {
  constexpr std::uint64_t kHigh = 0x8080808080808080ull;
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    if (w & kHigh) return false;
  }
  for (; i < s.size(); ++i) {
    if (static_cast<unsigned char>(s[i]) & 0x80) return false;
  }
  return true;
}

Number read_number(std::string_view s) {
  Number n;
  const char* const end = s.data() + s.size();
  const bool negative = !s.empty() && s.front() == '-';
  if (s.find_first_of(".eE") == std::string_view::npos) {
    if (negative) {
      auto [p, ec] = std::from_chars(s.data(), end, n.i);
      if (ec == std::errc() && p == end) {
        n.kind = Number::Kind::int64;
        return n;
      }
    } else {
      auto [p, ec] = std::from_chars(s.data(), end, n.u);
      if (ec == std::errc() && p == end) {
        n.kind = Number::Kind::uint64;
        return n;
      }
    }
  }
  auto [p, ec] = std::from_chars(s.data(), end, n.d);
  if (ec == std::errc()) return n;
  // Out of range: too large, or too small. The decimal magnitude of the first significant
  // digit tells which (the grammar guarantees a digit, and a nonzero one: zero never overflows).
  const std::string_view digits = s.substr(negative ? 1 : 0);
  const auto e = digits.find_first_of("eE");
  const std::string_view mantissa = digits.substr(0, e);
  long long exponent = 0;
  if (e != std::string_view::npos) {
    std::string_view ex = digits.substr(e + 1);
    const bool ex_negative = !ex.empty() && ex.front() == '-';
    if (!ex.empty() && (ex.front() == '-' || ex.front() == '+')) ex.remove_prefix(1);
    for (char c : ex)
      exponent = std::min<long long>(exponent * 10 + (c - '0'), 1'000'000'000);
    if (ex_negative) exponent = -exponent;
  }
  const auto point = std::min(mantissa.find('.'), mantissa.size());
  const auto first = mantissa.find_first_of("123456789");
  const long long magnitude =
      exponent + (first < point ? static_cast<long long>(point - first)
                                : -static_cast<long long>(first - point - 1));
  if (magnitude > 0) {
    n.kind = Number::Kind::out_of_range;
  } else {
    n.d = negative ? -0.0 : 0.0;
  }
  return n;
}

std::string_view cut_utf8(std::string_view s, std::size_t max) {
  if (s.size() <= max) return s;
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80)
    --cut;
  return s.substr(0, cut);
}

bool holds_lone_surrogate(std::string_view s) {
  for (auto p = s.find('\xED'); p != std::string_view::npos; p = s.find('\xED', p + 1))
    if (p + 1 < s.size() && static_cast<unsigned char>(s[p + 1]) >= 0xA0) return true;
  return false;
}

const char* json_type_name(rapidjson::Type t) {
  switch (t) {
    case rapidjson::kNullType:
      return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType:
      return "a boolean";
    case rapidjson::kObjectType:
      return "an object";
    case rapidjson::kArrayType:
      return "an array";
    case rapidjson::kStringType:
      return "a string";
    case rapidjson::kNumberType:
      return "a number";
  }
  return "a value";
}

std::string position_of(std::string_view text, std::size_t offset) {
  offset = std::min(offset, text.size());
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + " column " + std::to_string(col);
}

std::string_view first_token(std::string_view text) {
  const auto pos = text.find_first_not_of(" \t\r\n");
  return pos == std::string_view::npos ? std::string_view{} : text.substr(pos, 1);
}

ParseFailure failure(int c, std::string message, Id id) {
  return ParseFailure{Error{c, std::move(message), {}}, std::move(id)};
}

std::optional<ParseFailure> nul_failure(std::string_view text) {
  const auto nul = text.find('\0');
  if (nul == std::string_view::npos) return std::nullopt;
  return failure(code::parse_error, "invalid JSON at " + position_of(text, nul) +
                                        ": a NUL byte, which JSON text never holds");
}

}  // namespace detail

namespace {

// The length of the well-formed UTF-8 sequence at the start of `s` (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF), or 0 when there is none.
std::size_t utf8_sequence(std::string_view s) {
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = b(0);
  if (lead < 0x80) return 1;
  std::size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) lo = 0xA0;  // overlong
    if (lead == 0xED) hi = 0x9F;  // UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) lo = 0x90;  // overlong
    if (lead == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < n || b(1) < lo || b(1) > hi) return 0;
  for (std::size_t i = 2; i < n; ++i)
    if ((b(i) & 0xC0) != 0x80) return 0;
  return n;
}

// `s` with every byte that is not part of well-formed UTF-8 replaced by U+FFFD, so that it can
// be written into JSON text: what the bridge quotes (a header value, a path, a method in an
// error message) may come from a peer, byte for byte.
std::string scrub_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  while (!s.empty()) {
    const std::size_t n = utf8_sequence(s);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      s.remove_prefix(1);
    } else {
      out.append(s.data(), n);
      s.remove_prefix(n);
    }
  }
  return out;
}

bool valid_utf8(std::string_view s) {
  while (!s.empty()) {
    const std::size_t n = utf8_sequence(s);
    if (n == 0) return false;
    s.remove_prefix(n);
  }
  return true;
}

}  // namespace

std::string quote(std::string_view s) {
  std::string scrubbed;
  if (!detail::all_ascii(s) && !valid_utf8(s)) {
    scrubbed = scrub_utf8(s);
    s = scrubbed;
  }
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  return std::string(buf.GetString(), buf.GetSize());
}

}  // namespace mcpmqtt::jsonrpc

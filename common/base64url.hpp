// base64url (RFC 4648 §5) without padding, as JOSE (RFC 7515 §2) and the bridge's own tokens
// (requestState) use it. Decoding is strict: it refuses padding, whitespace, characters outside
// the alphabet, a length of 1 modulo 4 and unused low bits that are not zero (RFC 4648 §3.5), so
// that each byte string has exactly one text.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mcpmqtt {

std::string base64url_encode(std::string_view bytes);
std::optional<std::string> base64url_decode(std::string_view text);

}  // namespace mcpmqtt

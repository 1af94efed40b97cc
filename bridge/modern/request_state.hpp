// Integrity-protected tokens for the `requestState` of input_required results
// (basic/patterns/mrtr §Server Requirements 4–5: the server MUST treat requestState as
// attacker-controlled; if it influences what the server does, it MUST be integrity-protected and
// failing state rejected). The modern gateway mints one per round and checks it on the retry.
//
// Form: `v1.<base64url(payload)>.<base64url(HMAC-SHA256(secret, "v1." + base64url(payload)))>`,
// no padding. The payload is the caller's (JSON text); it is readable by the client, so it holds
// no secret, only handles and digests. The secret never leaves this object and is never logged.
//
// Thread-safe (immutable after construction).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mcpmqtt::bridge {

class RequestStateCodec {
 public:
  // At least 32 bytes are expected (the caller checks); any length works.
  explicit RequestStateCodec(std::string secret);

  std::string mint(std::string_view payload) const;
  // The payload of a token this codec minted, unchanged; nullopt for anything else (a bad form,
  // a MAC that does not match — compared in constant time).
  std::optional<std::string> open(std::string_view token) const;
  // The payload of a token of this form, its MAC unchecked: for routing only, never trusted.
  static std::optional<std::string> peek(std::string_view token);

 private:
  std::string mac(std::string_view signed_part) const;
  std::string secret_;
};

// HMAC-SHA256 of `data` under `key` (32 bytes).
std::string hmac_sha256(std::string_view key, std::string_view data);
// `n` bytes from OpenSSL's CSPRNG; nullopt if it has no entropy.
std::optional<std::string> random_bytes(std::size_t n);
// SHA-256 of `data` as 64 lowercase hex characters.
std::string sha256_hex(std::string_view data);

}  // namespace mcpmqtt::bridge

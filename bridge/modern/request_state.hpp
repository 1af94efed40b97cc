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

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace mcpmqtt::bridge {

// An HMAC-SHA256 key made ready once: the digest fetched and the key's inner and outer pads
// hashed. sign() copies that state, where hmac_sha256() sets it all up again for each message
// (which costs several times the hashing of a short message; bench/README.md, replicas).
// Thread-safe: sign() only reads the prepared state.
class HmacKey {
 public:
  explicit HmacKey(std::string_view key);
  ~HmacKey();
  HmacKey(const HmacKey&) = delete;
  HmacKey& operator=(const HmacKey&) = delete;

  // The 32-byte MAC of the concatenation of `parts` (no copy made of them).
  std::string sign(std::initializer_list<std::string_view> parts) const;
  std::string sign(std::string_view data) const { return sign({data}); }

 private:
  struct Prepared;
  std::unique_ptr<Prepared> prepared_;
};

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
  HmacKey key_;
};

// HMAC-SHA256 of `data` under `key` (32 bytes).
std::string hmac_sha256(std::string_view key, std::string_view data);
// `n` bytes from OpenSSL's CSPRNG; nullopt if it has no entropy.
std::optional<std::string> random_bytes(std::size_t n);
// SHA-256 of `data` as 64 lowercase hex characters.
std::string sha256_hex(std::string_view data);

}  // namespace mcpmqtt::bridge

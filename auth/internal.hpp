// What the files of auth/ share and callers need not see: the OpenSSL key behind a PublicKey,
// owners for OpenSSL objects, strict JSON reading, and one signature check.
//
// Free functions and immutable data; safe from any thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <openssl/evp.h>
#include <rapidjson/document.h>

#include "auth/token.hpp"

namespace mcpmqtt::auth {

namespace detail {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// Strict JSON (RFC 8259): UTF-8 validated, iterative so that deep nesting cannot exhaust the
// stack (a token or a JWK Set of nothing but '[' would otherwise recurse once per byte).
inline constexpr unsigned kJsonFlags =
    rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag;

// Reads `text` into `doc` as one JSON object whose member names are distinct (RFC 7515 §5.2,
// RFC 7519 §4). The text is bounded by the caller. nullopt when it is one; else what is wrong
// ("not JSON", "not a JSON object", "a member name twice").
std::optional<std::string> read_object(std::string_view text, rapidjson::Document& doc);

// An object's member names are all different.
bool distinct_members(const rapidjson::Value& object);

// The member `name` of an object (which must be one), or nullptr.
const rapidjson::Value* member(const rapidjson::Value& object, std::string_view name);

inline std::string_view text_of(const rapidjson::Value& v) {
  return {v.GetString(), v.GetStringLength()};
}

// The kty a key must have to verify `alg`: "RSA", "EC" or "OKP".
std::string_view kty_for(Alg alg);

// `signature` over `input` is valid for `key` under `alg` (the caller has matched the key's type
// to the alg). Leaves OpenSSL's error queue empty.
bool verify_signature(Alg alg, const PublicKey& key, std::string_view input,
                      std::string_view signature);

}  // namespace detail

struct PublicKey {
  detail::PkeyPtr pkey;
  std::size_t signature_bytes = 0;  // RSA: the modulus' length; EC and Ed25519: 64
};

}  // namespace mcpmqtt::auth

// The signing side of an OAuth authorization server, for tests and benchmarks that need access
// tokens: keys generated in-process with OpenSSL (RSA, EC P-256, Ed25519), each with a kid and
// the alg its tokens say; the public JWK Set; compact JWS tokens minted from claims, and the bad
// ones an attacker would send (alg none, an HMAC keyed with the public key, a tampered
// signature, a key nobody published). Independent of auth/: its own base64url and signing code,
// so that a mistake in one is not repeated in the other.
//
// Not thread-safe while keys are added; minting from a const issuer is safe from any thread.
// Throws std::runtime_error when OpenSSL fails (test code only).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mcpmqtt::test {

// base64url without padding (RFC 7515 §2).
std::string b64url(std::string_view bytes);

// A JSON string literal of `s` (quotes included).
std::string json_string(std::string_view s);

// Claims as members of a JSON object, in order; each value is JSON text. Built with defaults by
// TestIssuer::claims(): iss, sub, aud, iat, exp (now + 300), scope.
class ClaimSet {
 public:
  ClaimSet& set(const std::string& name, std::string json_value);  // replaces or appends
  ClaimSet& str(const std::string& name, std::string_view value) {
    return set(name, json_string(value));
  }
  ClaimSet& num(const std::string& name, std::int64_t value) {
    return set(name, std::to_string(value));
  }
  ClaimSet& remove(const std::string& name);
  std::string json() const;

 private:
  std::vector<std::pair<std::string, std::string>> members_;
};

// A JOSE header. Absent optionals are left out; `extra` is raw members appended
// (R"("crit":["exp"])").
struct JoseHeader {
  std::string alg;
  std::optional<std::string> kid;
  std::optional<std::string> typ = "at+jwt";
  std::string extra;
  std::string json() const;
};

class TestIssuer {
 public:
  struct KeyOptions {
    int rsa_bits = 2048;
    bool published = true;    // in jwks(); false: a key the resource server never saw
    bool jwk_alg = true;      // the JWK names its alg
    bool jwk_kid = true;      // the JWK names its kid
    std::string use = "sig";  // the JWK's use; empty: left out
    // Another kid's key pair instead of a new one (RSA keys take a quarter of a second to make):
    // one RSA key published as two JWKs, say, one for RS256 and one for PS256.
    std::string same_key_as;
  };

  explicit TestIssuer(std::string issuer = "https://issuer.test",
                      std::string audience = "https://bridge.test/mcp");
  // Copies share the keys.

  // A new key of the kind `alg` needs (RS256 and PS256: RSA; ES256: P-256; EdDSA: Ed25519), or
  // options.same_key_as's.
  TestIssuer& add_key(const std::string& kid, const std::string& alg, KeyOptions options);
  TestIssuer& add_key(const std::string& kid, const std::string& alg) {
    return add_key(kid, alg, KeyOptions{});
  }

  const std::string& issuer() const { return issuer_; }
  const std::string& audience() const { return audience_; }

  // {"keys": [...]} of the published keys, public parts only.
  std::string jwks() const;
  // One key as a JWK object: public, or with its private part ("d") too.
  std::string public_jwk(const std::string& kid) const;
  std::string private_jwk(const std::string& kid) const;

  // Defaults: iss and aud of this issuer, sub "user-1", iat `now`, exp `now` + 300,
  // scope "mcp:all".
  ClaimSet claims(std::int64_t now) const;

  // A token signed by `kid`'s key: header alg (the key's), kid, typ at+jwt.
  std::string mint(const std::string& kid, const ClaimSet& claims) const;
  std::string mint(const std::string& kid, std::string_view claims_json) const;
  // Any header (its alg as written), signed by `kid`'s key with the key's own algorithm.
  std::string mint(const std::string& kid, const JoseHeader& header,
                   std::string_view claims_json) const;
  // Raw header and claims text, signed by `kid`'s key with the key's own algorithm.
  std::string mint_raw(const std::string& kid, std::string_view header_json,
                       std::string_view claims_json) const;
  // The signature `kid`'s key makes over `input` in the JWS form (ES256: R || S).
  std::string sign(const std::string& kid, std::string_view input) const;

  // alg none, empty signature (RFC 7519 §6).
  static std::string unsigned_token(std::string_view claims_json);
  // HS256 keyed with the PEM text of `kid`'s public key: what a verifier that takes the key
  // for an HMAC secret would accept (the classic confusion of RS256 and HS256).
  std::string hs256_with_public_key(const std::string& kid, std::string_view claims_json) const;
  // The same token with the first byte of its signature changed.
  static std::string tamper_signature(std::string token);

 private:
  struct Key;
  const Key& key(const std::string& kid) const;
  std::string jwk(const Key& k, bool with_private) const;

  std::string issuer_;
  std::string audience_;
  std::vector<std::shared_ptr<const Key>> keys_;
};

}  // namespace mcpmqtt::test

// OAuth 2.1 access tokens as the HTTP ingress, a resource server, receives them: JWT access
// tokens (RFC 9068) signed with the issuer's keys (a JWK Set, RFC 7517), checked against the
// rules of one issuer and one resource (RFC 8707 audience); and the answer an issuer gives about
// an opaque token (RFC 7662 introspection), by the same rules. Pure: no I/O, no clock (the caller
// passes the time), no logging. Nothing here keeps or prints a token: a Rejection's detail names
// what is wrong, never the token's text.
//
// Thread-safe: a KeySet is immutable once parsed and may be shared between threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/base64url.hpp"
#include "common/expected.hpp"

namespace mcpmqtt::auth {

// base64url without padding (RFC 7515 §2), strict (common/base64url.hpp).
using ::mcpmqtt::base64url_decode;
using ::mcpmqtt::base64url_encode;

// Signature algorithms of JWS (RFC 7518 §3, RFC 8037 §3.1). There is no `none` and no HMAC: a
// resource server holds public keys only.
enum class Alg { RS256, PS256, ES256, EdDSA };
std::optional<Alg> alg_from_name(std::string_view name);
std::string_view alg_name(Alg alg);

// One public key of a JWK Set: RSA (kty RSA, n and e; kMinRsaBits to kMaxRsaBits, e odd), EC
// P-256 (kty EC, crv P-256, x and y of 32 bytes each; the point is checked to be on the curve)
// or Ed25519 (kty OKP, crv Ed25519, x of 32 bytes). Keys whose `use` is present and not "sig",
// whose `key_ops` is present without "verify", whose `alg` is not one of Alg or does not suit
// the kty, of another kty or curve, private (holding "d"), or that cannot be read (bad base64url,
// wrong lengths, a point off the curve, too few bits) are skipped with a reason, not refused:
// one bad key does not take the issuer's other keys down with it.
inline constexpr int kMinRsaBits = 2048;
inline constexpr int kMaxRsaBits = 8192;  // bounds the cost of one verification
struct PublicKey;                         // opaque: the OpenSSL key

struct Jwk {
  std::string kid;         // may be empty
  std::optional<Alg> alg;  // the key's `alg` when present: the token's must equal it
  std::string kty;         // "RSA", "EC", "OKP"
  std::shared_ptr<const PublicKey> key;
};

class KeySet {
 public:
  struct Limits {
    std::size_t max_document_bytes = 256 * 1024;
    std::size_t max_keys = 64;
  };
  // A JWK Set document ({"keys": [...]}). Refused (with a reason) when it is not JSON, too large,
  // has no "keys" array, or more than max_keys entries; a set whose entries were all skipped is
  // valid and empty.
  static Expected<KeySet, std::string> parse(std::string_view document, Limits limits);
  static Expected<KeySet, std::string> parse(std::string_view document) {
    return parse(document, Limits{});
  }

  // The keys a token with header `kid` (empty: none given) and `alg` may be verified with: those
  // with that kid, or when the token names no kid, every key; in both cases only keys whose
  // kty suits `alg` (RSA for RS256 and PS256, EC for ES256, OKP for EdDSA) and whose own `alg`,
  // when present, equals it. Empty while has_kid(kid): the key named is of another type.
  std::vector<const Jwk*> candidates(std::string_view kid, Alg alg) const;
  bool has_kid(std::string_view kid) const;
  std::size_t size() const { return keys_.size(); }
  bool empty() const { return keys_.empty(); }
  // How many entries parse() skipped, for the log ("3 keys, 1 skipped: kty oct").
  std::size_t skipped() const { return skipped_; }
  const std::string& skipped_reasons() const { return skipped_reasons_; }

 private:
  std::vector<Jwk> keys_;
  std::size_t skipped_ = 0;
  std::string skipped_reasons_;
};

// A compact JWS split and its header and claims read, signature not yet checked.
struct Token {
  Alg alg = Alg::RS256;
  std::string kid;            // "" when absent (an empty kid counts as none)
  std::string typ;            // header typ, lowercased; "" when absent
  std::string signing_input;  // base64url(header) "." base64url(payload)
  std::string signature;      // decoded bytes
  std::string claims_json;    // decoded payload
};

// Why a token is refused. The HTTP mapping (RFC 6750 §3.1): every kind is `invalid_token`
// (401) except unavailable (503: the keys cannot be had now).
enum class Failure {
  malformed,        // not three base64url parts, header or claims not a JSON object (or a
                    // member name twice, RFC 7515 §5.2), too long, no signature, a `crit`
                    // header (no extension is understood, RFC 7515 §4.1.11)
  unsupported_alg,  // alg none, HS*, or an algorithm not in the allow-list
  unknown_kid,      // no key with that kid (the caller may fetch the JWK Set again)
  bad_signature,
  wrong_type,  // typ is not at+jwt (RFC 9068 §4) when that is required
  wrong_issuer,
  wrong_audience,
  expired,
  not_yet_valid,
  missing_claim,  // iss, sub, exp or aud absent or of the wrong JSON type; nbf, iat,
                  // client_id, scope or scp of the wrong JSON type, a date out of range
  unavailable,    // no keys yet (issuer unreachable since start): set by the caller
  inactive,       // RFC 7662 §2.2: the authorization server answered "active": false
};
std::string_view failure_name(Failure f);  // "expired", ... for logs and metrics labels

struct Rejection {
  Failure failure = Failure::malformed;
  // For the log and error_description: "expired 42 s ago". Never the token, and no string the
  // token carries (its kid, iss, aud...): only names, numbers and configured values.
  std::string detail;
};

inline constexpr std::size_t kMaxTokenBytes = 16 * 1024;

// Splits and decodes a compact JWS (at most kMaxTokenBytes); checks alg against `allowed`. The
// header's jku, jwk, x5u and x5c are ignored: keys come from the KeySet only.
Expected<Token, Rejection> parse_token(std::string_view compact, const std::vector<Alg>& allowed);

// Whether `token` is a JWS compact serialization (RFC 7515 §7.1) and so verified here with the
// issuer's keys: exactly three dot-separated parts, the first base64url-decoding to a JSON
// object (the JOSE header). Anything else - opaque random text, a JWE's five parts - is a token
// only its issuer can read: introspected (RFC 7662) when the ingress is set up for it.
bool looks_like_jws(std::string_view token);

// What a valid token says (RFC 9068 §2.2).
struct Claims {
  std::string issuer;
  std::string subject;
  std::string client_id;               // "" when absent
  std::vector<std::string> audiences;  // aud as a string or an array
  // `scope` (space-separated); without it `scp`, an array or (as Entra ID sends it) a
  // space-separated string. Each a scope-token of RFC 6749 §3.3.
  std::vector<std::string> scopes;
  std::int64_t expires_at = 0;  // exp, seconds since the epoch
  std::int64_t not_before = 0;  // nbf, 0 when absent
  std::int64_t issued_at = 0;   // iat, 0 when absent
};

struct Rules {
  std::string issuer;                  // iss must equal it exactly
  std::vector<std::string> audiences;  // aud must contain at least one of these (none: refuse)
  std::vector<Alg> algorithms{Alg::RS256, Alg::PS256, Alg::ES256, Alg::EdDSA};
  // Tolerance for exp and nbf: valid while now < exp + skew and now >= nbf - skew.
  std::chrono::seconds clock_skew{60};
  bool require_at_jwt = true;  // typ must be "at+jwt" or "application/at+jwt"
};

// Checks alg against rules.algorithms again, the signature with `keys` (Failure::unknown_kid when
// the kid is not in the set, or when the token names no kid and no key suits its alg; with
// several candidates, any one verifying is enough), then typ, iss, aud, exp, nbf and sub against
// `rules` at `now` (seconds since the epoch), and the types of iat, client_id, scope and scp.
// Numeric dates may be integers or fractions (rounded down).
Expected<Claims, Rejection> verify(const Token& token, const KeySet& keys, const Rules& rules,
                                   std::int64_t now);

// An introspection response (RFC 7662 §2.2, at most the caller's bound in bytes) read as the
// claims of the token it describes, by the rules verify() applies to a JWT's claims, except:
// `active` must be true (else Failure::inactive); `iss`, when present, must equal rules.issuer
// (absent: the issuer asked is the issuer); `exp` may be absent (expires_at 0: valid as long as
// the caller caches the answer); `aud` is required (RFC 8707 audience binding, which MCP
// authorization requires), but whether it names the resource is checked per request by the
// caller (rules.audiences is not used); `token_type`, when present, must be Bearer (any case):
// a refresh token or a sender-constrained (DPoP) token is not a bearer access token.
Expected<Claims, Rejection> check_introspection(std::string_view response, const Rules& rules,
                                                std::int64_t now);

}  // namespace mcpmqtt::auth

// Compact JWS access tokens (RFC 7515 §7.1) read and checked as RFC 9068 §4 asks of a resource
// server: the signature with the issuer's keys, then typ, iss, aud, exp, nbf and the claims'
// types (RFC 7519 §4.1); and the same claims as an introspection response (RFC 7662 §2.2) states
// them for an opaque token.
#include "auth/token.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "auth/internal.hpp"

namespace mcpmqtt::auth {

using detail::member;
using detail::text_of;
using rapidjson::Value;

namespace {

Unexpected<Rejection> reject(Failure f, std::string detail) {
  return unexpected(Rejection{f, std::move(detail)});
}

// The JWS algorithm names registered with IANA ("JSON Web Signature and Encryption Algorithms"),
// which a refusal may name; anything else a token says is not repeated.
std::string alg_for_detail(std::string_view name) {
  static constexpr std::string_view kRegistered[] = {
      "HS256", "HS384", "HS512", "RS256", "RS384", "RS512",  "ES256",   "ES384", "ES512",
      "PS256", "PS384", "PS512", "none",  "EdDSA", "ES256K", "Ed25519", "Ed448"};
  for (const auto r : kRegistered)
    if (r == name) return "alg " + std::string(r);
  return "an alg this server does not know";
}

bool allowed(const std::vector<Alg>& list, Alg alg) {
  return std::find(list.begin(), list.end(), alg) != list.end();
}

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// A pool for a header's or claims' document on the stack: a token is at most 16 KiB, and
// RapidJSON's default first chunk is 64 KiB from the heap, per document.
struct SmallDocument {
  alignas(std::max_align_t) char buffer[4096];
  rapidjson::MemoryPoolAllocator<> pool{buffer, sizeof buffer};
  rapidjson::Document doc{&pool};
};

// Saturating, so that dates near the ends of int64 and any skew compare without overflow.
std::int64_t add_sat(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    return b > 0 ? std::numeric_limits<std::int64_t>::max()
                 : std::numeric_limits<std::int64_t>::min();
  return r;
}
std::int64_t sub_sat(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_sub_overflow(a, b, &r))
    return b < 0 ? std::numeric_limits<std::int64_t>::max()
                 : std::numeric_limits<std::int64_t>::min();
  return r;
}

enum class DateRead { absent, ok, bad };

// RFC 7519 §2 NumericDate: seconds since the epoch, an integer or not (rounded down here).
DateRead read_date(const Value& claims, std::string_view name, std::int64_t& out) {
  const Value* v = member(claims, name);
  if (!v) return DateRead::absent;
  if (v->IsInt64()) {
    out = v->GetInt64();
    return DateRead::ok;
  }
  if (!v->IsDouble()) return DateRead::bad;  // a string, or an integer beyond int64
  const double d = std::floor(v->GetDouble());
  // 2^63 is exactly representable; anything from it up does not fit.
  if (!std::isfinite(d) || d >= 9223372036854775808.0 || d < -9223372036854775808.0)
    return DateRead::bad;
  out = static_cast<std::int64_t>(d);
  return DateRead::ok;
}

// RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ).
bool scope_token(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return c >= 0x21 && c <= 0x7e && c != '"' && c != '\\'; });
}

// A space-separated scope string into its tokens; false when one is not a scope-token.
bool split_scopes(std::string_view s, std::vector<std::string>& out) {
  while (!s.empty()) {
    const auto space = s.find(' ');
    const auto part = s.substr(0, space);
    if (!part.empty()) {
      if (!scope_token(part)) return false;
      out.emplace_back(part);
    }
    if (space == std::string_view::npos) break;
    s.remove_prefix(space + 1);
  }
  return true;
}

std::optional<Rejection> check_signature(const Token& token, const KeySet& keys) {
  const auto candidates = keys.candidates(token.kid, token.alg);
  if (candidates.empty()) {
    const std::string alg(alg_name(token.alg));
    if (keys.has_kid(token.kid)) {
      return Rejection{Failure::bad_signature, "the key the token's kid names cannot verify " +
                                                   alg + " (its kty or alg is another)"};
    }
    if (!token.kid.empty())
      return Rejection{Failure::unknown_kid, "no key in the JWK Set has the token's kid"};
    return Rejection{Failure::unknown_kid, "the token names no kid and no key in the JWK Set " +
                                               std::string("suits ") + alg};
  }
  for (const Jwk* key : candidates) {
    if (key->key &&
        detail::verify_signature(token.alg, *key->key, token.signing_input, token.signature)) {
      return std::nullopt;
    }
  }
  std::string detail = std::string(alg_name(token.alg)) + " signature does not verify";
  if (candidates.size() > 1)
    detail += " with any of " + std::to_string(candidates.size()) + " keys";
  if (token.alg == Alg::ES256 && token.signature.size() != 64) {
    detail = "an ES256 signature is 64 bytes (R || S), this one is " +
             std::to_string(token.signature.size());
  }
  return Rejection{Failure::bad_signature, std::move(detail)};
}

// Where claims come from: a JWT's payload, or the authorization server's introspection response
// (RFC 7662 §2.2), where iss and exp are optional and the audience is matched per request.
enum class ClaimSource { jwt, introspection };

Expected<Claims, Rejection> read_claims(const Value& doc, const Rules& rules, std::int64_t now,
                                        ClaimSource source) {
  const bool introspected = source == ClaimSource::introspection;
  Claims c;

  const Value* iss = member(doc, "iss");
  if (introspected && !iss) {
    c.issuer = rules.issuer;
  } else {
    if (!iss || !iss->IsString() || iss->GetStringLength() == 0)
      return reject(Failure::missing_claim, "iss is missing or not a string");
    if (text_of(*iss) != rules.issuer)
      return reject(Failure::wrong_issuer, "iss is not the configured issuer " + rules.issuer);
    c.issuer.assign(text_of(*iss));
  }

  const Value* aud = member(doc, "aud");
  if (!aud) {
    return reject(Failure::missing_claim,
                  introspected ? "the introspection response names no aud: only a token bound to "
                                 "this resource is accepted (RFC 8707, MCP authorization)"
                               : "aud is missing");
  }
  if (aud->IsString()) {
    c.audiences.emplace_back(text_of(*aud));
  } else if (aud->IsArray()) {
    for (const auto& a : aud->GetArray()) {
      if (!a.IsString())
        return reject(Failure::missing_claim, "aud holds a value that is no string");
      c.audiences.emplace_back(text_of(a));
    }
  } else {
    return reject(Failure::missing_claim, "aud is neither a string nor an array of strings");
  }
  const bool audience_ok =
      introspected || std::any_of(c.audiences.begin(), c.audiences.end(), [&](const auto& a) {
        return std::find(rules.audiences.begin(), rules.audiences.end(), a) !=
               rules.audiences.end();
      });
  if (!audience_ok) {
    std::string expected;
    for (const auto& a : rules.audiences)
      expected += (expected.empty() ? "" : " or ") + a;
    return reject(Failure::wrong_audience, rules.audiences.empty()
                                               ? std::string("no audience is configured")
                                               : "aud does not contain " + expected);
  }

  const std::int64_t skew = std::max<std::int64_t>(0, rules.clock_skew.count());
  switch (read_date(doc, "exp", c.expires_at)) {
    case DateRead::absent:
      if (introspected) break;  // RFC 7662 §2.2: exp is OPTIONAL
      return reject(Failure::missing_claim, "exp is missing");
    case DateRead::bad:
      return reject(Failure::missing_claim, "exp is not a NumericDate within range");
    case DateRead::ok:
      break;
  }
  // RFC 7519 §4.1.4: valid before exp; the skew extends it.
  if ((c.expires_at != 0 || !introspected) && now >= add_sat(c.expires_at, skew)) {
    return reject(Failure::expired, "expired " + std::to_string(sub_sat(now, c.expires_at)) +
                                        " s ago (clock skew allowed: " + std::to_string(skew) +
                                        " s)");
  }
  switch (read_date(doc, "nbf", c.not_before)) {
    case DateRead::bad:
      return reject(Failure::missing_claim, "nbf is not a NumericDate within range");
    case DateRead::absent:
      c.not_before = 0;
      break;
    case DateRead::ok:
      // RFC 7519 §4.1.5: valid from nbf on; the skew brings it forward.
      if (now < sub_sat(c.not_before, skew)) {
        return reject(Failure::not_yet_valid,
                      "not valid for another " + std::to_string(sub_sat(c.not_before, now)) +
                          " s (clock skew allowed: " + std::to_string(skew) + " s)");
      }
      break;
  }

  const Value* sub = member(doc, "sub");
  if (!sub || !sub->IsString() || sub->GetStringLength() == 0)
    return reject(Failure::missing_claim, "sub is missing or not a string");
  c.subject.assign(text_of(*sub));

  if (read_date(doc, "iat", c.issued_at) == DateRead::bad)
    return reject(Failure::missing_claim, "iat is not a NumericDate within range");
  if (const Value* client = member(doc, "client_id")) {
    if (!client->IsString()) return reject(Failure::missing_claim, "client_id is not a string");
    c.client_id.assign(text_of(*client));
  }
  // RFC 9068 §2.2.3 names `scope`; `scp` is what several issuers send instead.
  if (const Value* scope = member(doc, "scope")) {
    if (!scope->IsString() || !split_scopes(text_of(*scope), c.scopes))
      return reject(Failure::missing_claim,
                    "scope is not a string of scope-tokens (RFC 6749 §3.3)");
  } else if (const Value* scp = member(doc, "scp")) {
    bool ok = true;
    if (scp->IsString()) {
      ok = split_scopes(text_of(*scp), c.scopes);
    } else if (scp->IsArray()) {
      for (const auto& s : scp->GetArray()) {
        ok = ok && s.IsString() && scope_token(text_of(s));
        if (ok) c.scopes.emplace_back(text_of(s));
      }
    } else {
      ok = false;
    }
    if (!ok) return reject(Failure::missing_claim, "scp is not an array of scope-tokens");
  }
  return c;
}

Expected<Claims, Rejection> check_claims(const Token& token, const Rules& rules, std::int64_t now) {
  if (rules.require_at_jwt && token.typ != "at+jwt" && token.typ != "application/at+jwt") {
    return reject(Failure::wrong_type, token.typ.empty()
                                           ? "no typ header: RFC 9068 access tokens say at+jwt"
                                           : "typ is not at+jwt (RFC 9068 §4)");
  }
  SmallDocument small;
  rapidjson::Document& doc = small.doc;
  if (auto problem = detail::read_object(token.claims_json, doc))
    return reject(Failure::malformed, "the claims are " + *problem);
  return read_claims(doc, rules, now, ClaimSource::jwt);
}

}  // namespace

std::optional<Alg> alg_from_name(std::string_view name) {
  if (name == "RS256") return Alg::RS256;
  if (name == "PS256") return Alg::PS256;
  if (name == "ES256") return Alg::ES256;
  if (name == "EdDSA") return Alg::EdDSA;
  return std::nullopt;
}

std::string_view alg_name(Alg alg) {
  switch (alg) {
    case Alg::RS256:
      return "RS256";
    case Alg::PS256:
      return "PS256";
    case Alg::ES256:
      return "ES256";
    case Alg::EdDSA:
      return "EdDSA";
  }
  return "?";
}

std::string_view failure_name(Failure f) {
  switch (f) {
    case Failure::malformed:
      return "malformed";
    case Failure::unsupported_alg:
      return "unsupported_alg";
    case Failure::unknown_kid:
      return "unknown_kid";
    case Failure::bad_signature:
      return "bad_signature";
    case Failure::wrong_type:
      return "wrong_type";
    case Failure::wrong_issuer:
      return "wrong_issuer";
    case Failure::wrong_audience:
      return "wrong_audience";
    case Failure::expired:
      return "expired";
    case Failure::not_yet_valid:
      return "not_yet_valid";
    case Failure::missing_claim:
      return "missing_claim";
    case Failure::unavailable:
      return "unavailable";
    case Failure::inactive:
      return "inactive";
  }
  return "?";
}

Expected<Token, Rejection> parse_token(std::string_view compact,
                                       const std::vector<Alg>& allowed_algs) {
  if (compact.size() > kMaxTokenBytes) {
    return reject(Failure::malformed, "a token of " + std::to_string(compact.size()) +
                                          " bytes, more than " + std::to_string(kMaxTokenBytes));
  }
  const auto dots = std::count(compact.begin(), compact.end(), '.');
  if (dots != 2) {
    return reject(Failure::malformed,
                  dots == 4 ? std::string("five parts: an encrypted token (JWE), not a JWS")
                            : "not three parts separated by dots (a compact JWS)");
  }
  const auto first = compact.find('.');
  const auto second = compact.find('.', first + 1);
  const std::string_view header_b64 = compact.substr(0, first);
  const std::string_view payload_b64 = compact.substr(first + 1, second - first - 1);
  const std::string_view signature_b64 = compact.substr(second + 1);

  const auto header_json = base64url_decode(header_b64);
  if (!header_json || header_json->empty())
    return reject(Failure::malformed, "the header is empty or not base64url");
  SmallDocument small;
  rapidjson::Document& header = small.doc;
  if (auto problem = detail::read_object(*header_json, header))
    return reject(Failure::malformed, "the header is " + *problem);

  Token token;
  const Value* alg = member(header, "alg");
  if (!alg || !alg->IsString()) return reject(Failure::malformed, "the header has no alg string");
  const auto name = text_of(*alg);
  const auto known = alg_from_name(name);
  if (!known) {
    if (name == "none")
      return reject(Failure::unsupported_alg, "alg none: an unsigned token is never accepted");
    if (name.substr(0, 2) == "HS") {
      return reject(Failure::unsupported_alg,
                    alg_for_detail(name) +
                        ": an HMAC needs a shared secret; only public-key signatures are accepted");
    }
    return reject(Failure::unsupported_alg, alg_for_detail(name) + " is not supported");
  }
  if (!allowed(allowed_algs, *known)) {
    return reject(Failure::unsupported_alg,
                  "alg " + std::string(alg_name(*known)) + " is not in the allow-list");
  }
  token.alg = *known;
  if (const Value* kid = member(header, "kid")) {
    if (!kid->IsString()) return reject(Failure::malformed, "the header's kid is not a string");
    token.kid.assign(text_of(*kid));
  }
  if (const Value* typ = member(header, "typ")) {
    if (!typ->IsString()) return reject(Failure::malformed, "the header's typ is not a string");
    token.typ = lowercase(text_of(*typ));
  }
  // RFC 7515 §4.1.11: extensions named in crit must be understood, and none is here.
  if (member(header, "crit"))
    return reject(Failure::malformed, "the header has crit: no extension is supported");

  auto claims = base64url_decode(payload_b64);
  if (!claims) return reject(Failure::malformed, "the claims are not base64url");
  {
    SmallDocument claims_small;
    if (auto problem = detail::read_object(*claims, claims_small.doc))
      return reject(Failure::malformed, "the claims are " + *problem);
  }
  auto signature = base64url_decode(signature_b64);
  if (!signature) return reject(Failure::malformed, "the signature is not base64url");
  if (signature->empty()) return reject(Failure::malformed, "the token has no signature");

  token.signing_input.assign(compact.substr(0, second));
  token.signature = std::move(*signature);
  token.claims_json = std::move(*claims);
  return token;
}

Expected<Claims, Rejection> verify(const Token& token, const KeySet& keys, const Rules& rules,
                                   std::int64_t now) {
  if (!allowed(rules.algorithms, token.alg)) {
    return reject(Failure::unsupported_alg,
                  "alg " + std::string(alg_name(token.alg)) + " is not in the allow-list");
  }
  if (auto rejection = check_signature(token, keys)) return unexpected(std::move(*rejection));
  return check_claims(token, rules, now);
}

bool looks_like_jws(std::string_view token) {
  if (std::count(token.begin(), token.end(), '.') != 2) return false;
  const auto header = base64url_decode(token.substr(0, token.find('.')));
  if (!header || header->empty()) return false;
  SmallDocument small;
  return !detail::read_object(*header, small.doc);
}

Expected<Claims, Rejection> check_introspection(std::string_view response, const Rules& rules,
                                                std::int64_t now) {
  rapidjson::Document doc;
  if (auto problem = detail::read_object(response, doc))
    return reject(Failure::malformed, "the introspection response is " + *problem);
  // RFC 7662 §2.2: "active" is REQUIRED, a boolean; anything but true means not active.
  const Value* active = member(doc, "active");
  if (!active || !active->IsBool())
    return reject(Failure::malformed, "the introspection response has no boolean \"active\"");
  if (!active->GetBool()) return reject(Failure::inactive, "the token is not active");
  if (const Value* type = member(doc, "token_type")) {
    if (!type->IsString() || lowercase(text_of(*type)) != "bearer")
      return reject(Failure::wrong_type, "token_type is not Bearer (RFC 6750 access tokens only)");
  }
  return read_claims(doc, rules, now, ClaimSource::introspection);
}

}  // namespace mcpmqtt::auth

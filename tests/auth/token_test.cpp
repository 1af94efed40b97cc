// The access-token core (auth/token.hpp) against tokens a test issuer signs in-process with
// OpenSSL (tests/support/test_issuer.hpp): every algorithm, every refusal of the JWK Set
// reader, every Failure kind, the clock skew at its edges.
#include "auth/token.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/support/test_issuer.hpp"

namespace mcpmqtt::auth {
namespace {

using test::b64url;
using test::ClaimSet;
using test::JoseHeader;
using test::TestIssuer;

constexpr std::int64_t kNow = 1'900'000'000;

// One issuer for the whole file, with one RSA key (published twice, for RS256 and PS256): making
// an RSA key takes a quarter of a second of CPU, and CTest runs each test in a process of its own.
const TestIssuer& auth_issuer() {
  static const TestIssuer issuer = [] {
    TestIssuer i;
    TestIssuer::KeyOptions same;
    same.same_key_as = "rsa-1";
    i.add_key("rsa-1", "RS256").add_key("ps-1", "PS256", same).add_key("ec-1", "ES256");
    i.add_key("ed-1", "EdDSA");
    TestIssuer::KeyOptions hidden;
    hidden.published = false;
    i.add_key("ec-hidden", "ES256", hidden).add_key("ed-hidden", "EdDSA", hidden);
    return i;
  }();
  return issuer;
}

const KeySet& auth_keys() {
  static const KeySet keys = *KeySet::parse(auth_issuer().jwks());
  return keys;
}

Rules auth_rules() {
  Rules r;
  r.issuer = auth_issuer().issuer();
  r.audiences = {auth_issuer().audience()};
  return r;
}

ClaimSet auth_claims() {
  return auth_issuer().claims(kNow);
}

// What the ingress does per request: parse, then verify.
Expected<Claims, Rejection> auth_check(std::string_view token, const KeySet& keys,
                                       const Rules& rules, std::int64_t now = kNow) {
  auto parsed = parse_token(token, rules.algorithms);
  if (!parsed) return unexpected(parsed.error());
  return verify(*parsed, keys, rules, now);
}
Expected<Claims, Rejection> auth_check(std::string_view token, std::int64_t now = kNow) {
  return auth_check(token, auth_keys(), auth_rules(), now);
}

// "ok", or the failure's name (the detail goes into the test's log).
std::string kind_of(const Expected<Claims, Rejection>& r) {
  if (r) return "ok";
  UNSCOPED_INFO("detail: " << r.error().detail);
  return std::string(failure_name(r.error().failure));
}
std::string kind_of(const Expected<Token, Rejection>& r) {
  if (r) return "ok";
  UNSCOPED_INFO("detail: " << r.error().detail);
  return std::string(failure_name(r.error().failure));
}

std::string with_header(const std::string& kid, JoseHeader h, const ClaimSet& c) {
  return auth_issuer().mint(kid, h, c.json());
}

JoseHeader header_of(const std::string& alg, std::optional<std::string> kid) {
  JoseHeader h;
  h.alg = alg;
  h.kid = std::move(kid);
  return h;
}

// A JWK Set of the given entries (JSON texts).
std::string key_set(const std::vector<std::string>& entries) {
  std::string out = "{\"keys\":[";
  for (std::size_t i = 0; i < entries.size(); ++i)
    out += (i ? "," : "") + entries[i];
  return out + "]}";
}

// Replaces the value of `name` in a JWK's JSON text.
std::string with_member(std::string jwk, const std::string& name, const std::string& json_value) {
  const std::string key = "\"" + name + "\":";
  const auto at = jwk.find(key);
  REQUIRE(at != std::string::npos);
  const auto start = at + key.size();
  auto end = start;
  if (jwk[start] == '"') {
    end = jwk.find('"', start + 1) + 1;
  } else {
    end = jwk.find_first_of(",}", start);
  }
  return jwk.replace(start, end - start, json_value);
}

std::string member_text(const std::string& jwk, const std::string& name) {
  const std::string key = "\"" + name + "\":\"";
  const auto at = jwk.find(key);
  REQUIRE(at != std::string::npos);
  const auto start = at + key.size();
  return jwk.substr(start, jwk.find('"', start) - start);
}

// ---- base64url -------------------------------------------------------------------------------

TEST_CASE("auth: RFC 4648 §10 test vectors in base64url without padding, both ways", "[auth]") {
  const std::pair<std::string, std::string> vectors[] = {
      {"", ""},           {"f", "Zg"},          {"fo", "Zm8"},          {"foo", "Zm9v"},
      {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"}, {"\xfb\xff", "-_8"}};
  for (const auto& [bytes, text] : vectors) {
    CHECK(base64url_encode(bytes) == text);
    CHECK(base64url_decode(text) == bytes);
  }
  // Every byte value, against the test issuer's own encoder.
  std::string all;
  for (int i = 0; i < 256; ++i)
    all += static_cast<char>(i);
  for (std::size_t len = 0; len <= all.size(); len += 37) {
    const auto bytes = all.substr(all.size() - len);
    CHECK(base64url_encode(bytes) == b64url(bytes));
    CHECK(base64url_decode(b64url(bytes)) == bytes);
  }
}

TEST_CASE(
    "auth: RFC 7515 §2 base64url decoding refuses padding, whitespace, the other alphabet and "
    "text with unused bits set",
    "[auth]") {
  for (const char* bad : {"Zg==", "Zm9v\n", "Zm 9v", "Zm+v", "Zm/v", "Z", "Zm9vY", "Zh", "Zm9",
                          "Zm9vYmF=", "\xc3\xa9"}) {
    INFO(bad);
    CHECK_FALSE(base64url_decode(bad).has_value());
  }
}

// ---- algorithms ---------------------------------------------------------------------------------

TEST_CASE("auth: RFC 7518 alg names are case-sensitive, and none and HS256 are no Alg", "[auth]") {
  for (Alg a : {Alg::RS256, Alg::PS256, Alg::ES256, Alg::EdDSA})
    CHECK(alg_from_name(alg_name(a)) == a);
  for (const char* name : {"none", "HS256", "rs256", "RS384", "ES256K", "Ed25519", ""})
    CHECK_FALSE(alg_from_name(name).has_value());
}

TEST_CASE("auth: each algorithm verifies: RS256, PS256, ES256 and EdDSA", "[auth]") {
  for (const char* kid : {"rsa-1", "ps-1", "ec-1", "ed-1"}) {
    INFO(kid);
    auto claims = auth_claims();
    claims.str("client_id", "desktop-app").str("scope", "mcp:weather mcp:all");
    const auto token = auth_issuer().mint(kid, claims);
    const auto parsed = parse_token(token, Rules{}.algorithms);
    REQUIRE(kind_of(parsed) == "ok");
    CHECK(parsed->kid == kid);
    CHECK(parsed->typ == "at+jwt");
    CHECK(parsed->signing_input == token.substr(0, token.rfind('.')));
    CHECK(parsed->claims_json == claims.json());
    const auto r = verify(*parsed, auth_keys(), auth_rules(), kNow);
    REQUIRE(kind_of(r) == "ok");
    CHECK(r->issuer == auth_issuer().issuer());
    CHECK(r->subject == "user-1");
    CHECK(r->client_id == "desktop-app");
    CHECK(r->audiences == std::vector<std::string>{auth_issuer().audience()});
    CHECK(r->scopes == std::vector<std::string>{"mcp:weather", "mcp:all"});
    CHECK(r->expires_at == kNow + 300);
    CHECK(r->issued_at == kNow);
    CHECK(r->not_before == 0);
  }
  CHECK(alg_name(Alg::PS256) == "PS256");
}

TEST_CASE("auth: RFC 8725 §3.1 a token with alg none is refused as unsupported_alg", "[auth]") {
  const auto token = TestIssuer::unsigned_token(auth_claims().json());
  CHECK(kind_of(auth_check(token)) == "unsupported_alg");
  // Even with something where the signature should be.
  CHECK(kind_of(auth_check(token + "c2ln")) == "unsupported_alg");
}

TEST_CASE(
    "auth: RFC 8725 §2.1 an HS256 token whose HMAC key is the RSA public key is refused, never "
    "verified",
    "[auth]") {
  const auto token = auth_issuer().hs256_with_public_key("rsa-1", auth_claims().json());
  const auto r = auth_check(token);
  CHECK(kind_of(r) == "unsupported_alg");
  // The same HMAC under a header that says RS256 is only a wrong signature.
  const auto input = token.substr(0, token.rfind('.'));
  const auto relabelled = b64url(header_of("RS256", "rsa-1").json()) + "." +
                          input.substr(input.find('.') + 1) + "." +
                          token.substr(token.rfind('.') + 1);
  CHECK(kind_of(auth_check(relabelled)) == "bad_signature");
}

TEST_CASE("auth: RFC 8725 §3.1 an algorithm outside the allow-list is refused", "[auth]") {
  const auto es = auth_issuer().mint("ec-1", auth_claims());
  const std::vector<Alg> rsa_only{Alg::RS256};
  CHECK(kind_of(parse_token(es, rsa_only)) == "unsupported_alg");
  CHECK(kind_of(parse_token(es, {})) == "unsupported_alg");
  CHECK(kind_of(parse_token(auth_issuer().mint("rsa-1", auth_claims()), rsa_only)) == "ok");
  // verify checks its rules' list again, whatever list parse_token was given.
  const auto parsed = parse_token(es, Rules{}.algorithms);
  REQUIRE(parsed);
  auto rules = auth_rules();
  rules.algorithms = {Alg::RS256, Alg::EdDSA};
  CHECK(kind_of(verify(*parsed, auth_keys(), rules, kNow)) == "unsupported_alg");
  // Registered algorithms nobody here verifies, and names nobody registered.
  for (const char* alg : {"RS384", "ES512", "PS512", "ES256K", "Ed448", "HS512", "xyz"}) {
    INFO(alg);
    const auto t = with_header("rsa-1", header_of(alg, "rsa-1"), auth_claims());
    const auto r = parse_token(t, Rules{}.algorithms);
    REQUIRE(kind_of(r) == "unsupported_alg");
    if (std::string(alg) == "xyz") CHECK(r.error().detail.find("xyz") == std::string::npos);
  }
}

// ---- the JWK Set ------------------------------------------------------------------------------

TEST_CASE("auth: RFC 7517 §5 a JWK Set of RSA, EC P-256 and Ed25519 keys is read", "[auth]") {
  const auto& keys = auth_keys();
  CHECK(keys.size() == 4);
  CHECK(keys.skipped() == 0);
  CHECK(keys.skipped_reasons().empty());
  for (const char* kid : {"rsa-1", "ps-1", "ec-1", "ed-1"})
    CHECK(keys.has_kid(kid));
  CHECK_FALSE(keys.has_kid("ec-hidden"));
  CHECK_FALSE(keys.has_kid(""));
  const auto rsa = keys.candidates("rsa-1", Alg::RS256);
  REQUIRE(rsa.size() == 1);
  CHECK(rsa[0]->kty == "RSA");
  CHECK(rsa[0]->alg == Alg::RS256);
  CHECK(keys.candidates("ec-1", Alg::ES256).size() == 1);
  CHECK(keys.candidates("ed-1", Alg::EdDSA).size() == 1);
  // Without a kid: every key of the alg's type whose own alg, if any, is the token's.
  CHECK(keys.candidates("", Alg::RS256).size() == 1);
  CHECK(keys.candidates("", Alg::PS256).size() == 1);
  CHECK(keys.candidates("", Alg::ES256).size() == 1);
}

TEST_CASE("auth: a JWK Set that is not JSON, or not an object, is refused", "[auth]") {
  for (const std::string& doc :
       {std::string("not json"), std::string(""), std::string("{\"keys\":["), std::string("[]"),
        std::string("\"keys\""), std::string("{\"keys\":[]} x"),
        std::string("{\"keys\":[]}\0{}", 14), std::string("{\"keys\":[\"\xff\"]}"),
        std::string(200000, '[')}) {
    INFO(doc.substr(0, 40));
    const auto r = KeySet::parse(doc);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().find("JWK Set") != std::string::npos);
  }
}

TEST_CASE("auth: a JWK Set larger than its limit is refused before it is read", "[auth]") {
  const auto jwks = auth_issuer().jwks();
  KeySet::Limits limits;
  limits.max_document_bytes = jwks.size() - 1;
  const auto r = KeySet::parse(jwks, limits);
  REQUIRE_FALSE(r);
  CHECK(r.error().find("limit") != std::string::npos);
  limits.max_document_bytes = jwks.size();
  CHECK(KeySet::parse(jwks, limits).has_value());
  // The default limit, 256 KiB.
  const std::string huge = "{\"keys\":[]" + std::string(256 * 1024, ' ') + "}";
  CHECK_FALSE(KeySet::parse(huge).has_value());
}

TEST_CASE("auth: a JWK Set without a keys array is refused", "[auth]") {
  for (const char* doc :
       {"{}", R"({"keys":{}})", R"({"keys":"x"})", R"({"key":[]})", R"({"keys":null})"}) {
    INFO(doc);
    const auto r = KeySet::parse(doc);
    REQUIRE_FALSE(r);
    CHECK(r.error().find("keys") != std::string::npos);
  }
  // Twice is once too many (RFC 7515 §5.2 asks the same of JOSE objects).
  CHECK_FALSE(KeySet::parse(R"({"keys":[],"keys":[]})").has_value());
}

TEST_CASE("auth: a JWK Set with more keys than its limit is refused", "[auth]") {
  std::vector<std::string> entries(64, R"({"kty":"oct","k":"c2VjcmV0"})");
  const auto at_limit = KeySet::parse(key_set(entries));
  REQUIRE(at_limit);
  CHECK(at_limit->empty());
  CHECK(at_limit->skipped() == 64);
  entries.push_back("{}");
  const auto over = KeySet::parse(key_set(entries));
  REQUIRE_FALSE(over);
  CHECK(over.error().find("65 keys") != std::string::npos);
  KeySet::Limits two;
  two.max_keys = 2;
  CHECK_FALSE(KeySet::parse(auth_issuer().jwks(), two).has_value());
}

TEST_CASE("auth: an RSA key of fewer than 2048 bits is skipped, with the reason", "[auth]") {
  TestIssuer weak;
  TestIssuer::KeyOptions small;
  small.rsa_bits = 1024;
  weak.add_key("weak", "RS256", small).add_key("strong", "ES256");
  const auto keys = KeySet::parse(weak.jwks());
  REQUIRE(keys);
  CHECK(keys->size() == 1);
  CHECK(keys->skipped() == 1);
  CHECK(keys->skipped_reasons().find("key 0 (kid \"weak\")") != std::string::npos);
  CHECK(keys->skipped_reasons().find("1024 bits") != std::string::npos);
  CHECK_FALSE(keys->has_kid("weak"));
  // Its tokens then name a kid nobody has.
  CHECK(kind_of(auth_check(weak.mint("weak", weak.claims(kNow)), *keys, auth_rules())) ==
        "unknown_kid");
}

TEST_CASE("auth: RSA moduli are read with a leading zero byte, and odd exponents only", "[auth]") {
  const auto jwk = auth_issuer().public_jwk("rsa-1");
  const auto n = *base64url_decode(member_text(jwk, "n"));
  const auto padded = with_member(jwk, "n", "\"" + base64url_encode('\0' + n) + "\"");
  const auto keys = KeySet::parse(key_set({padded}));
  REQUIRE(keys);
  CHECK(keys->size() == 1);
  CHECK(kind_of(auth_check(auth_issuer().mint("rsa-1", auth_claims()), *keys, auth_rules())) ==
        "ok");
  for (const char* e : {"\"AQAA\"", "\"AQ\"", "\"\"", "\"AA\"", "3"}) {
    INFO(e);
    const auto bad = KeySet::parse(key_set({with_member(jwk, "e", e)}));
    REQUIRE(bad);
    CHECK(bad->empty());
  }
  // A modulus beyond kMaxRsaBits is refused by its length, before any arithmetic.
  const auto huge =
      with_member(jwk, "n", "\"" + base64url_encode(std::string(1025, '\x01')) + "\"");
  const auto too_big = KeySet::parse(key_set({huge}));
  REQUIRE(too_big);
  CHECK(too_big->empty());
  CHECK(too_big->skipped_reasons().find("8192") != std::string::npos);
}

TEST_CASE("auth: RFC 7518 §6.2.1 an EC point not on P-256 is skipped", "[auth]") {
  const auto jwk = auth_issuer().public_jwk("ec-1");
  auto y = *base64url_decode(member_text(jwk, "y"));
  y[31] = static_cast<char>(y[31] ^ 1);
  const auto off_curve =
      KeySet::parse(key_set({with_member(jwk, "y", "\"" + base64url_encode(y) + "\"")}));
  REQUIRE(off_curve);
  CHECK(off_curve->empty());
  CHECK(off_curve->skipped_reasons().find("not a point of P-256") != std::string::npos);
  // The coordinates at their full length only (RFC 7518 §6.2.1.2).
  auto x = *base64url_decode(member_text(jwk, "x"));
  const auto short_x = with_member(jwk, "x", "\"" + base64url_encode(x.substr(1)) + "\"");
  const auto r = KeySet::parse(key_set({short_x}));
  REQUIRE(r);
  CHECK(r->empty());
  CHECK(r->skipped_reasons().find("32 bytes") != std::string::npos);
  // The point at infinity has no affine form; zeros are not on the curve either.
  const std::string zeros = "\"" + base64url_encode(std::string(32, '\0')) + "\"";
  CHECK(KeySet::parse(key_set({with_member(with_member(jwk, "x", zeros), "y", zeros)}))->empty());
}

TEST_CASE("auth: a private key in a JWK Set is skipped, never used", "[auth]") {
  for (const char* kid : {"rsa-1", "ec-1", "ed-1"}) {
    INFO(kid);
    const auto keys = KeySet::parse(key_set({auth_issuer().private_jwk(kid)}));
    REQUIRE(keys);
    CHECK(keys->empty());
    CHECK(keys->skipped_reasons().find("private key") != std::string::npos);
  }
}

TEST_CASE("auth: keys of another kty, curve, use, key_ops or alg are skipped and the others kept",
          "[auth]") {
  const auto rsa = auth_issuer().public_jwk("rsa-1");
  const auto ec = auth_issuer().public_jwk("ec-1");
  const auto ed = auth_issuer().public_jwk("ed-1");
  const std::vector<std::pair<std::string, std::string>> skipped = {
      {R"({"kty":"oct","k":"c2VjcmV0","kid":"hmac"})", "kty oct"},
      {R"({"kty":"XYZ"})", "kty not RSA"},
      {R"({"n":"AQAB"})", "kty is missing"},
      {"[1]", "not a JSON object"},
      {"7", "not a JSON object"},
      {with_member(ec, "crv", "\"P-384\""), "curve not P-256"},
      {with_member(ed, "crv", "\"X25519\""), "not Ed25519"},
      {with_member(rsa, "use", "\"enc\""), "use is not sig"},
      {with_member(rsa, "use", "1"), "use is not sig"},
      {with_member(rsa, "alg", "\"RS384\""), "alg not RS256"},
      {with_member(rsa, "alg", "\"ES256\""), "does not suit"},
      {with_member(ec, "alg", "\"EdDSA\""), "does not suit"},
      {with_member(rsa, "kid", "5"), "kid is not a string"},
      {with_member(rsa, "n", "\"a+b\""), "not base64url"},
      {with_member(ed, "x", "\"AAAA\""), "32 bytes"},
      {rsa.substr(0, rsa.size() - 1) + R"(,"key_ops":["encrypt"]})", "key_ops"},
      {rsa.substr(0, rsa.size() - 1) + R"(,"kid":"again"})", "a member name twice"},
  };
  std::vector<std::string> entries;
  for (const auto& s : skipped)
    entries.push_back(s.first);
  entries.push_back(rsa);
  entries.push_back(rsa.substr(0, rsa.size() - 1) + R"(,"key_ops":["verify"]})");
  const auto keys = KeySet::parse(key_set(entries));
  REQUIRE(keys);
  CHECK(keys->size() == 2);
  CHECK(keys->skipped() == skipped.size());
  INFO(keys->skipped_reasons());
  std::vector<std::string> reasons;
  std::string_view all = keys->skipped_reasons();
  for (auto at = all.find("; "); !all.empty(); at = all.find("; ")) {
    reasons.emplace_back(all.substr(0, at));
    all = at == std::string_view::npos ? std::string_view() : all.substr(at + 2);
  }
  REQUIRE(reasons.size() == skipped.size());
  for (std::size_t i = 0; i < skipped.size(); ++i) {
    INFO(skipped[i].first);
    CHECK(reasons[i].rfind("key " + std::to_string(i), 0) == 0);
    CHECK(reasons[i].find(skipped[i].second) != std::string::npos);
  }
}

TEST_CASE("auth: an empty JWK Set, or one whose keys were all skipped, verifies nothing",
          "[auth]") {
  for (const char* doc : {R"({"keys":[]})", R"({"keys":[{"kty":"oct","k":"AA"}]})"}) {
    const auto keys = KeySet::parse(doc);
    REQUIRE(keys);
    CHECK(keys->empty());
    CHECK(kind_of(auth_check(auth_issuer().mint("rsa-1", auth_claims()), *keys, auth_rules())) ==
          "unknown_kid");
  }
  CHECK(KeySet{}.empty());
}

// ---- the token's form ---------------------------------------------------------------------

TEST_CASE("auth: RFC 7515 §7.1 a token that is not a compact JWS is malformed", "[auth]") {
  const auto claims = auth_claims().json();
  const auto header = header_of("RS256", "rsa-1").json();
  const auto good = auth_issuer().mint("rsa-1", auth_claims());
  const auto sig = good.substr(good.rfind('.') + 1);
  auto signed_raw = [&](const std::string& h, const std::string& c) {
    return auth_issuer().mint_raw("rsa-1", h, c);
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty", ""},
      {"two parts", "a.b"},
      {"four parts", good + ".x"},
      {"five parts (JWE)", "a.b.c.d.e"},
      {"header not base64url", "e30=." + b64url(claims) + "." + sig},
      {"empty header", "." + b64url(claims) + "." + sig},
      {"header not JSON", b64url("{alg:RS256}") + "." + b64url(claims) + "." + sig},
      {"header an array", signed_raw("[\"RS256\"]", claims)},
      {"header without alg", signed_raw(R"({"kid":"rsa-1"})", claims)},
      {"alg not a string", signed_raw(R"({"alg":256})", claims)},
      {"kid not a string", signed_raw(R"({"alg":"RS256","kid":1})", claims)},
      {"typ not a string", signed_raw(R"({"alg":"RS256","typ":["at+jwt"]})", claims)},
      {"alg twice", signed_raw(R"({"alg":"RS256","alg":"none"})", claims)},
      {"crit", signed_raw(R"({"alg":"RS256","kid":"rsa-1","crit":["exp"],"exp":1})", claims)},
      {"claims not base64url", b64url(header) + ".e30=." + sig},
      {"claims not JSON", signed_raw(header, "sub=user-1")},
      {"claims an array", signed_raw(header, "[]")},
      {"claims a string", signed_raw(header, "\"x\"")},
      {"claims with a NUL", signed_raw(header, std::string("{}\0{}", 5))},
      {"claims nested past any stack", signed_raw(header, std::string(10000, '['))},
      {"a claim twice", signed_raw(header, R"({"sub":"a","sub":"b"})")},
      {"signature not base64url", b64url(header) + "." + b64url(claims) + "." + sig + "="},
      {"no signature", b64url(header) + "." + b64url(claims) + "."},
      {"too long", std::string(kMaxTokenBytes + 1, 'a')},
  };
  for (const auto& [what, token] : cases) {
    INFO(what);
    CHECK(kind_of(parse_token(token, Rules{}.algorithms)) == "malformed");
  }
  // At the limit, the length alone is no reason.
  auto big = auth_claims();
  big.str("pad", std::string(kMaxTokenBytes, 'x'));
  auto fits = auth_claims();
  const auto base = auth_issuer().mint("rsa-1", fits).size();
  fits.str("pad", std::string((kMaxTokenBytes - base - 16) * 3 / 4, 'x'));
  const auto near = auth_issuer().mint("rsa-1", fits);
  CHECK(near.size() <= kMaxTokenBytes);
  CHECK(near.size() > kMaxTokenBytes - 24);
  CHECK(kind_of(auth_check(near)) == "ok");
  CHECK(kind_of(parse_token(auth_issuer().mint("rsa-1", big), Rules{}.algorithms)) == "malformed");
  // A token built by hand whose claims are not JSON is malformed at verify too.
  auto parsed = parse_token(good, Rules{}.algorithms);
  REQUIRE(parsed);
  parsed->claims_json = "nope";
  CHECK(kind_of(verify(*parsed, auth_keys(), auth_rules(), kNow)) == "malformed");
}

TEST_CASE("auth: the header's kid and typ are read, typ in lower case, an empty kid as none",
          "[auth]") {
  JoseHeader h = header_of("ES256", "ec-1");
  h.typ = "Application/AT+JWT";
  const auto t = parse_token(with_header("ec-1", h, auth_claims()), Rules{}.algorithms);
  REQUIRE(t);
  CHECK(t->alg == Alg::ES256);
  CHECK(t->kid == "ec-1");
  CHECK(t->typ == "application/at+jwt");
  CHECK(kind_of(verify(*t, auth_keys(), auth_rules(), kNow)) == "ok");
  const auto no_kid =
      parse_token(with_header("ec-1", header_of("ES256", ""), auth_claims()), Rules{}.algorithms);
  REQUIRE(no_kid);
  CHECK(no_kid->kid.empty());
  CHECK(kind_of(verify(*no_kid, auth_keys(), auth_rules(), kNow)) == "ok");
  // jku, jwk and x5u name keys the token chose: ignored.
  h.extra = R"("jku":"https://evil.example/jwks","jwk":{"kty":"oct","k":"AA"})";
  CHECK(kind_of(auth_check(with_header("ec-1", h, auth_claims()))) == "ok");
}

// ---- signatures and keys ------------------------------------------------------------------

TEST_CASE("auth: a tampered signature is refused as bad_signature, for each algorithm", "[auth]") {
  for (const char* kid : {"rsa-1", "ps-1", "ec-1", "ed-1"}) {
    INFO(kid);
    const auto good = auth_issuer().mint(kid, auth_claims());
    CHECK(kind_of(auth_check(TestIssuer::tamper_signature(good))) == "bad_signature");
    // The claims changed under the old signature.
    auto changed = auth_claims();
    changed.str("sub", "admin");
    const auto swapped =
        good.substr(0, good.find('.') + 1) + b64url(changed.json()) + good.substr(good.rfind('.'));
    CHECK(kind_of(auth_check(swapped)) == "bad_signature");
  }
}

TEST_CASE("auth: a token signed by a key not in the set is refused", "[auth]") {
  // Its own kid: unknown (the caller may fetch the JWK Set again).
  CHECK(kind_of(auth_check(auth_issuer().mint("ed-hidden", auth_claims()))) == "unknown_kid");
  // A published kid on it: a signature that does not verify.
  CHECK(kind_of(auth_check(with_header("ed-hidden", header_of("EdDSA", "ed-1"), auth_claims()))) ==
        "bad_signature");
  CHECK(kind_of(auth_check(with_header("ec-hidden", header_of("ES256", "ec-1"), auth_claims()))) ==
        "bad_signature");
  // No kid at all: every key of its type is tried, and none verifies.
  const auto r =
      auth_check(with_header("ec-hidden", header_of("ES256", std::nullopt), auth_claims()));
  CHECK(kind_of(r) == "bad_signature");
}

TEST_CASE(
    "auth: a kid that names a key of another type is refused, so a key never checks another "
    "alg",
    "[auth]") {
  // Signed with the EC key but naming the RSA key, and the other way round.
  CHECK(kind_of(auth_check(with_header("ec-1", header_of("ES256", "rsa-1"), auth_claims()))) ==
        "bad_signature");
  CHECK(kind_of(auth_check(with_header("rsa-1", header_of("RS256", "ed-1"), auth_claims()))) ==
        "bad_signature");
  CHECK(auth_keys().candidates("rsa-1", Alg::ES256).empty());
  CHECK(auth_keys().candidates("ed-1", Alg::RS256).empty());
}

TEST_CASE("auth: RFC 7517 §4.4 a key whose alg is present must equal the token's", "[auth]") {
  // One RSA key signing PS256, published once without alg and once with "alg": "RS256".
  TestIssuer dual;
  TestIssuer::KeyOptions no_alg;
  no_alg.jwk_alg = false;
  dual.add_key("dual", "PS256", no_alg);
  const auto jwk = dual.public_jwk("dual");
  REQUIRE(jwk.find("\"alg\"") == std::string::npos);
  const auto open = KeySet::parse(key_set({jwk}));
  const auto pinned =
      KeySet::parse(key_set({jwk.substr(0, jwk.size() - 1) + R"(,"alg":"RS256"})"}));
  REQUIRE(open);
  REQUIRE(pinned);
  const auto ps_token = dual.mint("dual", dual.claims(kNow));
  CHECK(kind_of(auth_check(ps_token, *open, auth_rules())) == "ok");
  CHECK(kind_of(auth_check(ps_token, *pinned, auth_rules())) == "bad_signature");
  CHECK(pinned->candidates("dual", Alg::PS256).empty());
  CHECK(pinned->candidates("dual", Alg::RS256).size() == 1);
  // Without alg the key takes either, and a signature is still checked with the padding its
  // token's alg names: a PSS signature under an RS256 header does not verify.
  CHECK(open->candidates("dual", Alg::RS256).size() == 1);
  const auto input = b64url(header_of("RS256", "dual").json()) + "." + b64url(auth_claims().json());
  CHECK(kind_of(auth_check(input + "." + b64url(dual.sign("dual", input)), *open, auth_rules())) ==
        "bad_signature");
}

TEST_CASE("auth: without a kid, every key that suits the alg is tried", "[auth]") {
  TestIssuer several;
  TestIssuer::KeyOptions anonymous;
  anonymous.jwk_kid = false;
  several.add_key("a", "ES256", anonymous).add_key("b", "ES256", anonymous);
  several.add_key("c", "ES256", anonymous).add_key("d", "EdDSA", anonymous);
  const auto keys = KeySet::parse(several.jwks());
  REQUIRE(keys);
  CHECK(keys->candidates("", Alg::ES256).size() == 3);
  Rules rules = auth_rules();
  rules.issuer = several.issuer();
  auto claims = several.claims(kNow);
  for (const char* signer : {"a", "b", "c"}) {
    INFO(signer);
    CHECK(kind_of(auth_check(several.mint(signer, header_of("ES256", std::nullopt), claims.json()),
                             *keys, rules)) == "ok");
  }
  // A kid no key has is unknown even though keys without a kid would verify it.
  CHECK(kind_of(auth_check(several.mint("a", claims), *keys, rules)) == "unknown_kid");
  const auto r =
      auth_check(auth_issuer().mint("ec-hidden", header_of("ES256", std::nullopt), claims.json()),
                 *keys, rules);
  REQUIRE(kind_of(r) == "bad_signature");
  CHECK(r.error().detail.find("any of 3 keys") != std::string::npos);
  // No key of the alg's type, and no kid to fetch the set again for: unknown_kid all the same.
  CHECK(kind_of(
            auth_check(auth_issuer().mint("rsa-1", header_of("RS256", std::nullopt), claims.json()),
                       *keys, rules)) == "unknown_kid");
}

TEST_CASE("auth: RFC 7518 §3.4 an ES256 signature is R || S of 64 bytes, nothing else", "[auth]") {
  const auto good = auth_issuer().mint("ec-1", auth_claims());
  const auto input = good.substr(0, good.rfind('.'));
  const auto raw = *base64url_decode(good.substr(good.rfind('.') + 1));
  REQUIRE(raw.size() == 64);
  // The DER form OpenSSL makes, which some signers send by mistake.
  std::string der = "\x30";
  auto integer = [](std::string v) {
    v.erase(0, std::min(v.find_first_not_of('\0'), v.size() - 1));
    if (static_cast<unsigned char>(v[0]) & 0x80) v.insert(0, 1, '\0');
    return std::string("\x02") + static_cast<char>(v.size()) + v;
  };
  const auto body = integer(raw.substr(0, 32)) + integer(raw.substr(32));
  der += static_cast<char>(body.size());
  der += body;
  for (const auto& sig : {der, raw.substr(0, 63), raw + '\0', std::string(64, '\0')}) {
    INFO(sig.size());
    const auto r = auth_check(input + "." + base64url_encode(sig));
    CHECK(kind_of(r) == "bad_signature");
  }
  CHECK(auth_check(input + "." + base64url_encode(der)).error().detail.find("64 bytes") !=
        std::string::npos);
}

// ---- claims ------------------------------------------------------------------------------

TEST_CASE("auth: RFC 9068 §4 a token whose typ is not at+jwt is refused", "[auth]") {
  for (const char* typ : {"JWT", "jwt", "at+jwt2", "application/jwt", ""}) {
    INFO(typ);
    JoseHeader h = header_of("RS256", "rsa-1");
    h.typ = typ;
    CHECK(kind_of(auth_check(with_header("rsa-1", h, auth_claims()))) == "wrong_type");
  }
  JoseHeader absent = header_of("RS256", "rsa-1");
  absent.typ.reset();
  const auto untyped = with_header("rsa-1", absent, auth_claims());
  CHECK(kind_of(auth_check(untyped)) == "wrong_type");
  for (const char* typ : {"at+jwt", "AT+JWT", "application/at+jwt", "Application/At+Jwt"}) {
    INFO(typ);
    JoseHeader h = header_of("RS256", "rsa-1");
    h.typ = typ;
    CHECK(kind_of(auth_check(with_header("rsa-1", h, auth_claims()))) == "ok");
  }
  // When the rules do not require it, any typ or none.
  auto lax = auth_rules();
  lax.require_at_jwt = false;
  CHECK(kind_of(auth_check(untyped, auth_keys(), lax)) == "ok");
}

TEST_CASE("auth: RFC 9068 §4 iss must equal the configured issuer exactly", "[auth]") {
  const auto& iss = auth_issuer().issuer();
  for (const auto& other : {iss + "/", std::string("HTTPS://issuer.test"), iss + " ",
                            std::string("https://issuer.test.evil.example")}) {
    INFO(other);
    CHECK(kind_of(auth_check(auth_issuer().mint("rsa-1", auth_claims().str("iss", other)))) ==
          "wrong_issuer");
  }
  CHECK(kind_of(auth_check(auth_issuer().mint("rsa-1", auth_claims().remove("iss")))) ==
        "missing_claim");
  CHECK(kind_of(auth_check(auth_issuer().mint("rsa-1", auth_claims().num("iss", 1)))) ==
        "missing_claim");
  CHECK(kind_of(auth_check(auth_issuer().mint("rsa-1", auth_claims().str("iss", "")))) ==
        "missing_claim");
}

TEST_CASE("auth: RFC 9068 §4 aud, a string or an array, must contain the resource", "[auth]") {
  const auto& aud = auth_issuer().audience();
  auto mint = [](ClaimSet c) { return auth_issuer().mint("rsa-1", c); };
  CHECK(kind_of(auth_check(mint(auth_claims().str("aud", aud)))) == "ok");
  const auto array = mint(auth_claims().set("aud", "[\"other\"," + test::json_string(aud) + "]"));
  const auto r = auth_check(array);
  REQUIRE(kind_of(r) == "ok");
  CHECK(r->audiences == std::vector<std::string>{"other", aud});
  CHECK(kind_of(auth_check(mint(auth_claims().str("aud", aud + "/")))) == "wrong_audience");
  CHECK(kind_of(auth_check(mint(auth_claims().set("aud", R"(["a","b"])")))) == "wrong_audience");
  CHECK(kind_of(auth_check(mint(auth_claims().set("aud", "[]")))) == "wrong_audience");
  CHECK(kind_of(auth_check(mint(auth_claims().remove("aud")))) == "missing_claim");
  CHECK(kind_of(auth_check(mint(auth_claims().set("aud", "[1]")))) == "missing_claim");
  CHECK(kind_of(auth_check(mint(auth_claims().set("aud", "{}")))) == "missing_claim");
  // Any one of the configured audiences will do (the endpoint's URI or public_url); none: none.
  auto rules = auth_rules();
  rules.audiences = {"https://bridge.test", "other"};
  CHECK(kind_of(auth_check(array, auth_keys(), rules)) == "ok");
  rules.audiences.clear();
  CHECK(kind_of(auth_check(array, auth_keys(), rules)) == "wrong_audience");
}

TEST_CASE("auth: RFC 7519 §4.1.4 exp is required, valid until the clock skew after it", "[auth]") {
  const std::int64_t exp = kNow;
  const auto token = auth_issuer().mint("rsa-1", auth_claims().num("exp", exp));
  auto rules = auth_rules();  // 60 s
  CHECK(kind_of(auth_check(token, exp + 59)) == "ok");
  const auto late = auth_check(token, exp + 60);
  REQUIRE(kind_of(late) == "expired");
  CHECK(late.error().detail.find("expired 60 s ago") != std::string::npos);
  rules.clock_skew = std::chrono::seconds(0);
  CHECK(kind_of(auth_check(token, auth_keys(), rules, exp - 1)) == "ok");
  CHECK(kind_of(auth_check(token, auth_keys(), rules, exp)) == "expired");
  rules.clock_skew = std::chrono::seconds(-30);  // taken as none
  CHECK(kind_of(auth_check(token, auth_keys(), rules, exp)) == "expired");
  CHECK(kind_of(auth_check(token, auth_keys(), rules, exp - 1)) == "ok");

  auto mint = [](ClaimSet c) { return auth_issuer().mint("rsa-1", c); };
  CHECK(kind_of(auth_check(mint(auth_claims().remove("exp")))) == "missing_claim");
  CHECK(kind_of(auth_check(mint(auth_claims().str("exp", "1900000300")))) == "missing_claim");
  CHECK(kind_of(auth_check(mint(auth_claims().set("exp", "1e300")))) == "missing_claim");
  CHECK(kind_of(auth_check(mint(auth_claims().set("exp", "18446744073709551615")))) ==
        "missing_claim");
  // Fractions are rounded down.
  const auto fraction = auth_check(mint(auth_claims().set("exp", "1900000000.9")), kNow - 61);
  REQUIRE(kind_of(fraction) == "ok");
  CHECK(fraction->expires_at == kNow);
  CHECK(kind_of(auth_check(mint(auth_claims().set("exp", "1900000000.9")), kNow + 60)) ==
        "expired");
  // At the ends of the range, nothing overflows.
  CHECK(kind_of(auth_check(mint(auth_claims().num("exp", INT64_MAX)))) == "ok");
  CHECK(kind_of(auth_check(mint(auth_claims().set("exp", "-9223372036854775808")))) == "expired");
  CHECK(kind_of(auth_check(mint(auth_claims().set("exp", "-9.2e18")))) == "expired");
  CHECK(kind_of(auth_check(mint(auth_claims().set("exp", "-1e19")))) == "missing_claim");
}

TEST_CASE("auth: RFC 7519 §4.1.5 nbf, when present, holds from the clock skew before it",
          "[auth]") {
  const std::int64_t nbf = kNow + 100;
  const auto token = auth_issuer().mint("rsa-1", auth_claims().num("nbf", nbf));
  CHECK(kind_of(auth_check(token, nbf - 60)) == "ok");
  const auto early = auth_check(token, nbf - 61);
  REQUIRE(kind_of(early) == "not_yet_valid");
  CHECK(early.error().detail.find("another 61 s") != std::string::npos);
  auto rules = auth_rules();
  rules.clock_skew = std::chrono::seconds(0);
  CHECK(kind_of(auth_check(token, auth_keys(), rules, nbf)) == "ok");
  CHECK(kind_of(auth_check(token, auth_keys(), rules, nbf - 1)) == "not_yet_valid");
  const auto r = auth_check(token, nbf);
  REQUIRE(r);
  CHECK(r->not_before == nbf);
  CHECK(kind_of(auth_check(auth_issuer().mint("rsa-1", auth_claims().str("nbf", "0")))) ==
        "missing_claim");
  CHECK(kind_of(auth_check(auth_issuer().mint("rsa-1", auth_claims().num("nbf", INT64_MIN)))) ==
        "ok");
}

TEST_CASE("auth: RFC 9068 §2.2 sub is required, a non-empty string", "[auth]") {
  for (auto claims : {auth_claims().remove("sub"), auth_claims().num("sub", 7),
                      auth_claims().str("sub", ""), auth_claims().set("sub", "null")}) {
    INFO(claims.json());
    CHECK(kind_of(auth_check(auth_issuer().mint("rsa-1", claims))) == "missing_claim");
  }
}

TEST_CASE("auth: scope as a space-separated string and scp as an array give the same scopes",
          "[auth]") {
  using Scopes = std::vector<std::string>;
  auto scopes_of = [](ClaimSet c) {
    const auto r = auth_check(auth_issuer().mint("rsa-1", c));
    REQUIRE(kind_of(r) == "ok");
    return r->scopes;
  };
  const Scopes ab{"mcp:a", "mcp:b"};
  CHECK(scopes_of(auth_claims().str("scope", "mcp:a mcp:b")) == ab);
  CHECK(scopes_of(auth_claims().str("scope", " mcp:a   mcp:b ")) == ab);
  CHECK(scopes_of(auth_claims().remove("scope").set("scp", R"(["mcp:a","mcp:b"])")) == ab);
  // Entra ID sends scp as a string.
  CHECK(scopes_of(auth_claims().remove("scope").str("scp", "mcp:a mcp:b")) == ab);
  // RFC 9068's own claim wins when a token has both.
  CHECK(scopes_of(auth_claims().str("scope", "mcp:a").set("scp", R"(["mcp:b"])")) ==
        Scopes{"mcp:a"});
  CHECK(scopes_of(auth_claims().remove("scope")).empty());
  CHECK(scopes_of(auth_claims().str("scope", "")).empty());
  for (auto claims : {auth_claims().num("scope", 1), auth_claims().set("scope", R"(["a"])"),
                      auth_claims().str("scope", "a\tb"), auth_claims().str("scope", "a \"b\""),
                      auth_claims().remove("scope").set("scp", R"(["a",1])"),
                      auth_claims().remove("scope").set("scp", R"(["a b"])"),
                      auth_claims().remove("scope").set("scp", R"({"a":1})")}) {
    INFO(claims.json());
    CHECK(kind_of(auth_check(auth_issuer().mint("rsa-1", claims))) == "missing_claim");
  }
}

TEST_CASE("auth: iat and client_id are optional, and of their types when present", "[auth]") {
  const auto bare = auth_check(auth_issuer().mint("rsa-1", auth_claims().remove("iat")));
  REQUIRE(kind_of(bare) == "ok");
  CHECK(bare->issued_at == 0);
  CHECK(bare->client_id.empty());
  const auto fraction = auth_check(auth_issuer().mint("rsa-1", auth_claims().set("iat", "12.75")));
  REQUIRE(kind_of(fraction) == "ok");
  CHECK(fraction->issued_at == 12);
  for (auto claims : {auth_claims().str("iat", "now"), auth_claims().num("client_id", 3)}) {
    INFO(claims.json());
    CHECK(kind_of(auth_check(auth_issuer().mint("rsa-1", claims))) == "missing_claim");
  }
}

// ---- what a refusal says -------------------------------------------------------------------

TEST_CASE("auth: a rejection's detail never carries the token or any string the token holds",
          "[auth]") {
  const std::string marker = "SECRETMARKER";
  std::vector<std::string> tokens;
  JoseHeader h = header_of("RS256", marker);
  tokens.push_back(with_header("rsa-1", h, auth_claims()));  // unknown_kid
  h = header_of(marker, "rsa-1");
  tokens.push_back(with_header("rsa-1", h, auth_claims()));  // unsupported_alg
  h = header_of("RS256", "rsa-1");
  h.typ = marker;
  tokens.push_back(with_header("rsa-1", h, auth_claims()));  // wrong_type
  tokens.push_back(auth_issuer().mint("rsa-1", auth_claims().str("iss", marker)));
  tokens.push_back(auth_issuer().mint("rsa-1", auth_claims().str("aud", marker)));
  tokens.push_back(auth_issuer().mint("rsa-1", auth_claims().str("scope", marker + "\x01")));
  tokens.push_back(TestIssuer::tamper_signature(auth_issuer().mint("rsa-1", auth_claims())));
  tokens.push_back(auth_issuer().mint("rsa-1", auth_claims().num("exp", 1)));
  tokens.push_back(marker + ".x.y");
  std::vector<std::string> seen;
  for (const auto& t : tokens) {
    const auto r = auth_check(t);
    REQUIRE_FALSE(r);
    INFO(r.error().detail);
    CHECK(r.error().detail.find(marker) == std::string::npos);
    for (const auto& part : {t.substr(0, t.find('.')), t.substr(t.rfind('.') + 1)})
      if (part.size() > 8) CHECK(r.error().detail.find(part) == std::string::npos);
    CHECK_FALSE(r.error().detail.empty());
    seen.emplace_back(failure_name(r.error().failure));
  }
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  CHECK(seen.size() == 9);
}

TEST_CASE("auth: every failure kind has its own name for logs and metrics", "[auth]") {
  const Failure all[] = {Failure::malformed,      Failure::unsupported_alg, Failure::unknown_kid,
                         Failure::bad_signature,  Failure::wrong_type,      Failure::wrong_issuer,
                         Failure::wrong_audience, Failure::expired,         Failure::not_yet_valid,
                         Failure::missing_claim,  Failure::unavailable};
  std::vector<std::string> names;
  for (const auto f : all)
    names.emplace_back(failure_name(f));
  CHECK(names == std::vector<std::string>{"malformed", "unsupported_alg", "unknown_kid",
                                          "bad_signature", "wrong_type", "wrong_issuer",
                                          "wrong_audience", "expired", "not_yet_valid",
                                          "missing_claim", "unavailable"});
}

TEST_CASE("auth: one KeySet verifies tokens on several threads at once", "[auth]") {
  const auto keys = *KeySet::parse(auth_issuer().jwks());
  std::vector<std::string> tokens;
  for (const char* kid : {"rsa-1", "ps-1", "ec-1", "ed-1"})
    tokens.push_back(auth_issuer().mint(kid, auth_claims()));
  tokens.push_back(TestIssuer::tamper_signature(tokens[2]));
  std::vector<int> ok(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i)
        for (const auto& token : tokens)
          ok[t] += auth_check(token, keys, auth_rules()) ? 1 : 0;
    });
  }
  for (auto& t : threads)
    t.join();
  CHECK(ok == std::vector<int>(4, 100));
}

}  // namespace
}  // namespace mcpmqtt::auth

// Introspection responses (RFC 7662 §2.2) read by auth::check_introspection as the claims of the
// opaque token they describe, and auth::looks_like_jws, which decides which tokens are
// introspected at all.
#include <cstdint>
#include <string>

#include <catch2/catch.hpp>

#include "auth/token.hpp"

namespace mcpmqtt::auth {
namespace {

constexpr std::int64_t kIntrospectNow = 1'900'000'000;
const std::string kIss = "https://as.example";

Rules introspection_rules() {
  Rules r;
  r.issuer = kIss;
  r.clock_skew = std::chrono::seconds(60);
  return r;
}

// A typical active answer (oidc-provider's shape), with `more` members appended.
std::string active_answer(const std::string& more = "") {
  return R"({"active":true,"sub":"svc","client_id":"svc","exp":1900000600,"iat":1899999000,)"
         R"("iss":"https://as.example","aud":"https://bridge.example/mcp","scope":"mcp:all mcp:demo",)"
         R"("token_type":"Bearer")" +
         more + "}";
}

Failure failure_of(const std::string& response) {
  auto r = check_introspection(response, introspection_rules(), kIntrospectNow);
  REQUIRE(!r);
  return r.error().failure;
}

}  // namespace

TEST_CASE(
    "RFC 7662 §2.2: an active introspection answer gives the token's issuer, subject, client, "
    "audiences, scopes and dates",
    "[auth][introspection]") {
  auto c = check_introspection(active_answer(), introspection_rules(), kIntrospectNow);
  REQUIRE(c);
  CHECK(c->issuer == kIss);
  CHECK(c->subject == "svc");
  CHECK(c->client_id == "svc");
  CHECK(c->audiences == std::vector<std::string>{"https://bridge.example/mcp"});
  CHECK(c->scopes == std::vector<std::string>{"mcp:all", "mcp:demo"});
  CHECK(c->expires_at == 1'900'000'600);
  CHECK(c->issued_at == 1'899'999'000);
}

TEST_CASE(
    "RFC 7662 §2.2: active false is Failure::inactive, whatever else the answer holds - an answer "
    "without a boolean active, or not a JSON object, is malformed",
    "[auth][introspection]") {
  CHECK(failure_of(R"({"active":false})") == Failure::inactive);
  CHECK(failure_of(R"({"active":false,"sub":"x","aud":"y"})") == Failure::inactive);
  CHECK(failure_of(R"({"sub":"x"})") == Failure::malformed);
  CHECK(failure_of(R"({"active":"true"})") == Failure::malformed);
  CHECK(failure_of("<html>") == Failure::malformed);
  CHECK(failure_of("[true]") == Failure::malformed);
  CHECK(failure_of(R"({"active":true,"active":false})") == Failure::malformed);
}

TEST_CASE(
    "RFC 7662 §2.2: iss and exp are optional, but when present they bind - sub and aud are "
    "required - nbf and exp honour the clock skew",
    "[auth][introspection]") {
  // No iss: the issuer asked is the token's issuer.
  auto no_iss = check_introspection(
      R"({"active":true,"sub":"a","aud":"https://bridge.example/mcp","exp":1900000600})",
      introspection_rules(), kIntrospectNow);
  REQUIRE(no_iss);
  CHECK(no_iss->issuer == kIss);
  // No exp: valid as long as the caller keeps the answer.
  auto no_exp = check_introspection(R"({"active":true,"sub":"a","aud":"x"})", introspection_rules(),
                                    kIntrospectNow);
  REQUIRE(no_exp);
  CHECK(no_exp->expires_at == 0);

  CHECK(failure_of(R"({"active":true,"sub":"a","aud":"x","iss":"https://other.example"})") ==
        Failure::wrong_issuer);
  CHECK(failure_of(R"({"active":true,"aud":"x"})") == Failure::missing_claim);
  CHECK(failure_of(R"({"active":true,"sub":"","aud":"x"})") == Failure::missing_claim);
  // RFC 8707: a token bound to no resource is refused.
  auto no_aud =
      check_introspection(R"({"active":true,"sub":"a"})", introspection_rules(), kIntrospectNow);
  REQUIRE(!no_aud);
  CHECK(no_aud.error().failure == Failure::missing_claim);
  CHECK(no_aud.error().detail.find("no aud") != std::string::npos);
  // exp: valid while now < exp + skew.
  CHECK(failure_of(R"({"active":true,"sub":"a","aud":"x","exp":1899999940})") == Failure::expired);
  CHECK(check_introspection(R"({"active":true,"sub":"a","aud":"x","exp":1899999941})",
                            introspection_rules(), kIntrospectNow));
  // nbf: valid from nbf - skew.
  CHECK(failure_of(R"({"active":true,"sub":"a","aud":"x","nbf":1900000061})") ==
        Failure::not_yet_valid);
  CHECK(check_introspection(R"({"active":true,"sub":"a","aud":"x","nbf":1900000060})",
                            introspection_rules(), kIntrospectNow));
  CHECK(failure_of(R"({"active":true,"sub":"a","aud":"x","exp":"soon"})") ==
        Failure::missing_claim);
  CHECK(failure_of(R"({"active":true,"sub":"a","aud":"x","scope":"a \"b"})") ==
        Failure::missing_claim);
  CHECK(failure_of(R"({"active":true,"sub":"a","aud":"x","client_id":7})") ==
        Failure::missing_claim);
}

TEST_CASE(
    "RFC 7662 §2.2 token_type: only a Bearer access token passes - a refresh token or a DPoP "
    "token described as active is refused",
    "[auth][introspection]") {
  CHECK(check_introspection(active_answer().replace(active_answer().find("Bearer"), 6, "bearer"),
                            introspection_rules(), kIntrospectNow));
  CHECK(failure_of(R"({"active":true,"sub":"a","aud":"x","token_type":"refresh_token"})") ==
        Failure::wrong_type);
  CHECK(failure_of(R"({"active":true,"sub":"a","aud":"x","token_type":"DPoP"})") ==
        Failure::wrong_type);
}

TEST_CASE(
    "RFC 7515 §7.1: looks_like_jws takes three dot-separated parts whose first is a base64url "
    "JSON object - opaque tokens, JWEs and lookalikes are introspected instead",
    "[auth][introspection]") {
  // {"alg":"RS256"}
  CHECK(looks_like_jws("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"));
  CHECK(looks_like_jws("eyJhbGciOiJSUzI1NiJ9.."));
  CHECK_FALSE(looks_like_jws("XQCqTm5Obb7wbxa1N80g-74dZ0dTHPKx1PtX-kGrsgt"));
  CHECK_FALSE(looks_like_jws("a.b.c"));
  CHECK_FALSE(looks_like_jws("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0"));
  CHECK_FALSE(looks_like_jws("eyJhbGciOiJSUzI1NiJ9.e.c.d.e"));
  // "[1]" base64url: JSON, not an object.
  CHECK_FALSE(looks_like_jws("WzFd.x.y"));
  CHECK_FALSE(looks_like_jws(""));
}

}  // namespace mcpmqtt::auth

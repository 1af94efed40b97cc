// The Authenticator with opaque access tokens (http.oauth.introspection), against a scripted
// introspector: which tokens are introspected, what each RFC 7662 §2.2 answer gives (a
// principal, 401 invalid_token, 403 insufficient_scope, 503), and what is remembered.
#include <ctime>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "http/server_auth.hpp"
#include "http/server_precheck.hpp"
#include "http/server_rules.hpp"

namespace mcpmqtt::http {
namespace {

namespace bhttp = boost::beast::http;

const std::string kIntrospectedIssuer = "https://as.example";
const std::string kBridgeBase = "http://bridge.test:8080";

// Answers every call at once with `answer`, counting the calls.
class ScriptedIntrospector : public Introspector {
 public:
  Expected<std::string, std::string> answer = std::string(R"({"active":false})");
  std::string problem_text;
  std::vector<std::string> tokens;

  void introspect(std::string token, std::string, Done done) override {
    tokens.push_back(std::move(token));
    done(answer);
  }
  std::string problem() const override { return problem_text; }
};

// Keys present (none usable): the readiness problem is then the introspector's.
class PresentKeys : public KeySource {
 public:
  std::shared_ptr<const auth::KeySet> keys() const override {
    return std::make_shared<const auth::KeySet>();
  }
  std::string problem() const override { return {}; }
  void refresh_for_unknown_kid(std::function<void()> done) override { done(); }
};

ServerOptions introspecting_options(int cache_max_s = 300) {
  ServerOptions o;
  o.oauth.issuer = kIntrospectedIssuer;
  o.oauth.scopes = {{"mcp:all", {"#"}}, {"mcp:demo", {"demo/#"}}};
  o.oauth.introspection_cache_max_s = cache_max_s;
  return o;
}

std::string active_for(const std::string& aud, const std::string& scope, std::int64_t exp = 0,
                       const std::string& more = "") {
  if (exp == 0) exp = static_cast<std::int64_t>(std::time(nullptr)) + 3600;
  return R"({"active":true,"sub":"svc","client_id":"svc","iss":")" + kIntrospectedIssuer +
         R"(","aud":")" + aud + R"(","scope":")" + scope + R"(","exp":)" + std::to_string(exp) +
         more + "}";
}

struct Checked {
  Authenticator::Outcome outcome;
  bool introspected = false;
  unsigned status() const { return outcome.refusal ? outcome.refusal->result_int() : 200; }
  std::string challenge() const {
    return outcome.refusal ? std::string(sv((*outcome.refusal)[bhttp::field::www_authenticate]))
                           : "";
  }
  std::string body() const { return outcome.refusal ? outcome.refusal->body() : ""; }
};

// A request to `path` with `token`, as ServerConnection runs it: check, and after
// Kind::introspect, introspect and check again (or the 503 of a failed introspection).
Checked run_check(const Authenticator& auth, const std::string& token,
                  const std::string& path = "/mcp", const std::string& server = "demo/test") {
  Authenticator::Request req{bhttp::verb::post, path, 11};
  req.set(bhttp::field::host, "bridge.test:8080");
  req.set(bhttp::field::authorization, "Bearer " + token);
  const auto route = parse_route(path);
  Checked c;
  c.outcome = auth.check(req, route, server, false);
  if (c.outcome.kind != Authenticator::Outcome::Kind::introspect) return c;
  c.introspected = true;
  std::string why = "not answered";
  auth.introspect(req, [&why](std::string w) { why = std::move(w); });
  c.outcome = why.empty() ? auth.check(req, route, server, true) : auth.unavailable(why);
  return c;
}

// An Authenticator for /mcp reaching demo/test, introspecting with `as`.
struct IntrospectingAuth {
  explicit IntrospectingAuth(int cache_max_s = 300)
      : auth(introspecting_options(cache_max_s), "demo/test") {
    auth.set_introspector(as);
  }
  std::shared_ptr<ScriptedIntrospector> as = std::make_shared<ScriptedIntrospector>();
  Authenticator auth;
};

}  // namespace

TEST_CASE(
    "RFC 7662 §2.2: an active answer for an opaque token gives the principal a JWT would - "
    "oauth:iss|sub, scopes, server filters - and is remembered: the next request does not ask",
    "[http][oauth][introspection]") {
  IntrospectingAuth f;
  auto& auth = f.auth;
  auto& as = f.as;
  as->answer = active_for(kBridgeBase + "/mcp", "mcp:demo");
  auto c = run_check(auth, "opaque-1");
  REQUIRE(c.introspected);
  REQUIRE(c.outcome.kind == Authenticator::Outcome::Kind::allowed);
  const auto& p = c.outcome.principal;
  CHECK(p.key == "oauth:" + kIntrospectedIssuer + "|svc");
  CHECK(p.subject == "svc");
  CHECK(p.client_id == "svc");
  CHECK(p.scopes == std::vector<std::string>{"mcp:demo"});
  CHECK(p.server_filters == std::vector<std::string>{"demo/#"});
  CHECK_FALSE(p.unrestricted);
  CHECK(as->tokens == std::vector<std::string>{"opaque-1"});

  auto again = run_check(auth, "opaque-1");
  CHECK_FALSE(again.introspected);
  CHECK(again.outcome.kind == Authenticator::Outcome::Kind::allowed);
  CHECK(as->tokens.size() == 1);
}

TEST_CASE(
    "RFC 6750 §3.1: an opaque token the issuer calls inactive is 401 invalid_token, the token "
    "is not active, and the refusal is remembered so a flood does not reach the issuer",
    "[http][oauth][introspection]") {
  IntrospectingAuth f;
  auto& auth = f.auth;
  auto& as = f.as;
  auto c = run_check(auth, "revoked");
  CHECK(c.status() == 401);
  CHECK(c.challenge().find("error=\"invalid_token\"") != std::string::npos);
  CHECK(c.challenge().find("the token is not active") != std::string::npos);
  for (int i = 0; i < 5; ++i)
    CHECK(run_check(auth, "revoked").status() == 401);
  CHECK(as->tokens.size() == 1);
}

TEST_CASE(
    "RFC 7662 §2.2 with RFC 8707: an active answer whose aud does not name the route, whose iss "
    "is another, that has no sub or no aud, or that expired is 401 invalid_token",
    "[http][oauth][introspection]") {
  IntrospectingAuth f;
  auto& auth = f.auth;
  auto& as = f.as;
  const auto refused = [&](const std::string& token, const std::string& answer,
                           const std::string& detail) {
    as->answer = answer;
    auto c = run_check(auth, token);
    INFO(token << ": " << c.challenge());
    CHECK(c.status() == 401);
    CHECK(c.challenge().find("error=\"invalid_token\"") != std::string::npos);
    CHECK(c.challenge().find(detail) != std::string::npos);
  };
  refused("other-aud", active_for("http://elsewhere.test/mcp", "mcp:all"),
          "the audience does not name this resource");
  refused("other-iss",
          R"({"active":true,"sub":"a","aud":")" + kBridgeBase + R"(","iss":"https://x.test"})",
          "iss is not the configured issuer");
  refused("no-sub", R"({"active":true,"aud":")" + kBridgeBase + R"("})", "sub is missing");
  refused("no-aud", R"({"active":true,"sub":"a"})", "names no aud");
  refused("expired", active_for(kBridgeBase, "mcp:all", std::time(nullptr) - 3600), "expired");
  refused("not-yet",
          active_for(kBridgeBase, "mcp:all", 0,
                     R"(,"nbf":)" + std::to_string(std::time(nullptr) + 3600)),
          "not valid for another");
  refused("refresh", active_for(kBridgeBase, "mcp:all", 0, R"(,"token_type":"refresh_token")"),
          "token_type is not Bearer");

  // The audience is checked per request: a token for one server's endpoint is valid there only.
  as->answer = active_for(kBridgeBase + "/servers/other/srv/mcp", "mcp:all");
  CHECK(run_check(auth, "bound", "/servers/other/srv/mcp", "other/srv").status() == 200);
  CHECK(run_check(auth, "bound", "/mcp").status() == 401);
  CHECK(as->tokens.back() == "bound");
}

TEST_CASE(
    "RFC 6750 §3.1: an active opaque token whose scopes do not reach the server is 403 "
    "insufficient_scope, naming the scope that would",
    "[http][oauth][introspection]") {
  IntrospectingAuth f;
  auto& auth = f.auth;
  auto& as = f.as;
  as->answer = active_for(kBridgeBase, "mcp:demo");
  auto c = run_check(auth, "narrow", "/servers/other/srv/mcp", "other/srv");
  CHECK(c.status() == 403);
  CHECK(c.challenge().find("error=\"insufficient_scope\"") != std::string::npos);
  CHECK(c.challenge().find("scope=\"mcp:all\"") != std::string::npos);
}

TEST_CASE(
    "Introspection that fails - the issuer unreachable, an answer that is no RFC 7662 response - "
    "is 503 with Retry-After and the reason, never 401, and is not remembered",
    "[http][oauth][introspection]") {
  IntrospectingAuth f;
  auto& auth = f.auth;
  auto& as = f.as;
  as->answer = unexpected(std::string("cannot fetch https://as.example/introspect: refused"));
  auto c = run_check(auth, "fine-token");
  CHECK(c.status() == 503);
  CHECK(c.outcome.refusal->count(bhttp::field::retry_after) == 1);
  CHECK(c.body().find("cannot fetch https://as.example/introspect") != std::string::npos);
  CHECK(c.outcome.log_reason.find("fine-token") == std::string::npos);

  as->answer = std::string("<html>oops</html>");
  c = run_check(auth, "fine-token");
  CHECK(c.introspected);
  CHECK(c.status() == 503);
  CHECK(c.body().find("introspection answer is refused") != std::string::npos);

  as->answer = active_for(kBridgeBase, "mcp:all");
  c = run_check(auth, "fine-token");
  CHECK(c.introspected);
  CHECK(c.status() == 200);
  CHECK(as->tokens.size() == 3);
}

TEST_CASE(
    "Only tokens that are not a JWS are introspected - without http.oauth.introspection an opaque "
    "token is a malformed JWT (401) - the introspector's problem is the readiness problem",
    "[http][oauth][introspection]") {
  IntrospectingAuth f;
  auto& auth = f.auth;
  auto& as = f.as;
  // {"alg":"RS256"}: a JWS, checked with the keys (none here: 503), never introspected.
  auto jws = run_check(auth, "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln");
  CHECK_FALSE(jws.introspected);
  CHECK(jws.status() == 503);
  CHECK(as->tokens.empty());
  CHECK(run_check(auth, std::string(20000, 'a')).status() == 401);
  CHECK(as->tokens.empty());

  CHECK(auth.problem() == "no key source for the issuer's keys");
  auth.set_key_source(std::make_shared<PresentKeys>());
  CHECK(auth.problem().empty());
  as->problem_text = "the metadata has no introspection_endpoint";
  CHECK(auth.problem() == as->problem_text);

  IntrospectingAuth jwt_only(0);
  auto opaque = run_check(jwt_only.auth, "opaque");
  CHECK_FALSE(opaque.introspected);
  CHECK(opaque.status() == 401);
  CHECK(jwt_only.as->tokens.empty());
}

}  // namespace mcpmqtt::http

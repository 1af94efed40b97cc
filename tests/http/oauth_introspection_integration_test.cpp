// TokenIntrospection (RFC 7662 §2.1) against a scripted loopback authorization server
// (tests/http/client_fake_server.hpp): the request it sends, calls for one token sharing one
// request, the bound on tokens in flight, and the failures that become a 503's reason.
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "http/oauth_introspection.hpp"
#include "tests/http/client_fake_server.hpp"
#include "tests/http/oauth_loop.hpp"
#include "tests/support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using mcpmqtt::http::TokenIntrospection;
using mcpmqtt::test::OauthLoop;
namespace fake = mcpmqtt::test::fake;
using Answer = mcpmqtt::Expected<std::string, std::string>;

// TokenIntrospection as the client "bridge" of the fake server's issuer; `endpoint` empty: the
// metadata names none; `with_metadata` false: no metadata yet.
std::shared_ptr<TokenIntrospection> introspection_of(OauthLoop& loop, const fake::Server& srv,
                                                     const std::string& endpoint,
                                                     std::size_t max_in_flight = 64,
                                                     bool with_metadata = true) {
  TokenIntrospection::Options o;
  o.server.issuer = "http://127.0.0.1:" + std::to_string(srv.port());
  o.server.timeout = 5s;
  o.client_id = "bridge";
  o.client_secret = "s3cret:x";
  o.max_in_flight = max_in_flight;
  auto m = std::make_shared<mcpmqtt::http::oauth::AuthServerMetadata>();
  m->issuer = o.server.issuer;
  m->introspection_endpoint = endpoint;
  m->source = o.server.issuer + "/.well-known/oauth-authorization-server";
  std::shared_ptr<const mcpmqtt::http::oauth::AuthServerMetadata> metadata;
  if (with_metadata) metadata = m;
  auto t =
      TokenIntrospection::create(loop.executor(), std::move(o), [metadata] { return metadata; });
  REQUIRE(t);
  return *t;
}

std::future<Answer> ask(TokenIntrospection& t, const std::string& token, const std::string& key) {
  auto p = std::make_shared<std::promise<Answer>>();
  auto f = p->get_future();
  t.introspect(token, key, [p](Answer a) { p->set_value(std::move(a)); });
  return f;
}

}  // namespace

TEST_CASE(
    "RFC 7662 §2.1: the token is POSTed form-encoded with token_type_hint=access_token, the "
    "bridge authenticated with client_secret_basic, and the 200 answer's body handed back",
    "[oauth][introspection]") {
  OauthLoop loop;
  fake::Server srv([](fake::Conn& c, const fake::Request&) { c.json(R"({"active":false})"); });
  auto t = introspection_of(loop, srv, srv.url("/introspect"));
  auto a = ask(*t, "a+b/c=", "k1").get();
  REQUIRE(a);
  CHECK(*a == R"({"active":false})");
  const auto r = srv.requests().at(0);
  CHECK(r.method == "POST");
  CHECK(r.target == "/introspect");
  CHECK(r.header("content-type") == "application/x-www-form-urlencoded");
  CHECK(r.body == "token=a%2Bb%2Fc%3D&token_type_hint=access_token");
  // RFC 6749 §2.3.1: each half form-encoded, then base64: "bridge:s3cret%3Ax".
  CHECK(r.header("authorization") == "Basic YnJpZGdlOnMzY3JldCUzQXg=");
  t->stop();
}

TEST_CASE(
    "RFC 7662: calls for one token while its request is under way share it, and past "
    "max_in_flight tokens a call for another is answered at once with the reason",
    "[oauth][introspection]") {
  OauthLoop loop;
  fake::Queue<int> release;
  fake::Server srv;
  srv.start([&](fake::Conn& c, const fake::Request&) {
    release.pop(10s, &srv.stopping());
    c.json(R"({"active":true,"sub":"a","aud":"x"})");
  });
  auto t = introspection_of(loop, srv, srv.url("/introspect"), 1);
  auto first = ask(*t, "tok", "same");
  REQUIRE(mcpmqtt::test::eventually([&] { return srv.requests().size() == 1; }));
  auto second = ask(*t, "tok", "same");
  auto other = ask(*t, "other", "different").get();
  REQUIRE(!other);
  CHECK(other.error() == "too many tokens (1) are being introspected at once");
  release.push(1);
  auto a1 = first.get();
  auto a2 = second.get();
  REQUIRE(a1);
  REQUIRE(a2);
  CHECK(*a1 == *a2);
  CHECK(srv.requests().size() == 1);
  t->stop();
}

TEST_CASE(
    "RFC 7662: the issuer refusing the bridge's client (401 invalid_client), failing (503) or "
    "unreachable, metadata without introspection_endpoint or not fetched yet - each an error "
    "naming what to fix, for a 503",
    "[oauth][introspection]") {
  OauthLoop loop;
  fake::Server srv([](fake::Conn& c, const fake::Request& r) {
    if (r.target == "/refuses") {
      c.respond(401, "application/json",
                R"({"error":"invalid_client","error_description":"client authentication failed"})");
    } else {
      c.respond(503, "text/plain", "down");
    }
  });
  auto refuses = introspection_of(loop, srv, srv.url("/refuses"));
  auto a = ask(*refuses, "t", "k").get();
  REQUIRE(!a);
  CHECK(a.error().find("/refuses answered HTTP 401") != std::string::npos);
  CHECK(a.error().find("invalid_client (client authentication failed)") != std::string::npos);
  CHECK(a.error().find("http.oauth.introspection.client_id") != std::string::npos);
  CHECK(a.error().find("s3cret") == std::string::npos);

  auto failing = introspection_of(loop, srv, srv.url("/failing"));
  a = ask(*failing, "t", "k").get();
  REQUIRE(!a);
  CHECK(a.error().find("answered HTTP 503") != std::string::npos);

  auto unreachable = introspection_of(loop, srv, "http://127.0.0.1:1/introspect");
  a = ask(*unreachable, "t", "k").get();
  REQUIRE(!a);
  CHECK(a.error().find("cannot fetch http://127.0.0.1:1/introspect") != std::string::npos);

  auto none = introspection_of(loop, srv, "");
  CHECK(none->problem().find("has no introspection_endpoint") != std::string::npos);
  a = ask(*none, "t", "k").get();
  REQUIRE(!a);
  CHECK(a.error() == none->problem());

  auto early = introspection_of(loop, srv, "", 64, false);
  CHECK(early->problem().empty());
  a = ask(*early, "t", "k").get();
  REQUIRE(!a);
  CHECK(a.error().find("has not been fetched yet") != std::string::npos);
  CHECK(srv.requests().size() == 2);
  for (auto* t : {refuses.get(), failing.get(), unreachable.get(), none.get(), early.get()})
    t->stop();
}

TEST_CASE("RFC 7662: stop() answers a call under way, and every call after it",
          "[oauth][introspection]") {
  OauthLoop loop;
  fake::Queue<int> never;
  fake::Server srv;
  srv.start([&](fake::Conn& c, const fake::Request&) {
    never.pop(10s, &srv.stopping());
    c.json(R"({"active":false})");
  });
  auto t = introspection_of(loop, srv, srv.url("/introspect"));
  auto pending = ask(*t, "t", "k");
  REQUIRE(mcpmqtt::test::eventually([&] { return srv.requests().size() == 1; }));
  t->stop();
  auto a = pending.get();
  REQUIRE(!a);
  CHECK(a.error() == "the bridge is stopping");
  a = ask(*t, "t", "k").get();
  REQUIRE(!a);
  CHECK(a.error() == "the bridge is stopping");
}

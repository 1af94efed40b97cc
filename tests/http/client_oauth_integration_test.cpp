// The HTTP egress to a protected upstream (issue 31): the Streamable HTTP client sends the access
// token of an OAuth client credentials grant (RFC 6749 §4.4, RFC 8707 resource) on every
// request, sends a request once more with another token when the upstream answers 401 (RFC 6750
// §3.1 invalid_token), and answers every request with a precise error when there is no token.
// A real authorization server (oidc-provider, tests/node/oauth-server.mjs) and a scripted
// upstream on loopback.
#include <atomic>
#include <functional>
#include <set>

#include <catch2/catch.hpp>

#include "http/oauth_client_credentials.hpp"
#include "tests/http/client_fake_server.hpp"
#include "tests/http/client_harness.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/oauth_server.hpp"

using namespace mcpmqtt;
using namespace std::chrono_literals;
using test::ClientHarness;
using test::test_spec;
using test::fake::Conn;
using test::fake::Request;

namespace {

// The upstream's spec with a ClientCredentials token source for it, made on the harness's loop
// (the daemon runs both on the sessions' loop), as client svc with `secret`.
std::function<http::UpstreamSpec(const boost::asio::any_io_executor&)> with_tokens(
    const std::string& issuer, const std::string& url, const std::string& secret = "secret") {
  return [=](const boost::asio::any_io_executor& executor) {
    http::ClientCredentials::Options o;
    o.server.issuer = issuer;
    o.client_id = "svc";
    o.client_secret = secret;
    o.scope = "mcp:all";
    o.resource = url;
    auto made = http::ClientCredentials::create(executor, o);
    REQUIRE(made);
    auto spec = test_spec(url);
    spec.bearer = *made;
    return spec;
  };
}

// The upstream's view: the Authorization header of each POST of `method`, in order.
std::vector<std::string> authorizations(const test::fake::Server& srv, const std::string& needle) {
  std::vector<std::string> out;
  for (const auto& r : srv.requests())
    if (r.method == "POST" && r.has(needle)) out.push_back(r.header("Authorization"));
  return out;
}

}  // namespace

TEST_CASE(
    "HTTP egress to a protected upstream: every request carries the client credentials token "
    "(RFC 6749 §4.4) for the upstream's URL (RFC 8707 §2), a 401 is retried once with another "
    "token (RFC 6750 §3.1), a second 401 answers the request",
    "[integration][http][client][oauth]") {
  // Tokens that fail at the upstream: the first one the test condemns, or every one.
  std::mutex mu;
  std::set<std::string> refused;
  std::atomic<bool> refuse_next{false}, refuse_all{false};
  test::fake::Script script;
  script.request = [&](Conn& c, const Request& r, const jsonrpc::Message& m) {
    const auto auth = r.header("Authorization");
    bool refuse = refuse_all.load();
    {
      std::lock_guard<std::mutex> l(mu);
      if (refuse_next.exchange(false)) refused.insert(auth);
      refuse = refuse || refused.count(auth) != 0;
    }
    if (refuse) {
      c.respond(401, "application/json", R"({"error":"invalid_token"})",
                {{"WWW-Authenticate", R"(Bearer error="invalid_token")"}});
      return;
    }
    c.json(test::fake::result_json(m.id(), R"({"content":[]})"));
  };
  test::fake::Server srv(test::fake::mcp(script));
  // oidc-provider issues tokens for this upstream only: a grant with another resource fails.
  test::AuthServer as({"--resource", srv.url()});
  ClientHarness c(with_tokens(as.issuer, srv.url()));
  test::initialize(c);

  c.send(test::tool_call(2, "echo"));
  CHECK(c.next().kind() == jsonrpc::Kind::result);
  const auto init = authorizations(srv, "\"initialize\"");
  REQUIRE(init.size() == 1);
  CHECK(init[0].starts_with("Bearer ey"));  // a JWT (RFC 9068)
  const auto first = authorizations(srv, "\"id\":2");
  REQUIRE(first.size() == 1);
  CHECK(first[0] == init[0]);  // one token serves the session until it is refused

  // The upstream stops taking that token: the call goes once more, with a new one.
  refuse_next = true;
  c.send(test::tool_call(3, "echo"));
  CHECK(c.next().kind() == jsonrpc::Kind::result);
  const auto third = authorizations(srv, "\"id\":3");
  REQUIRE(third.size() == 2);
  CHECK(third[0] == init[0]);
  CHECK(third[1] != third[0]);
  CHECK(third[1].starts_with("Bearer ey"));

  // Refused again with the fresh token: the answer says so, after exactly two attempts.
  refuse_all = true;
  c.send(test::tool_call(4, "echo"));
  const auto e = c.next();
  REQUIRE(e.kind() == jsonrpc::Kind::error);
  CHECK(e.id() == jsonrpc::Id::integer(4));
  CHECK(e.error().code == -32603);
  CHECK(e.error().message == "upstream " + srv.url() +
                                 " answered HTTP 401 Unauthorized: invalid_token (a fresh access "
                                 "token of OAuth client \"svc\" of " +
                                 as.issuer + " was refused too)");
  CHECK(authorizations(srv, "\"id\":4").size() == 2);
  refuse_all = false;
  c.send(test::tool_call(5, "echo"));
  CHECK(c.next().kind() == jsonrpc::Kind::result);
  CHECK(c.close_count() == 0);
}

TEST_CASE(
    "HTTP egress to a protected upstream without a token: the authorization server's refusal "
    "(RFC 6749 §5.2 invalid_client) or its absence answers initialize, and nothing reaches the "
    "upstream",
    "[integration][http][client][oauth]") {
  test::fake::Server srv(test::fake::mcp({}));
  SECTION("a wrong client secret") {
    test::AuthServer as;
    ClientHarness c(with_tokens(as.issuer, srv.url(), "not-the-secret"));
    c.send(test::kClientInitialize);
    const auto e = c.next();
    REQUIRE(e.kind() == jsonrpc::Kind::error);
    CHECK(e.error().code == -32603);
    INFO(e.error().message);
    CHECK(e.error().message.starts_with("upstream " + srv.url() +
                                        " needs an access token, and OAuth client \"svc\" of " +
                                        as.issuer + " has none: "));
    CHECK(e.error().message.find("invalid_client") != std::string::npos);
    CHECK(e.error().message.find("not-the-secret") == std::string::npos);
    CHECK(c.wait_close().kind == bridge::CloseReason::Kind::error);
  }
  SECTION("the authorization server unreachable") {
    const std::string issuer = "http://127.0.0.1:" + std::to_string(test::free_loopback_port());
    ClientHarness c(with_tokens(issuer, srv.url()));
    c.send_all({test::kClientInitialize, test::request_body(2, "tools/list")});
    for (int id : {1, 2}) {
      const auto e = c.next();
      REQUIRE(e.kind() == jsonrpc::Kind::error);
      CHECK(e.id() == jsonrpc::Id::integer(id));
      INFO(e.error().message);
      CHECK(e.error().message.find("needs an access token") != std::string::npos);
      CHECK(e.error().message.find(issuer) != std::string::npos);
    }
  }
  CHECK(srv.requests().empty());
}

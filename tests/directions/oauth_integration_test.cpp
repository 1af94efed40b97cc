// The HTTP ingress as an OAuth 2.1 resource server (issue 31), end to end: a real authorization
// server from npm (oidc-provider, tests/node/oauth-server.mjs) on a loopback port, the daemon
// with http.oauth naming it, a real Mosquitto and the stdio egress; the official SDK clients
// doing the whole flow a desktop host does, and raw requests for each refusal.
#include <catch2/catch.hpp>

#include "http/oauth_documents.hpp"
#include "tests/http/server_test_support.hpp"
#include "tests/support/bridge_process.hpp"
#include "tests/support/ingress_bridge.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/mqtt_mcp_client.hpp"
#include "tests/support/oauth_server.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait.hpp"

using namespace mcpmqtt::test;
using namespace std::chrono_literals;

namespace {

const std::string kClient = MCPMQTT_SOURCE_DIR "/tests/node/sdk-oauth-client.mjs";

std::string servers_of(const std::string& cmd) {
  return R"({"demo/test": {"command": ")" + cmd + R"("}, "other/srv": {"command": ")" + cmd +
         R"("}})";
}

std::string oauth_extra(const std::string& issuer, const std::string& more = "") {
  return R"(, "oauth": {"issuer": ")" + issuer +
         R"(", "scopes": {"mcp:all": ["#"], "mcp:demo": ["demo/#"]})" + more + "}";
}

// The bridge's demo/test online and the issuer's keys in: the keys are fetched after start, so
// a token is checked only once they are.
void wait_for_keys(const Bridge& b) {
  REQUIRE(b.proc->wait_for_log("[directory] demo/test online"));
  REQUIRE(b.proc->wait_for_log("JWK Set"));
}

const std::string kInit =
    R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",)"
    R"("capabilities":{},"clientInfo":{"name":"t","version":"1"}}})";

HttpResult post(const Bridge& b, const std::string& path, const std::string& authorization,
                const std::string& body = kInit, const std::string& session = "") {
  RawClient c(b.endpoint());
  Headers h{{"Host", "127.0.0.1:" + std::to_string(b.port)},
            {"Content-Type", "application/json"},
            {"Accept", "application/json, text/event-stream"}};
  if (!authorization.empty()) h.push_back({"Authorization", authorization});
  if (!session.empty()) h.push_back({"Mcp-Session-Id", session});
  return c.request(bhttp::verb::post, path, h, body, 30s);
}

HttpResult get(const Bridge& b, const std::string& path, const std::string& authorization = "") {
  RawClient c(b.endpoint());
  Headers h{{"Host", "127.0.0.1:" + std::to_string(b.port)}};
  if (!authorization.empty()) h.push_back({"Authorization", authorization});
  return c.request(bhttp::verb::get, path, h, "", 30s);
}

}  // namespace

TEST_CASE(
    "MCP authorization: the official SDK clients (v1, v2 in the 2025 and 2026-07-28 eras) "
    "authorize against oidc-provider through the bridge as a desktop host does - 401, RFC 9728 "
    "metadata, RFC 8414 metadata, RFC 7591 registration, code with PKCE and resource, token, "
    "calls",
    "[ingress][oauth][sdk]") {
  AuthServer as;
  Mosquitto broker;
  Bridge bridge(broker, servers_of(MCPMQTT_TEST_SERVER), "demo/test", "", oauth_extra(as.issuer));
  wait_for_keys(bridge);
  const std::vector<std::vector<std::string>> variants{
      {"--sdk", "v1"}, {"--sdk", "v2", "--era", "2025"}, {"--sdk", "v2", "--era", "2026"}};
  for (const auto& v : variants) {
    std::vector<std::string> argv{node_binary(), kClient, "--url",  bridge.url(),
                                  "--call",      "echo",  "--args", R"({"message":"hi"})"};
    argv.insert(argv.end(), v.begin(), v.end());
    auto opts = Process::piped(argv);
    auto proc = Process::start(opts);
    auto line = proc->read_line(120s);
    const auto rc = proc->wait_for(60s);
    INFO(v.back() << " " << line.value_or("(no output)"));
    REQUIRE(line);
    CHECK(rc == 0);
    CHECK(json_at(*line, "ok") == "true");
    CHECK(json_at(*line, "flow.unauthorized") == "true");
    CHECK(json_at(*line, "flow.token") == "true");
    CHECK(json_at(*line, "flow.resource") == bridge.url());
    CHECK(json_at(*line, "accessToken.claims.aud") == bridge.url());
    CHECK(json_at(*line, "accessToken.claims.sub") == "alice");
    CHECK(json_at(*line, "calls.0.ok") == "true");
    CHECK(json_at(*line, "protocolVersion") == (v.back() == "2026" ? "2026-07-28" : "2025-11-25"));
  }
  CHECK(bridge.proc->log().find("Bearer ey") == std::string::npos);  // never a token in the log
}

TEST_CASE(
    "MCP authorization: RFC 6750 and RFC 9728 refusals - no token, malformed, alg none, bad "
    "signature, wrong audience, expired, another issuer's key, insufficient scope - each with "
    "its status and challenge, and per-principal reach and sessions",
    "[ingress][oauth]") {
  AuthServer as({"--ttl", "2"});
  AuthServer stranger;  // another issuer, other keys
  Mosquitto broker;
  Bridge bridge(broker, servers_of(MCPMQTT_TEST_SERVER), "demo/test", "",
                oauth_extra(as.issuer, R"(, "clock_skew_s": 0)"));
  wait_for_keys(bridge);
  REQUIRE(bridge.proc->wait_for_log("[directory] other/srv online"));
  const std::string base = "http://127.0.0.1:" + std::to_string(bridge.port);

  // RFC 9728 §3: the metadata of each endpoint, and of the bridge as a whole.
  auto prm = get(bridge, "/.well-known/oauth-protected-resource/servers/demo/test/mcp");
  REQUIRE(prm.status == 200);
  CHECK(json_at(prm.body, "resource") == base + "/servers/demo/test/mcp");
  CHECK(json_at(prm.body, "authorization_servers.0") == as.issuer);
  CHECK(json_at(prm.body, "scopes_supported.0") == "mcp:all");
  CHECK(json_at(prm.body, "bearer_methods_supported.0") == "header");
  CHECK(json_at(get(bridge, "/.well-known/oauth-protected-resource").body, "resource") == base);
  CHECK(get(bridge, "/.well-known/oauth-protected-resource/nothing").status == 404);

  // RFC 6750 §3.1 / RFC 9728 §5.1: no token: 401, the metadata's URL, no error code.
  auto none = post(bridge, "/mcp", "");
  CHECK(none.status == 401);
  CHECK(none.header("www-authenticate") == "Bearer resource_metadata=\"" + base +
                                               "/.well-known/oauth-protected-resource/mcp\", " +
                                               "scope=\"mcp:all mcp:demo\"");
  const auto invalid = [&](const std::string& authorization, const std::string& why) {
    auto r = post(bridge, "/mcp", authorization);
    INFO(why << ": " << r.body);
    CHECK(r.status == 401);
    CHECK(r.header("www-authenticate").find("error=\"invalid_token\"") != std::string::npos);
    CHECK(r.header("www-authenticate").find("resource_metadata=") != std::string::npos);
  };
  invalid("Bearer not-a-jwt", "malformed");
  const auto good = as.token(base + "/mcp", "mcp:all");
  auto tampered = good;
  tampered[tampered.size() - 5] = tampered[tampered.size() - 5] == 'A' ? 'B' : 'A';
  invalid("Bearer " + tampered, "bad signature");
  const auto dot = good.find('.');
  // RFC 7518 §3.6: the same claims under {"alg":"none","typ":"at+jwt"}, without a signature.
  invalid("Bearer eyJhbGciOiJub25lIiwidHlwIjoiYXQrand0In0" +
              good.substr(dot, good.rfind('.') - dot) + ".",
          "alg none");
  invalid("Bearer " + as.token("http://127.0.0.1:1/mcp", "mcp:all"), "wrong audience");
  invalid("Bearer " + stranger.token(base + "/mcp", "mcp:all"), "another issuer's key");

  // A valid token reaches what its scopes grant, and opens a session of its principal's.
  auto ok = post(bridge, "/mcp", "Bearer " + good);
  REQUIRE(ok.status == 200);
  const auto session = ok.header("mcp-session-id");
  REQUIRE(!session.empty());
  const auto demo_only = as.token(base + "/mcp", "mcp:demo", "svc2:secret2");
  // Security best practices §Session Hijacking: another principal cannot use the session.
  auto hijack = post(bridge, "/mcp", "Bearer " + demo_only,
                     R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})", session);
  CHECK(hijack.status == 403);
  // RFC 6750 §3.1: insufficient_scope, naming the scope that would do.
  auto narrow = post(bridge, "/servers/other/srv/mcp",
                     "Bearer " + as.token(base + "/servers/other/srv/mcp", "mcp:demo"));
  CHECK(narrow.status == 403);
  CHECK(narrow.header("www-authenticate").find("error=\"insufficient_scope\"") !=
        std::string::npos);
  CHECK(narrow.header("www-authenticate").find("scope=\"mcp:all\"") != std::string::npos);
  // GET /servers lists only what the principal may reach.
  const auto listing = get(bridge, "/servers", "Bearer " + as.token(base, "mcp:demo"));
  CHECK(listing.status == 200);
  CHECK(listing.body.find("demo/test") != std::string::npos);
  CHECK(listing.body.find("other/srv") == std::string::npos);
  CHECK(get(bridge, "/servers", "Bearer " + as.token(base, "mcp:all")).body.find("other/srv") !=
        std::string::npos);

  // RFC 7519 §4.1.4: the token expired (2 s tokens, no clock skew).
  std::this_thread::sleep_for(3s);
  invalid("Bearer " + good, "expired");
  CHECK(bridge.proc->log().find(good) == std::string::npos);
}

TEST_CASE(
    "MCP authorization: with the issuer unreachable at start the daemon starts, protected routes "
    "answer 503 with the reason, and tokens are accepted once the issuer is up",
    "[ingress][oauth][faults]") {
  // Held until the issuer starts on it: nothing else answers there meanwhile.
  HeldPort held;
  const auto port = held.port();
  Mosquitto broker;
  Bridge bridge(broker, servers_of(MCPMQTT_TEST_SERVER), "demo/test", "",
                oauth_extra("http://127.0.0.1:" + std::to_string(port)));
  REQUIRE(bridge.proc->wait_for_log("[directory] demo/test online"));
  // The first fetch of the issuer's metadata has failed (before it, the reason is only that
  // the keys have not been fetched yet).
  REQUIRE(bridge.proc->wait_for_log("no token can be checked until it succeeds"));
  auto early = post(bridge, "/mcp", "Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln");
  CHECK(early.status == 503);
  CHECK(early.error_message().find("cannot") != std::string::npos);
  CHECK(early.has("retry-after"));
  // A probe without a token learns the status and why tokens cannot be checked, nothing more.
  const auto probe = get(bridge, "/readyz");
  CHECK(probe.status == 503);
  CHECK(probe.body.starts_with("not ready: cannot fetch"));
  CHECK(probe.body.find("broker") == std::string::npos);
  held.release();
  AuthServer as({"--port", std::to_string(port)});
  const auto token =
      as.token("http://127.0.0.1:" + std::to_string(bridge.port) + "/mcp", "mcp:all");
  unsigned status = 0;
  for (int i = 0; i < 150 && status != 200; ++i) {
    status = post(bridge, "/mcp", "Bearer " + token).status;
    if (status != 200) std::this_thread::sleep_for(200ms);
  }
  CHECK(status == 200);
  // Readiness is sampled every 100 ms (Daemon::watch_readiness): a token may be accepted just
  // before /readyz says so. CI once asked in between.
  CHECK(eventually([&] { return get(bridge, "/readyz").body == "ready"; }, 5s));
}

TEST_CASE(
    "HTTP egress to a protected upstream, end to end: mcpServers url with oauth (client "
    "credentials, RFC 6749 §4.4) publishes another bridge's OAuth-protected /mcp on MQTT - a "
    "client reaches its tool through both, across token renewals, and never sees a token",
    "[egress][oauth]") {
  AuthServer as({"--ttl", "3"});
  Mosquitto broker;
  // The protected upstream: a bridge whose HTTP ingress is a resource server of `as`.
  Bridge upstream(broker, R"({"demo/test": {"command": ")" MCPMQTT_TEST_SERVER R"("}})",
                  "demo/test", "", oauth_extra(as.issuer));
  wait_for_keys(upstream);
  TempDir dir;
  const auto secret = dir.write("secret", "secret\n");
  Bridge front(broker,
               R"({"remote/demo": {"url": ")" + upstream.url() + R"(", "oauth": {"issuer": ")" +
                   as.issuer + R"(", "client_id": "svc", "client_secret_file": ")" + secret +
                   R"(", "scope": "mcp:all"}}})",
               "remote/demo");
  REQUIRE(front.proc->wait_for_log("[directory] remote/demo online"));
  auto init = post(front, "/mcp", "");
  REQUIRE(init.status == 200);
  const auto session = init.header("mcp-session-id");
  REQUIRE(!session.empty());
  // Tokens live 3 s and are renewed a tenth of that before they expire: calls over 5 s see
  // several, and none fails.
  for (int i = 0; i < 6; ++i) {
    auto call = post(front, "/mcp", "", tool_call(10 + i, "echo"), session);
    INFO(call.body);
    REQUIRE(call.status == 200);
    CHECK(call.body.find("hello") != std::string::npos);
    std::this_thread::sleep_for(1s);
  }
  // What the calls crossed is protected: without the bridge's token, 401.
  CHECK(post(upstream, "/mcp", "").status == 401);
  const auto log = front.proc->log();
  std::size_t grants = 0;
  for (auto at = log.find("access token for " + upstream.url()); at != std::string::npos;
       at = log.find("access token for " + upstream.url(), at + 1))
    ++grants;
  CHECK(grants >= 2);  // renewed at least once while the calls went on
  CHECK(log.find("secret\n") == std::string::npos);
  CHECK(log.find("Bearer ey") == std::string::npos);
}

namespace {

// What oauth-server.mjs is asked besides tokens for a resource, as the client svc:secret:
// RFC 7009 §2.1 revocation, and a token for no resource (for the AS itself).
HttpResult as_form_post(const AuthServer& as, const std::string& path, const std::string& body) {
  RawClient c({boost::asio::ip::make_address("127.0.0.1"), as.port});
  return c.request(bhttp::verb::post, path,
                   {{"Host", "127.0.0.1:" + std::to_string(as.port)},
                    {"Content-Type", "application/x-www-form-urlencoded"},
                    {"Authorization", mcpmqtt::http::oauth::basic_authorization("svc", "secret")}},
                   body);
}
void revoke_token(const AuthServer& as, const std::string& token) {
  REQUIRE(
      as_form_post(as, "/token/revocation", "token=" + mcpmqtt::http::oauth::form_urlencode(token))
          .status == 200);
}
std::string token_for_no_resource(const AuthServer& as, const std::string& scope) {
  const auto r = as_form_post(
      as, "/token",
      "grant_type=client_credentials&scope=" + mcpmqtt::http::oauth::form_urlencode(scope));
  INFO(r.body);
  REQUIRE(r.status == 200);
  return json_at(r.body, "access_token").value_or("");
}

// http.oauth with introspection as the client svc (its secret in a file of `dir`), answers as
// JSON bodies.
std::string introspecting_extra(const std::string& issuer, const TempDir& dir,
                                const std::string& more = "") {
  const auto secret = dir.write("introspection-secret", "secret\n");
  return R"(, "json_response": true)" +
         oauth_extra(issuer, R"(, "introspection": {"client_id": "svc", "client_secret_file": ")" +
                                 secret + "\"" + more + "}");
}

// initialize, notifications/initialized and tools/call echo on one session, with `token`.
HttpResult call_echo(const Bridge& b, const std::string& token) {
  auto init = post(b, "/mcp", "Bearer " + token);
  if (init.status != 200) return init;
  const auto session = init.header("mcp-session-id");
  post(b, "/mcp", "Bearer " + token, R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
       session);
  return post(b, "/mcp", "Bearer " + token,
              R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo",)"
              R"("arguments":{"text":"through introspection"}}})",
              session);
}

}  // namespace

TEST_CASE(
    "RFC 7662: opaque access tokens from oidc-provider checked by introspection - a valid one "
    "calls a tool, a revoked one (RFC 7009) and one for another resource are 401 invalid_token, "
    "one whose scopes do not reach the server 403 insufficient_scope",
    "[ingress][oauth][introspection]") {
  AuthServer as({"--format", "opaque"});
  TempDir dir;
  Mosquitto broker;
  Bridge bridge(broker, servers_of(MCPMQTT_TEST_SERVER), "demo/test", "",
                introspecting_extra(as.issuer, dir));
  wait_for_keys(bridge);
  REQUIRE(bridge.proc->wait_for_log("[directory] other/srv online"));
  const std::string base = "http://127.0.0.1:" + std::to_string(bridge.port);

  const auto token = as.token(base + "/mcp", "mcp:all");
  REQUIRE(token.find('.') == std::string::npos);  // opaque
  auto call = call_echo(bridge, token);
  INFO(call.body);
  CHECK(call.status == 200);
  CHECK(call.body.find("through introspection") != std::string::npos);

  const auto invalid = [&](const std::string& t, const std::string& path,
                           const std::string& detail) {
    auto r = post(bridge, path, "Bearer " + t);
    INFO(detail << ": " << r.body);
    CHECK(r.status == 401);
    CHECK(r.header("www-authenticate").find("error=\"invalid_token\"") != std::string::npos);
    CHECK(r.header("www-authenticate").find(detail) != std::string::npos);
  };
  // RFC 7662 §2.2: "active": false for a revoked token; RFC 6750 §3.1 invalid_token.
  const auto revoked = as.token(base + "/mcp", "mcp:all");
  revoke_token(as, revoked);
  invalid(revoked, "/mcp", "the token is not active");
  invalid(as.token("http://127.0.0.1:1/mcp", "mcp:all"), "/mcp",
          "the audience does not name this resource");
  invalid("no-such-token", "/mcp", "the token is not active");
  // RFC 6750 §3.1: insufficient_scope.
  auto narrow = post(bridge, "/servers/other/srv/mcp",
                     "Bearer " + as.token(base + "/servers/other/srv/mcp", "mcp:demo"));
  CHECK(narrow.status == 403);
  CHECK(narrow.header("www-authenticate").find("error=\"insufficient_scope\"") !=
        std::string::npos);
  CHECK(bridge.proc->log().find(token) == std::string::npos);
}

TEST_CASE(
    "RFC 7662 with JWTs: with introspection configured a JWT access token is still verified with "
    "the issuer's keys, and an opaque token bound to no resource (no aud) is refused",
    "[ingress][oauth][introspection]") {
  AuthServer as;
  TempDir dir;
  Mosquitto broker;
  Bridge bridge(broker, servers_of(MCPMQTT_TEST_SERVER), "demo/test", "",
                introspecting_extra(as.issuer, dir));
  wait_for_keys(bridge);
  const std::string base = "http://127.0.0.1:" + std::to_string(bridge.port);
  const auto jwt = as.token(base + "/mcp", "mcp:all");
  REQUIRE(std::count(jwt.begin(), jwt.end(), '.') == 2);
  CHECK(call_echo(bridge, jwt).status == 200);
  // Without a resource oidc-provider issues an opaque token for itself: active, but no aud.
  auto unbound = post(bridge, "/mcp", "Bearer " + token_for_no_resource(as, "mcp:all"));
  INFO(unbound.body);
  CHECK(unbound.status == 401);
  CHECK(unbound.header("www-authenticate").find("no aud") != std::string::npos);
}

TEST_CASE(
    "RFC 7662 with the authorization server gone: an opaque token not seen before is 503 with "
    "Retry-After and the reason (never 401), one already introspected keeps working until its "
    "answer's cache_max_s runs out",
    "[ingress][oauth][introspection][faults]") {
  AuthServer as({"--format", "opaque"});
  TempDir dir;
  Mosquitto broker;
  Bridge bridge(broker, servers_of(MCPMQTT_TEST_SERVER), "demo/test", "",
                introspecting_extra(as.issuer, dir, R"(, "cache_max_s": 4)"));
  wait_for_keys(bridge);
  const std::string base = "http://127.0.0.1:" + std::to_string(bridge.port);
  const auto cached = as.token(base + "/mcp", "mcp:all");
  const auto unseen = as.token(base + "/mcp", "mcp:all");
  REQUIRE(post(bridge, "/mcp", "Bearer " + cached).status == 200);
  const auto introspected_at = std::chrono::steady_clock::now();
  as.proc.reset();  // killed

  auto down = post(bridge, "/mcp", "Bearer " + unseen);
  INFO(down.body);
  CHECK(down.status == 503);
  CHECK(down.has("retry-after"));
  CHECK(down.error_message().find("/token/introspection") != std::string::npos);
  auto still = post(bridge, "/mcp", "Bearer " + cached);
  if (std::chrono::steady_clock::now() - introspected_at < 3s) CHECK(still.status == 200);
  std::this_thread::sleep_for(5s);
  CHECK(post(bridge, "/mcp", "Bearer " + cached).status == 503);
}

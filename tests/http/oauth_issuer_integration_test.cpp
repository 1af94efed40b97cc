// The I/O that feeds the token core: IssuerKeys (metadata discovery, the JWK Set, its freshness,
// unknown kids, an unreachable issuer, stale sets) and ClientCredentials (RFC 6749 §4.4), against
// a real authorization server from npm (tests/node/oauth2-mock-server.mjs, which serves only the
// OpenID Connect discovery document) and, for the RFC 8414 document and the failures a real
// server will not produce on demand, a scripted loopback server
// (tests/http/client_fake_server.hpp).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <rapidjson/document.h>

#include "auth/token.hpp"
#include "http/oauth_client_credentials.hpp"
#include "http/oauth_issuer.hpp"
#include "tests/http/client_fake_server.hpp"
#include "tests/http/oauth_loop.hpp"
#include "tests/support/bridge_process.hpp"
#include "tests/support/log_capture.hpp"
#include "tests/support/prerequisite.hpp"
#include "tests/support/process.hpp"
#include "tests/support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using mcpmqtt::http::ClientCredentials;
using mcpmqtt::http::IssuerKeys;
using mcpmqtt::test::eventually;
using mcpmqtt::test::LogCapture;
using mcpmqtt::test::OauthLoop;
using mcpmqtt::test::Process;
namespace fake = mcpmqtt::test::fake;
namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using Clock = std::chrono::steady_clock;

std::uint16_t oauth_free_port() {
  net::io_context io;
  net::ip::tcp::acceptor a(io, {net::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

bool oauth_have_node() {
  if (std::ifstream(mcpmqtt::test::node_binary()).good()) return true;
  mcpmqtt::test::missing_prerequisite("the pinned Node (scripts/setup-node.sh) is not installed");
  return false;
}

rapidjson::Document oauth_json(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str());
  REQUIRE(d.IsObject());
  return d;
}

// tests/node/oauth2-mock-server.mjs: oauth2-mock-server with an RS256 and an ES256 key, and
// control routes for the tests.
struct OauthMock {
  std::unique_ptr<Process> proc;
  std::string issuer;
  std::uint16_t port = 0;

  explicit OauthMock(std::uint16_t fixed_port = 0) {
    proc = Process::start(Process::piped({mcpmqtt::test::node_binary(),
                                          MCPMQTT_SOURCE_DIR "/tests/node/oauth2-mock-server.mjs",
                                          "--port", std::to_string(fixed_port)}));
    const std::string key = "OAUTH_ISSUER_URL=";
    for (int i = 0; i < 20 && issuer.empty(); ++i) {
      auto line = proc->read_line(30s);
      if (!line) break;
      if (line->rfind(key, 0) == 0) issuer = line->substr(key.size());
    }
    REQUIRE(!issuer.empty());
    port = static_cast<std::uint16_t>(std::stoi(issuer.substr(issuer.rfind(':') + 1)));
  }

  // One request on a connection of its own; the control routes answer JSON.
  std::string call(bhttp::verb verb, const std::string& target, const std::string& body = "") {
    net::io_context io;
    net::ip::tcp::socket s(io);
    s.connect({net::ip::make_address("127.0.0.1"), port});
    bhttp::request<bhttp::string_body> req{verb, target, 11};
    req.set(bhttp::field::host, "127.0.0.1");
    req.set(bhttp::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    bhttp::write(s, req);
    boost::beast::flat_buffer buf;
    bhttp::response<bhttp::string_body> res;
    bhttp::read(s, buf, res);
    REQUIRE(res.result_int() == 200);
    return res.body();
  }
  int requests(const std::string& path) {
    auto d = oauth_json(call(bhttp::verb::get, "/test/stats"));
    const auto& r = d["requests"];
    return r.HasMember(path.c_str()) ? r[path.c_str()].GetInt() : 0;
  }
  std::string stats() { return call(bhttp::verb::get, "/test/stats"); }
  std::string issue_token(const std::string& json) {
    auto d = oauth_json(call(bhttp::verb::post, "/test/token", json));
    return d["token"].GetString();
  }
  std::string add_key(const std::string& alg) {
    auto d = oauth_json(call(bhttp::verb::post, "/test/keys", R"({"alg":")" + alg + R"("})"));
    return d["kid"].GetString();
  }
};

// Two P-256 public keys: RFC 7517 Appendix A.1 and RFC 7515 Appendix A.3.
const std::string kOauthJwks = R"({"keys":[
  {"kty":"EC","crv":"P-256","kid":"1","use":"sig","alg":"ES256",
   "x":"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4","y":"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"},
  {"kty":"EC","crv":"P-256","kid":"2","alg":"ES256",
   "x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]})";

// RFC 8414 metadata for an issuer served by the scripted server: keys at {issuer}/keys.
std::string oauth_metadata(const std::string& issuer, const std::string& issuer_in_doc = "") {
  return R"({"issuer":")" + (issuer_in_doc.empty() ? issuer : issuer_in_doc) + R"(","jwks_uri":")" +
         issuer + R"(/keys","token_endpoint":")" + issuer +
         R"(/token","introspection_endpoint":")" + issuer +
         R"(/introspect","authorization_endpoint":")" + issuer +
         R"(/authorize","registration_endpoint":")" + issuer +
         R"(/register","scopes_supported":["mcp:all","mcp:weather"],"response_types_supported":["code"]})";
}

// Loopback-fast bounds; each test changes what it is about.
IssuerKeys::Options oauth_options(const std::string& issuer) {
  IssuerKeys::Options o;
  o.server.issuer = issuer;
  o.server.connect_timeout = 2s;
  o.server.timeout = 5s;
  o.min_refresh = 200ms;
  o.max_refresh = 1h;
  o.unknown_kid_min_interval = 30s;
  o.max_stale = 1h;
  o.retry_min = 100ms;
  o.retry_max = 400ms;
  return o;
}

std::shared_ptr<IssuerKeys> oauth_start(OauthLoop& loop, IssuerKeys::Options o) {
  auto keys = IssuerKeys::create(loop.executor(), std::move(o));
  REQUIRE(keys);
  (*keys)->start();
  return *keys;
}

IssuerKeys::Refreshed oauth_refresh(IssuerKeys& keys) {
  std::promise<IssuerKeys::Refreshed> p;
  auto f = p.get_future();
  keys.refresh_for_unknown_kid([&p](IssuerKeys::Refreshed r) { p.set_value(std::move(r)); });
  REQUIRE(f.wait_for(15s) == std::future_status::ready);
  return f.get();
}

using OauthTokenResult = mcpmqtt::Expected<std::string, ClientCredentials::Error>;
OauthTokenResult oauth_token(ClientCredentials& cc) {
  std::promise<OauthTokenResult> p;
  auto f = p.get_future();
  cc.token([&p](const OauthTokenResult& r) { p.set_value(r); });
  REQUIRE(f.wait_for(15s) == std::future_status::ready);
  return f.get();
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A claim of a JWT, read without checking anything (the test's own look at what was issued).
std::string oauth_claim(const std::string& jwt, const char* name) {
  const auto a = jwt.find('.');
  const auto b = jwt.find('.', a + 1);
  auto payload = mcpmqtt::auth::base64url_decode(jwt.substr(a + 1, b - a - 1));
  REQUIRE(payload);
  auto d = oauth_json(*payload);
  if (!d.HasMember(name)) return "<absent>";
  return d[name].IsString() ? d[name].GetString() : "<not a string>";
}

}  // namespace

// ---- IssuerKeys against the scripted server ----------------------------------------------------

TEST_CASE(
    "RFC 8414 §3: metadata from oauth-authorization-server before the issuer's path, then "
    "the JWK Set from its jwks_uri",
    "[oauth]") {
  LogCapture log("http");
  OauthLoop loop;
  fake::Server srv;
  const std::string issuer = "http://127.0.0.1:" + std::to_string(srv.port()) + "/tenant1";
  srv.start([&](fake::Conn& c, const fake::Request& r) {
    if (r.target == "/.well-known/oauth-authorization-server/tenant1") {
      c.json(oauth_metadata(issuer));
    } else if (r.target == "/tenant1/keys") {
      c.json(kOauthJwks, {{"Cache-Control", "public, max-age=3600"}});
    } else {
      c.respond(404, "text/plain", "no");
    }
  });
  auto keys = oauth_start(loop, oauth_options(issuer));
  REQUIRE(eventually([&] { return keys->keys() != nullptr; }));
  CHECK(keys->keys()->size() == 2);
  CHECK(keys->keys()->has_kid("1"));
  CHECK(keys->keys()->has_kid("2"));
  CHECK(keys->problem().empty());
  auto m = keys->metadata();
  REQUIRE(m);
  CHECK(m->source == "http://127.0.0.1:" + std::to_string(srv.port()) +
                         "/.well-known/oauth-authorization-server/tenant1");
  CHECK(m->issuer == issuer);
  CHECK(m->jwks_uri == issuer + "/keys");
  CHECK(m->token_endpoint == issuer + "/token");
  CHECK(m->introspection_endpoint == issuer + "/introspect");
  CHECK(m->authorization_endpoint == issuer + "/authorize");
  CHECK(m->registration_endpoint == issuer + "/register");
  CHECK(m->scopes_supported == std::vector<std::string>{"mcp:all", "mcp:weather"});
  // The RFC 8414 document was there: OpenID discovery was never asked.
  CHECK(srv.count([](const fake::Request& r) { return has(r.target, "openid-configuration"); }) ==
        0);
  CHECK(log.find({"JWK Set " + issuer + "/keys: 2 keys; next refresh in 3600 s"}));
  keys->stop();
}

TEST_CASE("RFC 8414 §3.3: metadata naming another issuer is refused, and nothing else is asked",
          "[oauth]") {
  OauthLoop loop;
  fake::Server srv;
  const std::string issuer = "http://127.0.0.1:" + std::to_string(srv.port());
  srv.start([&](fake::Conn& c, const fake::Request& r) {
    if (r.target == "/.well-known/oauth-authorization-server") {
      c.json(oauth_metadata(issuer, "https://attacker.example"));
    } else {
      c.respond(404, "text/plain", "no");
    }
  });
  auto keys = oauth_start(loop, oauth_options(issuer));
  REQUIRE(eventually([&] { return has(keys->problem(), "must be identical"); }));
  CHECK(keys->problem() == "the authorization server metadata at " + issuer +
                               "/.well-known/oauth-authorization-server is refused: its issuer "
                               "\"https://attacker.example\" is not the configured issuer \"" +
                               issuer + "\"; they must be identical (RFC 8414 §3.3)");
  CHECK(keys->keys() == nullptr);
  CHECK(keys->metadata() == nullptr);
  CHECK(srv.count([](const fake::Request& r) {
    return r.target != "/.well-known/oauth-authorization-server";
  }) == 0);
  keys->stop();
}

TEST_CASE("RFC 8414 §3.2: malformed metadata JSON is refused with the parser's reason", "[oauth]") {
  OauthLoop loop;
  fake::Server srv([](fake::Conn& c, const fake::Request&) { c.json(R"({"issuer": )"); });
  const std::string issuer = "http://127.0.0.1:" + std::to_string(srv.port());
  auto keys = oauth_start(loop, oauth_options(issuer));
  REQUIRE(eventually([&] { return has(keys->problem(), "is refused"); }));
  CHECK_THAT(keys->problem(),
             Catch::StartsWith("the authorization server metadata at " + issuer +
                               "/.well-known/oauth-authorization-server is refused: not JSON ("));
  CHECK(keys->keys() == nullptr);
  keys->stop();
}

TEST_CASE("a malformed or 10 MiB JWK Set is refused with a reason and the good set stays in use",
          "[oauth]") {
  OauthLoop loop;
  fake::Queue<std::string> script;  // what the next JWK Set request gets
  fake::Server srv;
  const std::string issuer = "http://127.0.0.1:" + std::to_string(srv.port());
  const std::string huge(10 * 1024 * 1024, ' ');
  srv.start([&](fake::Conn& c, const fake::Request& r) {
    if (r.target == "/.well-known/oauth-authorization-server")
      return (void)c.json(oauth_metadata(issuer));
    auto next = script.pop(20s, &srv.stopping());
    if (!next || *next == "good") {
      c.json(kOauthJwks, {{"Cache-Control", "no-store"}});
    } else if (*next == "malformed") {
      c.json(R"({"keys": [)");
    } else if (*next == "huge with length") {
      c.json("{\"keys\":[]}" + huge);
    } else {
      // No Content-Length: the limit has to be found while reading.
      c.write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n");
      for (int i = 0; i < 10 && c.write(std::string(1024 * 1024, ' ')); ++i) {
      }
      c.cut();
    }
  });
  auto o = oauth_options(issuer);
  o.server.timeout = 30s;
  script.push("good");
  auto keys = oauth_start(loop, o);
  REQUIRE(eventually([&] { return keys->keys() != nullptr; }));
  const auto good = keys->keys();

  script.push("malformed");
  REQUIRE(eventually([&] { return has(keys->problem(), "is refused"); }));
  CHECK_THAT(keys->problem(), Catch::StartsWith("the JWK Set at " + issuer + "/keys is refused: "));
  CHECK(keys->keys() == good);

  script.push("huge with length");
  REQUIRE(eventually([&] { return has(keys->problem(), "Content-Length"); }));
  CHECK(keys->problem() == "cannot fetch " + issuer +
                               "/keys: the response is larger than 256 KiB (Content-Length "
                               "10485771)");
  CHECK(keys->keys() == good);

  script.push("huge without length");
  REQUIRE(eventually([&] {
    return keys->problem() ==
           "cannot fetch " + issuer + "/keys: the response is larger than 256 KiB";
  }));
  CHECK(keys->keys() == good);

  script.push("good");
  REQUIRE(eventually([&] { return keys->problem().empty(); }));
  CHECK(keys->keys() != nullptr);
  CHECK(keys->keys() != good);
  keys->stop();
}

TEST_CASE("a metadata response slower than the timeout is cut off at the timeout", "[oauth]") {
  OauthLoop loop;
  fake::Server srv;
  srv.start([&](fake::Conn& c, const fake::Request&) {
    // Headers at once, then nothing: only the exchange's deadline can end it.
    c.write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{");
    const auto until = Clock::now() + 10s;
    while (!srv.stopping() && Clock::now() < until) {
      std::this_thread::sleep_for(20ms);
      c.write(" ");  // a byte now and then: each read is quick, the whole is not
    }
  });
  const std::string issuer = "http://127.0.0.1:" + std::to_string(srv.port());
  auto o = oauth_options(issuer);
  o.server.timeout = 500ms;
  o.retry_min = 5s;
  o.retry_max = 5s;
  const auto started = Clock::now();
  auto keys = oauth_start(loop, o);
  REQUIRE(eventually([&] { return has(keys->problem(), "within"); }, 5s));
  CHECK(Clock::now() - started < 3s);
  CHECK(keys->problem() == "cannot fetch " + issuer +
                               "/.well-known/oauth-authorization-server: no complete response "
                               "within 500 ms");
  CHECK(keys->keys() == nullptr);
  keys->stop();
}

TEST_CASE("RFC 9111 §5.2.2.1: Cache-Control max-age sets the next fetch, clamped to the bounds",
          "[oauth]") {
  OauthLoop loop;
  std::mutex m;
  std::vector<Clock::time_point> fetched;
  fake::Server srv;
  const std::string issuer = "http://127.0.0.1:" + std::to_string(srv.port());
  srv.start([&](fake::Conn& c, const fake::Request& r) {
    if (r.target == "/.well-known/oauth-authorization-server")
      return (void)c.json(oauth_metadata(issuer));
    std::size_t n;
    {
      std::lock_guard<std::mutex> l(m);
      fetched.push_back(Clock::now());
      n = fetched.size();
    }
    // 1: an hour, clamped to max_refresh; 2: one second; 3: no-store, so min_refresh.
    const std::string cc = n == 1 ? "max-age=3600" : n == 2 ? "max-age=1" : "no-store";
    c.json(kOauthJwks, {{"Cache-Control", cc}});
  });
  auto o = oauth_options(issuer);
  o.min_refresh = 300ms;
  o.max_refresh = 2s;
  auto keys = oauth_start(loop, o);
  REQUIRE(eventually([&] {
    std::lock_guard<std::mutex> l(m);
    return fetched.size() >= 4;
  }));
  keys->stop();
  std::lock_guard<std::mutex> l(m);
  const auto gap = [&](std::size_t i) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(fetched[i + 1] - fetched[i]);
  };
  CHECK(gap(0) >= 1950ms);  // max_refresh, not an hour
  CHECK(gap(0) < 3000ms);
  CHECK(gap(1) >= 950ms);  // max-age=1
  CHECK(gap(1) < 2000ms);
  CHECK(gap(2) >= 280ms);  // no-store: min_refresh
  CHECK(gap(2) < 1000ms);
}

TEST_CASE("an issuer that refuses connections: problem() says why, and the keys come when it is up",
          "[oauth]") {
  OauthLoop loop;
  const auto port = oauth_free_port();
  const std::string issuer = "http://127.0.0.1:" + std::to_string(port);
  auto keys = oauth_start(loop, oauth_options(issuer));
  const std::string refused =
      "cannot fetch " + issuer + "/.well-known/oauth-authorization-server: Connection refused";
  REQUIRE(eventually([&] { return keys->problem() == refused; }));
  CHECK(keys->keys() == nullptr);

  fake::Server srv(nullptr, port);
  srv.start([&](fake::Conn& c, const fake::Request& r) {
    if (r.target == "/.well-known/oauth-authorization-server")
      return (void)c.json(oauth_metadata(issuer));
    c.json(kOauthJwks);
  });
  REQUIRE(eventually([&] { return keys->keys() != nullptr; }));
  CHECK(keys->problem().empty());
  keys->stop();
}

TEST_CASE("a stale JWK Set stays in use while the issuer is unreachable, for max_stale at most",
          "[oauth]") {
  OauthLoop loop;
  std::atomic<std::int64_t> last_served{0};
  fake::Server srv;
  const std::string issuer = "http://127.0.0.1:" + std::to_string(srv.port());
  srv.start([&](fake::Conn& c, const fake::Request& r) {
    if (r.target == "/.well-known/oauth-authorization-server")
      return (void)c.json(oauth_metadata(issuer));
    c.json(kOauthJwks, {{"Cache-Control", "max-age=0"}});
    last_served = Clock::now().time_since_epoch().count();
  });
  auto o = oauth_options(issuer);
  o.min_refresh = 300ms;
  o.max_stale = 1500ms;
  auto keys = oauth_start(loop, o);
  REQUIRE(eventually([&] { return keys->keys() != nullptr; }));
  srv.stop_accepting();
  std::this_thread::sleep_for(100ms);  // a fetch under way ends
  const auto good = keys->keys();
  REQUIRE(good);
  const Clock::time_point last(Clock::duration(last_served.load()));

  REQUIRE(eventually([&] { return has(keys->problem(), "Connection refused"); }, 5s));
  // Past its freshness (300 ms) and within max_stale: still in use.
  std::this_thread::sleep_until(last + 1s);
  CHECK(keys->keys() == good);
  REQUIRE(eventually([&] { return keys->keys() == nullptr; }, 5s));
  CHECK(Clock::now() - last >= 1700ms);
  CHECK_THAT(keys->problem(),
             Catch::StartsWith("the signing keys of " + issuer +
                               " could not be refreshed for 1500 ms past their freshness and are "
                               "no longer used: cannot fetch " +
                               issuer + "/") &&
                 Catch::EndsWith(": Connection refused"));
  keys->stop();
}

TEST_CASE("stop() answers a refresh_for_unknown_kid waiting on a fetch", "[oauth]") {
  OauthLoop loop;
  fake::Server srv;
  srv.start([&](fake::Conn&, const fake::Request&) {
    while (!srv.stopping())
      std::this_thread::sleep_for(20ms);
  });
  const std::string issuer = "http://127.0.0.1:" + std::to_string(srv.port());
  auto keys = oauth_start(loop, oauth_options(issuer));
  REQUIRE(srv.wait_for([](const fake::Request&) { return true; }));
  std::promise<IssuerKeys::Refreshed> p;
  auto f = p.get_future();
  keys->refresh_for_unknown_kid([&p](IssuerKeys::Refreshed r) { p.set_value(std::move(r)); });
  CHECK(f.wait_for(300ms) == std::future_status::timeout);  // it waits on the fetch under way
  keys->stop();
  REQUIRE(f.wait_for(5s) == std::future_status::ready);
  auto r = f.get();
  CHECK_FALSE(r.fetched);
  CHECK(r.keys == nullptr);
  CHECK_THAT(r.problem, Catch::Contains("stopping"));
}

// ---- IssuerKeys against oauth2-mock-server --------------------------------------------------

TEST_CASE(
    "OpenID Connect Discovery 1.0 §4 after RFC 8414's 404: keys from oauth2-mock-server "
    "verify the tokens it issues (RFC 9068)",
    "[oauth]") {
  if (!oauth_have_node()) return;
  OauthMock as;
  OauthLoop loop;
  auto keys = oauth_start(loop, oauth_options(as.issuer));
  REQUIRE(eventually([&] { return keys->keys() != nullptr; }));
  CHECK(keys->metadata()->source == as.issuer + "/.well-known/openid-configuration");
  CHECK(keys->metadata()->token_endpoint == as.issuer + "/token");
  CHECK(as.requests("/.well-known/oauth-authorization-server") == 1);
  CHECK(as.requests("/.well-known/openid-configuration") == 1);
  CHECK(keys->keys()->size() == 2);

  namespace auth = mcpmqtt::auth;
  auth::Rules rules;
  rules.issuer = as.issuer;
  rules.audiences = {"https://bridge.example/mcp"};
  for (const std::string alg : {"RS256", "ES256"}) {
    INFO(alg);
    const auto jwt =
        as.issue_token(R"({"alg":")" + alg +
                       R"(","aud":"https://bridge.example/mcp","sub":"alice","scope":"mcp:all"})");
    auto token = auth::parse_token(jwt, rules.algorithms);
    REQUIRE(token);
    auto claims = auth::verify(*token, *keys->keys(), rules, std::time(nullptr));
    REQUIRE(claims);
    CHECK(claims->subject == "alice");
    CHECK(claims->scopes == std::vector<std::string>{"mcp:all"});
  }
  keys->stop();
}

TEST_CASE(
    "an unknown kid fetches the JWK Set again at once, at most once per interval, callers "
    "sharing the fetch",
    "[oauth]") {
  if (!oauth_have_node()) return;
  OauthMock as;
  OauthLoop loop;
  auto o = oauth_options(as.issuer);
  // Wide enough that a fetch and a key added under a loaded machine (ASan, two cores, builds
  // beside) stay within it; the keys added inside it are EC ones, which take no time to make.
  o.unknown_kid_min_interval = 3s;
  auto keys = oauth_start(loop, o);
  REQUIRE(eventually([&] { return keys->keys() != nullptr; }));
  REQUIRE(as.requests("/jwks") == 1);
  // A fetch that has just happened counts: the first unknown kid within the interval waits.
  std::this_thread::sleep_for(3100ms);

  const auto rotated = as.add_key("RS256");
  CHECK_FALSE(keys->keys()->has_kid(rotated));
  auto r = oauth_refresh(*keys);
  CHECK(r.fetched);
  REQUIRE(r.keys);
  CHECK(r.keys->has_kid(rotated));
  CHECK(keys->keys()->has_kid(rotated));
  CHECK(as.requests("/jwks") == 2);

  // Within the interval: answered with the set in use, the issuer not asked.
  const auto again = as.add_key("ES256");
  auto limited = oauth_refresh(*keys);
  CHECK_FALSE(limited.fetched);
  CHECK_FALSE(limited.keys->has_kid(again));
  CHECK(as.requests("/jwks") == 2);

  // After it, callers at the same moment share one fetch. The loop is held while the three
  // are posted: otherwise, on a loaded machine, the first one's fetch could finish before the
  // next is posted, which then (rightly) finds a fetch less than the interval ago.
  std::this_thread::sleep_for(3100ms);
  std::vector<std::future<IssuerKeys::Refreshed>> waits;
  std::vector<std::promise<IssuerKeys::Refreshed>> promises(3);
  std::promise<void> release;
  std::promise<void> held;
  boost::asio::post(loop.executor(), [&release, &held] {
    held.set_value();
    release.get_future().wait();
  });
  held.get_future().wait();
  for (auto& p : promises) {
    waits.push_back(p.get_future());
    keys->refresh_for_unknown_kid([&p](IssuerKeys::Refreshed x) { p.set_value(std::move(x)); });
  }
  release.set_value();
  for (auto& w : waits) {
    REQUIRE(w.wait_for(15s) == std::future_status::ready);
    auto x = w.get();
    CHECK(x.fetched);
    CHECK(x.keys->has_kid(again));
  }
  CHECK(as.requests("/jwks") == 3);
  keys->stop();
}

TEST_CASE(
    "an issuer unreachable at start: problem() says why, refresh_for_unknown_kid answers, "
    "and the keys come once it is up",
    "[oauth]") {
  if (!oauth_have_node()) return;
  OauthLoop loop;
  const auto port = oauth_free_port();
  const std::string issuer = "http://127.0.0.1:" + std::to_string(port);
  auto keys = oauth_start(loop, oauth_options(issuer));
  const std::string refused =
      "cannot fetch " + issuer + "/.well-known/oauth-authorization-server: Connection refused";
  REQUIRE(eventually([&] { return keys->problem() == refused; }));
  auto r = oauth_refresh(*keys);
  CHECK(r.keys == nullptr);
  CHECK_FALSE(r.fetched);
  CHECK(r.problem == refused);

  OauthMock as(port);
  REQUIRE(as.issuer == issuer);
  REQUIRE(eventually([&] { return keys->keys() != nullptr; }));
  CHECK(keys->problem().empty());
  CHECK(keys->metadata()->source == issuer + "/.well-known/openid-configuration");
  keys->stop();
}

// ---- ClientCredentials against oauth2-mock-server -------------------------------------------

namespace {

ClientCredentials::Options oauth_cc_options(const std::string& issuer) {
  ClientCredentials::Options o;
  o.server.issuer = issuer;
  o.server.connect_timeout = 2s;
  o.server.timeout = 5s;
  o.client_id = "bridge egress";
  o.client_secret = "s3cr:t+&sauce";
  o.scope = "mcp:all read";
  o.resource = "http://127.0.0.1:9/servers/weather/mcp";
  o.retry_min = 300ms;
  o.retry_max = 300ms;
  return o;
}

std::shared_ptr<ClientCredentials> oauth_cc(OauthLoop& loop, ClientCredentials::Options o) {
  auto cc = ClientCredentials::create(loop.executor(), std::move(o));
  REQUIRE(cc);
  return *cc;
}

}  // namespace

TEST_CASE(
    "RFC 6749 §4.4 with §2.3.1 client_secret_basic and RFC 8707 resource: one token "
    "request for concurrent callers, then the cached token",
    "[oauth]") {
  if (!oauth_have_node()) return;
  LogCapture log("http");
  OauthMock as;
  OauthLoop loop;
  const auto o = oauth_cc_options(as.issuer);
  auto cc = oauth_cc(loop, o);

  std::vector<std::promise<OauthTokenResult>> promises(4);
  std::vector<std::future<OauthTokenResult>> waits;
  for (auto& p : promises) {
    waits.push_back(p.get_future());
    cc->token([&p](const OauthTokenResult& r) { p.set_value(r); });
  }
  std::vector<std::string> tokens;
  for (auto& w : waits) {
    REQUIRE(w.wait_for(15s) == std::future_status::ready);
    auto r = w.get();
    REQUIRE(r);
    tokens.push_back(*r);
  }
  CHECK(std::all_of(tokens.begin(), tokens.end(), [&](auto& t) { return t == tokens[0]; }));
  auto again = oauth_token(*cc);
  REQUIRE(again);
  CHECK(*again == tokens[0]);

  auto stats = oauth_json(as.stats());
  const auto& reqs = stats["token_requests"];
  REQUIRE(reqs.Size() == 1);
  CHECK(std::string(reqs[0]["grant_type"].GetString()) == "client_credentials");
  CHECK(std::string(reqs[0]["auth"].GetString()) == "basic");
  // Form-encoded, then base64 (§2.3.1).
  CHECK(std::string(reqs[0]["basic_user"].GetString()) == "bridge+egress");
  CHECK(std::string(reqs[0]["basic_password"].GetString()) == "s3cr%3At%2B%26sauce");
  CHECK(reqs[0]["client_secret"].IsNull());
  CHECK(std::string(reqs[0]["scope"].GetString()) == "mcp:all read");
  CHECK(std::string(reqs[0]["resource"].GetString()) == o.resource);
  CHECK(oauth_claim(tokens[0], "aud") == o.resource);
  CHECK(oauth_claim(tokens[0], "sub") == "bridge egress");
  CHECK(cc->metadata()->token_endpoint == as.issuer + "/token");

  for (const auto& line : log.lines()) {
    CHECK_FALSE(has(line, o.client_secret));
    CHECK_FALSE(has(line, tokens[0]));
  }
  CHECK(log.find({"access token for " + o.resource, "valid for 3600 s"}));
  cc->stop();
}

TEST_CASE("client_secret_post sends the client's credentials in the form body", "[oauth]") {
  if (!oauth_have_node()) return;
  OauthMock as;
  OauthLoop loop;
  auto o = oauth_cc_options(as.issuer);
  o.auth_method = ClientCredentials::AuthMethod::client_secret_post;
  o.scope.clear();
  auto cc = oauth_cc(loop, o);
  REQUIRE(oauth_token(*cc));
  auto stats = oauth_json(as.stats());
  const auto& reqs = stats["token_requests"];
  REQUIRE(reqs.Size() == 1);
  CHECK(std::string(reqs[0]["auth"].GetString()) == "post");
  CHECK(reqs[0]["basic_user"].IsNull());
  CHECK(std::string(reqs[0]["client_id"].GetString()) == "bridge egress");
  CHECK(std::string(reqs[0]["client_secret"].GetString()) == "s3cr:t+&sauce");
  CHECK(reqs[0]["scope"].IsNull());
  cc->stop();
}

TEST_CASE(
    "RFC 6749 §5.1 expires_in: the token is fetched again a tenth of its life before it "
    "expires",
    "[oauth]") {
  if (!oauth_have_node()) return;
  OauthMock as;
  OauthLoop loop;
  as.call(bhttp::verb::post, "/test/expires-in", R"({"seconds":3})");
  auto cc = oauth_cc(loop, oauth_cc_options(as.issuer));
  const auto asked = Clock::now();
  auto first = oauth_token(*cc);
  REQUIRE(first);
  const auto got = Clock::now();
  // A 3 s life: renewed 300 ms before it ends (a tenth, less than the 60 s margin), so at
  // some time between asked + 2.7 s and got + 2.7 s.
  std::this_thread::sleep_until(asked + 2s);
  auto cached = oauth_token(*cc);
  REQUIRE(cached);
  CHECK(*cached == *first);
  CHECK(oauth_json(as.stats())["token_requests"].Size() == 1);
  std::this_thread::sleep_until(got + 2750ms);
  auto renewed = oauth_token(*cc);
  REQUIRE(renewed);
  CHECK(*renewed != *first);
  CHECK(oauth_json(as.stats())["token_requests"].Size() == 2);
  cc->stop();
}

TEST_CASE(
    "RFC 6749 §5.2: the authorization server's error and error_description reach the "
    "caller, and a failure is not asked again at once",
    "[oauth]") {
  if (!oauth_have_node()) return;
  LogCapture log("http");
  OauthMock as;
  OauthLoop loop;
  as.call(
      bhttp::verb::post, "/test/token-error",
      R"({"status":401,"error":"invalid_client","error_description":"client authentication failed"})");
  const auto o = oauth_cc_options(as.issuer);
  auto cc = oauth_cc(loop, o);
  auto r = oauth_token(*cc);
  REQUIRE_FALSE(r);
  CHECK(r.error().error == "invalid_client");
  CHECK(r.error().description == "client authentication failed");
  CHECK(r.error().reason == as.issuer +
                                "/token refused the client credentials grant of client \"bridge "
                                "egress\" (HTTP 401): invalid_client (client authentication "
                                "failed)");
  // Within retry_min the same answer comes without a request.
  auto held = oauth_token(*cc);
  REQUIRE_FALSE(held);
  CHECK(held.error().error == "invalid_client");
  CHECK(oauth_json(as.stats())["token_requests"].Size() == 1);
  std::this_thread::sleep_for(350ms);
  auto ok = oauth_token(*cc);
  REQUIRE(ok);
  CHECK(oauth_json(as.stats())["token_requests"].Size() == 2);
  for (const auto& line : log.lines())
    CHECK_FALSE(has(line, o.client_secret));
  CHECK(log.find({"invalid_client (client authentication failed)"}));
  cc->stop();
}

TEST_CASE("ClientCredentials::stop answers a token request under way", "[oauth]") {
  OauthLoop loop;
  fake::Server srv;
  const std::string issuer = "http://127.0.0.1:" + std::to_string(srv.port());
  srv.start([&](fake::Conn& c, const fake::Request& r) {
    if (r.target == "/.well-known/oauth-authorization-server")
      return (void)c.json(oauth_metadata(issuer));
    while (!srv.stopping())
      std::this_thread::sleep_for(20ms);
  });
  auto cc = oauth_cc(loop, oauth_cc_options(issuer));
  std::promise<OauthTokenResult> p;
  auto f = p.get_future();
  cc->token([&p](const OauthTokenResult& r) { p.set_value(r); });
  REQUIRE(srv.wait_for([](const fake::Request& r) { return r.target == "/token"; }));
  cc->stop();
  REQUIRE(f.wait_for(5s) == std::future_status::ready);
  auto r = f.get();
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().reason, Catch::Contains("stopping"));
}

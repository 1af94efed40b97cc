// The bridge against the floor and against what users would pick instead, for each
// MQTT client engine (mqtt.client: native, paho) and each broker set-up (Mosquitto as shipped,
// Nagle on; and tuned, set_tcp_nodelay true). One run measures four scenarios and prints one
// table with a column per (engine, broker):
//
//  1. latency at concurrency 1: tools/call of the echo tool through HTTP ingress → Mosquitto →
//     stdio egress → the C++ test server; beside it (a) the floor: a raw MQTT request and
//     response through the same Mosquitto with the same payload, by clients of the column's
//     engine, (b) supergateway (stateful Streamable HTTP) in front of the same server, (c) the
//     server over stdio directly;
//  2. throughput: C concurrent HTTP sessions calling the echo tool for a fixed time, bridge
//     and supergateway;
//  3. sessions: N concurrent initialized HTTP sessions on the ingress, each with its own MQTT
//     connection, served by one MQTT-native echo server (bench_mqtt_echo_server); the
//     ingress's RSS per session and the time to open them;
//  4. payload (default broker only): 1 MiB tool results through the bridge with K requests in
//     flight: throughput and each bridge process's peak RSS above idle.
//
// Ingress and egress run as two bridge processes, as they would be deployed (the ingress next
// to the clients, the egress next to the server), so each one's memory is its own.
//
//   bench_compare [--only 1,2,3,4] [--engines native,paho] [--brokers default,tuned]
//                 [--requests 2000] [--latency-cap-s 15] [--seconds 10] [--concurrency 64]
//                 [--sessions 10000] [--paho-sessions 5000] [--idle-seconds 0] [--keepalive 0]
//                 [--payload-kib 1024] [--in-flight 4] [--qos 1] [--threads 0] [--oauth none]
//                 [--replicas none] [--heap huge] [--cpus all]
//
// --oauth RS256[,ES256…] adds to scenario 1 the same calls through ingresses that are OAuth 2.1
// resource servers (http.oauth, an issuer served from this process), timed in turn with the
// plain bridge: a token reused, and a fresh token each call (bench/README.md, issue 31).
//
// --replicas 2025 adds to scenario 1 calls through ingress replicas sharing one secret: in a
// session on its own replica, and relayed to it from another replica (bench/README.md, issue 32).
//
// Scenario 1 also times (d) a bare loopback TCP round trip between two processes, on one CPU and
// across two: what the kernel and the machine charge for the wake-ups every hop between
// processes takes, bridge or not. --cpus one runs everything on one CPU, so that no wake-up
// crosses CPUs (bench/README.md, "Wake-ups across CPUs").
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <mqtt/async_client.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench_support.hpp"
#include "common/log.hpp"
#include "config/config.hpp"
#include "directions/options.hpp"
#include "mqtt/broker_connection.hpp"
#include "mqtt/paho/tcp_nodelay.hpp"
#include "tests/http/client_fake_server.hpp"
#include "tests/support/bridge_process.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_issuer.hpp"

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;
using namespace mcpmqtt;
using namespace mcpmqtt::bench;
using Clock = std::chrono::steady_clock;
// The bridge's MQTT side; `mqtt` alone would also name Paho's namespace.
namespace mq = mcpmqtt::mqtt;

namespace {

const std::string kServer = "bench/echo";
const std::string kText(64, 'a');  // the echo tool's argument in scenarios 1 and 2

// ---- the matrix --------------------------------------------------------------------------

enum class Engine { native, paho };  // mqtt.client of both bridge processes
enum class Broker { stock, tuned };  // Mosquitto as shipped (Nagle on), or set_tcp_nodelay true

const char* name(Engine e) {
  return e == Engine::native ? "native" : "paho";
}
const char* name(Broker b) {
  return b == Broker::stock ? "default" : "tuned";
}

// One column of the table.
struct Cell {
  Engine engine;
  Broker broker;
  std::size_t index() const {
    return 2 * static_cast<std::size_t>(engine) + static_cast<std::size_t>(broker);
  }
  std::string label() const { return std::string(name(engine)) + ", " + name(broker) + " broker"; }
};
constexpr std::size_t kCells = 4;
// The cell every target is checked on: the default engine against a broker as users run it.
constexpr Cell kTargetCell{Engine::native, Broker::stock};

template <typename T>
using PerCell = std::array<std::optional<T>, kCells>;

struct Settings {
  std::set<int> only = {1, 2, 3, 4};
  std::vector<Engine> engines = {Engine::native, Engine::paho};
  std::vector<Broker> brokers = {Broker::stock, Broker::tuned};
  // Scenario 1: each series (bridge, floor, supergateway, stdio) times `requests` calls after
  // `warmup`, or stops after `latency_cap_s` seconds of timed calls (the warm-up after 2 s):
  // only the Paho engine against a default broker (a Nagle stall of ~40 ms per call) is slow
  // enough to reach the cap.
  std::size_t requests = 2000, warmup = 200;
  double latency_cap_s = 15;
  int seconds = 10;
  std::size_t concurrency = 64;
  std::size_t sessions = 10000;  // scenario 3, native engine
  // Scenario 3 with the Paho engine, whose cost grows with the square of the sessions: 5,000
  // or --sessions when fewer, unless set.
  std::optional<std::size_t> paho_sessions;
  std::size_t payload_bytes = 1024 * 1024;
  std::size_t in_flight = 4;
  int qos = 1;          // mqtt.qos of both bridge processes, and the floor's QoS
  int keepalive_s = 0;  // scenario 3's ingress: mqtt.session_keepalive_s (0: the default)
  int threads = 0;      // daemon.threads of both bridge processes (0: the daemon's default)
  // Scenario 3: how long the open sessions idle while CPU is measured; 0: one keep-alive
  // interval of the ingress's session connections and 5 s more, so that every connection's
  // PINGREQ falls in the window (a shorter one misses them: bench/README.md, issue 34).
  int idle_seconds = 0;
  int idle_window() const {
    if (idle_seconds > 0) return idle_seconds;
    return (keepalive_s > 0 ? keepalive_s : config::MqttConfig{}.session_keepalive_s) + 5;
  }
  // Scenario 1's OAuth series (--oauth): the algorithms of their tokens, none when empty.
  std::vector<std::string> oauth;
  // Scenario 1 through ingress replicas too (--replicas): local against relayed calls.
  bool replicas = false;
  // --cpus one: this process and everything it starts (the broker, the bridge processes, their
  // children, supergateway) on one CPU, the first this process may use; else wherever the
  // kernel's scheduler puts them.
  bool one_cpu = false;
  int pinned_cpu = -1;  // the CPU --cpus one pinned the run to

  // The selected cells in the table's order: native before paho, the default broker first.
  std::vector<Cell> cells() const {
    std::vector<Cell> out;
    for (Engine e : engines)
      for (Broker b : brokers)
        out.push_back({e, b});
    return out;
  }
  std::size_t sessions_for(Engine e) const {
    if (e == Engine::native) return sessions;
    return paho_sessions ? *paho_sessions : std::min<std::size_t>(5000, sessions);
  }
};

std::string echo_request(std::uint64_t id, const std::string& text) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
         R"(,"method":"tools/call","params":{"name":"echo","arguments":{"text":")" + text +
         R"("}}})";
}

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

struct Latency {
  double p50 = 0, p90 = 0, p99 = 0;
  std::size_t n = 0;
};

Latency summarize(std::vector<double> us) {
  Latency l;
  l.n = us.size();
  l.p50 = percentile(us, 0.50);
  l.p90 = percentile(us, 0.90);
  l.p99 = percentile(us, 0.99);
  return l;
}

// Runs `call` (one request and its answer; it throws when the answer is wrong or missing) as
// a warm-up, then times it: see Settings::requests.
Latency time_calls(const Settings& s, const std::function<void()>& call) {
  const auto warm_end = Clock::now() + 2s;
  for (std::size_t i = 0; i < s.warmup && Clock::now() < warm_end; ++i)
    call();
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(s.latency_cap_s));
  std::vector<double> us;
  us.reserve(s.requests);
  while (us.size() < s.requests && Clock::now() < end) {
    const auto t0 = Clock::now();
    call();
    us.push_back(us_since(t0));
  }
  return summarize(std::move(us));
}

// time_calls for several series at once, one call of each in turn (warm-up included), so that
// whatever else the machine does falls on all of them alike; each round starts with the next
// series, so that none always follows the same one. The cap grows with the series.
std::vector<Latency> time_interleaved(const Settings& s,
                                      const std::vector<std::function<void()>>& calls) {
  const auto n = static_cast<double>(calls.size());
  const auto warm_end = Clock::now() + std::chrono::duration_cast<Clock::duration>(2s * n);
  for (std::size_t i = 0; i < s.warmup && Clock::now() < warm_end; ++i)
    for (std::size_t j = 0; j < calls.size(); ++j)
      calls[(i + j) % calls.size()]();
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(s.latency_cap_s * n));
  std::vector<std::vector<double>> us(calls.size());
  for (auto& v : us)
    v.reserve(s.requests);
  for (std::size_t i = 0; i < s.requests && Clock::now() < end; ++i) {
    for (std::size_t j = 0; j < calls.size(); ++j) {
      const std::size_t k = (i + j) % calls.size();
      const auto t0 = Clock::now();
      calls[k]();
      us[k].push_back(us_since(t0));
    }
  }
  std::vector<Latency> out;
  for (auto& v : us)
    out.push_back(summarize(std::move(v)));
  return out;
}

// ---- the table ---------------------------------------------------------------------------

struct Row {
  std::string scenario, measure;
  std::array<std::string, kCells> cell;  // by Cell::index()
  std::string supergateway, stdio, target, met;
};
std::vector<Row> g_rows;

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// The cells' values, formatted by `f` where measured.
template <typename T, typename F>
std::array<std::string, kCells> each(const PerCell<T>& values, F f) {
  std::array<std::string, kCells> out;
  for (std::size_t i = 0; i < kCells; ++i)
    if (values[i]) out[i] = f(*values[i]);
  return out;
}

// "yes"/"no" for a target checked on kTargetCell; "not run" when that cell was not selected.
template <typename T, typename P>
std::string met(const PerCell<T>& values, P pass) {
  const auto& v = values[kTargetCell.index()];
  if (!v) return "(not run)";
  return pass(*v) ? "yes" : "no";
}

const Clock::time_point g_start = Clock::now();

// What the run is doing now, on stderr, with the time since it started.
void progress(const std::string& what) {
  std::cerr << fmt("[%4.0f s] ", std::chrono::duration<double>(Clock::now() - g_start).count())
            << what << "\n";
}
void progress(const std::string& what, Cell c) {
  progress(what + ": " + c.label());
}

// ---- the parts ---------------------------------------------------------------------------

tcp::endpoint loopback(std::uint16_t port) {
  return {net::ip::make_address("127.0.0.1"), port};
}

std::unique_ptr<test::Mosquitto> start_broker(Broker b) {
  test::Mosquitto::Options o;
  o.tuned = b == Broker::tuned;
  return std::make_unique<test::Mosquitto>(std::move(o));
}

// The engine goes both into the configuration and into the environment: MCPMQTT_MQTT_CLIENT,
// inherited from whoever runs the benchmark, would override the file.
std::map<std::string, std::string> engine_env(Engine e) {
  return {{"MCPMQTT_MQTT_CLIENT", name(e)}};
}

// --threads: the bridge processes' daemon.threads (set in main).
int g_threads = 0;
// --heap: the bridge processes' heap as the systemd unit and the image run it (GLIBC_TUNABLES:
// transparent huge pages, docs/http-ingress.md "Capacity") or glibc's default (4 KiB pages where
// the kernel gives huge ones only on request). The broker and the servers run as they ship.
bool g_huge_heap = true;
std::map<std::string, std::string> bridge_env(Engine e) {
  auto env = engine_env(e);
  if (g_huge_heap) env["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1";
  return env;
}
std::string daemon_section() {
  return g_threads > 0 ? R"(, "daemon": {"threads": )" + std::to_string(g_threads) + "}" : "";
}

// A bridge serving only the HTTP ingress (toward `server`), on a free loopback port.
struct Ingress {
  std::uint16_t port = test::free_loopback_port();
  std::unique_ptr<test::BridgeProcess> proc;
  // `http_more`: members appended to the "http" section (http.oauth, say).
  // `ingress_more`: members appended to the "ingress" section (ingress.replicas, say).
  Ingress(const std::string& broker_url, Engine engine, std::size_t max_sessions, int qos,
          int keepalive_s = 0, const std::string& http_more = "",
          const std::string& ingress_more = "") {
    std::ostringstream cfg;
    cfg << R"({"mqtt": {"url": ")" << broker_url << R"(", "client": ")" << name(engine)
        << R"(", "qos": )" << qos;
    if (keepalive_s > 0) cfg << R"(, "session_keepalive_s": )" << keepalive_s;
    cfg << "},"
        << R"("http": {)"
        << R"("listen": "127.0.0.1:)" << port << R"(", "limits": {"max_sessions": )"
        << max_sessions + 16 << R"(, "max_connections": )" << max_sessions + 256 << "}" << http_more
        << "},"
        << R"("ingress": {"default_server": ")" << kServer << "\"" << ingress_more << "},"
        << R"("log": {"level": "warn"})" << daemon_section() << "}";
    proc = std::make_unique<test::BridgeProcess>(std::vector<std::string>{}, cfg.str(),
                                                 bridge_env(engine));
    if (!test::wait_for_port(port, 20s)) throw std::runtime_error("the ingress did not listen");
  }
  tcp::endpoint ep() const { return loopback(port); }
  std::string host() const { return "127.0.0.1:" + std::to_string(port); }
};

// A bridge publishing the C++ test server on MQTT through its stdio egress.
struct Egress {
  std::unique_ptr<test::BridgeProcess> proc;
  Egress(const std::string& broker_url, Engine engine, std::size_t max_sessions, int qos) {
    std::ostringstream cfg;
    cfg << R"({"mqtt": {"url": ")" << broker_url << R"(", "client": ")" << name(engine)
        << R"(", "qos": )" << qos << R"(}, "http": {"enabled": false},)"
        << R"("egress": {"max_sessions_per_server": )" << max_sessions + 16 << "},"
        << R"("log": {"level": "warn"},)"
        << R"("mcpServers": {")" << kServer << R"(": {"command": ")" MCPMQTT_TEST_SERVER << R"("}})"
        << daemon_section() << "}";
    proc = std::make_unique<test::BridgeProcess>(std::vector<std::string>{}, cfg.str(),
                                                 bridge_env(engine));
    find_server_id(broker_url, kServer);  // online
  }
};

// supergateway (npm, pinned in tests/node) serving the same test server as stateful
// Streamable HTTP: one child per session, as the bridge's egress.
struct Supergateway {
  std::uint16_t port = test::free_loopback_port();
  std::unique_ptr<test::Process> proc;
  Supergateway() {
    test::Process::Options o;
    o.argv = {
        test::node_binary(),
        std::string(MCPMQTT_SOURCE_DIR) + "/tests/node/node_modules/supergateway/dist/index.js",
        "--stdio",
        MCPMQTT_TEST_SERVER,
        "--outputTransport",
        "streamableHttp",
        "--stateful",
        "--port",
        std::to_string(port),
        "--logLevel",
        "none"};
    o.stdout_file = "/dev/null";
    proc = test::Process::start(o);
    if (!test::wait_for_port(port, 30s)) throw std::runtime_error("supergateway did not listen");
  }
  tcp::endpoint ep() const { return loopback(port); }
  std::string host() const { return "127.0.0.1:" + std::to_string(port); }
};

// Times echo calls one after the other in a new session.
Latency http_latency(const tcp::endpoint& ep, const std::string& host, const Settings& s) {
  McpHttpClient c(ep, host);
  c.open_session();
  std::uint64_t id = 1;
  return time_calls(s, [&] {
    const auto reply = c.call(echo_request(++id, kText));
    if (reply.find(kText) == std::string::npos)
      throw std::runtime_error("unexpected answer: " + reply.substr(0, 200));
  });
}

// ---- OAuth at the ingress (--oauth) -------------------------------------------------------

// The origin every OAuth ingress of the run names as http.public_url (as behind a proxy that
// ends TLS): their tokens' audience is its /mcp, so one set of tokens serves every column.
const std::string kOauthPublicUrl = "https://bridge.bench.example";
// http.oauth.scopes: the one scope, granting the echo server; every token holds it.
const std::string kOauthScope = "mcp:echo";

// An authorization server as the ingress sees one: its RFC 8414 metadata and its JWK Set on a
// loopback port (the tests' scripted HTTP server), keys and tokens from the tests' issuer: RSA
// 2048 for RS256 and PS256, P-256 for ES256, Ed25519 for EdDSA, one key per algorithm.
class OauthIssuer {
 public:
  explicit OauthIssuer(const std::vector<std::string>& algs)
      : issuer_("http://127.0.0.1:" + std::to_string(server_.port()), kOauthPublicUrl + "/mcp") {
    for (const auto& alg : algs)
      issuer_.add_key(kid(alg), alg);
    const std::string metadata = R"({"issuer":")" + issuer_.issuer() + R"(","jwks_uri":")" +
                                 issuer_.issuer() +
                                 R"(/jwks","response_types_supported":["code"]})";
    server_.start(
        [metadata, jwks = issuer_.jwks()](test::fake::Conn& c, const test::fake::Request& r) {
          if (r.target == "/.well-known/oauth-authorization-server")
            c.json(metadata);
          else if (r.target == "/jwks")
            c.json(jwks);
          else
            c.respond(404, "text/plain", "not found");
        });
  }
  const std::string& url() const { return issuer_.issuer(); }

  // An access token for the OAuth ingresses' /mcp (typ at+jwt, `alg`'s kid), valid for a day;
  // `jti` tells tokens apart. `audience`: another resource (the ingress's origin, for /readyz).
  std::string token(const std::string& alg, std::size_t jti,
                    const std::string& audience = "") const {
    const auto now = static_cast<std::int64_t>(std::time(nullptr));
    auto claims = issuer_.claims(now);
    if (!audience.empty()) claims.str("aud", audience);
    claims.num("exp", now + 86400)
        .str("scope", kOauthScope)
        .str("client_id", "bench-compare")
        .str("jti", "bench-" + std::to_string(jti));
    return issuer_.mint(kid(alg), claims);
  }

 private:
  static std::string kid(const std::string& alg) { return "bench-" + alg; }

  test::fake::Server server_;  // bound first: the issuer's URL names its port
  test::TestIssuer issuer_;
};

// The "http" members that make an ingress a resource server of `issuer`.
std::string oauth_http(const OauthIssuer& issuer) {
  return R"(, "public_url": ")" + kOauthPublicUrl + R"(", "oauth": {"issuer": ")" + issuer.url() +
         R"(", "scopes": {")" + kOauthScope + R"(": [")" + kServer + R"("]}})";
}

// A GET of `target` with an Authorization header: the status and the body.
std::pair<unsigned, std::string> http_get(const tcp::endpoint& ep, const std::string& host,
                                          const std::string& target,
                                          const std::string& authorization) {
  net::io_context io;
  tcp::socket sock(io);
  sock.connect(ep);
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, target, 11};
  req.set(bhttp::field::host, host);
  req.set(bhttp::field::authorization, authorization);
  bhttp::write(sock, req);
  boost::beast::flat_buffer buf;
  bhttp::response<bhttp::string_body> res;
  bhttp::read(sock, buf, res);
  return {res.result_int(), std::move(res.body())};
}

// Waits for an OAuth ingress's /readyz (ready once it has the issuer's keys; a protected route
// like the others, hence `authorization`); the first call of each series tells what went wrong
// if it never comes.
void wait_ready(const Ingress& ingress, const std::string& authorization) {
  const auto end = Clock::now() + 20s;
  auto [status, body] = http_get(ingress.ep(), ingress.host(), "/readyz", authorization);
  while (status != 200 && Clock::now() < end) {
    std::this_thread::sleep_for(50ms);
    std::tie(status, body) = http_get(ingress.ep(), ingress.host(), "/readyz", authorization);
  }
  if (status != 200) progress("an OAuth ingress is not ready: " + body);
}

// One series of echo calls through an ingress of its own (`http_more`: its http.oauth), in a
// session of its own; `authorization` gives each call's Authorization header (nothing when
// null). open() is the functional check: initialize and a first call must succeed, else it
// throws with the HTTP status and body.
struct EchoSeries {
  Ingress ingress;
  McpHttpClient client;
  std::function<std::string()> authorization;
  std::uint64_t id = 1;

  EchoSeries(const std::string& broker_url, Engine engine, int qos, const std::string& http_more,
             std::function<std::string()> auth)
      : ingress(broker_url, engine, 8, qos, 0, http_more),
        client(ingress.ep(), ingress.host()),
        authorization(std::move(auth)) {}
  void open() {
    if (authorization) client.set_authorization(authorization());
    client.open_session();
    call();
  }
  void call() {
    if (authorization) client.set_authorization(authorization());
    const auto reply = client.call(echo_request(++id, kText));
    if (reply.find(kText) == std::string::npos)
      throw std::runtime_error("unexpected answer: " + reply.substr(0, 200));
  }
};

// Scenario 1's OAuth results of one column: per algorithm, a token reused (the ingress verifies
// it once and finds it in its cache after) and a fresh token each call (verified each time).
struct OauthLatency {
  Latency plain;                       // the plain bridge, timed with the others
  Latency control;                     // the plain bridge again, on a second ingress
  std::vector<Latency> reused, fresh;  // by Settings::oauth
  // The CPU time of each series' ingress process per call (warm-up included), µs: the bridge,
  // the control, then as `reused` and `fresh`.
  std::vector<double> cpu_us;
};

// One column of scenario 1 with --oauth, against the column's egress and broker: the plain
// bridge, the same again (an A/A control: how far apart two identical series come out), and per
// algorithm a token reused and a fresh token each call. Each series has an ingress of its own,
// so that each process idles alike between its calls (a process called twice in a row answers
// faster the second time) and fresh tokens filling the verified-token cache (4,096) never evict
// a reused one.
OauthLatency oauth_cell(const Settings& s, const std::string& broker_url, Engine e,
                        const OauthIssuer& issuer,
                        const std::vector<std::vector<std::string>>& fresh) {
  std::vector<std::unique_ptr<EchoSeries>> series;
  const auto lane = [&](const std::string& http_more, std::function<std::string()> auth) {
    series.push_back(
        std::make_unique<EchoSeries>(broker_url, e, s.qos, http_more, std::move(auth)));
  };
  lane("", nullptr);
  lane("", nullptr);
  const auto oauth = oauth_http(issuer);
  for (const auto& alg : s.oauth)
    lane(oauth, [bearer = "Bearer " + issuer.token(alg, 0)] { return bearer; });
  for (const auto& pool : fresh)
    lane(oauth, [&pool, next = std::size_t{0}]() mutable {
      return "Bearer " + pool[next++ % pool.size()];
    });
  const auto probe = "Bearer " + issuer.token(s.oauth[0], 0, kOauthPublicUrl);
  std::vector<std::function<void()>> calls;
  for (auto& one : series) {
    if (one->authorization) wait_ready(one->ingress, probe);
    one->open();
    calls.push_back([&one] { one->call(); });
  }
  std::vector<double> cpu0;
  std::vector<std::uint64_t> id0;
  for (const auto& one : series) {
    cpu0.push_back(cpu_seconds(one->ingress.proc->pid()));
    id0.push_back(one->id);
  }
  auto timed = time_interleaved(s, calls);
  OauthLatency o;
  for (std::size_t k = 0; k < series.size(); ++k) {
    const auto& one = *series[k];
    o.cpu_us.push_back((cpu_seconds(one.ingress.proc->pid()) - cpu0[k]) * 1e6 /
                       static_cast<double>(std::max<std::uint64_t>(1, one.id - id0[k])));
  }
  o.plain = timed[0];
  o.control = timed[1];
  const auto algs = static_cast<std::ptrdiff_t>(s.oauth.size());
  o.reused.assign(timed.begin() + 2, timed.begin() + 2 + algs);
  o.fresh.assign(timed.begin() + 2 + algs, timed.end());
  return o;
}

// Events counted on other threads, waited for with a deadline.
class Counter {
 public:
  void add() {
    {
      std::lock_guard lock(mu_);
      ++n_;
    }
    cv_.notify_all();
  }
  bool wait_for(std::size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return n_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::size_t n_ = 0;
};

// (a) The floor with the Paho engine: a raw MQTT request and response through the same broker,
// with the same payload, both ways at the QoS the bridge publishes with, between two Paho C++
// clients with TCP_NODELAY (the bridge's interposed connect(2), as its Paho engine has it).
Latency paho_floor(const std::string& broker_url, const Settings& s) {
  const std::string payload = echo_request(7, kText);
  auto opts = ::mqtt::connect_options_builder().mqtt_version(5).clean_start(true).finalize();
  mcpmqtt::mqtt::paho::use_tcp_nodelay_interposition();
  ::mqtt::async_client responder(broker_url, "bench-floor-paho-responder",
                                 ::mqtt::create_options(5));
  ::mqtt::async_client requester(broker_url, "bench-floor-paho-requester",
                                 ::mqtt::create_options(5));
  // The responder answers from a thread of its own, as the bridge does (Paho's callbacks only
  // hand the message over): publishing from inside Paho's callback stalls now and then.
  std::mutex rmu;
  std::condition_variable rcv;
  std::vector<std::string> inbox;
  bool stop = false;
  responder.set_message_callback([&](::mqtt::const_message_ptr m) {
    std::lock_guard lock(rmu);
    inbox.push_back(m->get_payload_str());
    rcv.notify_one();
  });
  std::thread answering([&] {
    std::unique_lock lock(rmu);
    while (true) {
      rcv.wait(lock, [&] { return stop || !inbox.empty(); });
      if (stop) return;
      auto batch = std::move(inbox);
      inbox.clear();
      lock.unlock();
      for (const auto& p : batch)
        responder.publish("bench/floor/response", p.data(), p.size(), s.qos, false);
      lock.lock();
    }
  });
  Counter answered;
  requester.set_message_callback([&](::mqtt::const_message_ptr) { answered.add(); });
  responder.connect(opts)->wait();
  requester.connect(opts)->wait();
  responder.subscribe("bench/floor/request", s.qos)->wait();
  requester.subscribe("bench/floor/response", s.qos)->wait();
  std::size_t sent = 0;
  const Latency l = time_calls(s, [&] {
    requester.publish("bench/floor/request", payload.data(), payload.size(), s.qos, false);
    if (!answered.wait_for(++sent, 5s))
      throw std::runtime_error("the floor's response did not come");
  });
  {
    std::lock_guard lock(rmu);
    stop = true;
    rcv.notify_one();
  }
  answering.join();
  requester.disconnect()->wait();
  responder.disconnect()->wait();
  // Paho C leaves Nagle on; the bridge's connect(2) sets TCP_NODELAY, and so must the floor's.
  if (!mcpmqtt::mqtt::paho::tcp_nodelay_active())
    throw std::runtime_error("TCP_NODELAY was not set");
  return l;
}

// An io_context on a thread of its own, for as long as the object lives.
struct IoThread {
  net::io_context ioc;
  net::executor_work_guard<net::io_context::executor_type> work = net::make_work_guard(ioc);
  std::thread thread{[this] { ioc.run(); }};
  ~IoThread() {
    work.reset();
    ioc.stop();
    thread.join();
  }
};

// (a) The floor with the native engine: the same request and response between two
// mqtt::BrokerConnection on the bridge's own engine (TCP_NODELAY, TCP_QUICKACK after a read nothing
// answers), each on an event loop of its own as in the two bridge processes; the responder
// publishes from its message handler, as the bridge does (no thread hand-off on that engine).
// An object, so that its calls can be interleaved with other series (the replicas' rows).
class NativeFloor {
 public:
  NativeFloor(const std::string& broker_url, const Settings& s) {
    auto options = [&](const std::string& id) {
      auto loaded = config::defaults();
      config::Overrides o;
      o.broker_url = broker_url;
      config::apply_overrides(loaded, o);
      if (!loaded.ok()) throw std::runtime_error("bad broker URL " + broker_url);
      mq::ConnectionOptions c;
      c.broker = directions::broker_options(loaded.config->mqtt);
      c.broker.engine = mq::EngineKind::native;
      c.broker.qos = s.qos;
      c.client_id = id + "-" + std::to_string(::getpid());
      c.reconnect = false;
      return c;
    };
    auto up = std::make_shared<Counter>();
    auto subscribed = std::make_shared<Counter>();
    auto responder_ref = std::make_shared<std::weak_ptr<mq::BrokerConnection>>();
    mq::BrokerConnection::Handlers rh;
    rh.on_connected = [up](const mq::ConnackInfo&, bool) { up->add(); };
    rh.on_message = [responder_ref](const mq::Incoming& in) {
      if (auto r = responder_ref->lock()) r->publish("bench/floor/response", in.payload);
    };
    responder_ = mq::BrokerConnection::create(resp_strand_, options("bench-floor-native-responder"),
                                              std::move(rh));
    *responder_ref = responder_;
    mq::BrokerConnection::Handlers qh;
    qh.on_connected = [up](const mq::ConnackInfo&, bool) { up->add(); };
    qh.on_message = [answered = answered_](const mq::Incoming&) { answered->add(); };
    requester_ = mq::BrokerConnection::create(req_strand_, options("bench-floor-native-requester"),
                                              std::move(qh));
    auto on_subscribed = [subscribed](bool ok, const std::string& why) {
      if (ok)
        subscribed->add();
      else
        std::cerr << "the native floor could not subscribe: " << why << "\n";
    };
    net::post(resp_strand_, [c = responder_, on_subscribed] {
      c->connect();
      c->subscribe("bench/floor/request", false, on_subscribed);
    });
    net::post(req_strand_, [c = requester_, on_subscribed] {
      c->connect();
      c->subscribe("bench/floor/response", false, on_subscribed);
    });
    if (!up->wait_for(2, 10s) || !subscribed->wait_for(2, 10s)) {
      close();
      throw std::runtime_error("the native floor's clients did not connect and subscribe");
    }
  }
  NativeFloor(const NativeFloor&) = delete;
  NativeFloor& operator=(const NativeFloor&) = delete;
  ~NativeFloor() { close(); }

  // One request and its response.
  void call() {
    net::post(req_strand_,
              [c = requester_, p = payload_] { c->publish("bench/floor/request", p); });
    if (!answered_->wait_for(++sent_, 5s))
      throw std::runtime_error("the native floor's response did not come");
  }

 private:
  // A clean DISCONNECT each, then the last references released on their strands (the
  // connections must not die on this thread while theirs run).
  void close() {
    if (!responder_) return;
    auto closed = std::make_shared<Counter>();
    auto released = std::make_shared<Counter>();
    net::post(resp_strand_,
              [c = responder_, closed] { c->disconnect(1s, [closed] { closed->add(); }); });
    net::post(req_strand_,
              [c = requester_, closed] { c->disconnect(1s, [closed] { closed->add(); }); });
    closed->wait_for(2, 5s);
    net::post(resp_strand_, [c = std::move(responder_), released]() mutable {
      c.reset();
      released->add();
    });
    net::post(req_strand_, [c = std::move(requester_), released]() mutable {
      c.reset();
      released->add();
    });
    released->wait_for(2, 5s);
  }

  IoThread resp_io_, req_io_;
  net::strand<net::io_context::executor_type> resp_strand_ = net::make_strand(resp_io_.ioc);
  net::strand<net::io_context::executor_type> req_strand_ = net::make_strand(req_io_.ioc);
  std::shared_ptr<Counter> answered_ = std::make_shared<Counter>();
  std::shared_ptr<const std::string> payload_ =
      std::make_shared<const std::string>(echo_request(7, kText));
  std::shared_ptr<mq::BrokerConnection> responder_, requester_;
  std::size_t sent_ = 0;
};

Latency native_floor(const std::string& broker_url, const Settings& s) {
  NativeFloor floor(broker_url, s);
  return time_calls(s, [&] { floor.call(); });
}

Latency mqtt_floor(Engine e, const std::string& broker_url, const Settings& s) {
  return e == Engine::native ? native_floor(broker_url, s) : paho_floor(broker_url, s);
}

// ---- Replicas (--replicas) ------------------------------------------------------------------

// Scenario 1 through ingress replicas (ingress.replicas, docs/replicas.md): four replicas with
// one secret against the column's egress and broker, each serving one series only, so that each
// process's CPU per call is its series' own:
//   local    a session opened on replica 1 and called there;
//   control  the same on replica 2 (an A/A control: how far apart two identical series come out);
//   relayed  a session opened on replica 3 and called through replica 4, which relays each call
//            to replica 3 over the broker (MQTT 5 request/response) and plays its answer back.
struct ReplicaLatency {
  Latency local, control, relayed;
  // The raw MQTT round trip through the same broker, interleaved with the three (native engine
  // only): what one relay's two broker hops cost at least under the same conditions.
  std::optional<Latency> floor;
  // The CPU time per call (warm-up included), µs: replica 1 (local), replica 2 (control), and
  // replicas 3 + 4 (relayed: the owner and the replica in front of it).
  double local_cpu_us = 0, control_cpu_us = 0, relayed_cpu_us = 0;
};

ReplicaLatency replicas_cell(const Settings& s, const std::string& broker_url, Engine e) {
  test::TempDir dir;
  const auto secret = dir.write("replica.secret", std::string(48, 'b'));
  std::vector<std::unique_ptr<Ingress>> replica;
  for (int i = 1; i <= 4; ++i)
    replica.push_back(std::make_unique<Ingress>(broker_url, e, 8, s.qos, 0, "",
                                                R"(, "replicas": {"id": "bench)" +
                                                    std::to_string(i) + R"(", "secret_file": ")" +
                                                    secret + "\"}"));
  McpHttpClient local(replica[0]->ep(), replica[0]->host());
  McpHttpClient control(replica[1]->ep(), replica[1]->host());
  McpHttpClient owner(replica[2]->ep(), replica[2]->host());
  McpHttpClient relayed(replica[3]->ep(), replica[3]->host());
  local.open_session();
  control.open_session();
  relayed.use_session(owner.open_session(), "2025-06-18");
  std::uint64_t id = 1;
  const auto echo = [&id](McpHttpClient& c) {
    const auto reply = c.call(echo_request(++id, kText));
    if (reply.find(kText) == std::string::npos)
      throw std::runtime_error("unexpected answer: " + reply.substr(0, 200));
  };
  // Replica 4 relays once it has seen replica 3's presence; until then it answers 404.
  for (const auto end = Clock::now() + 20s;;) {
    try {
      echo(relayed);
      break;
    } catch (const std::exception& x) {
      if (Clock::now() > end)
        throw std::runtime_error(std::string("no call relayed within 20 s: ") + x.what());
      std::this_thread::sleep_for(50ms);
    }
  }
  std::array<double, 4> cpu0{};
  for (std::size_t i = 0; i < 4; ++i)
    cpu0[i] = cpu_seconds(replica[i]->proc->pid());
  std::array<std::uint64_t, 3> calls{};
  std::vector<std::function<void()>> series{[&] { echo(local), ++calls[0]; },
                                            [&] { echo(control), ++calls[1]; },
                                            [&] { echo(relayed), ++calls[2]; }};
  std::optional<NativeFloor> floor;
  if (e == Engine::native) {
    floor.emplace(broker_url, s);
    series.push_back([&] { floor->call(); });
  }
  const auto timed = time_interleaved(s, series);
  const auto cpu_us = [&](std::size_t i) {
    return (cpu_seconds(replica[i]->proc->pid()) - cpu0[i]) * 1e6;
  };
  const auto per = [](double us, std::uint64_t n) {
    return us / static_cast<double>(std::max<std::uint64_t>(1, n));
  };
  ReplicaLatency r;
  r.local = timed[0];
  r.control = timed[1];
  r.relayed = timed[2];
  if (floor) r.floor = timed[3];
  r.local_cpu_us = per(cpu_us(0), calls[0]);
  r.control_cpu_us = per(cpu_us(1), calls[1]);
  r.relayed_cpu_us = per(cpu_us(2) + cpu_us(3), calls[2]);
  return r;
}

// The first `n` CPUs (or fewer) the calling thread may run on.
std::vector<int> allowed_cpus(std::size_t n) {
  std::vector<int> out;
  cpu_set_t allowed;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE && out.size() < n; ++c)
    if (CPU_ISSET(c, &allowed)) out.push_back(c);
  return out;
}

// Pins the calling thread (and what it starts from now on) to `cpu`; false if refused.
bool pin_to_cpu(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return ::sched_setaffinity(0, sizeof one, &one) == 0;
}

// (d) The kernel's part of a hop between processes: a round trip over loopback TCP (TCP_NODELAY,
// 400 bytes each way, about a scenario 1 call's HTTP request and response) between this thread
// and a forked process that answers with blocking reads and writes. Each side sleeps until the
// other's bytes arrive, as the HTTP client and the ingress do; nothing but the kernel and the
// wake-ups. `across`: the two pinned to two CPUs, so that every wake-up is of another CPU (idle,
// on a VM: halted); else both on one. nullopt when this process may run on one CPU only.
std::optional<Latency> tcp_round_trip(const Settings& s, bool across) {
  cpu_set_t before;
  if (::sched_getaffinity(0, sizeof before, &before) != 0) return std::nullopt;
  const auto cpus = allowed_cpus(2);
  if (cpus.size() < 2) return std::nullopt;
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool listening = listener >= 0 &&
                         ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                         ::listen(listener, 1) == 0 &&
                         ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const bool connected = listening && client >= 0 &&
                         ::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  const int server = connected ? ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC) : -1;
  if (listener >= 0) ::close(listener);
  if (server < 0) {
    if (client >= 0) ::close(client);
    throw std::runtime_error("(d): no loopback TCP connection");
  }
  const int one = 1;
  ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  constexpr std::size_t kSize = 400;
  // Reads exactly kSize bytes; false at the end of the stream or an error.
  const auto read_all = [](int fd, char* buf) {
    for (std::size_t got = 0; got < kSize;) {
      const auto n = ::read(fd, buf + got, kSize - got);
      if (n <= 0) return false;
      got += static_cast<std::size_t>(n);
    }
    return true;
  };
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(client);
    ::close(server);
    throw std::runtime_error("(d): fork failed");
  }
  if (child == 0) {  // only system calls here: the parent has threads
    pin_to_cpu(cpus[across ? 1 : 0]);
    ::close(client);
    char buf[kSize];
    while (read_all(server, buf))
      if (::write(server, buf, kSize) != static_cast<ssize_t>(kSize)) break;
    ::_exit(0);
  }
  ::close(server);
  pin_to_cpu(cpus[0]);
  char buf[kSize];
  std::memset(buf, 'x', kSize);
  Latency l;
  try {
    l = time_calls(s, [&] {
      if (::write(client, buf, kSize) != static_cast<ssize_t>(kSize) || !read_all(client, buf))
        throw std::runtime_error("(d): the round trip failed");
    });
  } catch (...) {
    ::close(client);
    ::waitpid(child, nullptr, 0);
    ::sched_setaffinity(0, sizeof before, &before);
    throw;
  }
  ::close(client);
  ::waitpid(child, nullptr, 0);
  ::sched_setaffinity(0, sizeof before, &before);
  return l;
}

// (c) The test server over stdio, no bridge.
Latency stdio_direct(const Settings& s) {
  test::Process::Options o;
  o.argv = {MCPMQTT_TEST_SERVER};
  o.pipe_stdin = true;
  o.pipe_stdout = true;
  auto p = test::Process::start(o);
  p->write_stdin(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",)"
      R"("capabilities":{},"clientInfo":{"name":"bench","version":"1"}}})"
      "\n");
  if (!p->read_line(5s)) throw std::runtime_error("the test server did not initialize");
  p->write_stdin(R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
                 "\n");
  std::uint64_t id = 1;
  const Latency l = time_calls(s, [&] {
    p->write_stdin(echo_request(++id, kText) + "\n");
    const auto reply = p->read_line(5s);
    if (!reply || reply->find(kText) == std::string::npos)
      throw std::runtime_error("the test server did not echo");
  });
  p->close_stdin();
  p->wait_for(5s);
  return l;
}

struct Throughput {
  double rps = 0, p50_ms = 0, p99_ms = 0;
  double cpu_us_per_request = 0;  // of the processes `load` was told to measure, together
  std::size_t errors = 0;
};

// `concurrency` sessions, each on its own connection and thread, calling `body_for` for
// `seconds` once all are open; the CPU time the processes `measured` use meanwhile is divided
// by the requests answered (a measure the machine's other load disturbs less than rps).
Throughput load(const tcp::endpoint& ep, const std::string& host, std::size_t concurrency,
                int seconds, const std::vector<pid_t>& measured,
                const std::function<std::string(std::uint64_t)>& body_for,
                const std::string& expect) {
  std::atomic<std::size_t> ready{0}, errors{0};
  std::atomic<bool> go{false};
  Clock::time_point t_end;
  std::vector<std::vector<double>> per(concurrency);
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < concurrency; ++k) {
    threads.emplace_back([&, k] {
      McpHttpClient c(ep, host);
      try {
        c.open_session();
      } catch (const std::exception& e) {
        std::cerr << "session " << k << ": " << e.what() << "\n";
        errors++;
        ready++;
        return;
      }
      ready++;
      while (!go)
        std::this_thread::sleep_for(1ms);
      for (std::uint64_t i = 2; Clock::now() < t_end; ++i) {
        const auto t0 = Clock::now();
        try {
          const auto reply = c.call(body_for(i));
          if (reply.find(expect) == std::string::npos) errors++;
        } catch (const std::exception&) {
          errors++;
          continue;
        }
        per[k].push_back(us_since(t0) / 1000.0);
      }
    });
  }
  while (ready < concurrency)
    std::this_thread::sleep_for(10ms);
  auto cpu_of_measured = [&] {
    double sum = 0;
    for (pid_t pid : measured)
      sum += cpu_seconds(pid);
    return sum;
  };
  const double cpu0 = cpu_of_measured();
  const auto t0 = Clock::now();
  t_end = t0 + std::chrono::seconds(seconds);
  go = true;
  for (auto& t : threads)
    t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = cpu_of_measured() - cpu0;
  std::vector<double> all;
  for (auto& v : per)
    all.insert(all.end(), v.begin(), v.end());
  Throughput r;
  r.rps = static_cast<double>(all.size()) / elapsed;
  r.p50_ms = percentile(all, 0.50);
  r.p99_ms = percentile(all, 0.99);
  r.errors = errors;
  if (!all.empty()) r.cpu_us_per_request = cpu * 1e6 / static_cast<double>(all.size());
  return r;
}

// ---- the scenarios -----------------------------------------------------------------------

// Scenario 1's OAuth rows: the plain bridge timed with them, its A/A control, and per
// algorithm the series with a token reused and with a fresh one each call.
void oauth_rows(const Settings& s, const PerCell<Latency>& bridge,
                const PerCell<OauthLatency>& oauth) {
  auto us = [](double v) { return fmt("%.0f", v); };
  // p50 / p90 / p99 and the ingress's CPU per call of series `k` (OauthLatency::cpu_us).
  auto spread = [&](const Latency& l, std::size_t i, std::size_t k) {
    return us(l.p50) + " / " + us(l.p90) + " / " + us(l.p99) + "; " + us(oauth[i]->cpu_us[k]);
  };
  auto series_row = [&](const std::string& what, std::size_t k,
                        const std::function<const Latency&(const OauthLatency&)>& pick) {
    std::array<std::string, kCells> cells;
    for (std::size_t i = 0; i < kCells; ++i)
      if (oauth[i]) cells[i] = spread(pick(*oauth[i]), i, k);
    g_rows.push_back(
        {"", what + ": p50 / p90 / p99 µs; the ingress's CPU µs per call", cells, "", "", "", ""});
  };
  const auto algs = s.oauth.size();
  PerCell<double> control;
  for (std::size_t i = 0; i < kCells; ++i)
    if (oauth[i]) control[i] = oauth[i]->control.p50 / bridge[i]->p50;
  series_row("bridge (timed with the OAuth series)", 0,
             [](const OauthLatency& o) -> const Latency& { return o.plain; });
  series_row("the same on a second ingress (A/A control)", 1,
             [](const OauthLatency& o) -> const Latency& { return o.control; });
  g_rows.push_back({"", "A/A control: p50 ÷ bridge's p50",
                    each(control, [](double v) { return fmt("%.3f", v); }), "", "", "", ""});
  for (std::size_t a = 0; a < algs; ++a) {
    const std::string& alg = s.oauth[a];
    PerCell<double> ratio, extra;
    for (std::size_t i = 0; i < kCells; ++i) {
      if (!oauth[i]) continue;
      ratio[i] = oauth[i]->reused[a].p50 / bridge[i]->p50;
      extra[i] = oauth[i]->fresh[a].p50 - bridge[i]->p50;
    }
    series_row("OAuth " + alg + ", token reused", 2 + a,
               [a](const OauthLatency& o) -> const Latency& { return o.reused[a]; });
    g_rows.push_back({"", "OAuth " + alg + ", token reused: p50 ÷ bridge's p50",
                      each(ratio, [](double v) { return fmt("%.3f", v); }), "", "", "≤ 1.05",
                      met(ratio, [](double v) { return v <= 1.05; })});
    series_row("OAuth " + alg + ", a fresh token each call", 2 + algs + a,
               [a](const OauthLatency& o) -> const Latency& { return o.fresh[a]; });
    g_rows.push_back({"", "OAuth " + alg + ", a fresh token each call: p50 − bridge's p50, µs",
                      each(extra, us), "", "", "", ""});
  }
}

// Scenario 1's replica rows (--replicas): local, its A/A control and relayed, and the target
// of issue 32: a call relayed once costs at most 1.5 times a local one at p50.
void replica_rows(const PerCell<ReplicaLatency>& replicas) {
  auto us = [](double v) { return fmt("%.0f", v); };
  auto row =
      [&](const std::string& what,
          const std::function<std::pair<const Latency&, double>(const ReplicaLatency&)>& pick) {
        std::array<std::string, kCells> cells;
        for (std::size_t i = 0; i < kCells; ++i) {
          if (!replicas[i]) continue;
          const auto [l, cpu] = pick(*replicas[i]);
          cells[i] = us(l.p50) + " / " + us(l.p90) + " / " + us(l.p99) + "; " + us(cpu);
        }
        g_rows.push_back({"", what + ": p50 / p90 / p99 µs; the ingresses' CPU µs per call", cells,
                          "", "", "", ""});
      };
  row("replicas: local (a session called on its own replica)", [](const ReplicaLatency& r) {
    return std::pair<const Latency&, double>(r.local, r.local_cpu_us);
  });
  row("replicas: local on another replica (A/A control)", [](const ReplicaLatency& r) {
    return std::pair<const Latency&, double>(r.control, r.control_cpu_us);
  });
  row("replicas: relayed (called on another replica, relayed to its own)",
      [](const ReplicaLatency& r) {
        return std::pair<const Latency&, double>(r.relayed, r.relayed_cpu_us);
      });
  PerCell<double> control, ratio, beyond;
  PerCell<Latency> floor;
  for (std::size_t i = 0; i < kCells; ++i) {
    if (!replicas[i]) continue;
    control[i] = replicas[i]->control.p50 / replicas[i]->local.p50;
    ratio[i] = replicas[i]->relayed.p50 / replicas[i]->local.p50;
    if (const auto& f = replicas[i]->floor) {
      floor[i] = *f;
      beyond[i] = replicas[i]->relayed.p50 - replicas[i]->local.p50 - f->p50;
    }
  }
  g_rows.push_back(
      {"",
       "replicas: raw MQTT round trip through the same broker, interleaved with them: p50 / p90 / "
       "p99 µs",
       each(floor,
            [&](const Latency& l) { return us(l.p50) + " / " + us(l.p90) + " / " + us(l.p99); }),
       "", "", "", ""});
  g_rows.push_back({"",
                    "replicas: relayed − local − that round trip, at p50: the relay's own time, µs",
                    each(beyond, us), "", "", "", ""});
  g_rows.push_back({"", "replicas: A/A control p50 ÷ local p50",
                    each(control, [](double v) { return fmt("%.3f", v); }), "", "", "", ""});
  g_rows.push_back({"", "replicas: relayed p50 ÷ local p50",
                    each(ratio, [](double v) { return fmt("%.3f", v); }), "", "", "≤ 1.5",
                    met(ratio, [](double v) { return v <= 1.5; })});
}

void scenario_latency(const Settings& s) {
  progress("scenario 1: supergateway, stdio direct");
  Latency gateway;
  {
    Supergateway sg;
    gateway = http_latency(sg.ep(), sg.host(), s);
  }
  const Latency direct = stdio_direct(s);
  const auto tcp_one_cpu = tcp_round_trip(s, false);
  const auto tcp_two_cpus = tcp_round_trip(s, true);
  // --oauth: the issuer, and the tokens of the fresh-token series (one per call), minted before
  // anything is timed; each column's ingresses are new, so each sees every token for the first
  // time.
  std::optional<OauthIssuer> issuer;
  std::vector<std::vector<std::string>> fresh_tokens;
  if (!s.oauth.empty()) {
    progress("scenario 1: the issuer's keys and tokens");
    issuer.emplace(s.oauth);
    for (const auto& alg : s.oauth) {
      auto& pool = fresh_tokens.emplace_back();
      for (std::size_t i = 0; i < s.warmup + s.requests + 2; ++i)
        pool.push_back(issuer->token(alg, i));
    }
  }
  PerCell<Latency> bridge, floor;
  PerCell<OauthLatency> oauth;
  PerCell<ReplicaLatency> replicas;
  // One broker per set-up, shared by the engines' bridges and floors in turn.
  for (Broker b : s.brokers) {
    auto broker = start_broker(b);
    for (Engine e : s.engines) {
      const Cell c{e, b};
      progress("scenario 1", c);
      {
        Egress egress(broker->url(), e, 8, s.qos);
        if (!issuer) {
          Ingress ingress(broker->url(), e, 8, s.qos);
          bridge[c.index()] = http_latency(ingress.ep(), ingress.host(), s);
        } else {
          oauth[c.index()] = oauth_cell(s, broker->url(), e, *issuer, fresh_tokens);
          bridge[c.index()] = oauth[c.index()]->plain;
        }
        if (s.replicas) {
          progress("scenario 1: replicas", c);
          replicas[c.index()] = replicas_cell(s, broker->url(), e);
        }
      }
      floor[c.index()] = mqtt_floor(e, broker->url(), s);
    }
  }
  PerCell<double> own, ratio;
  for (std::size_t i = 0; i < kCells; ++i) {
    if (!bridge[i]) continue;
    own[i] = bridge[i]->p50 - floor[i]->p50 - direct.p50;
    ratio[i] = bridge[i]->p50 / gateway.p50;
  }
  auto us = [](double v) { return fmt("%.0f", v); };
  g_rows.push_back({"1 latency, concurrency 1", "calls timed (after a warm-up)",
                    each(bridge, [](const Latency& l) { return std::to_string(l.n); }),
                    std::to_string(gateway.n), std::to_string(direct.n), "", ""});
  g_rows.push_back({"", "p50 µs", each(bridge, [&](const Latency& l) { return us(l.p50); }),
                    us(gateway.p50), us(direct.p50), "", ""});
  g_rows.push_back({"", "p90 µs", each(bridge, [&](const Latency& l) { return us(l.p90); }),
                    us(gateway.p90), us(direct.p90), "", ""});
  g_rows.push_back({"", "p99 µs", each(bridge, [&](const Latency& l) { return us(l.p99); }),
                    us(gateway.p99), us(direct.p99), "", ""});
  g_rows.push_back({"", "p50 ÷ supergateway's p50",
                    each(ratio, [](double v) { return fmt("%.2f", v); }), "1", "", "≤ 0.80",
                    met(ratio, [](double v) { return v <= 0.8; })});
  g_rows.push_back({"", "(a) raw MQTT floor, the column's engine and broker: p50 / p99 µs",
                    each(floor, [&](const Latency& l) { return us(l.p50) + " / " + us(l.p99); }),
                    "", "", "", ""});
  g_rows.push_back({"", "(a) floor calls timed",
                    each(floor, [](const Latency& l) { return std::to_string(l.n); }), "", "", "",
                    ""});
  g_rows.push_back({"", "bridge's own time at p50: bridge − floor − stdio, µs", each(own, us), "",
                    "", "≤ 60", met(own, [](double v) { return v <= 60; })});
  if (tcp_one_cpu && tcp_two_cpus)
    g_rows.push_back(
        {"",
         "(d) loopback TCP round trip between two processes: both on one CPU / on two CPUs, p50 µs",
         each(bridge,
              [&](const Latency&) { return us(tcp_one_cpu->p50) + " / " + us(tcp_two_cpus->p50); }),
         "", "", "", ""});
  if (!s.oauth.empty()) oauth_rows(s, bridge, oauth);
  if (s.replicas) replica_rows(replicas);
}

void scenario_throughput(const Settings& s) {
  auto body = [](std::uint64_t id) { return echo_request(id, kText); };
  progress("scenario 2: supergateway");
  Throughput gateway;
  {
    Supergateway sg;
    gateway = load(sg.ep(), sg.host(), s.concurrency, s.seconds, {sg.proc->pid()}, body, kText);
  }
  PerCell<Throughput> bridge;
  PerCell<double> rps_ratio, cpu_ratio;
  for (Cell c : s.cells()) {
    progress("scenario 2", c);
    auto broker = start_broker(c.broker);
    Egress egress(broker->url(), c.engine, s.concurrency, s.qos);
    Ingress ingress(broker->url(), c.engine, s.concurrency, s.qos);
    const auto r = load(ingress.ep(), ingress.host(), s.concurrency, s.seconds,
                        {ingress.proc->pid(), egress.proc->pid(), broker->pid()}, body, kText);
    bridge[c.index()] = r;
    rps_ratio[c.index()] = r.rps / gateway.rps;
    cpu_ratio[c.index()] = r.cpu_us_per_request / gateway.cpu_us_per_request;
  }
  const std::string what = "2 throughput, " + std::to_string(s.concurrency) + " sessions, " +
                           std::to_string(s.seconds) + " s";
  auto ratio = [](double v) { return fmt("%.2f", v); };
  g_rows.push_back({what, "requests/s",
                    each(bridge, [](const Throughput& t) { return fmt("%.0f", t.rps); }),
                    fmt("%.0f", gateway.rps), "", "", ""});
  g_rows.push_back({"", "requests/s ÷ supergateway's", each(rps_ratio, ratio), "1", "", "≥ 2",
                    met(rps_ratio, [](double v) { return v >= 2; })});
  g_rows.push_back({"", "p50 / p99 ms",
                    each(bridge,
                         [](const Throughput& t) {
                           return fmt("%.2f", t.p50_ms) + " / " + fmt("%.2f", t.p99_ms);
                         }),
                    fmt("%.2f", gateway.p50_ms) + " / " + fmt("%.2f", gateway.p99_ms), "", "", ""});
  g_rows.push_back(
      {"",
       "CPU µs per request (bridge: both processes and Mosquitto; supergateway: its Node process)",
       each(bridge, [](const Throughput& t) { return fmt("%.0f", t.cpu_us_per_request); }),
       fmt("%.0f", gateway.cpu_us_per_request), "", "", ""});
  g_rows.push_back({"", "CPU per request ÷ supergateway's", each(cpu_ratio, ratio), "1", "",
                    "≤ 0.50", met(cpu_ratio, [](double v) { return v <= 0.5; })});
  const bool errors = gateway.errors > 0 || std::any_of(bridge.begin(), bridge.end(),
                                                        [](auto& t) { return t && t->errors > 0; });
  if (errors)
    g_rows.push_back({"", "errors",
                      each(bridge, [](const Throughput& t) { return std::to_string(t.errors); }),
                      std::to_string(gateway.errors), "", "0",
                      met(bridge, [](const Throughput& t) { return t.errors == 0; })});
}

struct Sessions {
  std::size_t asked = 0, opened = 0, failed = 0, sampled = 0, answered = 0;
  double open_s = 0, idle_kib = 0, open_kib = 0, idle_cpu = 0, per_session_kib = 0;
  // The broker's side of the same, for projecting beyond this machine (bench/README.md).
  double broker_idle_kib = 0, broker_open_kib = 0, broker_idle_cpu = 0;
};

Sessions sessions_cell(const Settings& s, Cell c) {
  Sessions r;
  r.asked = s.sessions_for(c.engine);
  auto broker = start_broker(c.broker);
  // The MQTT-native server on the native engine in every column, so that only the ingress
  // differs between them.
  test::Process::Options o;
  o.argv = {MCPMQTT_BENCH_MQTT_ECHO, broker->url(), kServer};
  o.env = engine_env(Engine::native);
  auto server = test::Process::start(o);
  find_server_id(broker->url(), kServer);
  Ingress ingress(broker->url(), c.engine, r.asked, s.qos, s.keepalive_s);
  // Each MQTT connection is a descriptor in the ingress and one in Mosquitto.
  const std::pair<const char*, pid_t> processes[] = {{"Mosquitto", broker->pid()},
                                                     {"the ingress", ingress.proc->pid()}};
  for (const auto& [who, pid] : processes) {
    const auto limit = open_file_limit(pid);
    if (limit < r.asked + 256)
      std::cerr << "warning: " << who << " may open only " << limit << " files, for " << r.asked
                << " sessions\n";
  }
  // One session opened and used first, so the idle figure includes what every process has
  // once it served anything (thread stacks, pools), not what sessions cost.
  {
    McpHttpClient client(ingress.ep(), ingress.host());
    client.open_session();
    client.call(echo_request(2, kText));
  }
  std::this_thread::sleep_for(500ms);
  r.idle_kib = static_cast<double>(rss_kib(ingress.proc->pid()));
  r.broker_idle_kib = static_cast<double>(rss_kib(broker->pid()));

  constexpr std::size_t kOpeners = 16;
  std::vector<std::vector<std::string>> ids(kOpeners);
  std::atomic<std::size_t> failed{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < kOpeners; ++k) {
    threads.emplace_back([&, k] {
      McpHttpClient client(ingress.ep(), ingress.host());
      for (std::size_t i = k; i < r.asked; i += kOpeners) {
        try {
          ids[k].push_back(client.open_session());
        } catch (const std::exception& e) {
          if (failed++ < 3) std::cerr << "open: " << e.what() << "\n";
        }
      }
    });
  }
  for (auto& t : threads)
    t.join();
  r.open_s = std::chrono::duration<double>(Clock::now() - t0).count();
  r.failed = failed;
  std::this_thread::sleep_for(2s);  // settle: every MQTT connection is up and subscribed
  r.open_kib = static_cast<double>(rss_kib(ingress.proc->pid()));
  r.broker_open_kib = static_cast<double>(rss_kib(broker->pid()));
  for (auto& v : ids)
    r.opened += v.size();
  std::cerr << "  " << r.opened << " sessions open after " << fmt("%.1f", r.open_s)
            << " s; the ingress idles for " << s.idle_window() << " s\n";
  // What holding them costs when nothing happens: keep-alives, timers.
  const double cpu0 = cpu_seconds(ingress.proc->pid());
  const double broker_cpu0 = cpu_seconds(broker->pid());
  std::this_thread::sleep_for(std::chrono::seconds(s.idle_window()));
  r.idle_cpu = (cpu_seconds(ingress.proc->pid()) - cpu0) / s.idle_window();
  r.broker_idle_cpu = (cpu_seconds(broker->pid()) - broker_cpu0) / s.idle_window();
  // Every session still answers: a call in each of a sample of them.
  {
    McpHttpClient client(ingress.ep(), ingress.host());
    for (auto& v : ids) {
      for (std::size_t i = 0; i < v.size(); i += 50) {
        ++r.sampled;
        client.use_session(v[i], "2025-06-18");
        try {
          if (client.call(echo_request(3, kText)).find(kText) != std::string::npos) ++r.answered;
        } catch (const std::exception&) {
        }
      }
    }
  }
  r.per_session_kib =
      (r.open_kib - r.idle_kib) / static_cast<double>(std::max<std::size_t>(1, r.opened));
  server->signal(SIGTERM);
  server->wait_for(10s);
  return r;
}

void scenario_sessions(const Settings& s) {
  PerCell<Sessions> cells;
  for (Cell c : s.cells()) {
    progress("scenario 3", c);
    cells[c.index()] = sessions_cell(s, c);
  }
  const std::string what =
      "3 sessions: initialized HTTP sessions, each with its own MQTT "
      "connection, opened by 16 clients";
  g_rows.push_back({what, "sessions opened, of asked",
                    each(cells,
                         [](const Sessions& r) {
                           return std::to_string(r.opened) + " of " + std::to_string(r.asked);
                         }),
                    "", "", "all", met(cells, [](const Sessions& r) {
                      return r.opened == r.asked && r.failed == 0;
                    })});
  g_rows.push_back({"", "sessions answering a call (every 50th)",
                    each(cells,
                         [](const Sessions& r) {
                           return std::to_string(r.answered) + " of " + std::to_string(r.sampled);
                         }),
                    "", "", "all",
                    met(cells, [](const Sessions& r) { return r.answered == r.sampled; })});
  g_rows.push_back({"", "time to open them, s",
                    each(cells, [](const Sessions& r) { return fmt("%.1f", r.open_s); }), "", "",
                    "≤ 5", met(cells, [](const Sessions& r) { return r.open_s <= 5; })});
  g_rows.push_back({"", "ingress RSS idle → with sessions, MiB",
                    each(cells,
                         [](const Sessions& r) {
                           return fmt("%.1f", r.idle_kib / 1024) + " → " +
                                  fmt("%.1f", r.open_kib / 1024);
                         }),
                    "", "", "", ""});
  g_rows.push_back(
      {"", "ingress CPU while they idle (" + std::to_string(s.idle_window()) + " s), % of one core",
       each(cells, [](const Sessions& r) { return fmt("%.1f", r.idle_cpu * 100); }), "", "", "≤ 1",
       met(cells, [](const Sessions& r) { return r.idle_cpu * 100 <= 1; })});
  g_rows.push_back({"", "ingress memory per idle session, KiB",
                    each(cells, [](const Sessions& r) { return fmt("%.1f", r.per_session_kib); }),
                    "", "", "≤ 16",
                    met(cells, [](const Sessions& r) { return r.per_session_kib <= 16; })});
  g_rows.push_back({"", "broker: memory per session, KiB; CPU while they idle, % of one core",
                    each(cells,
                         [](const Sessions& r) {
                           return fmt("%.1f",
                                      (r.broker_open_kib - r.broker_idle_kib) /
                                          static_cast<double>(std::max<std::size_t>(1, r.opened))) +
                                  "; " + fmt("%.1f", r.broker_idle_cpu * 100);
                         }),
                    "", "", "", ""});
}

struct Payload {
  Throughput t;
  double in_ratio = 0, eg_ratio = 0, in_mib = 0, eg_mib = 0;
};

void scenario_payload(const Settings& s) {
  // Against the default broker (or the tuned one when only that was selected).
  const Broker b = std::find(s.brokers.begin(), s.brokers.end(), Broker::stock) != s.brokers.end()
                       ? Broker::stock
                       : Broker::tuned;
  const double payload_kib = static_cast<double>(s.payload_bytes) / 1024.0;
  const double k = static_cast<double>(s.in_flight);
  const std::string body_tail =
      R"(,"method":"tools/call","params":{"name":"blob","arguments":{"bytes":)" +
      std::to_string(s.payload_bytes) + "}}}";
  auto body = [&](std::uint64_t id) {
    return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + body_tail;
  };
  PerCell<Payload> cells;
  for (Engine e : s.engines) {
    const Cell c{e, b};
    progress("scenario 4", c);
    auto broker = start_broker(b);
    Egress egress(broker->url(), e, s.in_flight, s.qos);
    Ingress ingress(broker->url(), e, s.in_flight, s.qos);
    // Open a session once (children started, pools warm) before taking the idle figures.
    {
      McpHttpClient client(ingress.ep(), ingress.host());
      client.open_session();
      client.call(echo_request(2, kText));
    }
    std::this_thread::sleep_for(500ms);
    const double in_idle = static_cast<double>(rss_kib(ingress.proc->pid()));
    const double eg_idle = static_cast<double>(rss_kib(egress.proc->pid()));
    Payload p;
    p.t = load(ingress.ep(), ingress.host(), s.in_flight, s.seconds,
               {ingress.proc->pid(), egress.proc->pid()}, body, "xxxxxxxx");
    const double in_peak = static_cast<double>(peak_rss_kib(ingress.proc->pid()));
    const double eg_peak = static_cast<double>(peak_rss_kib(egress.proc->pid()));
    p.in_mib = (in_peak - in_idle) / 1024;
    p.eg_mib = (eg_peak - eg_idle) / 1024;
    p.in_ratio = (in_peak - in_idle) / (k * payload_kib);
    p.eg_ratio = (eg_peak - eg_idle) / (k * payload_kib);
    cells[c.index()] = p;
  }
  // The targets: no worse than before the native engine. Speed and CPU depend on the machine's
  // day, so they are checked against the Paho engine's column of the same run when it ran; the
  // memory ratios, and speed without a Paho column, against the last results before the native
  // engine (bench/README.md: the Paho engine, a tuned broker, 2026-11-23).
  const auto& paho = cells[Cell{Engine::paho, b}.index()];
  const double min_rps = paho ? paho->t.rps : 169.7;
  const double max_cpu = paho ? paho->t.cpu_us_per_request : 7800;
  const std::string before = paho ? " (Paho, this run)" : " (before)";
  const std::string what = "4 payload: " + fmt("%.0f", payload_kib) + " KiB results, " +
                           std::to_string(s.in_flight) + " in flight, " +
                           std::to_string(s.seconds) + " s";
  g_rows.push_back({what, "results/s, MiB/s",
                    each(cells,
                         [&](const Payload& p) {
                           return fmt("%.1f", p.t.rps) + ", " +
                                  fmt("%.0f", p.t.rps * payload_kib / 1024);
                         }),
                    "", "", "≥ " + fmt("%.1f", min_rps) + " results/s" + before,
                    met(cells, [&](const Payload& p) { return p.t.rps >= min_rps; })});
  g_rows.push_back({"", "p50 / p99 ms",
                    each(cells,
                         [](const Payload& p) {
                           return fmt("%.1f", p.t.p50_ms) + " / " + fmt("%.1f", p.t.p99_ms);
                         }),
                    "", "", "", ""});
  g_rows.push_back(
      {"", "CPU µs per result: both bridge processes",
       each(cells, [](const Payload& p) { return fmt("%.0f", p.t.cpu_us_per_request); }), "", "",
       "≤ " + fmt("%.0f", max_cpu) + before,
       met(cells, [&](const Payload& p) { return p.t.cpu_us_per_request <= max_cpu; })});
  g_rows.push_back({"", "ingress peak RSS above idle, × payload per request in flight",
                    each(cells,
                         [](const Payload& p) {
                           return fmt("%.2f", p.in_ratio) + " (" + fmt("%.1f", p.in_mib) + " MiB)";
                         }),
                    "", "", "≤ 3.07 (before)",
                    met(cells, [](const Payload& p) { return p.in_ratio <= 3.07; })});
  g_rows.push_back({"", "egress peak RSS above idle, × payload per request in flight",
                    each(cells,
                         [](const Payload& p) {
                           return fmt("%.2f", p.eg_ratio) + " (" + fmt("%.1f", p.eg_mib) + " MiB)";
                         }),
                    "", "", "≤ 2.19 (before)",
                    met(cells, [](const Payload& p) { return p.eg_ratio <= 2.19; })});
  if (std::any_of(cells.begin(), cells.end(), [](auto& p) { return p && p->t.errors > 0; }))
    g_rows.push_back({"", "errors",
                      each(cells, [](const Payload& p) { return std::to_string(p.t.errors); }), "",
                      "", "0", met(cells, [](const Payload& p) { return p.t.errors == 0; })});
}

void print_table(const Settings& s) {
  const auto cells = s.cells();
  std::string header = "| scenario | measure |", rule = "|---|---|";
  for (Cell c : cells) {
    header += " bridge: " + c.label() + " |";
    rule += "---:|";
  }
  header += " (b) supergateway | (c) stdio direct | target (" + kTargetCell.label() + ") | met |";
  rule += "---:|---:|---|---|";
  std::printf("%s\n%s\n", header.c_str(), rule.c_str());
  for (const auto& r : g_rows) {
    std::string line = "| " + r.scenario + " | " + r.measure + " |";
    for (Cell c : cells)
      line += " " + r.cell[c.index()] + " |";
    line += " " + r.supergateway + " | " + r.stdio + " | " + r.target + " | " + r.met + " |";
    std::printf("%s\n", line.c_str());
  }
  std::printf(
      "\nColumns: the bridge (an HTTP ingress and a stdio egress, two processes) with mqtt.client "
      "native or paho, at QoS %d, against Mosquitto as shipped (\"default broker\": Nagle's "
      "algorithm on) or with set_tcp_nodelay true (\"tuned broker\"); a fresh broker for each "
      "column of scenarios 2-4. supergateway and the stdio server use no broker. Targets are "
      "checked on the native engine and the default broker. The bridge's heap: %s.\n",
      s.qos,
      g_huge_heap ? "on transparent huge pages, as the systemd unit and the image run it"
                  : "glibc's default (--heap default)");
  if (s.pinned_cpu >= 0)
    std::printf(
        "--cpus one: every process of the run (the benchmark, the brokers, the bridge processes "
        "and their children, supergateway) on CPU %d only: no wake-up crosses CPUs.\n",
        s.pinned_cpu);
  if (s.only.count(1))
    std::printf(
        "Scenario 1: (a) raw MQTT floor, per column: native: two mqtt::BrokerConnection on the "
        "bridge's native engine (TCP_NODELAY, TCP_QUICKACK after a read nothing answers), one "
        "event loop "
        "each; paho: two Paho C++ async_clients with TCP_NODELAY (the bridge's interposed "
        "connect(2), as its Paho engine has it), the responder answering from a thread of its "
        "own. A floor that stalls as the bridge does (Nagle) leaves no meaningful own time. Each "
        "latency series: %zu calls after a warm-up, or fewer when it reached %.0f s.\n",
        s.requests, s.latency_cap_s);
  if (s.only.count(1) && !s.oauth.empty())
    std::printf(
        "Scenario 1 with OAuth: per column, series through ingresses of their own against the "
        "same egress and broker, one call of each in turn (each round starting with the next "
        "series): the plain bridge (the rows above), the same again on a second ingress (an A/A "
        "control), and per algorithm a token reused (typ at+jwt; verified once, then found by "
        "its SHA-256 in the ingress's cache) and a fresh token each call (a new jti, minted "
        "before the run; verified each time). The OAuth ingresses have http.oauth with an issuer "
        "served by this process (RFC 8414 metadata and JWK Set on loopback), http.public_url "
        "%s and one scope granting the echo server.\n",
        kOauthPublicUrl.c_str());
  if (s.only.count(1) && s.replicas)
    std::printf(
        "Scenario 1 with replicas: per column, four ingress replicas with one secret "
        "(ingress.replicas) against the same egress and broker, each serving one series, one "
        "call of each series in turn: local (a 2025 session called on the replica that opened "
        "it), the same on another replica (an A/A control), and relayed (a session opened on "
        "the third replica, called through the fourth, which relays each call to it over the "
        "broker); the CPU of a relayed call is both replicas'.\n");
  if (s.only.count(3))
    std::printf(
        "Scenario 3: %zu sessions with the native engine, %zu with Paho; the MQTT echo server "
        "runs on the native engine in every column.\n",
        s.sessions_for(Engine::native), s.sessions_for(Engine::paho));
}

template <typename T>
std::vector<T> parse_list(const std::string& v,
                          const std::vector<std::pair<std::string, T>>& names) {
  std::vector<T> out;
  std::stringstream ss(v);
  for (std::string item; std::getline(ss, item, ',');) {
    const auto it =
        std::find_if(names.begin(), names.end(), [&](auto& n) { return n.first == item; });
    if (it == names.end()) throw std::invalid_argument(item);
    if (std::find(out.begin(), out.end(), it->second) == out.end()) out.push_back(it->second);
  }
  if (out.empty()) throw std::invalid_argument(v);
  std::sort(out.begin(), out.end());  // the table's order, whatever the command line's
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  const char* usage =
      "usage: bench_compare [--only 1,2,3,4] [--engines native,paho] [--brokers default,tuned]\n"
      "                     [--requests 2000] [--latency-cap-s 15] [--seconds 10]\n"
      "                     [--concurrency 64] [--sessions 10000] [--paho-sessions 5000]\n"
      "                     [--idle-seconds 10] [--keepalive 0] [--payload-kib 1024]\n"
      "                     [--in-flight 4] [--qos 1] [--threads 0] [--oauth none]\n"
      "                     [--replicas none] [--heap huge] [--cpus all]\n"
      "--engines: mqtt.client of the bridge processes; --brokers: Mosquitto as shipped (default)\n"
      "  or with set_tcp_nodelay true (tuned); the table has a column per combination\n"
      "  (scenario 4 runs on the default broker only)\n"
      "--requests: calls per latency series, each stopping after --latency-cap-s seconds\n"
      "--sessions / --paho-sessions: scenario 3's sessions with the native / Paho engine (Paho:\n"
      "  5000, or --sessions when fewer)\n"
      "--keepalive: scenario 3's mqtt.session_keepalive_s, 0 for the daemon's default\n"
      "--idle-seconds: scenario 3's window for idle CPU, 0 for one keep-alive interval and 5 s\n"
      "--threads: daemon.threads of both bridge processes, 0 for the daemon's default\n"
      "--oauth: scenario 1 also through ingresses that are OAuth resource servers (http.oauth),\n"
      "  timed in turn with the plain bridge, for tokens of each listed algorithm (RS256, PS256,\n"
      "  ES256, EdDSA; e.g. RS256,ES256): one token reused (verified once, then found in the\n"
      "  ingress's cache) and a fresh token each call (verified each time); none: no OAuth\n"
      "--replicas: 2025: scenario 1 also through ingress replicas with one secret\n"
      "  (ingress.replicas): calls in a 2025 session on its own replica, and relayed to it from\n"
      "  another replica; none: no replicas\n"
      "--heap: huge: the bridge processes' heap on transparent huge pages, as the systemd unit\n"
      "  and the image run them (GLIBC_TUNABLES=glibc.malloc.hugetlb=1); default: glibc's own\n"
      "--cpus: one: every process of the run pinned to one CPU (no wake-up crosses CPUs; on a VM\n"
      "  a halted virtual CPU's wake-up is what (d) shows); all: where the scheduler puts them\n";
  const int rc = parse_options(argc, argv, usage, [&](const std::string& a, const std::string& v) {
    if (a == "--only") {
      s.only.clear();
      std::stringstream ss(v);
      for (std::string item; std::getline(ss, item, ',');)
        s.only.insert(std::stoi(item));
    } else if (a == "--engines") {
      s.engines = parse_list<Engine>(v, {{"native", Engine::native}, {"paho", Engine::paho}});
    } else if (a == "--brokers") {
      s.brokers = parse_list<Broker>(v, {{"default", Broker::stock}, {"tuned", Broker::tuned}});
    } else if (a == "--requests") {
      s.requests = std::stoul(v);
      s.warmup = std::max<std::size_t>(10, s.requests / 10);
    } else if (a == "--latency-cap-s") {
      s.latency_cap_s = std::stod(v);
    } else if (a == "--seconds") {
      s.seconds = std::stoi(v);
    } else if (a == "--concurrency") {
      s.concurrency = std::stoul(v);
    } else if (a == "--sessions") {
      s.sessions = std::stoul(v);
    } else if (a == "--paho-sessions") {
      s.paho_sessions = std::stoul(v);
    } else if (a == "--payload-kib") {
      s.payload_bytes = std::stoul(v) * 1024;
    } else if (a == "--idle-seconds") {
      s.idle_seconds = std::max(0, std::stoi(v));
    } else if (a == "--qos") {
      s.qos = std::stoi(v);
      if (s.qos != 0 && s.qos != 1) throw std::invalid_argument("qos");
    } else if (a == "--keepalive") {
      s.keepalive_s = std::stoi(v);
    } else if (a == "--threads") {
      s.threads = std::stoi(v);
      if (s.threads < 0 || s.threads > 64) throw std::invalid_argument("threads");
    } else if (a == "--heap") {
      if (v != "huge" && v != "default") throw std::invalid_argument("heap");
      g_huge_heap = v == "huge";
    } else if (a == "--oauth") {
      s.oauth.clear();
      if (v == "none") return true;
      std::stringstream ss(v);
      for (std::string alg; std::getline(ss, alg, ',');) {
        if (alg != "RS256" && alg != "PS256" && alg != "ES256" && alg != "EdDSA")
          throw std::invalid_argument(alg);
        if (std::find(s.oauth.begin(), s.oauth.end(), alg) == s.oauth.end()) s.oauth.push_back(alg);
      }
      if (s.oauth.empty()) throw std::invalid_argument(v);
    } else if (a == "--replicas") {
      if (v != "none" && v != "2025") throw std::invalid_argument(v);
      s.replicas = v == "2025";
    } else if (a == "--cpus") {
      if (v != "one" && v != "all") throw std::invalid_argument(v);
      s.one_cpu = v == "one";
    } else if (a == "--in-flight") {
      s.in_flight = std::stoul(v);
    } else {
      return false;
    }
    return true;
  });
  if (rc >= 0) return rc;
  g_threads = s.threads;
  // Before any thread or process starts: they inherit the mask.
  if (s.one_cpu) {
    const auto cpus = allowed_cpus(1);
    if (cpus.empty() || !pin_to_cpu(cpus.front())) {
      std::cerr << "--cpus one: cannot pin this process to one CPU\n";
      return 1;
    }
    s.pinned_cpu = cpus.front();
  }
  log::set_level("warn");  // the native floor's connections
  // Before anything starts: the broker and the bridge processes inherit the limit. Scenario 3
  // needs a descriptor per session in the ingress and in Mosquitto.
  const std::size_t files = raise_fd_limit();
  if (s.only.count(3) &&
      files < std::max(s.sessions_for(Engine::native), s.sessions_for(Engine::paho)) + 256)
    std::cerr << "warning: the open-file limit is " << files << " (hard limit reached), "
              << "too low for scenario 3's sessions\n";
  const StealMeter steal;
  const auto t0 = Clock::now();
  try {
    if (s.only.count(1)) scenario_latency(s);
    if (s.only.count(2)) scenario_throughput(s);
    if (s.only.count(3)) scenario_sessions(s);
    if (s.only.count(4)) scenario_payload(s);
  } catch (const std::exception& e) {
    std::cerr << "benchmark failed: " << e.what() << "\n";
    return 1;
  }
  print_table(s);
  std::printf("\n(%.0f s in all; CPU time stolen by the hypervisor: %.1f %%)\n",
              std::chrono::duration<double>(Clock::now() - t0).count(), steal.percent());
  return 0;
}

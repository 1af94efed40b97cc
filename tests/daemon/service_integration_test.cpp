// The daemon as a service: SIGHUP reloads, /readyz follows the broker, /metrics is
// Prometheus text whose counters move with traffic, and READY / RELOADING / STOPPING / WATCHDOG
// reach a real $NOTIFY_SOCKET. Everything runs against the real mcp-mqtt-bridge executable and a
// real Mosquitto; /metrics is read by the Prometheus project's own parser (python3-prometheus-
// client), not by code of ours.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>
#include <signal.h>

#include "tests/http/server_test_support.hpp"
#include "tests/support/bridge_process.hpp"
#include "tests/support/ingress_bridge.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/mqtt_mcp_client.hpp"
#include "tests/support/notify_socket.hpp"
#include "tests/support/observer.hpp"
#include "tests/support/process.hpp"
#include "tests/support/wait.hpp"

using namespace mcpmqtt::test;
using namespace std::chrono_literals;
namespace bhttp = boost::beast::http;

namespace {

std::string server(const std::string& name) {
  return R"(")" + name + R"(": {"command": ")" MCPMQTT_TEST_SERVER R"(", "description": "test"})";
}

std::string egress_config(const Mosquitto& broker, const std::string& servers,
                          const std::string& extra = "") {
  return R"({"mqtt": {"url": ")" + broker.url() + R"("}, "http": {"enabled": false}, )" + extra +
         R"("mcpServers": {)" + servers + "}}";
}

// Presence messages on `$mcp-server/presence/{server-id}/{server-name}`, by server-name: the
// last payload seen (empty = cleared).
struct PresenceWatch {
  Observer obs;
  std::map<std::string, std::string> last;  // server-name -> payload
  std::map<std::string, std::string> ids;   // server-name -> server-id
  explicit PresenceWatch(const std::string& url) : obs(url) {
    obs.subscribe("$mcp-server/presence/#");
  }
  // Reads presence messages until `pred(last)` holds.
  template <typename Pred>
  bool until(Pred pred, std::chrono::milliseconds timeout = 15s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!pred(*this)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left <= 0ms) return false;
      auto m = obs.next(left);
      if (!m) return false;
      const std::string prefix = "$mcp-server/presence/";
      const auto rest = m->topic.substr(prefix.size());
      const auto slash = rest.find('/');
      const auto name = rest.substr(slash + 1);
      last[name] = m->payload;
      if (!m->payload.empty()) ids[name] = rest.substr(0, slash);
    }
    return true;
  }
  bool online(const std::string& name) const {
    auto it = last.find(name);
    return it != last.end() && it->second.find("notifications/server/online") != std::string::npos;
  }
  bool cleared(const std::string& name) const {
    auto it = last.find(name);
    return it != last.end() && it->second.empty();
  }
};

// Replaces a file the way an editor or a deployment tool does: a new file renamed over it.
void replace_file(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".new";
  std::ofstream(tmp) << content;
  std::filesystem::rename(tmp, path);
}

HttpResult get(const Bridge& b, const std::string& target) {
  RawClient c(b.endpoint());
  return c.request(bhttp::verb::get, target, {{"Host", "127.0.0.1:" + std::to_string(b.port)}});
}

// GET /metrics, read by the Prometheus parser: sample (name{sorted labels}) -> value, and
// family -> type. Fails the test when the text does not parse.
struct Scrape {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;
  double at(const std::string& series) const {
    auto it = samples.find(series);
    return it == samples.end() ? 0 : it->second;
  }
};

Scrape scrape(const Bridge& b) {
  auto r = get(b, "/metrics");
  REQUIRE(r.status == 200);
  CHECK(r.header("content-type").rfind("text/plain; version=0.0.4", 0) == 0);
  TempDir dir;
  const auto file = dir.write("metrics.txt", r.body);
  auto parsed =
      run_capture({"/usr/bin/python3",
                   std::string(MCPMQTT_SOURCE_DIR) + "/tests/daemon/prometheus_parse.py", file});
  INFO(r.body);
  INFO(parsed.err);
  REQUIRE(parsed.exit_code == 0);
  Scrape s;
  std::istringstream in(parsed.out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("family ", 0) == 0) {
      const auto rest = line.substr(7);
      s.types[rest.substr(0, rest.find(' '))] = rest.substr(rest.find(' ') + 1);
    } else if (line.rfind("sample ", 0) == 0) {
      const auto rest = line.substr(7);
      const auto sp = rest.rfind(' ');
      s.samples[rest.substr(0, sp)] = std::stod(rest.substr(sp + 1));
    }
  }
  return s;
}

// An MCP session over raw HTTP through the bridge's ingress.
struct HttpSession {
  const Bridge& bridge;
  std::string host;
  std::string sid;
  int next_id = 2;
  explicit HttpSession(const Bridge& b) : bridge(b), host("127.0.0.1:" + std::to_string(b.port)) {
    RawClient c(bridge.endpoint());
    c.send(bhttp::verb::post, "/mcp", post_headers(host), initialize_body(1, "2025-11-25"));
    auto head = c.read_header(20s);
    REQUIRE(head.status == 200);
    sid = head.header("mcp-session-id");
    REQUIRE(sse_response(c));
    REQUIRE(
        RawClient(bridge.endpoint())
            .request(bhttp::verb::post, "/mcp", post_headers(host, sid, "2025-11-25"), kInitialized)
            .status == 202);
  }
  Message call(const std::string& tool, const std::string& args) {
    RawClient c(bridge.endpoint());
    c.send(bhttp::verb::post, "/mcp", post_headers(host, sid, "2025-11-25"),
           request_body(next_id++, "tools/call",
                        R"({"name":")" + tool + R"(","arguments":)" + args + "}"));
    REQUIRE(c.read_header().status == 200);
    auto m = sse_response(c);
    REQUIRE(m);
    return *m;
  }
};

}  // namespace

TEST_CASE(
    "service: SIGHUP brings added servers online, takes removed ones offline, and keeps the "
    "running configuration when the new one is invalid",
    "[service]") {
  Mosquitto broker;
  BridgeProcess bridge({}, egress_config(broker, server("svc/a")));
  REQUIRE(bridge.wait_for_log("[server svc/a] online"));
  PresenceWatch presence(broker.url());
  REQUIRE(presence.until([](auto& p) { return p.online("svc/a"); }));

  // A client in session with svc/a: removing the server ends its session cleanly.
  McpMqttClient client(broker.url(), "svc/a");
  REQUIRE(client.initialize());
  REQUIRE(eventually([&] { return children_of(bridge.pid()).size() == 1; }));

  const std::string file = bridge.dir() + "/bridge.jsonc";
  replace_file(file, egress_config(broker, server("svc/b"), R"("log": {"level": "debug"}, )"));
  REQUIRE(::kill(bridge.pid(), SIGHUP) == 0);

  REQUIRE(presence.until([](auto& p) { return p.online("svc/b") && p.cleared("svc/a"); }));
  auto bye = client.next_containing("notifications/disconnected", 10s);
  REQUIRE(bye);
  CHECK(bye->topic == client.rpc_topic());
  REQUIRE(
      bridge.wait_for_log("configuration reloaded: log level info -> debug; removed svc/a; "
                          "added svc/b"));
  // svc/a's child is gone; svc/b serves.
  CHECK(eventually([&] { return children_of(bridge.pid()).empty(); }));
  McpMqttClient b_client(broker.url(), "svc/b");
  REQUIRE(b_client.initialize());
  auto echo = b_client.request("tools/call", R"({"name":"echo","arguments":{"text":"after HUP"}})");
  REQUIRE(echo);
  CHECK(echo->find("after HUP") != std::string::npos);

  // An invalid configuration (a misspelt key) is rejected, with the reason; nothing changes.
  replace_file(file, R"({"mqtt": {"ulr": "mqtt://127.0.0.1:1"}, "mcpServers": {}})");
  REQUIRE(::kill(bridge.pid(), SIGHUP) == 0);
  REQUIRE(bridge.wait_for_log("the new configuration is rejected"));
  CHECK(bridge.log().find("mqtt.ulr") != std::string::npos);
  CHECK(presence.online("svc/b"));
  CHECK_FALSE(presence.until([](auto& p) { return p.cleared("svc/b"); }, 300ms));
  auto again = b_client.request("tools/call", R"({"name":"echo","arguments":{"text":"still"}})");
  REQUIRE(again);
  CHECK(again->find("still") != std::string::npos);
  CHECK(bridge.terminate() == 0);
}

TEST_CASE("service: /readyz answers 503 while the broker is down and 200 once it is back",
          "[service]") {
  Mosquitto broker;
  Bridge bridge(broker, "{}", "");
  CHECK(eventually([&] { return get(bridge, "/readyz").status == 200; }));
  CHECK(get(bridge, "/healthz").status == 200);
  const auto before = scrape(bridge);
  CHECK(before.at("mcpmqtt_ready") == 1);

  broker.stop();
  CHECK(eventually([&] { return get(bridge, "/readyz").status == 503; }));
  CHECK(get(bridge, "/healthz").status == 200);  // the process is up all the same
  CHECK(scrape(bridge).at("mcpmqtt_ready") == 0);

  broker.restart();
  CHECK(eventually([&] { return get(bridge, "/readyz").status == 200; }, 30s));
  const auto after = scrape(bridge);
  CHECK(after.at("mcpmqtt_mqtt_reconnects_total") >=
        before.at("mcpmqtt_mqtt_reconnects_total") + 1);
  CHECK(after.at("mcpmqtt_mqtt_connection_losses_total") >=
        before.at("mcpmqtt_mqtt_connection_losses_total") + 1);
}

TEST_CASE("service: /metrics parses as Prometheus text and its counters move with traffic",
          "[service]") {
  Mosquitto broker;
  // One process both publishes the test server (stdio egress) and serves it over HTTP (ingress):
  // one call crosses both directions.
  Bridge bridge(broker, "{" + server("svc/m") + "}", "svc/m");
  REQUIRE(bridge.proc->wait_for_log("[server svc/m] online"));
  const auto before = scrape(bridge);
  CHECK(before.types.at("mcpmqtt_children") == "gauge");
  CHECK(before.at("mcpmqtt_children") == 0);

  HttpSession session(bridge);
  auto m = session.call("echo", R"({"text":"counted"})");
  CHECK(at(m, {"result", "content", "0", "text"}) == "counted");
  auto after = scrape(bridge);
  // (The parser names counter families without _total.)
  CHECK(after.types.at("mcpmqtt_requests") == "counter");
  CHECK(after.types.at("mcpmqtt_request_duration_seconds") == "histogram");

  const std::string call_ok = R"(method="tools/call",origin="client",outcome="result"})";
  CHECK(after.at(R"(mcpmqtt_requests_total{direction="http_ingress",)" + call_ok) ==
        before.at(R"(mcpmqtt_requests_total{direction="http_ingress",)" + call_ok) + 1);
  CHECK(after.at(R"(mcpmqtt_requests_total{direction="stdio_egress",)" + call_ok) ==
        before.at(R"(mcpmqtt_requests_total{direction="stdio_egress",)" + call_ok) + 1);
  CHECK(
      after.at(
          R"(mcpmqtt_requests_total{direction="http_ingress",method="initialize",origin="client",outcome="result"})") >=
      1);
  CHECK(after.at(R"(mcpmqtt_sessions{direction="http_ingress"})") == 1);
  CHECK(after.at(R"(mcpmqtt_sessions{direction="stdio_egress"})") == 1);
  // One child for the session; the short-lived copy the egress started to learn the server's
  // era (stdio §Backward Compatibility) is counted too until it has exited.
  CHECK(eventually([&] { return scrape(bridge).at("mcpmqtt_children") == 1; }));
  CHECK(after.at(R"(mcpmqtt_exposed_server_sessions{server_name="svc/m"})") == 1);
  const std::string hist =
      R"(mcpmqtt_request_duration_seconds_count{direction="http_ingress",method="tools/call"})";
  CHECK(after.at(hist) == before.at(hist) + 1);
  CHECK(
      after.at(
          R"(mcpmqtt_request_duration_seconds_bucket{direction="http_ingress",le="+Inf",method="tools/call"})") ==
      after.at(hist));
  for (const std::string t : {"mqtt", "http", "stdio"}) {
    for (const std::string d : {"in", "out"}) {
      const auto series = R"(mcpmqtt_bytes_total{direction=")" + d + R"(",transport=")" + t + "\"}";
      INFO(series);
      CHECK(after.at(series) > before.at(series));
    }
  }
  CHECK(after.at(R"(mcpmqtt_http_responses_total{code="200"})") >
        before.at(R"(mcpmqtt_http_responses_total{code="200"})"));

  // The session ends (DELETE): the gauges come back down.
  RawClient del(bridge.endpoint());
  CHECK(del.request(bhttp::verb::delete_, "/mcp",
                    post_headers(session.host, session.sid, "2025-11-25"))
            .status == 200);
  CHECK(eventually([&] {
    auto s = scrape(bridge);
    return s.at(R"(mcpmqtt_sessions{direction="http_ingress"})") == 0 &&
           s.at(R"(mcpmqtt_sessions{direction="stdio_egress"})") == 0 &&
           s.at("mcpmqtt_children") == 0;
  }));
}

TEST_CASE(
    "service: READY=1 only once the broker is connected, then WATCHDOG=1, RELOADING=1 around "
    "SIGHUP and STOPPING=1 on SIGTERM, through $NOTIFY_SOCKET",
    "[service][systemd]") {
  Mosquitto broker;
  broker.stop();  // down at start: the daemon must not report ready
  NotifySocket manager;
  const auto port = free_loopback_port();
  BridgeProcess bridge({},
                       R"({"mqtt": {"url": ")" + broker.url() +
                           R"(", "reconnect_min_ms": 100, "reconnect_max_ms": 200},
          "http": {"listen": "127.0.0.1:)" +
                           std::to_string(port) + R"("}, "mcpServers": {}})",
                       {{"NOTIFY_SOCKET", manager.address()}, {"WATCHDOG_USEC", "400000"}});
  REQUIRE(bridge.wait_for_log("HTTP ingress on"));
  // Watchdog keep-alives come from the start, and the status line says why the daemon is not
  // ready; READY does not come while the broker is down.
  std::optional<NotifySocket::Datagram> watchdog, status;
  for (auto d = manager.receive(3s); d && !(watchdog && status); d = manager.receive(3s)) {
    CHECK(d->sender_pid == bridge.pid());
    CHECK(d->fields().count("READY") == 0);
    if (d->text == "WATCHDOG=1") watchdog = d;
    if (d->fields().count("STATUS")) status = d;
  }
  REQUIRE(watchdog);
  REQUIRE(status);
  CHECK(status->fields()["STATUS"].rfind("not ready: ingress: ", 0) == 0);
  CHECK_FALSE(manager.wait_for("READY", "1", 1500ms));

  broker.restart();
  auto ready = manager.wait_for("READY", "1", 20s);
  REQUIRE(ready);
  CHECK(ready->sender_pid == bridge.pid());
  CHECK(manager.wait_for("WATCHDOG", "1", 2s));

  REQUIRE(::kill(bridge.pid(), SIGHUP) == 0);
  auto reloading = manager.wait_for("RELOADING", "1", 5s);
  REQUIRE(reloading);
  CHECK(reloading->fields().count("MONOTONIC_USEC") == 1);
  CHECK(manager.wait_for("READY", "1", 5s));

  ::kill(bridge.pid(), SIGTERM);
  auto stopping = manager.wait_for("STOPPING", "1", 10s);
  REQUIRE(stopping);
  CHECK(stopping->sender_pid == bridge.pid());
  CHECK(bridge.wait_exit() == 0);
}

// Any broker (docs/brokers.md): the topic prefix (mqtt.topic_prefix) over Mosquitto, failover
// between brokers (mqtt.url as a list), and the interop subset over a second, independent MQTT 5
// broker: ejabberd's mod_mqtt, which refuses every topic beginning with '$' and has no anonymous
// login (tests/support/ejabberd.hpp). Real brokers, real mcp-mqtt-bridge processes, the official
// SDK clients of both eras and the conformance suite as peers.
//
// A file of tests/mqtt/: every test runs on both MQTT engines ("integration:" and
// "integration paho:"), but for those tagged [native] (the conformance suite, which runs on the
// native engine over Mosquitto too).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <signal.h>

#include "tests/http/server_test_support.hpp"
#include "tests/support/ejabberd.hpp"
#include "tests/support/ingress_bridge.hpp"
#include "tests/support/modern_peers.hpp"
#include "tests/support/mqtt_mcp_client.hpp"
#include "tests/support/node_tools.hpp"
#include "tests/support/observer.hpp"
#include "tests/support/prerequisite.hpp"
#include "tests/support/wait.hpp"

using namespace mcpmqtt::test;
using namespace std::chrono_literals;
namespace mp = mcpmqtt::test::modern_peers;

namespace {

const std::string kServer = "test/brokers";
const std::string kSdk2 = "test/sdk2";

std::string cpp_server(const std::string& name = kServer) {
  return R"(")" + name + R"(": {"command": ")" MCPMQTT_TEST_SERVER R"("})";
}
std::string sdk2_server() {
  return R"(")" + kSdk2 + R"(": {"command": ")" + node_binary() + R"(", "args": [")" +
         mp::sdk2_server_script() + R"(", "--stdio"], "protocol": "modern"})";
}

const std::string kFastReconnect = R"(, "reconnect_min_ms": 100, "reconnect_max_ms": 400)";

// An SDK client (2025) that calls the test server's echo tool through `args`' transport.
bool echo_works(const std::vector<std::string>& args, const std::string& text) {
  const bool http = args.front() == "--url";
  auto run = run_sdk_client(
      args, R"({"steps":[{"op":"callTool","name":"echo","arguments":{"text":")" + text + R"("}})" +
                std::string(http ? R"(,{"op":"terminateSession"})" : "") + "]}");
  UNSCOPED_INFO(run.err);
  const auto step = run.line("step");
  return run.exit_code == 0 && step && step->find(text) != std::string::npos;
}

HttpResult get(const Bridge& b, const std::string& target) {
  return RawClient(b.endpoint())
      .request(boost::beast::http::verb::get, target,
               {{"Host", "127.0.0.1:" + std::to_string(b.port)}});
}

bool any_topic_starts_with(const std::vector<Received>& seen, const std::string& prefix) {
  for (const auto& r : seen)
    if (r.topic.rfind(prefix, 0) == 0) return true;
  return false;
}

// Everything an observer received within `d`.
std::vector<Received> drain(Observer& o, std::chrono::milliseconds d) {
  std::vector<Received> out;
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
    if (auto r = o.next(50ms)) out.push_back(std::move(*r));
  }
  return out;
}

}  // namespace

// ---- mqtt.topic_prefix over Mosquitto
// ------------------------------------------------------------

TEST_CASE(
    "mqtt.topic_prefix acme/mcp-: all six topic families and the bridge's own are under the "
    "prefix on every side, and a participant with the default prefix neither sees nor is seen",
    "[brokers][topic-prefix]") {
  Mosquitto broker;
  Observer all(broker.url());
  all.subscribe("#");              // every topic but those beginning with '$'
  all.subscribe("$mcp-server/#");  // 004's default families: nothing may come here
  all.subscribe("$mcp-client/#");
  all.subscribe("$mcp-rpc/#");
  Bridge bridge(broker, "{" + cpp_server() + "}", kServer, "", "",
                R"(, "topic_prefix": "acme/mcp-")");
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
  // HTTP ingress → stdio egress, and a desktop host through `stdio --topic-prefix`.
  CHECK(echo_works({"--url", bridge.url()}, "over http"));
  CHECK(echo_works({"--command", MCPMQTT_BRIDGE_EXE, "--args", "stdio", "--broker", broker.url(),
                    "--topic-prefix", "acme/mcp-", "--server", kServer},
                   "over stdio"));
  const auto seen = drain(all, 300ms);
  for (const auto& r : seen) {
    INFO(r.topic);
    CHECK(r.topic.rfind("acme/mcp-", 0) == 0);
  }
  // The server's presence and control topics, the clients' RPC and their goodbye on presence.
  CHECK(any_topic_starts_with(seen, "acme/mcp-server/presence/"));
  CHECK(std::any_of(seen.begin(), seen.end(), [](const Received& r) {  // initialize
    return r.topic.rfind("acme/mcp-server/", 0) == 0 &&
           r.topic.rfind("acme/mcp-server/presence/", 0) != 0 &&
           r.topic.rfind("acme/mcp-server/capability/", 0) != 0;
  }));
  CHECK(any_topic_starts_with(seen, "acme/mcp-rpc/"));
  CHECK(any_topic_starts_with(seen, "acme/mcp-client/presence/"));
  CHECK_FALSE(any_topic_starts_with(seen, "$mcp-"));

  // A host on the default prefix finds no server: the two namespaces do not meet.
  auto run = run_sdk_client({"--command", MCPMQTT_BRIDGE_EXE, "--args", "stdio", "--broker",
                             broker.url(), "--server", kServer, "--presence-wait-ms", "500"},
                            R"({"steps":[{"op":"listTools"}]})", 60s);
  CHECK(run.exit_code != 0);
  CHECK(run.err.find("$mcp-server/presence/+/" + kServer) != std::string::npos);
}

// ---- failover: mqtt.url as a list
// ----------------------------------------------------------------

TEST_CASE(
    "failover: with mqtt.url a list of two brokers, killing the first moves the egress and the "
    "ingress to the second, which gets the presence again, and new sessions work within seconds",
    "[brokers][failover]") {
  Mosquitto first, second;
  const std::string urls = first.url() + "," + second.url();
  Bridge bridge(urls, "{" + cpp_server() + "}", kServer, "", "", kFastReconnect);
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
  CHECK(echo_works({"--url", bridge.url()}, "through the first"));

  first.kill();
  const auto fault = std::chrono::steady_clock::now();
  // The server's presence is announced again, on the second broker (retained there).
  Observer watch(second.url());
  watch.subscribe("$mcp-server/presence/+/" + kServer);
  auto presence = watch.wait_for(
      [](const Received& r) {
        return r.payload.find("notifications/server/online") != std::string::npos;
      },
      15s);
  REQUIRE(presence);
  CHECK(bridge.proc->wait_for_log("reconnecting to " + second.url(), 5s));
  // A new session works: the ingress's session connections start on the broker that is up.
  CHECK(eventually(
      [&] {
        return echo_works({"--url", bridge.url()}, "through the second");
      },
      20s, 200ms));
  INFO("a session worked " << std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - fault)
                                  .count()
                           << " ms after the first broker died");
  // A desktop host given the same list reaches the server too (the first refuses it at once).
  CHECK(echo_works(
      {"--command", MCPMQTT_BRIDGE_EXE, "--args", "stdio", "--broker", urls, "--server", kServer},
      "stdio through the list"));
  // Readiness is sampled every 100 ms (Daemon::watch_readiness).
  CHECK(eventually([&] { return get(bridge, "/readyz").status == 200; }, 5s));
}

// ---- ejabberd: the interop subset -------------------------------------------------------------

namespace {

// ejabberd needs a prefix without '$' and a login (any user name, a non-empty password).
const std::string kPrefix = "mcp-";
std::string ejabberd_mqtt() {
  return R"(, "topic_prefix": ")" + kPrefix + R"(", "username": ")" + Ejabberd::username() + "\"" +
         kFastReconnect;
}
std::map<std::string, std::string> ejabberd_env() {
  return {{"MCPMQTT_MQTT_PASSWORD", Ejabberd::password()}};
}
// A desktop host's `mcp-mqtt-bridge stdio`, with the login in its environment.
std::vector<std::string> stdio_args(const Ejabberd& broker, const std::string& server) {
  return {"--command",      MCPMQTT_BRIDGE_EXE,
          "--env",          "MCPMQTT_MQTT_USERNAME=" + Ejabberd::username(),
          "--env",          "MCPMQTT_MQTT_PASSWORD=" + Ejabberd::password(),
          "--args",         "stdio",
          "--broker",       broker.url(),
          "--topic-prefix", kPrefix,
          "--server",       server};
}
Observer::Options ejabberd_login() {
  Observer::Options o;
  o.username = Ejabberd::username();
  o.password = Ejabberd::password();
  return o;
}

}  // namespace

TEST_CASE(
    "ejabberd: presence and will, the stdio and HTTP ingresses to a stdio server in both MCP "
    "eras (2026-07-28 with MRTR, subscriptions/listen and list changes), over a broker that "
    "refuses '$' topics",
    "[brokers][ejabberd]") {
  if (const auto why = Ejabberd::missing(); !why.empty()) return missing_prerequisite(why);
  Ejabberd broker;
  Bridge bridge(broker.url(), "{" + cpp_server() + "," + sdk2_server() + "}", kServer, "", "",
                ejabberd_mqtt(), ejabberd_env());
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kSdk2 + " online"));

  // 2025: HTTP ingress and stdio ingress to the stdio egress.
  CHECK(echo_works({"--url", bridge.url()}, "ejabberd over http"));
  CHECK(echo_works(stdio_args(broker, kServer), "ejabberd over stdio"));

  // 2026-07-28: MRTR (elicitation), a listen, and a list change on the capability topic.
  auto run = mp::run_client(
      {"--url", bridge.url("/servers/" + kSdk2 + "/mcp"), "--version-mode", "pin"},
      R"({"steps":[{"op":"callTool","name":"ask_elicitation"},)"
      R"({"op":"listen","name":"s1","filter":{"toolsListChanged":true}},)"
      R"({"op":"callTool","name":"trigger_list_changed","arguments":{"list":"tools"}},)"
      R"({"op":"waitNotification","method":"notifications/tools/list_changed","timeoutMs":15000},)"
      R"({"op":"closeListen","name":"s1"}]})");
  INFO(run.err);
  for (const auto& l : run.lines)
    UNSCOPED_INFO(l);
  CHECK(run.exit_code == 0);
  const auto connected = run.line("connected");
  REQUIRE(connected);
  CHECK(json_at(*connected, "protocolVersion") == "2026-07-28");

  // The will: a server process that vanishes is offline for the ingress (its retained presence
  // cleared by the empty retained will), while the other stays online.
  Bridge egress(broker.url(), "{" + cpp_server("test/vanishing") + "}", "", "", "", ejabberd_mqtt(),
                ejabberd_env());
  REQUIRE(bridge.proc->wait_for_log("[directory] test/vanishing online"));
  ::kill(egress.proc->pid(), SIGKILL);
  CHECK(bridge.proc->wait_for_log("[directory] test/vanishing instance", 30s));
  Observer late(broker.url(), ejabberd_login());
  late.subscribe(kPrefix + "server/presence/+/#");
  const auto retained = drain(late, 500ms);
  CHECK(any_topic_starts_with(retained, kPrefix + "server/presence/"));
  for (const auto& r : retained) {
    INFO(r.topic);
    CHECK(r.topic.find("test/vanishing") == std::string::npos);
  }
}

TEST_CASE(
    "ejabberd: an MQTT-native client initializes, subscribes to a resource and gets its "
    "update on the capability topic, at QoS 1 and 2 against the bridge's QoS 0 and 1",
    "[brokers][ejabberd]") {
  if (const auto why = Ejabberd::missing(); !why.empty()) return missing_prerequisite(why);
  Ejabberd broker;
  for (const int bridge_qos : {0, 1}) {
    INFO("mqtt.qos " << bridge_qos);
    Bridge bridge(broker.url(), "{" + cpp_server() + "}", "", "", "",
                  ejabberd_mqtt() + R"(, "qos": )" + std::to_string(bridge_qos), ejabberd_env());
    REQUIRE(bridge.proc->wait_for_log("online"));
    for (const int client_qos : {1, 2}) {
      INFO("client QoS " << client_qos);
      McpMqttClient::Options o;
      o.topic_prefix = kPrefix;
      o.username = Ejabberd::username();
      o.password = Ejabberd::password();
      o.qos = client_qos;
      std::unique_ptr<McpMqttClient> made;
      try {
        made = std::make_unique<McpMqttClient>(broker.url(), kServer, o);
      } catch (const std::exception& e) {
        FAIL(e.what() << "\nbridge:\n" << bridge.proc->log() << "\nejabberd:\n" << broker.log());
      }
      auto& client = *made;
      auto init = client.initialize();
      REQUIRE(init);
      CHECK(json_at(*init, "result.serverInfo.name"));
      auto sub = client.request("resources/subscribe", R"({"uri":"test://r/1"})");
      REQUIRE(sub);
      CHECK_FALSE(json_at(*sub, "error"));
      auto call = client.request(
          "tools/call",
          R"({"name":"notify","arguments":{"method":"notifications/resources/updated","uri":"test://r/1","count":1}})");
      REQUIRE(call);
      auto update = client.next_containing("notifications/resources/updated");
      REQUIRE(update);
      CHECK(update->topic.rfind(kPrefix + "server/capability/", 0) == 0);
      CHECK(update->payload.find("test://r/1") != std::string::npos);
      client.disconnect();
    }
    CHECK(bridge.proc->terminate() == 0);
  }
}

TEST_CASE(
    "ejabberd: a broker restart - the server is announced again and new sessions work within "
    "seconds, on a fresh node that kept nothing",
    "[brokers][ejabberd]") {
  if (const auto why = Ejabberd::missing(); !why.empty()) return missing_prerequisite(why);
  Ejabberd broker;
  Bridge bridge(broker.url(), "{" + cpp_server() + "}", kServer, "", "", ejabberd_mqtt(),
                ejabberd_env());
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
  CHECK(echo_works({"--url", bridge.url()}, "before the restart"));
  broker.kill();
  broker.restart();
  CHECK(eventually(
      [&] {
        return echo_works({"--url", bridge.url()}, "after the restart");
      },
      30s, 250ms));
  // Readiness is sampled every 100 ms (Daemon::watch_readiness).
  CHECK(eventually([&] { return get(bridge, "/readyz").status == 200; }, 5s));
}

TEST_CASE(
    "ejabberd: the conformance suite through HTTP ingress, ejabberd and the HTTP egress gives "
    "the same result as against the fixture directly",
    "[brokers][ejabberd][conformance][native]") {
  if (const auto why = Ejabberd::missing(); !why.empty()) return missing_prerequisite(why);
  TempDir out;
  FixtureHttpServer direct;
  std::string log;
  auto a = run_conformance(direct.url, out.path() + "/direct", &log);
  INFO(log);
  REQUIRE(a);
  Ejabberd broker;
  Bridge bridge(broker.url(), R"({"test/conformance-http": {"url": ")" + direct.url + R"("}})",
                "test/conformance-http", R"("egress": {"max_sessions_per_server": 64}, )", "",
                ejabberd_mqtt(), ejabberd_env());
  REQUIRE(bridge.proc->wait_for_log("[directory] test/conformance-http online"));
  auto b = run_conformance(bridge.url(), out.path() + "/bridged", &log);
  INFO(log);
  REQUIRE(b);
  auto same = compare_conformance({*a, *b});
  INFO(same.out << same.err);
  CHECK(same.exit_code == 0);
}

// ---- federation: a server on an edge broker, clients on a central one -------------------------

TEST_CASE(
    "federation: servers on an edge Mosquitto, clients on a central one bridged to it - across "
    "an edge restart the live session survives (the egress's pings are spread over the ping "
    "timeout), a request in flight is answered at once with a retriable error, and an initialize "
    "lost in the cut is sent again when the server's presence returns",
    "[brokers][federation]") {
  namespace bhttp = boost::beast::http;
  Mosquitto edge;
  Mosquitto::Options central_options;
  // The central broker's bridge to the edge carries the three families both ways (MQTT v5);
  // it dials the edge again 2 s after losing it.
  central_options.extra_config =
      "connection edge\naddress 127.0.0.1:" + std::to_string(edge.port()) +
      "\nbridge_protocol_version mqttv50\ncleansession true\n"
      "restart_timeout 2\n"
      "topic $mcp-server/# both 1\ntopic $mcp-client/# both 1\n"
      "topic $mcp-rpc/# both 1\n";
  Mosquitto central(central_options);
  Bridge egress(edge, "{" + cpp_server() + "}", "", "", "", kFastReconnect);
  REQUIRE(egress.proc->wait_for_log("online"));
  Bridge ingress(central, "{}", kServer, "", "", kFastReconnect);
  REQUIRE(ingress.proc->wait_for_log("[directory] " + kServer + " online", 20s));

  // A live session through the link: the SDK client, which keeps its GET stream open and
  // answers the server's pings, connects before the restart and calls once the egress's pings
  // after its reconnect are over.
  auto live = std::async(std::launch::async, [&] {
    return run_sdk_client(
        {"--url", ingress.url()},
        R"({"steps":[{"op":"sleep","ms":18000},)"
        R"({"op":"callTool","name":"echo","arguments":{"text":"after the edge restart"}},)"
        R"({"op":"terminateSession"}]})");
  });
  REQUIRE(ingress.proc->wait_for_log("session with " + kServer + " established", 30s));

  const std::string host = "127.0.0.1:" + std::to_string(ingress.port);
  // These run on threads of their own: no Catch assertions inside.
  auto response_text = [](RawClient& c, std::chrono::seconds wait) -> std::optional<std::string> {
    while (auto e = c.next_message(wait)) {
      if (auto m = e->message(); m && m->is_response()) return std::string(m->text());
    }
    return std::nullopt;
  };
  // A session of a raw HTTP client; returns its id.
  auto open_session = [&](std::chrono::seconds wait) {
    RawClient init(ingress.endpoint());
    init.send(bhttp::verb::post, "/mcp", post_headers(host), initialize_body(1));
    auto head = init.read_header(wait);
    if (head.status != 200) return std::string();
    const auto answer = response_text(init, wait);
    if (!answer || answer->find(R"("result")") == std::string::npos) return std::string();
    const auto sid = head.header("mcp-session-id");
    const auto ack = RawClient(ingress.endpoint())
                         .request(bhttp::verb::post, "/mcp", post_headers(host, sid, "2025-11-25"),
                                  kInitialized);
    return ack.status == 202 ? sid : std::string();
  };
  std::atomic<int> next_id{2};
  auto echo = [&](const std::string& sid, const std::string& text) {
    RawClient c(ingress.endpoint());
    c.send(bhttp::verb::post, "/mcp", post_headers(host, sid, "2025-11-25"),
           request_body(next_id++, "tools/call",
                        R"({"name":"echo","arguments":{"text":")" + text + R"("}})"));
    const auto h = c.read_header(40s);
    if (h.status != 200) return std::string("HTTP ") + std::to_string(h.status);
    return response_text(c, 40s).value_or("no answer");
  };
  const auto sid = open_session(20s);
  REQUIRE_FALSE(sid.empty());
  REQUIRE(echo(sid, "before").find("before") != std::string::npos);

  // The edge restarts empty; while the central broker's link to it is down (seconds), a call in
  // a live session and a new session's initialize are published on the central broker and do
  // not cross.
  edge.kill();
  edge.restart();
  const auto cut = std::chrono::steady_clock::now();
  auto in_flight = std::async(std::launch::async, [&] {
    auto r = echo(sid, "in the cut");
    return std::make_pair(r, std::chrono::steady_clock::now() - cut);
  });
  auto opened = std::async(std::launch::async, [&] {
    auto r = open_session(40s);
    return std::make_pair(r, std::chrono::steady_clock::now() - cut);
  });
  const auto [call, call_took] = in_flight.get();
  const auto [new_sid, open_took] = opened.get();
  INFO(ingress.proc->log());
  // Answered when the server's presence came back across the link - not after the call's
  // 60 s timeout, nor the initialize's 30 s.
  INFO(call);
  CHECK((call.find("in the cut") != std::string::npos ||
         call.find(R"("retriable":true)") != std::string::npos));
  CHECK(call_took < 20s);
  CHECK_FALSE(new_sid.empty());
  CHECK(open_took < 20s);
  if (!new_sid.empty()) CHECK(echo(new_sid, "new").find("new") != std::string::npos);

  // The egress pinged its clients when it was back on the edge, before the link was: a later
  // ping of the same check crossed it, and the SDK client's session lived on.
  const auto run = live.get();
  INFO(run.err);
  for (const auto& l : run.lines)
    UNSCOPED_INFO(l);
  INFO(egress.proc->log());
  const auto steps = run.all("step");
  REQUIRE(steps.size() == 3);
  CHECK(steps[1].find("after the edge restart") != std::string::npos);
  CHECK(run.exit_code == 0);
  CHECK(egress.proc->log().find("answered none of") == std::string::npos);
}

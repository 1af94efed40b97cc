// Replicas of the HTTP ingress (issue 32, docs/replicas.md), end to end: two or three real
// mcp-mqtt-bridge replicas with the same configuration and shared secret, one egress bridge in
// front of the test servers, one Mosquitto, and a real HAProxy balancing each request
// round-robin with no stickiness; the official SDK clients of both eras through the balancer, raw
// requests at each replica for the exact answers, and a replica killed under load.
#include <atomic>
#include <future>
#include <set>
#include <thread>

#include <catch2/catch.hpp>
#include <rapidjson/document.h>
#include <signal.h>

#include "tests/http/server_test_support.hpp"
#include "tests/support/bridge_process.hpp"
#include "tests/support/haproxy.hpp"
#include "tests/support/ingress_bridge.hpp"
#include "tests/support/mcp_messages.hpp"
#include "tests/support/modern_peers.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/mqtt_mcp_client.hpp"
#include "tests/support/node_tools.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mcpmqtt::test;
using namespace std::chrono_literals;
namespace bhttp = boost::beast::http;
namespace mp = mcpmqtt::test::modern_peers;

namespace {

const std::string kInitialize =
    R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",)"
    R"("capabilities":{},"clientInfo":{"name":"t","version":"1"}}})";

// The egress: the C++ test server and the v2 test server (reached in 2025-11-25, so the
// ingress runs MRTR rounds for 2026-07-28 clients), published on the broker.
struct Egress {
  explicit Egress(const Mosquitto& broker)
      : bridge(broker,
               R"({"demo/test": {"command": ")" MCPMQTT_TEST_SERVER R"("}, "test/sdk2": )"
               R"({"command": ")" +
                   node_binary() + R"(", "args": [")" + mp::sdk2_server_script() +
                   R"(", "--stdio"], "protocol": "legacy"}})",
               "demo/test") {
    REQUIRE(bridge.proc->wait_for_log("[directory] demo/test online"));
    REQUIRE(bridge.proc->wait_for_log("[directory] test/sdk2 online"));
  }
  Bridge bridge;
};

// `n` ingress replicas r1..rn with one secret file, serving no server of their own.
struct Replicas {
  // `replicas_extra`: more keys of ingress.replicas (", \"key\": value"); `secrets`: the
  // secret of each replica when they differ (default: one for all).
  // `server`: the default server, which each replica waits to see.
  Replicas(const Mosquitto& broker, int n, const std::string& replicas_extra = "",
           std::vector<std::string> secrets = {}, const std::string& server = "demo/test") {
    secret = dir.write("replica.secret", std::string(48, 's'));
    for (int i = 1; i <= n; ++i) {
      const auto file = static_cast<std::size_t>(i) <= secrets.size()
                            ? dir.write("secret" + std::to_string(i), secrets[i - 1])
                            : secret;
      all.push_back(std::make_unique<Bridge>(broker, "{}", "demo/test", "", "", "",
                                             R"(, "replicas": {"id": "r)" + std::to_string(i) +
                                                 R"(", "secret_file": ")" + file + "\"" +
                                                 replicas_extra + "}"));
    }
    // Each sees the others and the servers.
    for (auto& r : all) {
      REQUIRE(r->proc->wait_for_log("[directory] " + server + " online"));
      for (int i = 1; i <= n; ++i)
        if (r.get() != all[i - 1].get())
          REQUIRE(r->proc->wait_for_log("[relay] replica r" + std::to_string(i) + " is up"));
    }
  }
  std::vector<std::uint16_t> ports() const {
    std::vector<std::uint16_t> out;
    for (const auto& r : all)
      out.push_back(r->port);
    return out;
  }
  TempDir dir;
  std::string secret;
  std::vector<std::unique_ptr<Bridge>> all;
};

Headers mcp_headers(std::uint16_t port, const std::string& session = "") {
  Headers h{{"Host", "127.0.0.1:" + std::to_string(port)},
            {"Content-Type", "application/json"},
            {"Accept", "application/json, text/event-stream"}};
  if (!session.empty()) h.push_back({"Mcp-Session-Id", session});
  return h;
}

HttpResult post_to(std::uint16_t port, const std::string& body, const std::string& session = "",
                   std::chrono::milliseconds timeout = 30s) {
  RawClient c({boost::asio::ip::make_address("127.0.0.1"), port});
  return c.request(bhttp::verb::post, "/mcp", mcp_headers(port, session), body, timeout);
}

// An initialized session held by the replica on `port`.
std::string open_session(std::uint16_t port) {
  auto init = post_to(port, kInitialize);
  INFO(init.body);
  REQUIRE(init.status == 200);
  const auto id = init.header("mcp-session-id");
  REQUIRE(!id.empty());
  auto note = post_to(port, kInitialized, id);
  REQUIRE(note.status == 202);
  return id;
}

std::string metrics_of(const Bridge& b) {
  RawClient c(b.endpoint());
  return c.request(bhttp::verb::get, "/metrics", {{"Host", "127.0.0.1:" + std::to_string(b.port)}})
      .body;
}

// The value of one series line in a Prometheus text body, or -1.
double series(const std::string& metrics, const std::string& name_and_labels) {
  const auto at = metrics.find("\n" + name_and_labels + " ");
  if (at == std::string::npos) return -1;
  return std::stod(metrics.substr(at + name_and_labels.size() + 2));
}

// Waits (up to 10 s) until `b` has no relay in flight in `role`: a client that went away is
// seen by its connection at the stream's next write (a keep-alive comment at the latest), then
// by the relay.
bool settles(const Bridge& b, const std::string& role) {
  for (int i = 0; i < 100; ++i) {
    if (series(metrics_of(b), R"(mcpmqtt_relay_in_flight{role=")" + role + R"("})") == 0)
      return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

}  // namespace

TEST_CASE(
    "replicas: a 2025 session opened on one replica is served by another - POST with JSON and "
    "SSE answers, the GET stream, subscriptions/listen and DELETE relayed to its owner over MQTT "
    "5 request/response - and a forged or unknown session id gets 404",
    "[replicas]") {
  Mosquitto broker;
  Egress egress(broker);
  Replicas replicas(broker, 2);
  const auto p1 = replicas.all[0]->port;
  const auto p2 = replicas.all[1]->port;
  const auto session = open_session(p1);
  CHECK(session.rfind("r1.", 0) == 0);  // the id names its owner

  // A call through r2, answered as JSON (the request asks for either; the result is one message).
  auto call = post_to(p2, tool_call(2, "echo"), session);
  INFO(call.body);
  REQUIRE(call.status == 200);
  CHECK(call.body.find("hello") != std::string::npos);
  CHECK(call.header("mcp-session-id").empty() == call.header("mcp-session-id").empty());

  // An SSE answer through r2: a tool with progress streams its notification, then the result.
  {
    RawClient c(replicas.all[1]->endpoint());
    c.send(bhttp::verb::post, "/mcp", mcp_headers(p2, session),
           request_body(3, "tools/call",
                        R"({"name":"sleep","arguments":{"ms":50},"_meta":{"progressToken":"p"}})"));
    auto head = c.read_header();
    REQUIRE(head.status == 200);
    CHECK(head.header("content-type").find("text/event-stream") != std::string::npos);
    bool progress = false, result = false;
    for (int i = 0; i < 5 && !result; ++i) {
      auto m = c.next_message();
      REQUIRE(m);
      auto msg = m->message();
      REQUIRE(msg);
      if (msg->method() == "notifications/progress") progress = true;
      if (msg->id() == mcpmqtt::jsonrpc::Id::integer(3)) result = true;
    }
    CHECK(progress);
    CHECK(result);
  }

  // The GET stream through r2: it opens, and a server notification reaches it.
  {
    RawClient stream(replicas.all[1]->endpoint());
    stream.send(bhttp::verb::get, "/mcp",
                {{"Host", "127.0.0.1:" + std::to_string(p2)},
                 {"Accept", "text/event-stream"},
                 {"Mcp-Session-Id", session}},
                "");
    auto head = stream.read_header();
    REQUIRE(head.status == 200);
    CHECK(head.header("content-type").find("text/event-stream") != std::string::npos);
    // Another session makes the server publish a list change: every session's MQTT
    // connection hears it, and r1 writes it to this session's GET stream, through r2.
    const auto other = open_session(p2);
    auto notify = post_to(p2,
                          request_body(4, "tools/call",
                                       R"({"name":"notify","arguments":)"
                                       R"({"method":"notifications/tools/list_changed"}})"),
                          other);
    REQUIRE(notify.status == 200);
    bool got = false;
    for (int i = 0; i < 5 && !got; ++i) {
      auto m = stream.next_message(5s);
      if (!m) break;
      auto msg = m->message();
      got = msg && msg->is_notification();
    }
    CHECK(got);
  }

  // subscriptions/listen (000) through r2: the acknowledgement, then a list change another
  // session causes, tagged with the listen's id, on the relayed stream.
  {
    RawClient listen(replicas.all[1]->endpoint());
    listen.send(bhttp::verb::post, "/mcp", mcp_headers(p2, session),
                R"({"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":)"
                R"({"notifications":{"toolsListChanged":true}}})");
    REQUIRE(listen.read_header().status == 200);
    auto ack = listen.next_message();
    REQUIRE(ack);
    CHECK(ack->message()->method() == "notifications/subscriptions/acknowledged");
    const auto other = open_session(p1);
    REQUIRE(post_to(p1,
                    request_body(5, "tools/call",
                                 R"({"name":"notify","arguments":)"
                                 R"({"method":"notifications/tools/list_changed"}})"),
                    other)
                .status == 200);
    auto change = listen.next_message();
    REQUIRE(change);
    CHECK(change->message()->method() == "notifications/tools/list_changed");
    CHECK(change->data.find(R"("io.modelcontextprotocol/subscriptionId":"L")") !=
          std::string::npos);
  }

  // A forged id (the MAC does not match), another secret's id, an id of no replica: 404 at once.
  auto forged = session;
  forged.back() = forged.back() == 'A' ? 'B' : 'A';
  CHECK(post_to(p2, tool_call(5, "echo"), forged).status == 404);
  CHECK(post_to(p2, tool_call(6, "echo"), "r1.AAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA")
            .status == 404);
  CHECK(post_to(p2, tool_call(7, "echo"), "0123456789abcdef").status == 404);

  // DELETE through r2 ends the session on r1.
  {
    RawClient c(replicas.all[1]->endpoint());
    auto del =
        c.request(bhttp::verb::delete_, "/mcp",
                  {{"Host", "127.0.0.1:" + std::to_string(p2)}, {"Mcp-Session-Id", session}}, "");
    CHECK(del.status == 200);
  }
  CHECK(post_to(p1, tool_call(8, "echo"), session).status == 404);
  CHECK(post_to(p2, tool_call(9, "echo"), session).status == 404);

  // echo, the SSE call, DELETE, the POST after it (counted a moment after the client has its
  // answer); the GET stream ended with its client.
  for (int i = 0;
       i < 50 && series(metrics_of(*replicas.all[1]),
                        R"(mcpmqtt_relay_requests_total{role="sent",outcome="answered"})") < 4;
       ++i)
    std::this_thread::sleep_for(100ms);
  const auto m2 = metrics_of(*replicas.all[1]);
  CHECK(series(m2, R"(mcpmqtt_relay_requests_total{role="sent",outcome="answered"})") >= 4);
  CHECK(series(m2, R"(mcpmqtt_relay_requests_total{role="sent",outcome="client_gone"})") >= 1);
  const auto m1 = metrics_of(*replicas.all[0]);
  CHECK(series(m1, R"(mcpmqtt_relay_requests_total{role="served",outcome="served"})") >= 5);
  CHECK(settles(*replicas.all[0], "served"));
}

TEST_CASE(
    "replicas behind HAProxy round-robin, no stickiness: the official SDK clients of both eras - "
    "v1 with tools, resources and a session GET stream, v2 in 2025, v2 pinned to 2026-07-28 "
    "with MRTR elicitation and sampling rounds across replicas - work as against one bridge",
    "[replicas][sdk][sdk2]") {
  Mosquitto broker;
  Egress egress(broker);
  Replicas replicas(broker, 3);
  Haproxy lb(replicas.ports());

  // SDK v1 (2025 sessions): every request after initialize lands on another replica than the
  // last.
  {
    auto run =
        run_sdk_client({"--url", lb.url()},
                       R"({"steps":[{"op":"listTools"},)"
                       R"({"op":"callTool","name":"echo","arguments":{"text":"a"}},)"
                       R"({"op":"callTool","name":"echo","arguments":{"text":"b"}},)"
                       R"({"op":"callTool","name":"sleep","arguments":{"ms":20},"progress":true},)"
                       R"({"op":"ping"},{"op":"listTools"},)"
                       R"({"op":"callTool","name":"echo","arguments":{"text":"c"}},)"
                       R"({"op":"terminateSession"}]})");
    INFO(run.err);
    for (const auto& l : run.lines)
      UNSCOPED_INFO(l);
    REQUIRE(run.exit_code == 0);
    for (const auto& s : run.all("step"))
      CHECK(json_at(s, "ok").value_or("") == "true");
  }
  // SDK v2 in the 2025 era, and pinned to 2026-07-28 with MRTR rounds: a retry carrying
  // requestState that reaches another replica is relayed to the one holding the parked request.
  const std::string mrtr = R"({"steps":[{"op":"listTools"},)"
                           R"({"op":"callTool","name":"ask_elicitation"},)"
                           R"({"op":"callTool","name":"ask_sampling","arguments":{"prompt":"Hi"}},)"
                           R"({"op":"callTool","name":"list_roots"},)"
                           R"({"op":"callTool","name":"ask_elicitation"}]})";
  for (const std::string mode : {"legacy", "pin"}) {
    INFO("version mode " << mode);
    auto run =
        mp::run_client({"--url", lb.url("/servers/test/sdk2/mcp"), "--version-mode", mode}, mrtr);
    INFO(run.err);
    for (const auto& l : run.lines)
      UNSCOPED_INFO(l);
    REQUIRE(run.exit_code == 0);
    auto connected = run.line("connected");
    REQUIRE(connected);
    CHECK(json_at(*connected, "era").value_or("") == (mode == "pin" ? "modern" : "legacy"));
    int calls = 0;
    for (const auto& s : run.all("step")) {
      if (json_at(s, "op").value_or("") != "callTool") continue;
      ++calls;
      CHECK(json_at(s, "ok").value_or("") == "true");
    }
    CHECK(calls == 4);
    CHECK(run.all("serverRequest").size() == 5);  // elicitation ×2, sampling ×2, roots
  }
  // Relays happened on every replica, each way, and none is left in flight.
  double sent = 0, served = 0;
  for (const auto& r : replicas.all) {
    const auto m = metrics_of(*r);
    sent +=
        std::max(0.0, series(m, R"(mcpmqtt_relay_requests_total{role="sent",outcome="answered"})"));
    served +=
        std::max(0.0, series(m, R"(mcpmqtt_relay_requests_total{role="served",outcome="served"})"));
    CHECK(settles(*r, "sent"));
    CHECK(settles(*r, "served"));
  }
  CHECK(sent >= 10);
  CHECK(served >= sent);
}

TEST_CASE(
    "replicas: one replica killed under load of both eras - every request is answered or refused "
    "with an error, none hangs, the dead replica's sessions get 404 at once, new sessions work "
    "within seconds, and no relayed request is left without an answer",
    "[replicas][faults]") {
  Mosquitto broker;
  Egress egress(broker);
  Replicas replicas(broker, 2);
  Haproxy lb(replicas.ports());
  const auto p1 = replicas.all[0]->port;
  const auto p2 = replicas.all[1]->port;
  // Sessions on each replica.
  std::vector<std::string> on_r1, on_r2;
  for (int i = 0; i < 4; ++i) {
    on_r1.push_back(open_session(p1));
    on_r2.push_back(open_session(p2));
  }
  // Load: slow calls relayed from r2 to r1's sessions, and 2026-07-28 calls through the
  // balancer, all in flight when r1 dies.
  std::vector<std::future<HttpResult>> relayed;
  for (const auto& s : on_r1)
    relayed.push_back(std::async(std::launch::async, [p2, s] {
      return post_to(p2,
                     request_body(20, "tools/call", R"({"name":"sleep","arguments":{"ms":3000}})"),
                     s, 20s);
    }));
  std::atomic<bool> stop{false};
  std::atomic<int> modern_answered{0}, modern_unanswered{0};
  std::thread modern_load([&] {
    const std::string body =
        R"({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":)"
        R"({"text":"m"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",)"
        R"("io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},)"
        R"("io.modelcontextprotocol/clientCapabilities":{}}}})";
    while (!stop) {
      RawClient c({boost::asio::ip::make_address("127.0.0.1"), lb.port()});
      Headers h = mcp_headers(lb.port());
      h.push_back({"MCP-Protocol-Version", "2026-07-28"});
      h.push_back({"Mcp-Method", "tools/call"});
      h.push_back({"Mcp-Name", "echo"});
      auto r = c.request(bhttp::verb::post, "/mcp", h, body, 15s);
      (r.ok ? modern_answered : modern_unanswered)++;
    }
  });
  std::this_thread::sleep_for(500ms);
  ::kill(replicas.all[0]->proc->pid(), SIGKILL);
  const auto killed = std::chrono::steady_clock::now();

  // Relayed requests in flight to r1: each answered with an error (its owner is gone) - 404
  // if nothing had come yet, else the error as the last event of its stream - none hangs.
  for (auto& f : relayed) {
    auto r = f.get();
    INFO(r.body);
    CHECK(r.ok);
    CHECK((r.status == 404 || (r.status == 200 && r.body.find(R"("error")") != std::string::npos &&
                               r.body.find("is gone") != std::string::npos)));
  }
  CHECK(std::chrono::steady_clock::now() - killed < 10s);
  // r1's sessions: 404 at once from r2 (the client initializes again); r2's keep working.
  for (const auto& s : on_r1) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = post_to(p2, tool_call(30, "echo"), s);
    CHECK(r.status == 404);
    CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  }
  for (const auto& s : on_r2)
    CHECK(post_to(p2, tool_call(31, "echo"), s).status == 200);
  // New sessions through the balancer within a few seconds.
  bool fresh = false;
  for (int i = 0; i < 50 && !fresh; ++i) {
    auto init = post_to(lb.port(), kInitialize);
    fresh = init.status == 200;
    if (!fresh) std::this_thread::sleep_for(100ms);
  }
  CHECK(fresh);
  stop = true;
  modern_load.join();
  CHECK(modern_answered > 0);
  CHECK(modern_unanswered == 0);
  CHECK(settles(*replicas.all[1], "sent"));
  INFO(lb.log());
}

TEST_CASE(
    "replicas: relay bounds - an owner that does not answer in time gets its relayed request "
    "503 after ingress.replicas.relay_timeout_ms, past max_relays a request gets 503 at once, "
    "and the owner serves again once it runs",
    "[replicas][faults]") {
  Mosquitto broker;
  Egress egress(broker);
  Replicas replicas(broker, 2, R"(, "relay_timeout_ms": 700, "max_relays": 1)");
  const auto p1 = replicas.all[0]->port;
  const auto p2 = replicas.all[1]->port;
  const auto session = open_session(p1);
  // r1 frozen: its connections stay up (no will), it answers nothing.
  ::kill(replicas.all[0]->proc->pid(), SIGSTOP);
  auto first = std::async(std::launch::async,
                          [&] { return post_to(p2, tool_call(2, "echo"), session, 10s); });
  std::this_thread::sleep_for(200ms);
  const auto t0 = std::chrono::steady_clock::now();
  auto second = post_to(p2, tool_call(3, "echo"), session, 10s);
  CHECK(std::chrono::steady_clock::now() - t0 < 500ms);
  CHECK(second.status == 503);
  CHECK(second.error_message().find("ingress.replicas.max_relays") != std::string::npos);
  CHECK(second.body.find(R"("id":3)") != std::string::npos);
  auto timed_out = first.get();
  CHECK(timed_out.status == 503);
  CHECK(timed_out.error_message().find("did not answer within") != std::string::npos);
  CHECK(timed_out.body.find(R"("id":2)") != std::string::npos);
  ::kill(replicas.all[0]->proc->pid(), SIGCONT);
  // Once r1 runs again, relays to it work.
  unsigned status = 0;
  for (int i = 0; i < 50 && status != 200; ++i) {
    status = post_to(p2, tool_call(4, "echo"), session).status;
    if (status != 200) std::this_thread::sleep_for(100ms);
  }
  CHECK(status == 200);
  const auto m2 = metrics_of(*replicas.all[1]);
  CHECK(series(m2, R"(mcpmqtt_relay_requests_total{role="sent",outcome="refused"})") >= 1);
  CHECK(series(m2, R"(mcpmqtt_relay_requests_total{role="sent",outcome="failed"})") >= 1);
}

TEST_CASE(
    "replicas: relay messages without the secret are ignored - a replica with another secret "
    "cannot read r1's session ids (404, nothing relayed), and a client publishing a request on "
    "the relay topics is not served",
    "[replicas][faults]") {
  Mosquitto broker;
  Egress egress(broker);
  Replicas replicas(broker, 2, R"(, "relay_timeout_ms": 700)",
                    {std::string(48, 's'), std::string(48, 'x')});
  const auto p1 = replicas.all[0]->port;
  const auto p2 = replicas.all[1]->port;
  const auto session = open_session(p1);
  // r2 cannot check r1's ids: 404 as for any unknown id, no relay.
  CHECK(post_to(p2, tool_call(2, "echo"), session).status == 404);
  // A request forged on the broker, with a Response Topic and Correlation Data: ignored.
  auto pub = Process::start(
      Process::piped({"mosquitto_pub", "-h", "127.0.0.1", "-p", std::to_string(broker.port()), "-V",
                      "mqttv5", "-t", "$mcp-bridge/relay/r1/request", "-D", "publish",
                      "response-topic", "$mcp-bridge/relay/evil/reply", "-D", "publish",
                      "correlation-data", "c1", "-m", "forged request without a MAC"}));
  pub->read_all(5s);
  REQUIRE(replicas.all[0]->proc->wait_for_log("without a valid MAC is ignored"));
  const auto m1 = metrics_of(*replicas.all[0]);
  CHECK(series(m1, R"(mcpmqtt_relay_requests_total{role="served",outcome="served"})") <= 0);
}

TEST_CASE(
    "replicas: the conformance suite 0.2.0-alpha.12 (requirements 2026-07-28 with its MRTR "
    "scenarios, and 2025-11-25 with its sessions) gives the same result through HAProxy over "
    "two replicas as through one replica, scenario by scenario and check by check",
    "[replicas][conformance][serial]") {
  Mosquitto broker;
  Bridge egress(broker,
                R"({"test/fixture2": {"command": ")" + node_binary() + R"(", "args": [")" +
                    mp::fixture2_script() + R"(", "--stdio"]}})",
                "test/fixture2", R"("egress": {"max_sessions_per_server": 128}, )");
  REQUIRE(egress.proc->wait_for_log("[directory] test/fixture2 online"));
  Replicas replicas(broker, 2, "", {}, "test/fixture2");
  Haproxy lb(replicas.ports());
  const std::string path = "/servers/test/fixture2/mcp";
  // The one timing check of the 2026-07-28 set that may differ through any bridge (see
  // modern_ingress_integration_test.cpp, same_as_direct_2026).
  const std::set<std::string> known = {
      "server-stateless/sep-2575-http-server-no-independent-requests-on-stream"};
  for (const std::string requirements : {"2026-07-28", "2025-11-25"}) {
    INFO("requirements " << requirements);
    TempDir out;
    std::string log;
    auto one =
        mp::run_conformance(replicas.all[0]->url(path), out.path() + "/one", requirements, &log);
    INFO(log);
    REQUIRE(one);
    auto balanced = mp::run_conformance(lb.url(path), out.path() + "/lb", requirements, &log);
    INFO(log);
    REQUIRE(balanced);
    auto same = mp::compare_except(*one, *balanced, false, known);
    INFO(same.output);
    CHECK(same.unexpected.empty());
    auto strict = mp::compare_except(*one, *balanced, true, known);
    INFO(strict.output);
    CHECK(strict.unexpected.empty());
  }
  // Through the balancer, requests did cross replicas.
  double sent = 0;
  for (const auto& r : replicas.all)
    sent += std::max(
        0.0,
        series(metrics_of(*r), R"(mcpmqtt_relay_requests_total{role="sent",outcome="answered"})"));
  CHECK(sent > 0);
}

namespace {

const std::string kModernMeta =
    R"("_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",)"
    R"("io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},)"
    R"("io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}})";

HttpResult modern_call(std::uint16_t port, int id, const std::string& more_params = "") {
  RawClient c({boost::asio::ip::make_address("127.0.0.1"), port});
  Headers h = mcp_headers(port);
  h.push_back({"MCP-Protocol-Version", "2026-07-28"});
  h.push_back({"Mcp-Method", "tools/call"});
  h.push_back({"Mcp-Name", "ask_elicitation"});
  return c.request(
      bhttp::verb::post, "/servers/test/sdk2/mcp", h,
      R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
          R"(,"method":"tools/call","params":{"name":"ask_elicitation","arguments":{},)" +
          kModernMeta + more_params + "}}",
      20s);
}

// The retry's params of an input_required result: its requestState, and an accepting answer to
// each of its input requests (basic/patterns/mrtr).
std::string retry_params(const std::string& body) {
  rapidjson::Document d;
  d.Parse(body.data(), body.size());
  REQUIRE(d.IsObject());
  const auto& result = d["result"];
  REQUIRE(std::string(result["resultType"].GetString()) == "input_required");
  std::string answers;
  for (const auto& m : result["inputRequests"].GetObject())
    answers += (answers.empty() ? "" : ",") + mcpmqtt::jsonrpc::quote(m.name.GetString()) +
               R"(:{"action":"accept","content":{"name":"relayed"}})";
  return R"(,"requestState":)" + mcpmqtt::jsonrpc::quote(result["requestState"].GetString()) +
         R"(,"inputResponses":{)" + answers + "}";
}

}  // namespace

TEST_CASE(
    "replicas: an MRTR retry (basic/patterns/mrtr) that reaches another replica is relayed to the "
    "one holding the parked request and completes there, and when that replica is gone the retry "
    "gets the revision's invalid_request_state error at once",
    "[replicas][modern-ingress][faults]") {
  Mosquitto broker;
  Egress egress(broker);
  Replicas replicas(broker, 2);
  const auto p1 = replicas.all[0]->port;
  const auto p2 = replicas.all[1]->port;

  auto asked = modern_call(p1, 1);
  INFO(asked.body);
  REQUIRE(asked.status == 200);
  auto done = modern_call(p2, 1, retry_params(asked.body));
  INFO(done.body);
  CHECK(done.status == 200);
  CHECK(json_at(done.body, "result.resultType").value_or("") == "complete");
  CHECK(json_at(done.body, "result.structuredContent.answer.content.name").value_or("") ==
        "relayed");

  auto parked = modern_call(p1, 2);
  REQUIRE(parked.status == 200);
  ::kill(replicas.all[0]->proc->pid(), SIGKILL);
  REQUIRE(replicas.all[1]->proc->wait_for_log("[relay] replica r1 is gone"));
  const auto t0 = std::chrono::steady_clock::now();
  auto stale = modern_call(p2, 2, retry_params(parked.body));
  INFO(stale.body);
  CHECK(std::chrono::steady_clock::now() - t0 < 1s);
  CHECK(stale.status == 200);  // in-band, as the revision's SDK expects it
  CHECK(stale.error_code() == -32602);
  CHECK(json_at(stale.body, "error.data.reason").value_or("") == "invalid_request_state");
  CHECK(json_at(stale.body, "id").value_or("") == "2");
}

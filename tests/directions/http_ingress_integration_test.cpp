// HTTP ingress end to end: Streamable HTTP clients reach MQTT-hosted servers through the real
// mcp-mqtt-bridge, a real Mosquitto and the stdio egress. The clients are the official MCP
// TypeScript SDK and the MCP conformance suite (from npm), and a raw HTTP client for the
// malformed requests.
#include <thread>

#include <catch2/catch.hpp>
#include <signal.h>

#include "tests/http/server_test_support.hpp"
#include "tests/support/bridge_process.hpp"
#include "tests/support/engine.hpp"
#include "tests/support/ingress_bridge.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/mqtt_mcp_client.hpp"
#include "tests/support/node_tools.hpp"
#include "tests/support/observer.hpp"

using namespace mcpmqtt::test;
using namespace std::chrono_literals;
namespace bhttp = boost::beast::http;
namespace jsonrpc = mcpmqtt::jsonrpc;

namespace {

std::string everything_entry() {
  return R"({"demo/everything": {"command": ")" + node_binary() + R"(", "args": [")" +
         server_everything() + R"(", "stdio"], "description": "reference server"}})";
}

const std::string kSampling =
    R"("responders":{"sampling":{"result":{"role":"assistant","content":{"type":"text","text":"sampled over MQTT"},"model":"m","stopReason":"endTurn"}}})";

const mcpmqtt::test::Headers kPostHeaders = {{"Content-Type", "application/json"},
                                             {"Accept", "application/json, text/event-stream"}};

}  // namespace

TEST_CASE(
    "HTTP ingress: the official TypeScript SDK client initializes, lists and calls tools of "
    "server-everything through the bridge",
    "[ingress][sdk]") {
  Mosquitto broker;
  Bridge bridge(broker, everything_entry(), "demo/everything");
  REQUIRE(bridge.proc->wait_for_log("[directory] demo/everything online"));
  auto run = run_sdk_client(
      {"--url", bridge.url()},
      "{" + kSampling +
          R"(,"steps":[{"op":"listTools"},{"op":"callTool","name":"echo","arguments":{"message":"hello"}},)"
          R"({"op":"callTool","name":"trigger-sampling-request","arguments":{"prompt":"hi","maxTokens":5}},)"
          R"({"op":"callTool","name":"trigger-long-running-operation","arguments":{"duration":1,"steps":3},"progress":true}]})");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  auto connected = run.line("connected");
  REQUIRE(connected);
  CHECK(json_at(*connected, "serverInfo.title") == "Everything Reference Server");
  auto tools = run.line("step", "listTools");
  REQUIRE(tools);
  CHECK(tools->find(R"("name":"echo")") != std::string::npos);
  auto steps = run.all("step");
  REQUIRE(steps.size() == 4);
  CHECK(json_at(steps[1], "result.content.0.text") == "Echo: hello");
  CHECK(steps[2].find("sampled over MQTT") != std::string::npos);  // the sampling round trip
  CHECK(json_at(steps[3], "ok") == "true");
  // Progress reached the stream of the request that carried the token.
  std::size_t progress = 0;
  for (const auto& n : run.all("notification")) {
    if (json_at(n, "method") == "notifications/progress") ++progress;
  }
  CHECK(progress == 3);
}

TEST_CASE(
    "HTTP ingress with mqtt.qos 0: the SDK client calls a tool through Mosquitto and the stdio "
    "egress and every MCP message crosses the broker at QoS 0",
    "[ingress][sdk][qos]") {
  Mosquitto broker;
  // The observer subscribes at QoS 1: what it receives carries the publisher's QoS (MQTT 5
  // §3.8.4: delivery at the lower of the two).
  Observer watch(broker.url());
  watch.subscribe("$mcp-rpc/#");
  watch.subscribe("$mcp-server/#");
  watch.subscribe("$mcp-client/#");
  Bridge bridge(broker, R"({"test/qos0": {"command": ")" MCPMQTT_TEST_SERVER R"("}})", "test/qos0",
                "", "", R"(, "qos": 0)");
  REQUIRE(bridge.proc->wait_for_log("[directory] test/qos0 online"));
  auto run = run_sdk_client(
      {"--url", bridge.url()},
      R"({"steps":[{"op":"callTool","name":"echo","arguments":{"text":"at most once"}}]})");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  auto steps = run.all("step");
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].find("at most once") != std::string::npos);
  const auto seen = watch.drain(500ms);
  std::size_t rpc = 0, at_qos1 = 0;
  for (const auto& m : seen) {
    if (m.topic.rfind("$mcp-rpc/", 0) == 0) ++rpc;
    if (m.qos != 0) {
      UNSCOPED_INFO(m.topic << " at QoS " << m.qos);
      ++at_qos1;
    }
  }
  CHECK(rpc >= 4);  // initialize and tools/call, each a request and a response
  CHECK(at_qos1 == 0);
}

TEST_CASE(
    "HTTP ingress: the conformance suite passes every server scenario through the bridge, "
    "with the same result as against the fixture directly",
    "[ingress][conformance]") {
  TempDir out;
  FixtureHttpServer direct;
  std::string log;
  auto a = run_conformance(direct.url, out.path() + "/direct", &log);
  INFO(log);
  REQUIRE(a);

  Mosquitto broker;
  Bridge bridge(broker,
                R"({"test/conformance": {"command": ")" + node_binary() + R"(", "args": [")" +
                    fixture_script() + R"(", "--stdio"]}})",
                "test/conformance", R"("egress": {"max_sessions_per_server": 64}, )");
  REQUIRE(bridge.proc->wait_for_log("[directory] test/conformance online"));
  auto b = run_conformance(bridge.url(), out.path() + "/bridged", &log);
  INFO(log);
  REQUIRE(b);
  auto all_pass = compare_conformance({"--all-pass", *b, "--min-scenarios", "32"});
  INFO(all_pass.out << all_pass.err);
  CHECK(all_pass.exit_code == 0);
  auto same = compare_conformance({*a, *b});
  INFO(same.out << same.err);
  CHECK(same.exit_code == 0);
}

namespace {

// The bridge's lines about refused sessions (what kept every session from making room).
std::string refusals(const std::string& log) {
  std::string out;
  std::size_t start = 0, n = 0;
  while (start < log.size() && n < 5) {
    auto end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const auto line = log.substr(start, end - start);
    if (line.find("refused client") != std::string::npos) {
      out += line + "\n";
      ++n;
    }
    start = end + 1;
  }
  return out;
}

// The conformance suite's client opens one session per scenario and never sends DELETE: run back
// to back, each run finds the server at its max_sessions with the last run's sessions, quiet
// for milliseconds only. Every run must have the passes of the first (no client refused: the
// least recently active sessions make room), and a new client works afterwards. Ten runs on the
// native engine; three on Paho, where what is tested is the same and the engine only carries it.
void suite_back_to_back(const Bridge& bridge, const std::string& out) {
  const int runs = paho_under_test() ? 3 : 10;
  std::string first;
  for (int run = 1; run <= runs; ++run) {
    std::string log;
    const auto started = std::chrono::steady_clock::now();
    auto result = run_conformance(bridge.url(), out + "/run" + std::to_string(run), &log);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - started)
                          .count();
    INFO("run " << run << " (" << took << " ms): " << log);
    REQUIRE(result);
    UNSCOPED_INFO("run " << run << " took " << took << " ms");
    if (run == 1) {
      first = *result;
      auto all_pass = compare_conformance({"--all-pass", first, "--min-scenarios", "32"});
      INFO(all_pass.out << all_pass.err);
      CHECK(all_pass.exit_code == 0);
      continue;
    }
    auto same = compare_conformance({first, *result});
    INFO(same.out << same.err);
    INFO(refusals(bridge.proc->log()));
    CHECK(same.exit_code == 0);
  }
  const auto log = bridge.proc->log();
  CHECK(log.find("closed to make room for a new session") != std::string::npos);
  INFO(refusals(log));
  CHECK(log.find("refused client") == std::string::npos);
  // A client that comes afterwards is served.
  auto later = run_sdk_client(
      {"--url", bridge.url()},
      R"({"steps":[{"op":"listTools"},{"op":"callTool","name":"test_simple_text","arguments":{}}]})");
  INFO(later.err);
  REQUIRE(later.exit_code == 0);
  const auto steps = later.all("step");
  REQUIRE(steps.size() == 2);
  CHECK(steps[1].find("This is a simple text response for testing.") != std::string::npos);
}

}  // namespace

TEST_CASE(
    "HTTP ingress, stdio egress at its default limits: the conformance suite, whose client never "
    "sends DELETE, runs back to back against one bridge and every run has the passes of the "
    "first (abandoned sessions make room instead of locking clients out)",
    "[ingress][conformance][limits][engines]") {
  TempDir out;
  Mosquitto broker;
  // egress.max_sessions_per_stdio_server 32: a suite run opens at least 32 sessions and abandons
  // each; without them making room, the second run is refused.
  Bridge bridge(broker,
                R"({"test/conformance": {"command": ")" + node_binary() + R"(", "args": [")" +
                    fixture_script() + R"(", "--stdio"]}})",
                "test/conformance");
  REQUIRE(bridge.proc->wait_for_log("[directory] test/conformance online"));
  suite_back_to_back(bridge, out.path());
  // The egress never holds more than its 32 children.
  CHECK(children_of(bridge.proc->pid()).size() <= 32);
}

TEST_CASE(
    "HTTP ingress, HTTP egress of a fast server at 32 sessions: the conformance suite runs back "
    "to back with no pause and every run has the passes of the first (sessions quiet for "
    "milliseconds make room - no idle floor of seconds locks the client out)",
    "[ingress][http-egress][conformance][limits][engines]") {
  TempDir out;
  FixtureHttpServer upstream;  // answers in a few milliseconds
  Mosquitto broker;
  Bridge bridge(
      broker,
      R"({"test/conformance-http": {"url": ")" + upstream.url + R"(", "max_sessions": 32}})",
      "test/conformance-http");
  REQUIRE(bridge.proc->wait_for_log("[directory] test/conformance-http online"));
  suite_back_to_back(bridge, out.path());
}

TEST_CASE(
    "HTTP ingress: malformed requests get the documented status and error, and the bridge "
    "keeps serving",
    "[ingress][malformed]") {
  Mosquitto broker;
  Bridge bridge(broker, everything_entry(), "demo/everything", "",
                R"(, "limits": {"max_body_bytes": 4096})");
  REQUIRE(bridge.proc->wait_for_log("[directory] demo/everything online"));
  const std::string host = "127.0.0.1:" + std::to_string(bridge.port);
  RawClient c(bridge.endpoint());

  // docs/bad-input.md's status table, through the real daemon.
  auto r = c.request(bhttp::verb::post, "/mcp", post_headers(host), "{not json");
  CHECK(r.status == 400);
  CHECK(r.error_code() == -32700);

  r = c.request(
      bhttp::verb::post, "/mcp",
      {{"Host", host}, {"Accept", "application/json"}, {"Content-Type", "application/json"}},
      initialize_body());
  CHECK(r.status == 406);

  r = c.request(bhttp::verb::post, "/mcp",
                {{"Host", host},
                 {"Accept", "application/json, text/event-stream"},
                 {"Content-Type", "text/plain"}},
                initialize_body());
  CHECK(r.status == 415);

  r = c.request(bhttp::verb::post, "/mcp", post_headers(host, "0123456789abcdef0123456789abcdef"),
                request_body(2, "tools/list"));
  CHECK(r.status == 404);
  CHECK(r.error_code() == -32001);

  r = c.request(bhttp::verb::post, "/mcp", post_headers(host), request_body(3, "tools/list"));
  CHECK(r.status == 400);
  CHECK(r.error_code() == -32000);

  auto evil = post_headers(host);
  evil.emplace_back("Origin", "http://evil.example");
  r = c.request(bhttp::verb::post, "/mcp", evil, initialize_body());
  CHECK(r.status == 403);
  CHECK(r.error_code() == -32000);

  r = c.request(bhttp::verb::post, "/mcp",
                {{"Host", "evil.example"},
                 {"Accept", "application/json, text/event-stream"},
                 {"Content-Type", "application/json"}},
                initialize_body());
  CHECK(r.status == 403);

  RawClient big(bridge.endpoint());
  r = big.request(bhttp::verb::post, "/mcp", post_headers(host),
                  R"({"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":")" +
                      std::string(8000, 'x') + "\"}}");
  CHECK(r.status == 413);

  // The bridge is still serving: a whole session over raw HTTP.
  RawClient good(bridge.endpoint());
  good.send(bhttp::verb::post, "/mcp", post_headers(host), initialize_body(1, "2025-06-18"));
  auto head = good.read_header();
  REQUIRE(head.status == 200);
  const auto sid = head.header("mcp-session-id");
  REQUIRE_FALSE(sid.empty());
  auto init = sse_response(good);
  REQUIRE(init);
  CHECK(init->kind() == jsonrpc::Kind::result);
  auto ack =
      good.request(bhttp::verb::post, "/mcp", post_headers(host, sid, "2025-06-18"), kInitialized);
  CHECK(ack.status == 202);
  // An unsupported protocol version header on that session: 400 naming the supported ones.
  r = good.request(bhttp::verb::post, "/mcp", post_headers(host, sid, "1999-01-01"),
                   request_body(4, "ping"));
  CHECK(r.status == 400);
  CHECK(r.error_message().find("2025-06-18") != std::string::npos);
  good.send(bhttp::verb::post, "/mcp", post_headers(host, sid, "2025-06-18"),
            request_body(5, "tools/list"));
  REQUIRE(good.read_header().status == 200);
  auto tools = sse_response(good);
  REQUIRE(tools);
  CHECK(std::string(tools->text()).find(R"("name":"echo")") != std::string::npos);
}

TEST_CASE(
    "HTTP ingress: a server-name with no live instance gets 503 with an error naming it "
    "and the filters",
    "[ingress]") {
  Mosquitto broker;
  Bridge bridge(broker, "{}", "");
  const std::string host = "127.0.0.1:" + std::to_string(bridge.port);
  RawClient c(bridge.endpoint());
  const auto start = std::chrono::steady_clock::now();
  auto r = c.request(bhttp::verb::post, "/servers/nobody/here/mcp", post_headers(host),
                     initialize_body());
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(r.status == 503);
  CHECK_FALSE(r.has("mcp-session-id"));
  CHECK(r.error_code() == -32000);
  CHECK(r.error_message() ==
        "no MCP server named \"nobody/here\" is online (waited 1000 ms for its presence on "
        "$mcp-server/presence/+/nobody/here; server-name filters in use: #)");
  CHECK(waited < 5s);  // bounded by ingress.presence_wait_ms, not a hang
  // /mcp without a default server says how to name one.
  r = c.request(bhttp::verb::post, "/mcp", post_headers(host), initialize_body());
  CHECK(r.status == 404);
  CHECK(r.error_message().find("/servers/{server-name}/mcp") != std::string::npos);
  // GET /servers lists the live directory.
  r = c.request(bhttp::verb::get, "/servers", {{"Host", host}});
  CHECK(r.status == 200);
  CHECK(r.body.rfind(R"({"filters":["#"],"servers":[)", 0) == 0);
}

TEST_CASE(
    "HTTP ingress: when the server instance goes away, pending requests get errors and the "
    "session answers 404 so the client re-initializes",
    "[ingress]") {
  Mosquitto broker;
  // Ingress and egress in two processes, so the egress can vanish.
  Bridge ingress(broker, "{}", "demo/everything");
  auto egress = std::make_unique<BridgeProcess>(
      std::vector<std::string>{"expose", "--broker", broker.url(), "--name", "demo/everything",
                               "--", node_binary(), server_everything(), "stdio"});
  REQUIRE(ingress.proc->wait_for_log("[directory] demo/everything online"));
  const std::string host = "127.0.0.1:" + std::to_string(ingress.port);
  RawClient c(ingress.endpoint());
  c.send(bhttp::verb::post, "/mcp", post_headers(host), initialize_body(1, "2025-06-18"));
  auto head = c.read_header();
  REQUIRE(head.status == 200);
  const auto sid = head.header("mcp-session-id");
  REQUIRE(sse_response(c));
  REQUIRE(c.request(bhttp::verb::post, "/mcp", post_headers(host, sid, "2025-06-18"), kInitialized)
              .status == 202);
  // A long call is in flight when the egress process dies.
  RawClient call(ingress.endpoint());
  call.send(
      bhttp::verb::post, "/mcp", post_headers(host, sid, "2025-06-18"),
      request_body(
          7, "tools/call",
          R"({"name":"trigger-long-running-operation","arguments":{"duration":30,"steps":30},"_meta":{"progressToken":"p7"}})"));
  REQUIRE(call.read_header().status == 200);
  // The first progress event: the call has crossed both bridges and the child is working on it.
  bool progressing = false;
  while (!progressing) {
    auto e = call.next_message(20s);
    REQUIRE(e);
    auto m = e->message();
    progressing = m && m->method() == "notifications/progress";
  }
  egress->process().signal_group(SIGKILL);
  std::optional<Message> answer;
  while (auto e = call.next_message(20s)) {
    auto m = e->message();
    if (m && m->is_response()) answer = m;
  }
  REQUIRE(answer);
  CHECK(answer->kind() == jsonrpc::Kind::error);
  CHECK(answer->error().message.find("went offline") != std::string::npos);
  auto after = c.request(bhttp::verb::post, "/mcp", post_headers(host, sid, "2025-06-18"),
                         request_body(8, "ping"));
  CHECK(after.status == 404);
}

TEST_CASE("HTTP ingress: DELETE ends the session and the MQTT server hears disconnected",
          "[ingress]") {
  Mosquitto broker;
  Bridge bridge(broker, everything_entry(), "demo/everything");
  REQUIRE(bridge.proc->wait_for_log("[directory] demo/everything online"));
  Observer watcher(broker.url());
  watcher.subscribe("$mcp-client/presence/+");
  const std::string host = "127.0.0.1:" + std::to_string(bridge.port);
  RawClient c(bridge.endpoint());
  c.send(bhttp::verb::post, "/mcp", post_headers(host), initialize_body(1, "2025-06-18"));
  auto head = c.read_header();
  REQUIRE(head.status == 200);
  const auto sid = head.header("mcp-session-id");
  REQUIRE(sse_response(c));
  auto del = c.request(bhttp::verb::delete_, "/mcp", {{"Host", host}, {"Mcp-Session-Id", sid}});
  CHECK(del.status == 200);
  auto bye = watcher.next(10s);
  REQUIRE(bye);
  CHECK(bye->payload == R"({"jsonrpc":"2.0","method":"notifications/disconnected"})");
  CHECK(c.request(bhttp::verb::post, "/mcp", post_headers(host, sid, "2025-06-18"),
                  request_body(2, "ping"))
            .status == 404);
}

// Stdio egress end to end: the real mcp-mqtt-bridge publishes stdio MCP servers (the pinned
// @modelcontextprotocol/server-everything, and a small test child) on a real Mosquitto, and an
// independent MCP client on MQTT uses them.
#include <filesystem>
#include <thread>

#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/resource.h>

#include "tests/support/bridge_process.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/mqtt_mcp_client.hpp"
#include "tests/support/wait.hpp"

using namespace mcpmqtt::test;
using namespace std::chrono_literals;

namespace {

const std::string kEverything = "demo/everything";

// `mcp-mqtt-bridge expose` as README.md documents it, with the pinned Node instead of npx.
std::unique_ptr<BridgeProcess> expose_everything(const Mosquitto& broker) {
  auto b = std::make_unique<BridgeProcess>(std::vector<std::string>{
      "expose", "--broker", broker.url(), "--name", kEverything, "--description",
      "The MCP reference server", "--", node_binary(), server_everything(), "stdio"});
  REQUIRE(b->wait_for_log("[server demo/everything] online"));
  return b;
}

std::string config_with(const Mosquitto& broker, const std::string& servers,
                        const std::string& extra = "") {
  return R"({"mqtt": {"url": ")" + broker.url() + R"("}, "http": {"enabled": false}, )" + extra +
         R"("mcpServers": )" + servers + "}";
}

}  // namespace

TEST_CASE("stdio egress: an MQTT client lists and calls the tools of server-everything",
          "[egress]") {
  Mosquitto broker;
  auto bridge = expose_everything(broker);
  McpMqttClient client(broker.url(), kEverything);
  auto init = client.initialize();
  REQUIRE(init);
  CHECK(json_at(*init, "result.serverInfo.name").value_or("").find("everything") !=
        std::string::npos);
  auto tools = client.request("tools/list");
  REQUIRE(tools);
  CHECK(tools->find(R"("name":"echo")") != std::string::npos);
  auto call =
      client.request("tools/call", R"({"name":"echo","arguments":{"message":"hello over MQTT"}})");
  REQUIRE(call);
  CHECK(json_at(*call, "result.content.0.text") == "Echo: hello over MQTT");
  // The presence the bridge published carries the description.
  Observer watcher(broker.url());
  watcher.subscribe("$mcp-server/presence/+/" + kEverything);
  auto p = watcher.next();
  REQUIRE(p);
  CHECK(json_at(p->payload, "params.description") == "The MCP reference server");
  CHECK(bridge->terminate() == 0);
}

TEST_CASE(
    "stdio egress: the child's sampling request reaches the MQTT client and the answer "
    "returns to the child",
    "[egress]") {
  Mosquitto broker;
  auto bridge = expose_everything(broker);
  McpMqttClient client(broker.url(), kEverything);
  REQUIRE(client.initialize(R"({"sampling":{}})"));
  const int call = client.send_request(
      "tools/call",
      R"({"name":"trigger-sampling-request","arguments":{"prompt":"What is MQTT?","maxTokens":20}})");
  auto sampling = client.next_containing("sampling/createMessage", 20s);
  REQUIRE(sampling);
  CHECK(sampling->topic == client.rpc_topic());
  const auto id = json_at(sampling->payload, "id");
  REQUIRE(id);
  client.respond(
      *id,
      R"({"role":"assistant","content":{"type":"text","text":"A publish/subscribe protocol."},"model":"test-model","stopReason":"endTurn"})");
  auto result = client.response(call);
  REQUIRE(result);
  CHECK(result->find("A publish/subscribe protocol.") != std::string::npos);
}

TEST_CASE("stdio egress: two MQTT clients get two separate children", "[egress]") {
  Mosquitto broker;
  auto bridge = expose_everything(broker);
  McpMqttClient a(broker.url(), kEverything);
  McpMqttClient b(broker.url(), kEverything);
  REQUIRE(a.initialize());
  REQUIRE(b.initialize());
  REQUIRE(eventually([&] { return children_of(bridge->pid()).size() == 2; }));
  // Each session is its own: a client that ends leaves the other working.
  a.disconnect();
  REQUIRE(eventually([&] { return children_of(bridge->pid()).size() == 1; }));
  auto call = b.request("tools/call", R"({"name":"echo","arguments":{"message":"still here"}})");
  REQUIRE(call);
  CHECK(json_at(*call, "result.content.0.text") == "Echo: still here");
}

TEST_CASE(
    "stdio egress: SIGKILL of the MQTT client's process ends its child within the grace "
    "period",
    "[egress]") {
  Mosquitto broker;
  auto bridge = expose_everything(broker);
  std::string sid;
  {
    McpMqttClient probe(broker.url(), kEverything);
    sid = probe.server_id();
  }
  auto runner = Process::start(Process::piped(
      {MCPMQTT_ROLE_RUNNER, "mcp-client", broker.url(), random_id("doomed"), sid, kEverything}));
  REQUIRE(runner->read_line(30s) == "ready");
  REQUIRE(eventually([&] { return children_of(bridge->pid()).size() == 1; }));
  const auto child = children_of(bridge->pid()).at(0);
  runner->signal(SIGKILL);
  // The will reaches the bridge, which closes the child's stdin (then SIGTERM after 2 s, SIGKILL
  // after 3 s more): well within 8 s it is gone.
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(eventually([&] { return !pid_alive(child); }, 8s));
  INFO("child gone after " << std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - start)
                                  .count()
                           << " ms");
  CHECK(children_of(bridge->pid()).empty());
  CHECK(bridge->wait_for_log("is gone (its presence says disconnected)"));
}

TEST_CASE(
    "stdio egress: killing the child mid-request answers the request with an error and "
    "tells the client the session is over",
    "[egress]") {
  Mosquitto broker;
  auto bridge = expose_everything(broker);
  McpMqttClient client(broker.url(), kEverything);
  REQUIRE(client.initialize());
  const int call = client.send_request(
      "tools/call",
      R"({"name":"trigger-long-running-operation","arguments":{"duration":30,"steps":30},"_meta":{"progressToken":"p1"}})");
  REQUIRE(eventually([&] { return children_of(bridge->pid()).size() == 1; }));
  // The first progress notification: the request has reached the child, which is working on it.
  REQUIRE(client.next_containing("notifications/progress", 15s));
  ::kill(children_of(bridge->pid()).at(0), SIGKILL);
  auto r = client.response(call, 15s);
  REQUIRE(r);
  CHECK(json_at(*r, "error.code") == "-32000");
  CHECK(json_at(*r, "error.message") ==
        "tools/call was not answered: child killed by signal 9 (SIGKILL)");
  auto bye = client.next_containing("notifications/disconnected", 10s);
  REQUIRE(bye);
  CHECK(bye->topic == client.rpc_topic());
  // The bridge is still up and serves a new session.
  McpMqttClient again(broker.url(), kEverything);
  REQUIRE(again.initialize());
}

TEST_CASE(
    "stdio egress from a configuration file: limits, a child that never answers "
    "initialize, non-JSON output, and a spawn failure",
    "[egress]") {
  Mosquitto broker;
  const std::string child = MCPMQTT_STDIO_TEST_CHILD;
  auto bridge = std::make_unique<BridgeProcess>(
      std::vector<std::string>{},
      config_with(
          broker,
          R"({
        "test/silent": { "command": ")" +
              child + R"(", "args": ["--no-read"] },
        "test/noisy": { "command": ")" +
              child + R"(", "args": ["--banner", "this is not JSON-RPC"],
                        "max_sessions": 1 },
        "test/missing": { "command": "/nonexistent/mcp-server" }
      })",
          R"("timeouts": {"initialize": 2}, "egress": {"terminate_after_ms": 200, "kill_after_ms": 200, "idle_floor_ms": 3600000}, )"));
  REQUIRE(bridge->wait_for_log("[server test/missing] online"));
  REQUIRE(bridge->wait_for_log("[server test/silent] online"));
  REQUIRE(bridge->wait_for_log("[server test/noisy] online"));

  // A child that never answers initialize: the client hears so after the configured 2 s, the
  // session ends, the child is stopped.
  {
    McpMqttClient client(broker.url(), "test/silent");
    auto r = client.initialize("{}", 10s);
    REQUIRE(r);
    CHECK(json_at(*r, "error.code") == "-32001");
    CHECK(json_at(*r, "error.message") ==
          "request timed out: no response to initialize from the server within 2 s "
          "(mcp-mqtt-bridge)");
    CHECK(client.next_containing("notifications/disconnected", 10s));
    CHECK(eventually([&] { return children_of(bridge->pid()).empty(); }));
  }
  // Non-JSON on the child's stdout is logged as a protocol violation, never forwarded; the
  // session goes on. The per-server limit of 1 refuses a second client.
  {
    McpMqttClient client(broker.url(), "test/noisy");
    auto r = client.initialize();
    REQUIRE(r);
    CHECK(json_at(*r, "error").has_value());  // the test child has no initialize: -32601
    CHECK(json_at(*r, "error.code") == "-32601");
    auto echo = client.request("echo", R"({"x":1})");
    REQUIRE(echo);
    CHECK(json_at(*echo, "result.echo.x") == "1");
    CHECK_FALSE(client.next(500ms));  // the banner never reached the client
    CHECK(bridge->log().find("this is not JSON-RPC") != std::string::npos);
    McpMqttClient second(broker.url(), "test/noisy");
    auto refused = second.initialize();
    REQUIRE(refused);
    CHECK(json_at(*refused, "error.message") ==
          "test/noisy is serving its maximum of 1 sessions; try again later");
  }
  // A command that cannot start: initialize gets an error that names the command.
  {
    McpMqttClient client(broker.url(), "test/missing");
    auto r = client.initialize();
    REQUIRE(r);
    CHECK(json_at(*r, "error.code") == "-32603");
    CHECK(json_at(*r, "error.message").value_or("").find("\"/nonexistent/mcp-server\"") !=
          std::string::npos);
  }
  // A request on the control topic that is not initialize gets a clear error.
  {
    McpMqttClient client(broker.url(), "test/noisy");
    client.publish_raw("$mcp-server/" + client.server_id() + "/test/noisy",
                       R"({"jsonrpc":"2.0","id":5,"method":"tools/list"})");
    auto r = client.response(5, 10s);
    REQUIRE(r);
    CHECK(json_at(*r, "error.code") == "-32600");
  }
  CHECK(bridge->terminate() == 0);
}

TEST_CASE(
    "stdio egress: out of descriptors, initialize gets -32000 'try again later' and the server "
    "stays up, and with descriptors again the next client is served",
    "[egress]") {
  Mosquitto broker;
  auto bridge = std::make_unique<BridgeProcess>(
      std::vector<std::string>{},
      config_with(broker, R"({"test/tight": {"command": ")" MCPMQTT_TEST_SERVER R"("}})"));
  REQUIRE(bridge->wait_for_log("[server test/tight] online"));
  // The daemon's limit set so that two descriptor numbers are free: a child needs four pipes.
  const auto is_open = [&](int fd) {
    return std::filesystem::exists("/proc/" + std::to_string(bridge->pid()) + "/fd/" +
                                   std::to_string(fd));
  };
  int limit = 0;
  for (int spare = 0; spare < 2; ++limit) {
    if (!is_open(limit)) ++spare;
  }
  rlimit before{};
  rlimit tight{};
  REQUIRE(::prlimit(bridge->pid(), RLIMIT_NOFILE, nullptr, &before) == 0);
  tight = before;
  tight.rlim_cur = static_cast<rlim_t>(limit);
  REQUIRE(::prlimit(bridge->pid(), RLIMIT_NOFILE, &tight, nullptr) == 0);
  {
    McpMqttClient client(broker.url(), "test/tight");
    auto r = client.initialize();
    REQUIRE(r);
    INFO(*r);
    CHECK(json_at(*r, "error.code") == "-32000");
    const auto message = json_at(*r, "error.message").value_or("");
    CHECK(message.find("cannot create pipes: Too many open files; try again later") !=
          std::string::npos);
  }
  REQUIRE(::prlimit(bridge->pid(), RLIMIT_NOFILE, &before, nullptr) == 0);
  McpMqttClient client(broker.url(), "test/tight");
  auto r = client.initialize();
  REQUIRE(r);
  INFO(*r);
  CHECK(json_at(*r, "result.protocolVersion").has_value());
  CHECK(bridge->terminate() == 0);
}

TEST_CASE("stdio egress: SIGTERM clears presence, tells clients and leaves no child behind",
          "[egress]") {
  Mosquitto broker;
  auto bridge = expose_everything(broker);
  McpMqttClient client(broker.url(), kEverything);
  REQUIRE(client.initialize());
  REQUIRE(eventually([&] { return children_of(bridge->pid()).size() == 1; }));
  const auto child = children_of(bridge->pid()).at(0);
  Observer watcher(broker.url());
  watcher.subscribe("$mcp-server/presence/" + client.server_id() + "/" + kEverything);
  REQUIRE(watcher.next());  // retained online
  CHECK(bridge->terminate() == 0);
  auto bye = client.next_containing("notifications/disconnected", 10s);
  REQUIRE(bye);
  CHECK(bye->topic == client.rpc_topic());
  auto cleared = watcher.next();
  REQUIRE(cleared);
  CHECK(cleared->payload.empty());
  CHECK_FALSE(pid_alive(child));
}

TEST_CASE(
    "stdio egress, the children's memory bound (max_memory_mb): past it a new client's "
    "initialize closes the least recently active session with nothing in flight, and is refused "
    "with the bound's reason while every session is busy",
    "[egress][limits]") {
  Mosquitto broker;
  // 1 MiB: one child of the test server alone holds more, so every second session is past it.
  auto bridge = std::make_unique<BridgeProcess>(
      std::vector<std::string>{},
      config_with(broker, R"({"test/mem": {"command": ")" MCPMQTT_TEST_SERVER
                          R"(", "protocol": "legacy", "max_memory_mb": 1}})"));
  REQUIRE(bridge->wait_for_log("[server test/mem] online"));
  // (Clients are made first: discovering the server takes a while under the sanitizers.)
  McpMqttClient a(broker.url(), "test/mem"), b(broker.url(), "test/mem"),
      c(broker.url(), "test/mem");
  REQUIRE(a.initialize());
  const int slow = a.send_request(
      "tools/call", R"({"name":"sleep","arguments":{"ms":3000},"_meta":{"progressToken":1}})");
  REQUIRE(a.next_containing("notifications/progress", 10s));  // the child has it: a is busy
  auto refused = b.initialize();
  REQUIRE(refused);
  INFO(*refused);
  INFO(bridge->log());
  CHECK(json_at(*refused, "error.code") == "-32000");
  const auto message = json_at(*refused, "error.message").value_or("");
  CHECK(message.rfind("test/mem holds ", 0) == 0);
  CHECK(message.find(" MiB in its 1 children, and one more would pass its max_memory_mb (1 "
                     "MiB); try again later") != std::string::npos);

  // a's call answered: a is idle, and the next client takes its place.
  REQUIRE(a.response(slow, 10s));
  auto served = c.initialize();
  REQUIRE(served);
  CHECK(json_at(*served, "result").has_value());
  CHECK(a.next_containing("notifications/disconnected", 10s));
  CHECK(bridge->wait_for_log("closed to make room for a new session (test/mem holds "));
  CHECK(eventually([&] { return children_of(bridge->pid()).size() == 1; }));
}

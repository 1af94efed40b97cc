// HTTP egress end to end: the real mcp-mqtt-bridge publishes a Streamable HTTP MCP server on a
// real Mosquitto; an independent MCP client on MQTT uses it. The upstream is the conformance
// fixture (the official TypeScript SDK over Streamable HTTP) for the normal path, and a scripted
// HTTP server for each way an upstream fails.
#include <thread>

#include <catch2/catch.hpp>
#include <signal.h>

#include "tests/http/client_fake_server.hpp"
#include "tests/support/bridge_process.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/mqtt_mcp_client.hpp"

using namespace mcpmqtt::test;
using namespace std::chrono_literals;
namespace fake = mcpmqtt::test::fake;
namespace jsonrpc = mcpmqtt::jsonrpc;

namespace {

const std::string kName = "web/upstream";

std::unique_ptr<BridgeProcess> publish_url(const Mosquitto& broker, const std::string& url,
                                           const std::string& extra = "") {
  auto b = std::make_unique<BridgeProcess>(
      std::vector<std::string>{},
      R"({"mqtt": {"url": ")" + broker.url() + R"("}, "http": {"enabled": false}, )" + extra +
          R"("mcpServers": {")" + kName + R"(": {"url": ")" + url +
          R"(", "headers": {"X-Test": "from-config"}, "description": "an HTTP server"}}})");
  REQUIRE(b->wait_for_log("[server " + kName + "] online"));
  return b;
}

// The TypeScript SDK fixture over Streamable HTTP on a free loopback port.
struct Fixture {
  std::unique_ptr<Process> proc;
  std::string url;
  Fixture() {
    proc = Process::start(Process::piped(
        {node_binary(), std::string(MCPMQTT_SOURCE_DIR) + "/tests/fixtures/conformance-server.mjs",
         "--http", "--port", "0"}));
    for (int i = 0; i < 50 && url.empty(); ++i) {
      auto line = proc->read_line(20s);
      REQUIRE(line);
      const std::string key = "MCP_FIXTURE_URL=";
      if (line->rfind(key, 0) == 0) url = line->substr(key.size());
    }
    REQUIRE_FALSE(url.empty());
  }
};

std::uint16_t closed_port() {
  return free_loopback_port();
}

}  // namespace

TEST_CASE(
    "HTTP egress: an MQTT client uses a Streamable HTTP server (the TypeScript SDK "
    "fixture): tools, and a sampling round trip",
    "[egress][http-egress]") {
  Mosquitto broker;
  Fixture upstream;
  auto bridge = publish_url(broker, upstream.url);
  McpMqttClient client(broker.url(), kName);
  auto init = client.initialize(R"({"sampling":{}})");
  REQUIRE(init);
  CHECK(json_at(*init, "result.serverInfo.name").has_value());
  auto tools = client.request("tools/list");
  REQUIRE(tools);
  CHECK(tools->find("test_simple_text") != std::string::npos);
  auto simple = client.request("tools/call", R"({"name":"test_simple_text","arguments":{}})");
  REQUIRE(simple);
  CHECK(json_at(*simple, "result.content.0.type") == "text");

  const int call = client.send_request(
      "tools/call", R"({"name":"test_sampling","arguments":{"prompt":"Say hi"}})");
  auto sampling = client.next_containing("sampling/createMessage", 20s);
  REQUIRE(sampling);
  const auto id = json_at(sampling->payload, "id");
  REQUIRE(id);
  client.respond(
      *id,
      R"({"role":"assistant","content":{"type":"text","text":"Hi from MQTT"},"model":"m","stopReason":"endTurn"})");
  auto result = client.response(call, 20s);
  REQUIRE(result);
  CHECK(result->find("Hi from MQTT") != std::string::npos);
  CHECK(bridge->terminate() == 0);
}

TEST_CASE("HTTP egress failure: the upstream refuses the connection", "[egress][http-egress]") {
  Mosquitto broker;
  const auto url = "http://127.0.0.1:" + std::to_string(closed_port()) + "/mcp";
  auto bridge = publish_url(broker, url);
  McpMqttClient client(broker.url(), kName);
  auto r = client.initialize("{}", 20s);
  REQUIRE(r);
  CHECK(json_at(*r, "error.code") == "-32000");
  CHECK(json_at(*r, "error.message") == "upstream " + url + " unreachable: Connection refused");
  CHECK(client.next_containing("notifications/disconnected", 10s));
}

TEST_CASE("HTTP egress failure: HTTP 500 on a request answers that request, the session goes on",
          "[egress][http-egress]") {
  Mosquitto broker;
  fake::Script script;
  script.request = [](fake::Conn& c, const fake::Request& r, const jsonrpc::Message& m) {
    if (m.method() == "tools/call") {
      c.respond(500, "text/plain", "database is down");
      return;
    }
    // The headers from the configuration reach the upstream.
    c.json(fake::result_json(m.id(), R"({"x-test":")" + r.header("x-test") + "\"}"));
  };
  fake::Server server(fake::mcp(script));
  auto bridge = publish_url(broker, server.url());
  McpMqttClient client(broker.url(), kName);
  REQUIRE(client.initialize());
  auto call = client.request("tools/call", R"({"name":"x"})");
  REQUIRE(call);
  CHECK(json_at(*call, "error.code") == "-32603");
  CHECK(json_at(*call, "error.message") ==
        "upstream " + server.url() + " answered HTTP 500 Internal Server Error: database is down");
  auto list = client.request("tools/list");
  REQUIRE(list);
  CHECK(json_at(*list, "result.x-test") == "from-config");
}

TEST_CASE("HTTP egress failure: the upstream session expired (404) ends the MQTT session",
          "[egress][http-egress]") {
  Mosquitto broker;
  fake::Script script;
  script.request = [](fake::Conn& c, const fake::Request&, const jsonrpc::Message&) {
    c.respond(
        404, "application/json",
        R"({"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}})");
  };
  fake::Server server(fake::mcp(script));
  auto bridge = publish_url(broker, server.url());
  McpMqttClient client(broker.url(), kName);
  REQUIRE(client.initialize());
  auto call = client.request("tools/list");
  REQUIRE(call);
  CHECK(json_at(*call, "error.code") == "-32000");
  CHECK(json_at(*call, "error.message") ==
        "upstream " + server.url() + " session expired (HTTP 404); initialize a new session");
  auto bye = client.next_containing("notifications/disconnected", 10s);
  REQUIRE(bye);
  CHECK(bye->topic == client.rpc_topic());
}

TEST_CASE(
    "HTTP egress failure: a response stream cut before the response answers the request "
    "with an error",
    "[egress][http-egress]") {
  Mosquitto broker;
  fake::Script script;
  script.request = [](fake::Conn& c, const fake::Request&, const jsonrpc::Message& m) {
    if (m.method() != "tools/call") {
      c.json(fake::result_json(m.id(), "{}"));
      return;
    }
    // A progress notification, then the stream dies: no event ids, so it cannot be resumed.
    c.start_sse();
    c.event(
        R"({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}})");
    c.cut();
  };
  fake::Server server(fake::mcp(script));
  auto bridge = publish_url(broker, server.url());
  McpMqttClient client(broker.url(), kName);
  REQUIRE(client.initialize());
  const int call = client.send_request("tools/call", R"({"name":"slow"})");
  auto note = client.next_containing("working", 10s);
  CHECK(note);
  auto r = client.response(call, 15s);
  REQUIRE(r);
  CHECK(json_at(*r, "error.code") == "-32000");
  CHECK(json_at(*r, "error.message") == "upstream " + server.url() +
                                            " closed the event stream before answering "
                                            "\"tools/call\"; it gave no event id to resume it");
  // The session is still usable.
  auto list = client.request("tools/list");
  REQUIRE(list);
  CHECK(json_at(*list, "result").has_value());
}

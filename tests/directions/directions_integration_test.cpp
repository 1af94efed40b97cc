// The other two directions end to end, driven by peers nobody here wrote: a desktop-style host
// (the TypeScript SDK's StdioClientTransport) launching `mcp-mqtt-bridge stdio`, and the MCP
// conformance suite reaching a Streamable HTTP server published through the HTTP egress.
#include <catch2/catch.hpp>

#include "tests/http/server_test_support.hpp"
#include "tests/support/ingress_bridge.hpp"
#include "tests/support/mqtt_mcp_client.hpp"
#include "tests/support/node_tools.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mcpmqtt::test;

TEST_CASE(
    "stdio ingress: the TypeScript SDK's StdioClientTransport, spawning mcp-mqtt-bridge stdio, "
    "initializes, lists and calls tools of server-everything and answers its sampling request",
    "[stdio-ingress][sdk]") {
  Mosquitto broker;
  BridgeProcess egress({"expose", "--broker", broker.url(), "--name", "demo/everything", "--",
                        node_binary(), server_everything(), "stdio"});
  REQUIRE(egress.wait_for_log("online"));
  auto run = run_sdk_client(
      {"--command", MCPMQTT_BRIDGE_EXE, "--args", "stdio", "--broker", broker.url(), "--server",
       "demo/everything"},
      R"({"responders":{"sampling":{"result":{"role":"assistant","content":{"type":"text","text":"sampled through stdio and MQTT"},"model":"m","stopReason":"endTurn"}}},)"
      R"("steps":[{"op":"listTools"},{"op":"callTool","name":"echo","arguments":{"message":"over stdio"}},)"
      R"({"op":"callTool","name":"trigger-sampling-request","arguments":{"prompt":"hi","maxTokens":5}}]})");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  auto connected = run.line("connected");
  REQUIRE(connected);
  CHECK(json_at(*connected, "serverInfo.title") == "Everything Reference Server");
  auto steps = run.all("step");
  REQUIRE(steps.size() == 3);
  CHECK(steps[0].find(R"("name":"echo")") != std::string::npos);
  CHECK(json_at(steps[1], "result.content.0.text") == "Echo: over stdio");
  CHECK(steps[2].find("sampled through stdio and MQTT") != std::string::npos);
  // The host closed stdin: the bridge said goodbye to the server, which ended its child.
  CHECK(egress.wait_for_log("the client closed the session"));
}

TEST_CASE(
    "HTTP egress: the conformance suite passes every server scenario through HTTP ingress, "
    "Mosquitto and the HTTP egress, with the same result as against the fixture directly",
    "[http-egress][conformance]") {
  TempDir out;
  FixtureHttpServer direct;
  std::string log;
  auto a = run_conformance(direct.url, out.path() + "/direct", &log);
  INFO(log);
  REQUIRE(a);

  Mosquitto broker;
  Bridge bridge(broker, R"({"test/conformance-http": {"url": ")" + direct.url + R"("}})",
                "test/conformance-http", R"("egress": {"max_sessions_per_server": 64}, )");
  REQUIRE(bridge.proc->wait_for_log("[directory] test/conformance-http online"));
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

// 2026-only servers published on MQTT end to end: the real
// mcp-mqtt-bridge puts tests/node/sdk2-server.mjs --legacy reject (the v2 TypeScript SDK, a
// server that refuses every 2025 client) behind the stdio egress and the HTTP egress on a real
// Mosquitto. A 2025 MCP client reaches it over MQTT (the independent C++ client) and through the
// bridge's HTTP ingress (the official SDK v1 client): initialize, tools with progress and
// logging, elicitation, the two-round sampling tool and roots as server→client requests over
// MQTT, list changes and resource updates on the capability topic. Also: the conformance suite
// (0.2.0-alpha.12, requirements 2025-11-25) through the bridge equals the suite run directly,
// and dual-era servers still work either way.
#include <atomic>
#include <map>

#include <catch2/catch.hpp>

#include "tests/http/client_fake_server.hpp"
#include "tests/support/bridge_process.hpp"
#include "tests/support/ingress_bridge.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/mqtt_mcp_client.hpp"
#include "tests/support/node_tools.hpp"
#include "tests/support/observer.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mcpmqtt::test;
using namespace std::chrono_literals;
namespace fake = mcpmqtt::test::fake;
namespace jsonrpc = mcpmqtt::jsonrpc;

namespace {

const std::string kName = "test/sdk2";

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The mcpServers entry of sdk2-server over stdio (`legacy`: reject or allow), with `extra` keys.
std::string stdio_entry(const std::string& legacy, const std::string& extra = "") {
  return "{" + quote(kName) + R"(: {"command": )" + quote(node_binary()) + R"(, "args": [)" +
         quote(sdk2_server_script()) + R"(, "--stdio", "--legacy", )" + quote(legacy) + "]" +
         extra + R"(, "description": "a 2026 server"}})";
}

std::string url_entry(const std::string& url, const std::string& extra = "") {
  return "{" + quote(kName) + R"(: {"url": )" + quote(url) + extra +
         R"(, "description": "a 2026 server"}})";
}

std::unique_ptr<BridgeProcess> publish(const Mosquitto& broker, const std::string& servers,
                                       const std::string& extra = "") {
  auto b = std::make_unique<BridgeProcess>(std::vector<std::string>{},
                                           R"({"mqtt": {"url": ")" + broker.url() +
                                               R"("}, "http": {"enabled": false}, )" + extra +
                                               R"("mcpServers": )" + servers + "}");
  REQUIRE(b->wait_for_log("[server " + kName + "] online"));
  return b;
}

// The report sdk2-server's tools answer with (what reached the server through the bridge).
std::string report(const std::optional<std::string>& response, const std::string& path) {
  REQUIRE(response);
  INFO(*response);
  return json_at(*response, "result.structuredContent." + path).value_or("<absent>");
}

// The messages (not responses) that came within `within`, by method.
std::map<std::string, std::vector<McpMqttClient::Incoming>> drain(
    McpMqttClient& c, std::chrono::milliseconds within) {
  std::map<std::string, std::vector<McpMqttClient::Incoming>> out;
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    auto m = c.next(std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now()));
    if (!m) break;
    out[json_at(m->payload, "method").value_or("")].push_back(*m);
  }
  return out;
}

// What a 2025 MQTT client does with a 2026-only server behind the egress; the same for stdio and
// HTTP upstreams.
void exercise_over_mqtt(const Mosquitto& broker) {
  McpMqttClient client(broker.url(), kName);
  const std::string capability_topic = "$mcp-server/capability/" + client.server_id() + "/" + kName;

  // initialize is answered by the bridge from server/discover (004 §Initialization).
  auto init = client.initialize(R"({"elicitation":{},"sampling":{},"roots":{"listChanged":true}})");
  REQUIRE(init);
  INFO(*init);
  CHECK(json_at(*init, "result.protocolVersion") == "2025-03-26");
  CHECK(json_at(*init, "result.serverInfo.name") == "mcp-mqtt-bridge-sdk2-server");
  CHECK(json_at(*init, "result.instructions") == "Test server of mcp-mqtt-bridge (SDK v2).");
  CHECK(json_at(*init, "result.capabilities.resources.subscribe") == "true");
  auto ping = client.request("ping");
  REQUIRE(ping);
  CHECK(json_at(*ping, "result") == "{}");

  auto tools = client.request("tools/list");
  REQUIRE(tools);
  CHECK(tools->find(R"("name":"ask_sampling")") != std::string::npos);

  // Every request carries the envelope made of the session's initialize (basic/index §_meta).
  auto echo = client.request("tools/call", R"({"name":"echo","arguments":{"message":"hi"}})");
  CHECK(report(echo, "era") == "modern");
  CHECK(report(echo, "protocolVersion") == "2026-07-28");
  CHECK(report(echo, "clientInfo.name") == "mcpmqtt-test-client");
  CHECK(report(echo, "clientCapabilities.sampling") == "{}");
  CHECK(report(echo, "logLevel") == "debug");
  CHECK(report(echo, "message") == "hi");

  // Progress and logs of a request reach the client on its RPC topic; logging/setLevel becomes
  // the logLevel of later requests.
  auto progress = client.request(
      "tools/call",
      R"({"name":"progress","arguments":{"steps":2},"_meta":{"progressToken":"pt"}})");
  CHECK(report(progress, "progressSent") == "2");
  CHECK(report(progress, "progressToken") == "pt");
  // (Sent before the result, they are already here: the window only bounds a failure.)
  auto notes = drain(client, 300ms);
  CHECK(notes["notifications/progress"].size() == 2);
  CHECK(notes["notifications/message"].size() == 2);  // "info" passes the default "debug"
  for (const auto& p : notes["notifications/progress"])
    CHECK(p.topic == client.rpc_topic());
  auto level = client.request("logging/setLevel", R"({"level":"error"})");
  REQUIRE(level);
  CHECK(json_at(*level, "result") == "{}");
  auto quiet = client.request("tools/call", R"({"name":"progress","arguments":{"steps":1}})");
  CHECK(report(quiet, "logLevel") == "error");
  CHECK(drain(client, 300ms)["notifications/message"].empty());

  // Elicitation: input_required becomes elicitation/create on the session, with the server's key.
  const int ask = client.send_request("tools/call", R"({"name":"ask_elicitation","arguments":{}})");
  auto elicit = client.next_containing("elicitation/create", 20s);
  REQUIRE(elicit);
  CHECK(elicit->topic == client.rpc_topic());
  CHECK(json_at(elicit->payload, "params._meta.mcp-mqtt-bridge/inputKey") == "answer");
  CHECK(json_at(elicit->payload, "params.message") == "What is your name?");
  client.respond(quote(*json_at(elicit->payload, "id")),
                 R"({"action":"accept","content":{"name":"Ada"}})");
  CHECK(report(client.response(ask), "answer.content.name") == "Ada");

  // Sampling in two rounds, the second carrying the server's requestState back.
  const int sample =
      client.send_request("tools/call", R"({"name":"ask_sampling","arguments":{"prompt":"Q"}})");
  auto first = client.next_containing("sampling/createMessage", 20s);
  REQUIRE(first);
  CHECK(first->payload.find("Q (1 of 2)") != std::string::npos);
  CHECK(json_at(first->payload, "params._meta.mcp-mqtt-bridge/inputKey") == "first");
  client.respond(quote(*json_at(first->payload, "id")),
                 R"({"role":"assistant","content":{"type":"text","text":"A1"},"model":"m"})");
  auto second = client.next_containing("sampling/createMessage", 20s);
  REQUIRE(second);
  CHECK(second->payload.find("Q (2 of 2)") != std::string::npos);
  CHECK(json_at(second->payload, "params._meta.mcp-mqtt-bridge/inputKey") == "second");
  client.respond(quote(*json_at(second->payload, "id")),
                 R"({"role":"assistant","content":{"type":"text","text":"A2"},"model":"m"})");
  auto sampled = client.response(sample);
  CHECK(report(sampled, "rounds") == "3");
  CHECK(report(sampled, "first.content.text") == "A1");
  CHECK(report(sampled, "second.content.text") == "A2");

  // Roots.
  const int roots = client.send_request("tools/call", R"({"name":"list_roots","arguments":{}})");
  auto list = client.next_containing("roots/list", 20s);
  REQUIRE(list);
  client.respond(quote(*json_at(list->payload, "id")),
                 R"({"roots":[{"uri":"file:///data","name":"d"}]})");
  CHECK(report(client.response(roots), "roots.0.uri") == "file:///data");

  // An error answer to an input request fails the call with it.
  const int refused =
      client.send_request("tools/call", R"({"name":"ask_elicitation","arguments":{}})");
  elicit = client.next_containing("elicitation/create", 20s);
  REQUIRE(elicit);
  client.publish_raw(client.rpc_topic(),
                     R"({"jsonrpc":"2.0","id":")" + *json_at(elicit->payload, "id") +
                         R"(","error":{"code":-32603,"message":"no user here"}})");
  auto failed = client.response(refused);
  REQUIRE(failed);
  CHECK(json_at(*failed, "error.code") == "-32603");
  CHECK(json_at(*failed, "error.message") ==
        "elicitation/create (input \"answer\") to the MQTT client failed: no user here");

  // List changes arrive on the server's capability topic (004 §Capability List Changed).
  CHECK(client.request("tools/call", R"({"name":"trigger_list_changed","arguments":{}})"));
  auto changed = client.next_containing("notifications/tools/list_changed", 10s);
  REQUIRE(changed);
  CHECK(changed->topic == capability_topic);
  CHECK(changed->payload.find("subscriptionId") == std::string::npos);

  // Resource updates after resources/subscribe, on the capability topic (004 §Resource Update).
  auto subscribed = client.request("resources/subscribe", R"({"uri":"test://watched"})");
  REQUIRE(subscribed);
  CHECK(json_at(*subscribed, "result") == "{}");
  CHECK(client.request("tools/call",
                       R"({"name":"update_resource","arguments":{"uri":"test://watched"}})"));
  auto updated = client.next_containing("notifications/resources/updated", 10s);
  REQUIRE(updated);
  CHECK(updated->topic == capability_topic);
  CHECK(json_at(updated->payload, "params.uri") == "test://watched");
  auto read = client.request("resources/read", R"({"uri":"test://watched"})");
  REQUIRE(read);
  CHECK(json_at(*read, "result.contents.0.text") == "version 2");
  CHECK(client.request("resources/unsubscribe", R"({"uri":"test://watched"})"));
  CHECK(client.request("tools/call",
                       R"({"name":"update_resource","arguments":{"uri":"test://watched"}})"));
  CHECK_FALSE(client.next_containing("notifications/resources/updated", 300ms));

  // Prompts; a cancelled request is never answered, and the session goes on.
  auto prompt = client.request("prompts/get", R"({"name":"greeting","arguments":{"name":"Ada"}})");
  REQUIRE(prompt);
  CHECK(json_at(*prompt, "result.messages.0.content.text") == "Hello, Ada!");
  const int slow =
      client.send_request("tools/call", R"({"name":"sleep","arguments":{"ms":30000}})");
  client.notify("notifications/cancelled", R"({"requestId":)" + std::to_string(slow) + "}");
  auto after = client.request("tools/call", R"({"name":"echo","arguments":{"message":"on"}})");
  CHECK(report(after, "message") == "on");
  CHECK_FALSE(client.response(slow, 300ms));
}

}  // namespace

TEST_CASE(
    "modern egress over stdio: a 2026-only server (sdk2-server --legacy reject) is reached by "
    "an MQTT client, everything translated",
    "[egress][modern]") {
  Mosquitto broker;
  auto bridge = publish(broker, stdio_entry("reject"));
  exercise_over_mqtt(broker);
  // The verdict came from a probe copy of the server, and is kept.
  CHECK(bridge->log().find("the server's protocol era is modern") != std::string::npos);
  CHECK(bridge->terminate() == 0);
}

TEST_CASE(
    "modern egress over HTTP: a 2026-only server (sdk2-server --http --legacy reject) is "
    "reached by an MQTT client, everything translated",
    "[egress][modern][http-egress]") {
  Mosquitto broker;
  NodeHttpServer upstream(sdk2_server_script(), {"--http", "--port", "0", "--legacy", "reject"});
  auto bridge = publish(broker, url_entry(upstream.url));
  exercise_over_mqtt(broker);
  CHECK(bridge->terminate() == 0);
}

TEST_CASE(
    "modern egress over HTTP (basic/versioning §Backward Compatibility): a server that fails "
    "the probe but refuses initialize with -32022 is spoken to in 2026-07-28 after all, and "
    "its next session goes straight to server/discover",
    "[egress][modern][http-egress]") {
  Mosquitto broker;
  std::atomic<int> discovers{0};
  fake::Script script;
  script.initialize = [](fake::Conn& c, const fake::Request&, const jsonrpc::Message& m) {
    c.respond(
        400, "application/json",
        R"({"jsonrpc":"2.0","id":)" + m.id().to_json() +
            R"(,"error":{"code":-32022,"message":"Unsupported protocol version: 2025-03-26","data":{"supported":["2026-07-28"],"requested":"2025-03-26"}}})");
  };
  script.request = [&](fake::Conn& c, const fake::Request& r, const jsonrpc::Message& m) {
    if (m.method() == "server/discover") {
      // The first probe is refused in a way that means "2025" (a 4xx that is not JSON-RPC).
      if (++discovers == 1) return (void)c.respond(404, "text/plain", "not here");
      c.json(fake::result_json(
          m.id(),
          R"({"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fake-2026","version":"1"}}})"));
      return;
    }
    // What reached the server: its headers, as the body (streamable-http §Standard Request
    // Headers).
    c.json(fake::result_json(
        m.id(), R"({"content":[],"structuredContent":{"version":")" +
                    r.header("MCP-Protocol-Version") + R"(","method":")" + r.header("Mcp-Method") +
                    R"(","name":")" + r.header("Mcp-Name") + R"(","session":")" +
                    r.header("Mcp-Session-Id") + R"("},"resultType":"complete"})"));
  };
  fake::Server upstream(fake::mcp(script));
  auto bridge = publish(broker, url_entry(upstream.url()));
  for (int i = 0; i < 2; ++i) {
    McpMqttClient client(broker.url(), kName);
    auto init = client.initialize(R"({"sampling":{}})");
    REQUIRE(init);
    INFO(*init);
    CHECK(json_at(*init, "result.serverInfo.name") == "fake-2026");
    auto call = client.request("tools/call", R"({"name":"x","arguments":{}})");
    CHECK(report(call, "version") == "2026-07-28");
    CHECK(report(call, "method") == "tools/call");
    CHECK(report(call, "name") == "x");
    CHECK(report(call, "session") == "<absent>");
  }
  CHECK(discovers == 3);  // the failed probe, the one after -32022, the second session's
  CHECK(upstream.count(fake::post_with("\"initialize\"")) == 1);
  CHECK(upstream.count(fake::method_is("GET")) == 0);
  CHECK(bridge->log().find("refused initialize with -32022") != std::string::npos);
}

TEST_CASE(
    "modern egress: a dual-era server is spoken to in 2025 under \"auto\" (it loses nothing on "
    "an MQTT session, over stdio and HTTP alike) and with \"protocol\": \"legacy\", its own "
    "server→client requests passing unchanged - presence says which era and why",
    "[egress][modern]") {
  Mosquitto broker;
  auto exercise = [&](BridgeProcess& bridge) {
    McpMqttClient client(broker.url(), kName);
    auto init = client.initialize(R"({"elicitation":{}})");
    REQUIRE(init);
    CHECK(json_at(*init, "result.serverInfo.name") == "mcp-mqtt-bridge-sdk2-server");
    auto echo = client.request("tools/call", R"({"name":"echo","arguments":{"message":"x"}})");
    CHECK(report(echo, "era") == "legacy");
    // What only the 2025 side has: logging/setLevel reaches the server itself.
    auto level = client.request("logging/setLevel", R"({"level":"error"})");
    REQUIRE(level);
    CHECK(json_at(*level, "result") == "{}");
    CHECK(bridge.wait_for_log("speaks both eras"));
    // 004 §Service Registration: the retained presence names the era and why.
    Observer presence(broker.url());
    presence.subscribe("$mcp-server/presence/+/" + kName);
    std::optional<std::string> era;
    for (auto m = presence.next(5s); m && !era; m = presence.next(5s)) {
      if (json_at(m->payload, "params.meta.mcp-mqtt-bridge/upstream.era") == "both")
        era = m->payload;
    }
    REQUIRE(era);
    CHECK(json_at(*era, "params.meta.mcp-mqtt-bridge/upstream.why")
              .value_or("")
              .find("speaks both eras") != std::string::npos);
  };
  SECTION("auto, stdio") {
    auto bridge = publish(broker, stdio_entry("allow"));
    exercise(*bridge);
  }
  SECTION("auto, HTTP") {
    NodeHttpServer upstream(sdk2_server_script(), {"--http", "--port", "0", "--legacy", "allow"});
    auto bridge = publish(broker, url_entry(upstream.url));
    exercise(*bridge);
  }
  SECTION("legacy") {
    auto bridge = publish(broker, stdio_entry("allow", R"(, "protocol": "legacy")"));
    McpMqttClient client(broker.url(), kName);
    auto init = client.initialize(R"({"elicitation":{}})");
    REQUIRE(init);
    CHECK(json_at(*init, "result.serverInfo.name") == "mcp-mqtt-bridge-sdk2-server");
    auto echo = client.request("tools/call", R"({"name":"echo","arguments":{"message":"x"}})");
    CHECK(report(echo, "era") == "legacy");
    const int ask =
        client.send_request("tools/call", R"({"name":"ask_elicitation","arguments":{}})");
    auto elicit = client.next_containing("elicitation/create", 20s);
    REQUIRE(elicit);
    CHECK(elicit->payload.find("mcp-mqtt-bridge/inputKey") == std::string::npos);
    // The server's own id (the SDK's: a number), as it came.
    const auto id = *json_at(elicit->payload, "id");
    client.respond(id.find_first_not_of("0123456789") == std::string::npos ? id : quote(id),
                   R"({"action":"accept","content":{"name":"Bo"}})");
    CHECK(report(client.response(ask), "answer.content.name") == "Bo");
    CHECK(bridge->log().find("server/discover") == std::string::npos);
  }
}

TEST_CASE(
    "modern egress: \"protocol\": \"modern\" in front of a 2025-only server fails initialize "
    "with an error naming why, and ends the session",
    "[egress][modern]") {
  Mosquitto broker;
  auto bridge = publish(broker, "{" + quote(kName) + R"(: {"command": )" +
                                    quote(MCPMQTT_TEST_SERVER) + R"(, "protocol": "modern"}})");
  McpMqttClient client(broker.url(), kName);
  auto init = client.initialize("{}", 20s);
  REQUIRE(init);
  CHECK(json_at(*init, "error.code") == "-32603");
  CHECK(json_at(*init, "error.message")
            .value_or("")
            .find("does not serve protocol revision "
                  "2026-07-28") != std::string::npos);
  CHECK(client.next_containing("notifications/disconnected", 10s));
}

namespace {

const std::string kResponders =
    R"("responders":{)"
    R"("elicitation":{"result":{"action":"accept","content":{"name":"Sdk One"}}},)"
    R"("sampling":{"result":{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m"}},)"
    R"("roots":{"result":{"roots":[{"uri":"file:///sdk","name":"sdk"}]}}})";

// The official SDK v1 client (2025 only) through the HTTP ingress, the broker and the egress to
// a 2026-only server.
void exercise_with_sdk_client(const Bridge& bridge) {
  auto run = run_sdk_client(
      {"--url", bridge.url()},
      "{" + kResponders +
          R"(,"steps":[{"op":"listTools"},)"
          R"({"op":"callTool","name":"echo","arguments":{"message":"hello"}},)"
          R"({"op":"callTool","name":"progress","arguments":{"steps":3},"progress":true},)"
          R"({"op":"callTool","name":"ask_elicitation","arguments":{}},)"
          R"({"op":"callTool","name":"ask_sampling","arguments":{"prompt":"P"}},)"
          R"({"op":"callTool","name":"list_roots","arguments":{}},)"
          R"({"op":"subscribe","uri":"test://watched"},)"
          R"({"op":"callTool","name":"update_resource","arguments":{"uri":"test://watched"}},)"
          R"({"op":"waitNotification","method":"notifications/resources/updated","params":{"uri":"test://watched"}},)"
          R"({"op":"callTool","name":"trigger_list_changed","arguments":{"list":"prompts"}},)"
          R"({"op":"waitNotification","method":"notifications/prompts/list_changed"},)"
          R"({"op":"setLoggingLevel","level":"info"},)"
          R"({"op":"callTool","name":"progress","arguments":{"steps":1}},)"
          R"({"op":"ping"}]})");
  INFO(run.err);
  for (const auto& l : run.lines)
    UNSCOPED_INFO(l);
  REQUIRE(run.exit_code == 0);
  auto connected = run.line("connected");
  REQUIRE(connected);
  CHECK(json_at(*connected, "serverInfo.name") == "mcp-mqtt-bridge-sdk2-server");
  const auto steps = run.all("step");
  REQUIRE(steps.size() == 14);
  CHECK(json_at(steps[1], "result.structuredContent.era") == "modern");
  CHECK(json_at(steps[1], "result.structuredContent.clientInfo.name") ==
        "mcp-mqtt-bridge-sdk-client");
  CHECK(json_at(steps[3], "result.structuredContent.answer.content.name") == "Sdk One");
  CHECK(json_at(steps[4], "result.structuredContent.rounds") == "3");
  CHECK(json_at(steps[4], "result.structuredContent.second.content.text") == "sampled");
  CHECK(json_at(steps[5], "result.structuredContent.roots.0.uri") == "file:///sdk");
  CHECK(json_at(steps[12], "result.structuredContent.logLevel") == "info");
  std::size_t progress = 0, logs = 0;
  for (const auto& n : run.all("notification")) {
    if (json_at(n, "method") == "notifications/progress") ++progress;
    if (json_at(n, "method") == "notifications/message") ++logs;
  }
  CHECK(progress == 3);
  CHECK(logs >= 3);
  // The server's keys travelled with its input requests.
  std::size_t asked = 0;
  for (const auto& r : run.all("serverRequest")) {
    ++asked;
    CHECK(json_at(r, "params._meta.mcp-mqtt-bridge/inputKey").has_value());
  }
  CHECK(asked == 4);  // elicitation, two sampling rounds, roots
}

}  // namespace

TEST_CASE(
    "modern egress: the official SDK v1 client reaches a 2026-only stdio server through the "
    "HTTP ingress, the broker and the stdio egress",
    "[egress][modern][ingress][sdk]") {
  Mosquitto broker;
  Bridge bridge(broker, stdio_entry("reject"), kName);
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kName + " online"));
  exercise_with_sdk_client(bridge);
}

TEST_CASE(
    "modern egress: the official SDK v1 client reaches a 2026-only HTTP server through the "
    "HTTP ingress, the broker and the HTTP egress",
    "[egress][modern][ingress][sdk][http-egress]") {
  Mosquitto broker;
  NodeHttpServer upstream(sdk2_server_script(), {"--http", "--port", "0", "--legacy", "reject"});
  Bridge bridge(broker, url_entry(upstream.url), kName);
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kName + " online"));
  exercise_with_sdk_client(bridge);
}

TEST_CASE(
    "modern egress: the conformance suite (requirements 2025-11-25) through the HTTP ingress "
    "and the stdio egress in front of the v2 fixture serving 2026-07-28 only (every session "
    "translated) gives the same result as the dual-era fixture directly",
    "[egress][modern][conformance]") {
  TempDir out;
  std::string log;
  NodeHttpServer direct(fixture2_script(), {"--http", "--port", "0"});
  auto a = run_conformance_requirements(direct.url, out.path() + "/direct", "2025-11-25", &log);
  INFO(log);
  REQUIRE(a);

  Mosquitto broker;
  Bridge bridge(broker,
                "{" + quote("test/fixture2") + R"(: {"command": )" + quote(node_binary()) +
                    R"(, "args": [)" + quote(fixture2_script()) +
                    R"(, "--stdio", "--legacy", "reject"]}})",
                "test/fixture2", R"("egress": {"max_sessions_per_server": 64}, )");
  REQUIRE(bridge.proc->wait_for_log("[directory] test/fixture2 online"));
  auto b = run_conformance_requirements(bridge.url(), out.path() + "/bridged", "2025-11-25", &log);
  INFO(log);
  REQUIRE(b);
  // Every session was translated: the fixture answered server/discover.
  CHECK(bridge.proc->log().find("the server speaks 2026-07-28") != std::string::npos);
  auto all_pass = compare_conformance({"--all-pass", *b, "--min-scenarios", "30"});
  INFO(all_pass.out << all_pass.err);
  CHECK(all_pass.exit_code == 0);
  auto same = compare_conformance({*a, *b});
  INFO(same.out << same.err);
  CHECK(same.exit_code == 0);
}

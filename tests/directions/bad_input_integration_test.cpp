// README "Bad input": the rows that need the whole daemon — a real mcp-mqtt-bridge, a real
// Mosquitto, real children — and the log lines the table promises (BridgeProcess::wait_for_log).
// The answers themselves are checked row by row in tests/http/, tests/stdio/, tests/bridge/ and
// tests/mqtt/; here they are checked again where only the daemon produces them.
#include <catch2/catch.hpp>

#include "tests/http/server_test_support.hpp"
#include "tests/support/bridge_process.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/mqtt_mcp_client.hpp"
#include "tests/support/observer.hpp"
#include "tests/support/wait.hpp"

using namespace mcpmqtt::test;
using namespace std::chrono_literals;
namespace bhttp = boost::beast::http;
namespace jsonrpc = mcpmqtt::jsonrpc;

namespace {

std::string everything_entry() {
  return R"({"demo/everything": {"command": ")" + node_binary() + R"(", "args": [")" +
         server_everything() + R"(", "stdio"]}})";
}

}  // namespace

TEST_CASE(
    "bad input over HTTP ingress: the log names what was refused, and the bridge keeps serving",
    "[ingress][malformed]") {
  Mosquitto broker;
  const auto port = free_loopback_port();
  BridgeProcess bridge({}, R"({"mqtt": {"url": ")" + broker.url() + R"("},
        "http": {"listen": "127.0.0.1:)" +
                               std::to_string(port) + R"(",
                 "limits": {"max_body_bytes": 4096, "max_sessions": 1, "max_connections": 4,
                            "idle_floor_ms": 600000}},
        "ingress": {"default_server": "demo/everything", "presence_wait_ms": 500,
                    "server_name_filters": ["demo/#", "nobody/#"]},
        "timeouts": {"tools/call": 1},
        "log": {"level": "debug"},
        "mcpServers": )" + everything_entry() +
                               "}");
  REQUIRE(bridge.wait_for_log("[directory] demo/everything online"));
  const boost::asio::ip::tcp::endpoint ep{boost::asio::ip::make_address("127.0.0.1"), port};
  const std::string host = "127.0.0.1:" + std::to_string(port);

  // Too many connections: the fifth of four is answered without being read.
  {
    std::vector<std::unique_ptr<RawClient>> held;
    for (int i = 0; i < 4; ++i) {
      held.push_back(std::make_unique<RawClient>(ep));
      REQUIRE(held.back()->request(bhttp::verb::get, "/healthz", {{"Host", host}}).status == 200);
    }
    RawClient fifth(ep);
    auto r = fifth.read_response();
    CHECK(r.status == 503);
    CHECK(r.error_message() == "Service Unavailable: too many open connections");
    CHECK(bridge.wait_for_log("refused: 4 connections are open (http.limits.max_connections)"));
  }
  auto post = [&](const Headers& h, const std::string& target, const std::string& body) {
    HttpResult r;
    // The connections just closed may still count for a moment.
    REQUIRE(eventually([&] {
      RawClient c(ep);
      r = c.request(bhttp::verb::post, target, h, body);
      return r.status != 503 ||
             r.error_message() != "Service Unavailable: too many open connections";
    }));
    return r;
  };

  auto r = post(post_headers(host), "/mcp", "{not json");
  CHECK(r.status == 400);
  CHECK(r.error_code() == -32700);
  CHECK(bridge.wait_for_log("POST /mcp → 400"));

  auto evil_host = post_headers("evil.example");
  r = post(evil_host, "/mcp", initialize_body());
  CHECK(r.status == 403);
  CHECK(bridge.wait_for_log("refused Host \"evil.example\""));

  auto evil_origin = post_headers(host);
  evil_origin.emplace_back("Origin", "http://evil.example");
  r = post(evil_origin, "/mcp", initialize_body());
  CHECK(r.status == 403);
  CHECK(bridge.wait_for_log("refused Origin \"http://evil.example\""));

  r = post(post_headers(host), "/mcp",
           R"({"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":")" + std::string(8000, 'x') +
               "\"}}");
  CHECK(r.status == 413);
  CHECK(bridge.wait_for_log("request body larger than 4096 bytes refused"));

  // No instance online, and a server-name outside the filters: 503 with the initialize's id.
  r = post(post_headers(host), "/servers/nobody/here/mcp", initialize_body(3));
  CHECK(r.status == 503);
  CHECK(r.error_code() == -32000);
  CHECK(r.error_message().rfind("no MCP server named \"nobody/here\" is online (waited 500 ms",
                                0) == 0);
  CHECK(Message::parse(r.body)->id() == Id::integer(3));
  CHECK(bridge.wait_for_log("initialize refused: no MCP server named \"nobody/here\" is online"));
  CHECK(bridge.wait_for_log("initialize for nobody/here failed (HTTP 503)"));
  r = post(post_headers(host), "/servers/elsewhere/x/mcp", initialize_body(4));
  CHECK(r.status == 503);
  CHECK(r.error_message() ==
        "the MCP server \"elsewhere/x\" is outside the server-name filters the bridge subscribes "
        "to (demo/#, nobody/#); add a filter that matches it to ingress.server_name_filters");
  CHECK(bridge.wait_for_log("initialize refused: the MCP server \"elsewhere/x\" is outside"));

  // A session, and a call that outlives timeouts."tools/call" (1 s).
  RawClient c(ep);
  c.send(bhttp::verb::post, "/mcp", post_headers(host), initialize_body(1, "2025-06-18"));
  auto head = c.read_header();
  REQUIRE(head.status == 200);
  const auto sid = head.header("mcp-session-id");
  REQUIRE(sse_response(c));
  REQUIRE(c.request(bhttp::verb::post, "/mcp", post_headers(host, sid, "2025-06-18"), kInitialized)
              .status == 202);
  c.send(bhttp::verb::post, "/mcp", post_headers(host, sid, "2025-06-18"),
         request_body(
             7, "tools/call",
             R"({"name":"trigger-long-running-operation","arguments":{"duration":5,"steps":1}})"));
  REQUIRE(c.read_header().status == 200);
  auto late = sse_response(c);
  REQUIRE(late);
  CHECK(late->id() == Id::integer(7));
  CHECK(late->error().code == -32001);
  CHECK(late->error().message ==
        "request timed out: no response to tools/call from the server within 1 s "
        "(mcp-mqtt-bridge)");
  CHECK(bridge.wait_for_log("tools/call 7 timed out after 1 s"));

  // Too many sessions (http.limits.max_sessions 1; the idle floor spares the one session).
  r = post(post_headers(host), "/mcp", initialize_body(5));
  CHECK(r.status == 503);
  CHECK(r.error_message() ==
        "Service Unavailable: the bridge holds its maximum of 1 MCP sessions "
        "(http.limits.max_sessions); try again later");
  CHECK(Message::parse(r.body)->id() == Id::integer(5));
  CHECK(bridge.wait_for_log(
      "initialize refused: 1 MCP sessions are open (http.limits.max_sessions)"));

  // Still serving.
  c.send(bhttp::verb::post, "/mcp", post_headers(host, sid, "2025-06-18"),
         request_body(8, "tools/list"));
  REQUIRE(c.read_header().status == 200);
  auto tools = sse_response(c);
  REQUIRE(tools);
  CHECK(tools->kind() == jsonrpc::Kind::result);
}

TEST_CASE(
    "stdio ingress: a server-name with no instance online gets its initialize answered with an "
    "error naming it, and the process exits 1",
    "[stdio][malformed]") {
  Mosquitto broker;
  BridgeProcess host(
      {"stdio", "--broker", broker.url(), "--server", "nobody/here", "--presence-wait-ms", "500"},
      {}, {}, true);
  auto& p = host.process();
  p.write_stdin(initialize_body(1, "2025-06-18") + "\n");
  auto line = p.read_line(20s);
  REQUIRE(line);
  auto m = Message::parse(*line);
  REQUIRE(m);
  CHECK(m->id() == Id::integer(1));
  CHECK(m->error().code == -32000);
  CHECK(m->error().message ==
        "no MCP server named \"nobody/here\" is online (waited 500 ms for its presence on "
        "$mcp-server/presence/+/nobody/here; server-name filters in use: nobody/here)");
  CHECK(host.wait_exit(20s) == 1);
  CHECK(host.log().find("initialize refused: no MCP server named") != std::string::npos);
  CHECK(host.log().find("session ended: no MCP server named") != std::string::npos);
}

TEST_CASE(
    "what is not JSON-RPC on MQTT: a client's gets -32700 on its RPC topic, a server's is dropped "
    "and logged, and both sessions go on",
    "[ingress][egress][malformed]") {
  Mosquitto broker;
  const auto port = free_loopback_port();
  BridgeProcess bridge({}, R"({"mqtt": {"url": ")" + broker.url() + R"("},
        "http": {"listen": "127.0.0.1:)" +
                               std::to_string(port) +
                               R"("}, "ingress": {"default_server": "test/server"},
        "mcpServers": {"test/server": {"command": ")" MCPMQTT_TEST_SERVER R"("}}})");
  REQUIRE(bridge.wait_for_log("[directory] test/server online"));

  // Egress: an MQTT client writes garbage on its RPC topic.
  McpMqttClient client(broker.url(), "test/server");
  REQUIRE(client.initialize());
  Observer rpc(broker.url());
  rpc.subscribe(client.rpc_topic());
  client.publish_raw(client.rpc_topic(), "{not json");
  std::optional<Received> error;
  while (!error) {
    auto seen = rpc.next(10s);
    REQUIRE(seen);
    if (seen->payload.find("-32700") != std::string::npos) error = seen;
  }
  CHECK(json_at(error->payload, "id") == "null");
  CHECK(json_at(error->payload, "error.message") ==
        "invalid JSON at line 1 column 2: Missing a name for object member.");
  CHECK(bridge.wait_for_log("bad message on the RPC topic: invalid JSON at line 1 column 2"));
  auto echo = client.request("tools/call", R"({"name":"echo","arguments":{"text":"on"}})");
  REQUIRE(echo);
  CHECK(json_at(*echo, "result.content.0.text") == "on");

  // Ingress: garbage arrives on an HTTP session's RPC topic, as if from the server.
  Observer watch(broker.url());
  watch.subscribe("$mcp-rpc/#");
  const boost::asio::ip::tcp::endpoint ep{boost::asio::ip::make_address("127.0.0.1"), port};
  const std::string host = "127.0.0.1:" + std::to_string(port);
  RawClient c(ep);
  c.send(bhttp::verb::post, "/mcp", post_headers(host), initialize_body(1, "2025-06-18"));
  auto head = c.read_header();
  REQUIRE(head.status == 200);
  const auto sid = head.header("mcp-session-id");
  REQUIRE(sse_response(c));
  std::string topic;
  while (topic.empty()) {
    auto seen = watch.next(10s);
    REQUIRE(seen);
    if (seen->topic.find("/" + client.client_id() + "/") == std::string::npos &&
        seen->topic.rfind("$mcp-rpc/", 0) == 0)
      topic = seen->topic;
  }
  watch.publish(topic, "[1,");
  CHECK(bridge.wait_for_log("dropped a bad message from the server on " + topic +
                            ": invalid JSON at line 1 column 4"));
  auto list = c.request(bhttp::verb::post, "/mcp", post_headers(host, sid, "2025-06-18"),
                        request_body(2, "tools/list"));
  CHECK(list.status == 200);
  CHECK(list.body.find(R"("name":"echo")") != std::string::npos);
}

// Resource updates, list changes and subscriptions/listen end to end: raw Streamable HTTP
// clients (and a stdio host) → the real mcp-mqtt-bridge → a real Mosquitto → the stdio egress →
// the C++ test server (tests/servers), whose `notify` tool publishes notifications on the
// server's shared capability topic on demand.
#include <atomic>
#include <thread>

#include <catch2/catch.hpp>
#include <signal.h>

#include "bridge/relay/subscription_hub.hpp"
#include "tests/http/server_test_support.hpp"
#include "tests/support/ingress_bridge.hpp"
#include "tests/support/wait.hpp"

using namespace mcpmqtt::test;
using namespace std::chrono_literals;
namespace bhttp = boost::beast::http;
namespace jsonrpc = mcpmqtt::jsonrpc;
using jsonrpc::Id;

namespace {

const std::string kVersion = "2025-11-25";
const std::string kServer = "test/subs";

std::string server_entry() {
  return R"({")" + kServer + R"(": {"command": ")" MCPMQTT_TEST_SERVER R"("}})";
}

// One MCP session over raw HTTP; every request on a connection of its own.
struct McpSession {
  const Bridge& bridge;
  std::string host;
  std::string sid;
  int next_id = 1000;  // listens in the tests use small ids

  explicit McpSession(const Bridge& b) : bridge(b), host("127.0.0.1:" + std::to_string(b.port)) {
    RawClient c(bridge.endpoint());
    c.send(bhttp::verb::post, "/mcp", post_headers(host), initialize_body(1, kVersion));
    auto head = c.read_header();
    REQUIRE(head.status == 200);
    sid = head.header("mcp-session-id");
    REQUIRE_FALSE(sid.empty());
    REQUIRE(sse_response(c));
    REQUIRE(RawClient(bridge.endpoint())
                .request(bhttp::verb::post, "/mcp", headers(), kInitialized)
                .status == 202);
  }
  Headers headers() const { return post_headers(host, sid, kVersion); }

  // Sends a request; returns every message of its stream, the response last.
  std::vector<Message> exchange(const std::string& method, const std::string& params,
                                std::chrono::seconds patience = 20s) {
    RawClient c(bridge.endpoint());
    c.send(bhttp::verb::post, "/mcp", headers(), request_body(next_id++, method, params));
    REQUIRE(c.read_header().status == 200);
    std::vector<Message> out;
    while (auto e = c.next_message(patience)) {
      auto m = e->message();
      REQUIRE(m);
      out.push_back(*m);
    }
    REQUIRE_FALSE(out.empty());
    REQUIRE(out.back().is_response());
    return out;
  }
  Message call(const std::string& method, const std::string& params) {
    return exchange(method, params).back();
  }
  // Asks the test server to publish a notification (on the capability topic, via MQTT).
  std::vector<Message> notify(const std::string& method, const std::string& uri = "", int count = 1,
                              std::chrono::seconds patience = 20s) {
    return exchange("tools/call",
                    R"({"name":"notify","arguments":{"method":")" + method + R"(","uri":")" + uri +
                        R"(","count":)" + std::to_string(count) + "}}",
                    patience);
  }
  // The URIs the server side of this session is subscribed to, as the server reports them.
  std::string server_subscriptions() {
    return at(call("tools/call", R"({"name":"subscriptions","arguments":{}})"),
              {"result", "content", "0", "text"});
  }
  std::unique_ptr<RawClient> open_get() {
    auto c = std::make_unique<RawClient>(bridge.endpoint());
    c->send(bhttp::verb::get, "/mcp", get_headers(host, sid));
    REQUIRE(c->read_header().status == 200);
    return c;
  }
  // Opens a subscriptions/listen stream; `id` is JSON ("7" or "\"s\"").
  std::unique_ptr<RawClient> listen(const std::string& id, const std::string& notifications) {
    auto c = std::make_unique<RawClient>(bridge.endpoint());
    c->send(bhttp::verb::post, "/mcp", headers(),
            R"({"jsonrpc":"2.0","id":)" + id +
                R"(,"method":"subscriptions/listen","params":{"notifications":)" + notifications +
                "}}");
    REQUIRE(c->read_header().status == 200);
    return c;
  }
};

Message next(RawClient& c, std::chrono::milliseconds timeout = 20s) {
  auto e = c.next_message(timeout);
  REQUIRE(e);
  auto m = e->message();
  REQUIRE(m);
  return *m;
}

// Messages of a stream up to and including the first with `method`.
std::vector<Message> until(RawClient& c, const std::string& method) {
  std::vector<Message> out;
  while (true) {
    out.push_back(next(c));
    if (out.back().method() == method) return out;
  }
}

std::vector<std::string> describe(const std::vector<Message>& ms) {
  std::vector<std::string> out;
  for (const auto& m : ms) {
    std::string d = m.is_response() ? "response " + m.id().to_string() : m.method();
    if (auto sid = mcpmqtt::bridge::subscription_id(m)) d += " #" + sid->to_string();
    if (auto uri = at(m, {"params", "uri"}); !uri.empty()) d += " " + uri;
    out.push_back(d);
  }
  return out;
}

const std::string kUpdated = "notifications/resources/updated";
const std::string kTools = "notifications/tools/list_changed";
const std::string kPrompts = "notifications/prompts/list_changed";
const std::string kAck = "notifications/subscriptions/acknowledged";

}  // namespace

TEST_CASE(
    "subscriptions: two sessions subscribed to different URIs each receive only their own "
    "updates from the shared capability topic",
    "[subscriptions]") {
  Mosquitto broker;
  Bridge bridge(broker, server_entry(), kServer);
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
  McpSession a(bridge), b(bridge), c(bridge);
  CHECK(a.call("resources/subscribe", R"({"uri":"a://1"})").kind() == jsonrpc::Kind::result);
  CHECK(b.call("resources/subscribe", R"({"uri":"a://2"})").kind() == jsonrpc::Kind::result);
  auto ga = a.open_get();
  auto gb = b.open_get();
  // A third session makes its server publish: the bridge's MQTT sessions of all three hear it.
  std::vector<Message> from_c;
  for (auto part : {c.notify(kUpdated, "a://1"), c.notify(kUpdated, "a://2"),
                    c.notify(kTools)}) {  // list changes concern every session: the end marker
    from_c.insert(from_c.end(), part.begin(), part.end());
  }
  CHECK(describe(until(*ga, kTools)) == std::vector<std::string>{kUpdated + " a://1", kTools});
  CHECK(describe(until(*gb, kTools)) == std::vector<std::string>{kUpdated + " a://2", kTools});
  // The session that subscribed to nothing got no resource update on any of its streams.
  for (const auto& m : from_c)
    CHECK(m.method() != kUpdated);
  // After an unsubscribe, a://1 no longer reaches the first session.
  CHECK(a.call("resources/unsubscribe", R"({"uri":"a://1"})").kind() == jsonrpc::Kind::result);
  c.notify(kUpdated, "a://1");
  c.notify(kTools);
  CHECK(describe(until(*ga, kTools)) == std::vector<std::string>{kTools});
}

TEST_CASE(
    "subscriptions/listen (000): the acknowledgement comes first, a listen for tool-list changes "
    "never gets a resource update, and concurrent listens are told apart by subscriptionId",
    "[subscriptions][listen]") {
  Mosquitto broker;
  Bridge bridge(broker, server_entry(), kServer);
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
  McpSession a(bridge);
  auto tools = a.listen("101", R"({"toolsListChanged":true})");
  auto res = a.listen(R"("r")", R"({"resourceSubscriptions":["a://x"],"promptsListChanged":true})");
  auto ack1 = next(*tools);
  CHECK(ack1.method() == kAck);
  CHECK(mcpmqtt::bridge::subscription_id(ack1) == Id::integer(101));
  CHECK(at(ack1, {"params", "notifications"}) == R"({"toolsListChanged":true})");
  auto ack2 = next(*res);
  CHECK(ack2.method() == kAck);
  CHECK(mcpmqtt::bridge::subscription_id(ack2) == Id::string("r"));
  CHECK(at(ack2, {"params", "notifications"}) ==
        R"({"promptsListChanged":true,"resourceSubscriptions":["a://x"]})");
  CHECK(a.server_subscriptions() == R"(["a://x"])");  // the bridge subscribed for the listen

  // The session's own calls make the server publish; their untagged copies stay off the
  // listen streams (they go to the calls' own streams).
  std::vector<Message> on_calls;
  for (auto part : {a.notify(kUpdated, "a://x"), a.notify(kTools), a.notify(kUpdated, "a://x"),
                    a.notify(kUpdated, "a://other"), a.notify(kPrompts), a.notify(kTools)}) {
    on_calls.insert(on_calls.end(), part.begin(), part.end());
  }
  CHECK(describe(until(*tools, kTools)) == std::vector<std::string>{kTools + " #101"});
  CHECK(describe(until(*tools, kTools)) == std::vector<std::string>{kTools + " #101"});
  CHECK(describe(until(*res, kPrompts)) == std::vector<std::string>{kUpdated + " #\"r\" a://x",
                                                                    kUpdated + " #\"r\" a://x",
                                                                    kPrompts + " #\"r\""});
  for (const auto& m : on_calls)
    CHECK_FALSE(mcpmqtt::bridge::subscription_id(m));
}

TEST_CASE(
    "subscriptions/listen: cancelling one listen leaves the other working, and the server is "
    "unsubscribed only when the last interested listen is gone",
    "[subscriptions][listen]") {
  Mosquitto broker;
  // Debug logs tell when the bridge has seen the stream close.
  Bridge bridge(broker, server_entry(), kServer, R"("log": {"level": "debug"}, )");
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
  McpSession a(bridge);
  auto one = a.listen("1", R"({"resourceSubscriptions":["a://x"]})");
  auto two = a.listen("2", R"({"resourceSubscriptions":["a://x"]})");
  CHECK(next(*one).method() == kAck);
  CHECK(next(*two).method() == kAck);
  CHECK(a.server_subscriptions() == R"(["a://x"])");

  // 000 §Cancellation: closing the SSE stream cancels that listen.
  one->close();
  REQUIRE(bridge.proc->wait_for_log("subscription 1 on stream"));
  a.notify(kUpdated, "a://x");
  CHECK(describe(until(*two, kUpdated)) == std::vector<std::string>{kUpdated + " #2 a://x"});
  CHECK(a.server_subscriptions() == R"(["a://x"])");

  two->close();
  CHECK(eventually([&] { return a.server_subscriptions() == "[]"; }));
}

TEST_CASE(
    "subscriptions/listen: a stalled SSE reader gets its stream closed while a healthy one "
    "keeps receiving",
    "[subscriptions][listen][slow]") {
  Mosquitto broker;
  Bridge bridge(broker, server_entry(), kServer, "",
                R"(, "limits": {"stream_queue_messages": 64})");
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
  // Large notifications fill the socket buffers of the stalled reader quickly.
  const std::string uri = "a://" + std::string(64 * 1024, 'x');
  const int count = 400;
  McpSession stalled(bridge), healthy(bridge), publisher(bridge);
  auto slow = stalled.listen("1", R"({"resourceSubscriptions":[")" + uri + R"("]})");
  auto fast = healthy.listen("1", R"({"resourceSubscriptions":[")" + uri + R"("]})");
  REQUIRE(next(*slow).method() == kAck);  // then it never reads again
  REQUIRE(next(*fast).method() == kAck);

  std::atomic<int> received{0};
  {
    // jthread: a failed REQUIRE below still joins it (a joinable std::thread would abort).
    // 25 MiB of notifications: generous timeouts for a loaded sanitizer build.
    std::jthread reader([&] {
      while (received < count) {
        auto e = fast->next_message(60s);
        if (!e) return;
        auto m = e->message();
        if (m && m->method() == kUpdated) ++received;
      }
    });
    publisher.notify(kUpdated, uri, count, 120s);
  }
  CHECK(received == count);
  CHECK(bridge.proc->wait_for_log("reads its SSE stream too slowly"));
  // The stalled stream was closed: draining it ends in an error or EOF, not in a wait.
  bool closed = false;
  for (int i = 0; i < 4 * count && !closed; ++i) {
    if (!slow->next_event(5s)) closed = true;
  }
  CHECK(closed);
  CHECK((slow->stream_failed() || slow->stream_ended()));
  // Its listen was cancelled and its session's server subscription released; the healthy
  // session still holds its own.
  CHECK(eventually([&] { return stalled.server_subscriptions() == "[]"; }));
  CHECK(healthy.server_subscriptions() == "[\"" + uri + "\"]");
}

TEST_CASE(
    "stdio ingress: a listen is acknowledged first, gets tagged updates, notifications/cancelled "
    "ends it, and SIGTERM answers the open one with a result",
    "[subscriptions][listen][stdio]") {
  Mosquitto broker;
  BridgeProcess egress(
      {"expose", "--broker", broker.url(), "--name", kServer, "--", MCPMQTT_TEST_SERVER});
  REQUIRE(egress.wait_for_log("online"));
  BridgeProcess host({"stdio", "--broker", broker.url(), "--server", kServer}, {}, {}, true);
  auto& p = host.process();
  auto send = [&](const std::string& line) { p.write_stdin(line + "\n"); };
  auto read = [&] {
    auto line = p.read_line(20s);
    REQUIRE(line);
    auto m = Message::parse(*line);
    REQUIRE(m);
    return *m;
  };
  // Reads messages until the response with `id`; returns them all.
  auto until_response = [&](int id) {
    std::vector<Message> out;
    do {
      out.push_back(read());
    } while (!(out.back().is_response() && out.back().id() == Id::integer(id)));
    return out;
  };
  auto notify = [&](int id, const std::string& method, const std::string& uri) {
    send(R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
         R"(,"method":"tools/call","params":{"name":"notify","arguments":{"method":")" + method +
         R"(","uri":")" + uri + R"("}}})");
    return describe(until_response(id));
  };
  send(initialize_body(1, kVersion));
  CHECK(read().kind() == jsonrpc::Kind::result);
  send(kInitialized);
  send(
      R"({"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["a://x"]}}})");
  auto ack = read();
  CHECK(ack.method() == kAck);
  CHECK(mcpmqtt::bridge::subscription_id(ack) == Id::integer(5));
  // The update arrives tagged; whether before or after the call's response is up to MQTT.
  auto got = notify(6, kUpdated, "a://x");
  if (got.size() == 1) got.push_back(describe({read()}).front());
  CHECK(std::count(got.begin(), got.end(), kUpdated + " #5 a://x") == 1);

  // 000 §Cancellation (stdio): notifications/cancelled naming the listen ends it.
  send(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}})");
  bool released = false;
  for (int i = 7; i < 107 && !released; ++i) {
    send(R"({"jsonrpc":"2.0","id":)" + std::to_string(i) +
         R"(,"method":"tools/call","params":{"name":"subscriptions","arguments":{}}})");
    auto ms = until_response(i);
    released = at(ms.back(), {"result", "content", "0", "text"}) == "[]";
    if (!released) std::this_thread::sleep_for(100ms);
  }
  CHECK(released);
  CHECK(notify(200, kUpdated, "a://x") == std::vector<std::string>{"response 200"});

  // SIGTERM: the bridge ends gracefully, and the open listen gets its result.
  send(
      R"({"jsonrpc":"2.0","id":300,"method":"subscriptions/listen","params":{"notifications":{}}})");
  CHECK(read().method() == kAck);
  p.signal(SIGTERM);
  auto last = read();
  CHECK(last.id() == Id::integer(300));
  CHECK(last.kind() == jsonrpc::Kind::result);
  CHECK(host.wait_exit() == 0);
}

// SEP-1803 events in-band, end to end: raw Streamable HTTP clients → the real mcp-mqtt-bridge →
// a real Mosquitto → the stdio egress → the events test server (tests/servers/
// mcp_events_server.cpp), whose `trigger` tool publishes notifications/resources/updated with a
// payload on the server's shared capability topic.
#include <fstream>
#include <set>

#include <catch2/catch.hpp>
#include <rapidjson/document.h>
#include <signal.h>

#include "tests/http/server_test_support.hpp"
#include "tests/support/ingress_bridge.hpp"
#include "tests/support/prerequisite.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait.hpp"

using namespace mcpmqtt::test;
using namespace std::chrono_literals;
namespace bhttp = boost::beast::http;
namespace jsonrpc = mcpmqtt::jsonrpc;

namespace {

const std::string kVersion = "2025-11-25";
const std::string kServer = "test/events";
const std::string kUpdated = "notifications/resources/updated";

// What the events server writes, as it writes it (tests/servers/mcp_events_server.cpp).
const std::string kCapabilities =
    R"({"tools":{},"resources":{"subscribe":true,"listChanged":true,"events":true,"subscription":["notification"]}})";
const std::string kResources =
    R"({"resources":[{"uri":"event://x/tick","name":"tick","mimeType":"application/json",)"
    R"("_meta":{"eventSchema":{"type":"object","properties":{"seq":{"type":"integer"},"big":{"type":"integer"}},"required":["seq"]}}}]})";
const std::string kTemplates =
    R"({"resourceTemplates":[{"uriTemplate":"event://x/tick/{n}","name":"tick-n",)"
    R"("_meta":{"paramsSchema":{"type":"object","properties":{"n":{"type":"integer","minimum":0}},"required":["n"]},)"
    R"("eventSchema":{"type":"object","properties":{"seq":{"type":"integer"}},"required":["seq"]},)"
    R"("webhookType":"x.tick.n"}}]})";
std::string payload(int seq) {
  return R"({"z":1,"big":9007199254740993,"huge":12345678901234567891,"a":{"y":[3,2,1],"b":"\u00e9t\u00e9"},"seq":)" +
         std::to_string(seq) + "}";
}

std::string server_entry() {
  return R"({")" + kServer + R"(": {"command": ")" MCPMQTT_EVENTS_SERVER R"("}})";
}

// One MCP session over raw HTTP; every request on a connection of its own.
struct Session {
  const Bridge& bridge;
  std::string host;
  std::string sid;
  std::string initialize_data;  // the initialize response as the bridge sent it
  std::string token;            // bearer token, when the bridge wants one
  int next_id = 1000;

  explicit Session(const Bridge& b, std::string bearer = {})
      : bridge(b), host("127.0.0.1:" + std::to_string(b.port)), token(std::move(bearer)) {
    RawClient c(bridge.endpoint());
    auto h = post_headers(host);
    if (!token.empty()) h.emplace_back("Authorization", "Bearer " + token);
    c.send(bhttp::verb::post, "/mcp", h, initialize_body(1, kVersion));
    auto head = c.read_header();
    REQUIRE(head.status == 200);
    sid = head.header("mcp-session-id");
    REQUIRE_FALSE(sid.empty());
    while (auto e = c.next_message())
      initialize_data = e->data;
    REQUIRE_FALSE(sid.empty());
    REQUIRE(RawClient(bridge.endpoint())
                .request(bhttp::verb::post, "/mcp", headers(), kInitialized)
                .status == 202);
  }
  Headers headers() const {
    auto h = post_headers(host, sid, kVersion);
    if (!token.empty()) h.emplace_back("Authorization", "Bearer " + token);
    return h;
  }

  // Sends a request; returns every event of its stream, the response last.
  std::vector<SseEvent> exchange(const std::string& method, const std::string& params) {
    RawClient c(bridge.endpoint());
    c.send(bhttp::verb::post, "/mcp", headers(), request_body(next_id++, method, params));
    REQUIRE(c.read_header().status == 200);
    std::vector<SseEvent> out;
    while (auto e = c.next_message(20s))
      out.push_back(*e);
    REQUIRE_FALSE(out.empty());
    return out;
  }
  std::string result_data(const std::string& method, const std::string& params = "{}") {
    return exchange(method, params).back().data;
  }
  void subscribe(const std::string& uri) {
    auto m = exchange("resources/subscribe", R"({"uri":")" + uri + R"("})").back().message();
    REQUIRE(m);
    REQUIRE(m->kind() == jsonrpc::Kind::result);
  }
  void trigger(const std::string& uri, int count = 1) {
    exchange("tools/call", R"({"name":"trigger","arguments":{"uri":")" + uri + R"(","count":)" +
                               std::to_string(count) + "}}");
  }
  Message call(const std::string& method, const std::string& params) {
    auto m = exchange(method, params).back().message();
    REQUIRE(m);
    return *m;
  }
  std::unique_ptr<RawClient> open_get() {
    auto c = std::make_unique<RawClient>(bridge.endpoint());
    c->send(bhttp::verb::get, "/mcp", get_headers(host, sid));
    REQUIRE(c->read_header().status == 200);
    return c;
  }
  std::unique_ptr<RawClient> listen(const std::string& id, const std::string& uris) {
    auto c = std::make_unique<RawClient>(bridge.endpoint());
    c->send(
        bhttp::verb::post, "/mcp", headers(),
        R"({"jsonrpc":"2.0","id":)" + id +
            R"(,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":)" +
            uris + "}}}");
    REQUIRE(c->read_header().status == 200);
    return c;
  }
};

// The raw data of a stream's events up to and including the update of `last`.
std::vector<std::string> updates_until(RawClient& c, const std::string& last) {
  std::vector<std::string> out;
  while (true) {
    auto e = c.next_message(20s);
    REQUIRE(e);
    auto m = e->message();
    REQUIRE(m);
    if (m->method() != kUpdated) continue;  // the listen's acknowledgement
    if (at(*m, {"params", "uri"}) == last) return out;
    out.push_back(e->data);
  }
}

std::string untagged(const std::string& uri, int seq) {
  return R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":")" + uri +
         R"(","payload":)" + payload(seq) + "}}";
}

std::string tagged(const std::string& id, const std::string& uri, int seq) {
  return R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":)" +
         id + R"(},"uri":")" + uri + R"(","payload":)" + payload(seq) + "}}";
}

}  // namespace

TEST_CASE(
    "events (SEP-1803 §Capability Advertisement, §Event Resources): capabilities, event "
    "resources and templates reach the HTTP client byte for byte",
    "[events]") {
  Mosquitto broker;
  Bridge bridge(broker, server_entry(), kServer);
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
  Session s(bridge);
  CHECK_THAT(s.initialize_data, Catch::Contains(R"("capabilities":)" + kCapabilities + ","));
  CHECK(s.result_data("resources/list") ==
        R"({"jsonrpc":"2.0","id":1000,"result":)" + kResources + "}");
  CHECK(s.result_data("resources/templates/list") ==
        R"({"jsonrpc":"2.0","id":1001,"result":)" + kTemplates + "}");
}

TEST_CASE(
    "events (SEP-1803 §In-Band): an update reaches exactly the sessions and listens whose "
    "subscription covers its URI, its payload byte for byte",
    "[events]") {
  Mosquitto broker;
  Bridge bridge(broker, server_entry(), kServer);
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
  const std::string end = "event://end";
  Session tick(bridge), ticks(bridge), tick7(bridge), listener(bridge), trigger(bridge);
  tick.subscribe("event://x/tick");
  ticks.subscribe("event://x/ticks");
  tick7.subscribe("event://x/tick/7");
  for (auto* s : {&tick, &ticks, &tick7})
    s->subscribe(end);
  auto g_tick = tick.open_get();
  auto g_ticks = ticks.open_get();
  auto g_tick7 = tick7.open_get();
  auto l_tick = listener.listen("1", R"(["event://x/tick",")" + end + R"("])");
  auto l_tic = listener.listen("2", R"(["event://x/tic",")" + end + R"("])");
  for (auto* l : {l_tick.get(), l_tic.get()}) {
    auto ack = l->next_message(20s);
    REQUIRE(ack);
    REQUIRE(ack->message()->method() == "notifications/subscriptions/acknowledged");
  }

  const std::vector<std::string> uris = {"event://x/tick/7", "event://x/tick?a=1",
                                         "event://x/tick#f", "event://x/ticks",
                                         "event://x/tic",    "event://x/tick"};
  for (const auto& uri : uris)
    trigger.trigger(uri);
  trigger.trigger(end);

  CHECK(updates_until(*g_tick, end) ==
        std::vector<std::string>{untagged("event://x/tick/7", 0), untagged("event://x/tick?a=1", 0),
                                 untagged("event://x/tick#f", 0), untagged("event://x/tick", 0)});
  CHECK(updates_until(*g_ticks, end) == std::vector<std::string>{untagged("event://x/ticks", 0)});
  CHECK(updates_until(*g_tick7, end) == std::vector<std::string>{untagged("event://x/tick/7", 0)});
  CHECK(updates_until(*l_tick, end) ==
        std::vector<std::string>{
            tagged("1", "event://x/tick/7", 0), tagged("1", "event://x/tick?a=1", 0),
            tagged("1", "event://x/tick#f", 0), tagged("1", "event://x/tick", 0)});
  CHECK(updates_until(*l_tic, end) == std::vector<std::string>{tagged("2", "event://x/tic", 0)});
}

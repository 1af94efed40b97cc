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
#include "tests/support/mqtt_mcp_client.hpp"
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

// ---- webhooks served by the bridge ------------------------------------------------------------

namespace {

// tests/node/webhook-receiver.mjs: verifies every webhook with the npm `standardwebhooks`
// package and reports it on stdout.
struct Receiver {
  std::unique_ptr<Process> proc;
  std::uint16_t port = 0;
  struct Hit {
    std::string path, id, raw, body;
    bool verified = false;
    int status = 0;
  };
  std::vector<Hit> hits;

  explicit Receiver(std::uint16_t fixed_port = 0) { start(fixed_port); }
  void start(std::uint16_t fixed_port) {
    proc = Process::start(
        Process::piped({node_binary(), MCPMQTT_SOURCE_DIR "/tests/node/webhook-receiver.mjs",
                        "--port", std::to_string(fixed_port)}));
    auto line = proc->read_line(30s);
    REQUIRE(line);
    rapidjson::Document d;
    d.Parse(line->c_str());
    REQUIRE(d.IsObject());
    REQUIRE(d.HasMember("port"));
    port = static_cast<std::uint16_t>(d["port"].GetUint());
  }
  void stop() {
    proc->signal(SIGKILL);
    proc->wait_for(10s);
    drain(0ms);
  }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port) + path;
  }
  void control(const std::string& what, const std::string& path, const std::string& value) {
    RawClient c({boost::asio::ip::make_address("127.0.0.1"), port});
    REQUIRE(c.request(bhttp::verb::put, "/control/" + what + path,
                      {{"Host", "127.0.0.1"}, {"Content-Type", "text/plain"}}, value)
                .status == 204);
  }
  // Reads what the receiver reported within `wait`.
  void drain(std::chrono::milliseconds wait) {
    while (auto line = proc->read_line(wait)) {
      rapidjson::Document d;
      d.Parse(line->c_str());
      if (!d.IsObject() || !d.HasMember("type") || std::string(d["type"].GetString()) != "webhook")
        continue;
      Hit h;
      h.path = d["path"].GetString();
      h.id = d["id"].IsString() ? d["id"].GetString() : "";
      h.raw = d["raw"].GetString();
      h.body = d["body"].IsNull() ? "" : jsonrpc::to_json(d["body"]);
      h.verified = d["verified"].GetBool();
      h.status = d["status"].GetInt();
      hits.push_back(std::move(h));
      wait = 0ms;
    }
  }
  // Waits until `pred(hits)` holds.
  bool until(const std::function<bool(const std::vector<Hit>&)>& pred,
             std::chrono::seconds patience = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (std::chrono::steady_clock::now() < deadline) {
      drain(100ms);
      if (pred(hits)) return true;
    }
    return false;
  }
  std::size_t delivered(const std::string& path) const {
    std::set<std::string> ids;
    for (const auto& h : hits)
      if (h.path == path && h.status / 100 == 2 && h.verified) ids.insert(h.id);
    return ids.size();
  }
};

std::string webhooks_config(const std::string& db, const std::string& extra = "") {
  return R"("events": {"webhooks": {"enabled": true, "database": ")" + db +
         R"(", "allow_http": true, "allow_targets": ["127.0.0.1"], "retry_min_ms": 100, "retry_max_ms": 400)" +
         extra + "}}, ";
}

bool have_node() {
  if (std::ifstream(node_binary()).good()) return true;
  missing_prerequisite("the pinned Node (scripts/setup-node.sh) for the webhook receiver");
  return false;
}

struct Registered {
  std::string uri, key;
};

Registered register_webhook(Session& s, const std::string& uris, const std::string& target) {
  auto m = s.call("resources/subscriptions/register",
                  R"({"uris":)" + uris + R"(,"targetUri":")" + target + R"("})");
  INFO(m.text());
  REQUIRE(m.kind() == jsonrpc::Kind::result);
  Registered r{at(m, {"result", "subscription", "uri"}),
               at(m, {"result", "subscription", "webhookSecret", "key"})};
  CHECK(at(m, {"result", "subscription", "webhookSecret", "type"}) == "standard");
  CHECK(at(m, {"result", "subscription", "targetUri"}) == target);
  REQUIRE(r.key.rfind("whsec_", 0) == 0);
  return r;
}

const std::string kWebhookCapabilities =
    R"({"tools":{},"resources":{"subscribe":true,"listChanged":true,"events":true,"subscription":["notification","webhook"]}})";

}  // namespace

TEST_CASE(
    "webhooks (SEP-1803 §Out-of-Band): the bridge advertises webhook, registers, and delivers "
    "each covering event signed (verified by the npm standardwebhooks package), payload as "
    "written",
    "[events][webhooks]") {
  if (!have_node()) return;
  Mosquitto broker;
  TempDir dir;
  Receiver rx;
  Bridge bridge(broker, server_entry(), kServer, webhooks_config(dir.path() + "/w.sqlite3"));
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
  Session s(bridge), trigger(bridge);
  CHECK_THAT(s.initialize_data, Catch::Contains(R"("capabilities":)" + kWebhookCapabilities));
  auto reg = register_webhook(s, R"(["event://x/tick"])", rx.url("/a"));
  rx.control("secret", "/a", reg.key);
  REQUIRE(bridge.proc->wait_for_log("subscribed event://x/tick"));
  trigger.trigger("event://x/ticks");  // not covered
  trigger.trigger("event://x/tick/7");
  REQUIRE(rx.until([](const auto& hits) { return !hits.empty(); }));
  rx.drain(500ms);
  REQUIRE(rx.hits.size() == 1);
  const auto& h = rx.hits[0];
  CHECK(h.verified);
  CHECK(h.id.rfind("msg_", 0) == 0);
  CHECK_THAT(h.raw, Catch::Contains(R"("uri":"event://x/tick/7","payload":)" + payload(0) + "}"));
  CHECK_THAT(h.raw, Catch::Contains(R"("subscription":")" + reg.uri + "\""));
  // SEP-1803 §Event Resources: the event's template (event://x/tick/{n}) names its webhook
  // type; an event no template describes has the bridge's default.
  CHECK_THAT(h.raw, Catch::StartsWith(R"({"type":"x.tick.n","timestamp":")"));
  trigger.trigger("event://x/tick");
  REQUIRE(rx.until([](const auto& hits) { return hits.size() == 2; }));
  CHECK(rx.hits[1].verified);
  CHECK_THAT(rx.hits[1].raw,
             Catch::StartsWith(R"({"type":"notifications/resources/updated","timestamp":")"));

  // SEP-1803: out-of-band subscriptions are listed as subscription:// resources — after the
  // server's own, which pass as written, and only to the principal that made them.
  auto list = s.result_data("resources/list");
  CHECK_THAT(list, Catch::Contains(kResources.substr(1, kResources.size() - 4)));
  CHECK_THAT(list, Catch::Contains(R"(,{"uri":")" + reg.uri + R"(","name":"webhook )"));
  CHECK_THAT(list, Catch::Contains(R"("mimeType":"application/json"}]})"));

  // The registration reads as a subscription:// resource with its last delivery.
  auto read = s.call("resources/read", R"({"uri":")" + reg.uri + R"("})");
  REQUIRE(read.kind() == jsonrpc::Kind::result);
  CHECK_THAT(at(read, {"result", "contents", "0", "text"}), Catch::Contains("delivered (204)"));
  CHECK_THAT(at(read, {"result", "contents", "0", "text"}), !Catch::Contains("whsec_"));
  // Metrics count it.
  REQUIRE(eventually([&] {
    auto r = RawClient(bridge.endpoint()).request(bhttp::verb::get, "/metrics", {{"Host", s.host}});
    return r.body.find(R"(mcpmqtt_webhook_deliveries_total{outcome="delivered"} 2)") !=
           std::string::npos;
  }));
}

TEST_CASE(
    "webhooks: a receiver down for a while, then up, gets every event, each webhook-id "
    "delivered once",
    "[events][webhooks]") {
  if (!have_node()) return;
  Mosquitto broker;
  TempDir dir;
  Receiver rx;
  Bridge bridge(broker, server_entry(), kServer, webhooks_config(dir.path() + "/w.sqlite3"));
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
  Session s(bridge);
  auto reg = register_webhook(s, R"(["event://x/tick"])", rx.url("/a"));
  REQUIRE(bridge.proc->wait_for_log("subscribed event://x/tick"));
  const auto port = rx.port;
  rx.stop();  // connection refused from now on
  const int n = 20;
  s.trigger("event://x/tick", n);
  REQUIRE(eventually([&] {
    auto r = RawClient(bridge.endpoint()).request(bhttp::verb::get, "/metrics", {{"Host", s.host}});
    return r.body.find(R"(mcpmqtt_webhook_attempts_total{result="error"})") != std::string::npos;
  }));
  rx.start(port);
  rx.control("secret", "/a", reg.key);
  REQUIRE(rx.until([&](const auto&) { return rx.delivered("/a") == static_cast<std::size_t>(n); },
                   60s));
  rx.drain(1s);
  std::set<std::string> seqs;
  std::map<std::string, int> per_id;
  for (const auto& h : rx.hits) {
    // Until the test hands the receiver the secret it answers 401, and the bridge retries.
    if (!h.verified) {
      CHECK(h.status == 401);
      continue;
    }
    CHECK(h.status == 204);
    ++per_id[h.id];
    seqs.insert(h.raw.substr(h.raw.find("\"seq\":")));
  }
  CHECK(per_id.size() == static_cast<std::size_t>(n));
  for (const auto& [id, count] : per_id)
    CHECK(count == 1);
  CHECK(seqs.size() == static_cast<std::size_t>(n));
}

TEST_CASE(
    "webhooks: the bridge SIGKILLed with events accepted but not delivered delivers them after "
    "restart, same webhook-ids, nothing lost",
    "[events][webhooks]") {
  if (!have_node()) return;
  Mosquitto broker;
  TempDir dir;
  Receiver rx;
  const std::string db = dir.path() + "/w.sqlite3";
  std::set<std::string> ids_before;
  const int n = 10;
  {
    Bridge bridge(broker, server_entry(), kServer, webhooks_config(db));
    REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
    Session s(bridge);
    auto reg = register_webhook(s, R"(["event://x/tick"])", rx.url("/a"));
    rx.control("secret", "/a", reg.key);
    rx.control("status", "/a", "503");  // accepted by the bridge, never delivered
    REQUIRE(bridge.proc->wait_for_log("subscribed event://x/tick"));
    s.trigger("event://x/tick", n);
    REQUIRE(rx.until([&](const auto& hits) {
      std::set<std::string> ids;
      for (const auto& h : hits)
        ids.insert(h.id);
      return ids.size() == static_cast<std::size_t>(n);
    }));
    for (const auto& h : rx.hits) {
      CHECK(h.verified);
      ids_before.insert(h.id);
    }
    CHECK(rx.delivered("/a") == 0);
    bridge.proc->process().signal(SIGKILL);
    bridge.proc->process().wait_for(10s);
  }
  rx.control("status", "/a", "204");
  rx.hits.clear();
  Bridge again(broker, server_entry(), kServer, webhooks_config(db));
  REQUIRE(rx.until([&](const auto&) { return rx.delivered("/a") == static_cast<std::size_t>(n); },
                   60s));
  std::set<std::string> ids_after;
  for (const auto& h : rx.hits)
    if (h.status == 204) ids_after.insert(h.id);
  CHECK(ids_after == ids_before);
  // After the restart the bridge holds the upstream subscription again: new events arrive.
  REQUIRE(again.proc->wait_for_log("subscribed event://x/tick"));
  Session s(again);
  s.trigger("event://x/tick");
  REQUIRE(rx.until([&](const auto&) { return rx.delivered("/a") == n + 1u; }));
}

TEST_CASE("webhooks: 410 Gone deregisters, and the subscription:// resource is gone",
          "[events][webhooks]") {
  if (!have_node()) return;
  Mosquitto broker;
  TempDir dir;
  Receiver rx;
  Bridge bridge(broker, server_entry(), kServer, webhooks_config(dir.path() + "/w.sqlite3"));
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
  Session s(bridge);
  auto reg = register_webhook(s, R"(["event://x/tick"])", rx.url("/a"));
  rx.control("secret", "/a", reg.key);
  rx.control("status", "/a", "410");
  REQUIRE(bridge.proc->wait_for_log("subscribed event://x/tick"));
  s.trigger("event://x/tick");
  REQUIRE(bridge.proc->wait_for_log("answered 410 Gone"));
  auto read = s.call("resources/read", R"({"uri":")" + reg.uri + R"("})");
  CHECK(read.kind() == jsonrpc::Kind::error);
  rx.control("status", "/a", "204");
  rx.drain(200ms);
  const auto before = rx.hits.size();
  s.trigger("event://x/tick");
  s.trigger("event://x/tick");
  rx.drain(1500ms);
  CHECK(rx.hits.size() == before);
}

TEST_CASE(
    "webhooks: refused targets get -32602 with the reason (https only, no private address "
    "unless allow-listed)",
    "[events][webhooks]") {
  Mosquitto broker;
  TempDir dir;
  Bridge bridge(broker, server_entry(), kServer,
                R"("events": {"webhooks": {"enabled": true, "database": ")" + dir.path() +
                    R"(/w.sqlite3"}}, )");
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
  Session s(bridge);
  auto refuse = [&](const std::string& target) {
    auto m = s.call("resources/subscriptions/register",
                    R"({"uris":["event://x/tick"],"targetUri":")" + target + R"("})");
    REQUIRE(m.kind() == jsonrpc::Kind::error);
    CHECK(m.error().code == -32602);
    return m.error().message;
  };
  CHECK_THAT(refuse("http://example.com/hook"), Catch::Contains("must be https"));
  CHECK_THAT(refuse("https://127.0.0.1:9/hook"), Catch::Contains("loopback"));
  CHECK_THAT(refuse("https://localhost:9/hook"), Catch::Contains("loopback"));
  CHECK_THAT(refuse("https://10.1.2.3/hook"), Catch::Contains("private"));
  CHECK_THAT(refuse("https://169.254.169.254/latest"), Catch::Contains("link-local"));
  CHECK_THAT(refuse("https://[::1]/hook"), Catch::Contains("loopback"));
  CHECK_THAT(refuse("https://[fe80::1]/hook"), Catch::Contains("link-local"));
  // RFC 6052: 127.0.0.1 through the well-known NAT64 prefix is loopback still.
  CHECK_THAT(refuse("https://[64:ff9b::7f00:1]/hook"), Catch::Contains("loopback (through NAT64"));
  CHECK_THAT(refuse("not a url"), Catch::Contains("targetUri"));
}

TEST_CASE(
    "webhooks: deregistration stops deliveries, and another bearer token can neither read nor "
    "deregister a registration",
    "[events][webhooks]") {
  if (!have_node()) return;
  Mosquitto broker;
  TempDir dir;
  Receiver rx;
  const auto tokens = dir.write("tokens", "token-alice\ntoken-mallory\n");
  Bridge bridge(broker, server_entry(), kServer, webhooks_config(dir.path() + "/w.sqlite3"),
                R"(, "bearer_tokens_file": ")" + tokens + "\"");
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
  Session alice(bridge, "token-alice"), mallory(bridge, "token-mallory");
  auto reg = register_webhook(alice, R"(["event://x/tick"])", rx.url("/a"));
  rx.control("secret", "/a", reg.key);
  REQUIRE(bridge.proc->wait_for_log("subscribed event://x/tick"));

  auto other =
      mallory.call("resources/subscriptions/deregister", R"({"uri":")" + reg.uri + R"("})");
  REQUIRE(other.kind() == jsonrpc::Kind::error);
  CHECK(other.error().code == -32602);
  CHECK(mallory.call("resources/read", R"({"uri":")" + reg.uri + R"("})").kind() ==
        jsonrpc::Kind::error);
  // Nor is it in another token's resources/list.
  CHECK_THAT(alice.result_data("resources/list"), Catch::Contains(reg.uri));
  CHECK_THAT(mallory.result_data("resources/list"), !Catch::Contains("subscription://"));
  alice.trigger("event://x/tick");
  REQUIRE(rx.until([&](const auto&) { return rx.delivered("/a") == 1; }));

  auto mine = alice.call("resources/subscriptions/deregister", R"({"uri":")" + reg.uri + R"("})");
  CHECK(mine.kind() == jsonrpc::Kind::result);
  alice.trigger("event://x/tick");
  alice.trigger("event://x/tick");
  rx.drain(1500ms);
  CHECK(rx.hits.size() == 1);
}

TEST_CASE(
    "webhooks (SEP-1803 §Backward Compatibility): a server that advertises webhook itself "
    "answers register and deregister, the bridge passes them through",
    "[events][webhooks]") {
  Mosquitto broker;
  TempDir dir;
  Bridge bridge(broker,
                R"({")" + kServer +
                    R"(": {"command": ")" MCPMQTT_EVENTS_SERVER R"(", "args": ["--webhook"]}})",
                kServer, webhooks_config(dir.path() + "/w.sqlite3"));
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
  Session s(bridge);
  CHECK_THAT(s.initialize_data, Catch::Contains(R"("capabilities":)" + kWebhookCapabilities));
  auto m = s.call("resources/subscriptions/register",
                  R"({"uris":["event://x/tick"],"targetUri":"https://example.com/h"})");
  REQUIRE(m.kind() == jsonrpc::Kind::result);
  CHECK(at(m, {"result", "_meta", "servedBy"}) == "events-server");
  CHECK(at(s.call("resources/subscriptions/deregister",
                  R"({"uri":"subscription://events-server/1"})"),
           {"result", "_meta", "servedBy"}) == "events-server");
}

TEST_CASE(
    "webhooks for MCP 2026-07-28 clients: server/discover offers webhook, and sessionless "
    "register, resources/list, resources/read and deregister work for the request's principal",
    "[events][webhooks][modern-ingress]") {
  if (!have_node()) return;
  Mosquitto broker;
  TempDir dir;
  Receiver rx;
  Bridge bridge(broker, server_entry(), kServer, webhooks_config(dir.path() + "/w.sqlite3"));
  REQUIRE(bridge.proc->wait_for_log("[directory] " + kServer + " online"));
  const std::string host = "127.0.0.1:" + std::to_string(bridge.port);
  const std::string meta =
      R"("_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}})";
  int id = 1;
  // One sessionless request: its final message (JSON, or the last event of an SSE answer).
  auto modern = [&](const std::string& method, const std::string& params,
                    const std::string& name = {}) {
    Headers h = post_headers(host);
    h.emplace_back("MCP-Protocol-Version", "2026-07-28");
    h.emplace_back("Mcp-Method", method);
    if (!name.empty()) h.emplace_back("Mcp-Name", name);
    RawClient c(bridge.endpoint());
    c.send(
        bhttp::verb::post, "/mcp", h,
        request_body(id++, method, params.empty() ? "{" + meta + "}" : params + "," + meta + "}"));
    auto head = c.read_header(20s);
    REQUIRE(head.status == 200);
    if (head.header("content-type") == "application/json") {
      REQUIRE(c.read_body(head, 20s));
      return head.body;
    }
    std::string last;
    while (auto e = c.next_message(20s))
      last = e->data;
    REQUIRE_FALSE(last.empty());
    return last;
  };
  // server/discover answers from the server's initialize result, as the bridge offers it.
  const auto discover = modern("server/discover", "");
  CHECK_THAT(discover, Catch::Contains(R"("subscription":["notification","webhook"])"));
  const auto reg = modern("resources/subscriptions/register",
                          R"({"uris":["event://x/tick"],"targetUri":")" + rx.url("/m") + "\"");
  INFO(reg);
  CHECK(json_at(reg, "result.resultType") == "complete");
  const auto uri = json_at(reg, "result.subscription.uri").value_or("");
  const auto key = json_at(reg, "result.subscription.webhookSecret.key").value_or("");
  REQUIRE(uri.rfind("subscription://", 0) == 0);
  REQUIRE(key.rfind("whsec_", 0) == 0);
  rx.control("secret", "/m", key);
  REQUIRE(bridge.proc->wait_for_log("subscribed event://x/tick"));
  modern("tools/call", R"({"name":"trigger","arguments":{"uri":"event://x/tick/3"})", "trigger");
  REQUIRE(rx.until([](const auto& hits) { return !hits.empty(); }));
  CHECK(rx.hits[0].verified);
  CHECK_THAT(rx.hits[0].raw, Catch::StartsWith(R"({"type":"x.tick.n",)"));
  // The registration is the principal's resource, listed and readable without a session.
  CHECK_THAT(modern("resources/list", ""), Catch::Contains(R"({"uri":")" + uri + "\""));
  const auto read = modern("resources/read", R"({"uri":")" + uri + "\"", uri);
  CHECK(json_at(read, "result.resultType") == "complete");
  CHECK_THAT(read, Catch::Contains("delivered (204)"));
  const auto gone = modern("resources/subscriptions/deregister", R"({"uri":")" + uri + "\"");
  CHECK(json_at(gone, "result.resultType") == "complete");
  const auto again = modern("resources/read", R"({"uri":")" + uri + "\"", uri);
  CHECK(json_at(again, "error.code").value_or("") != "");
}

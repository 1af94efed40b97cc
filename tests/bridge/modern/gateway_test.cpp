// The modern gateway (bridge/modern/gateway.hpp) with in-memory MQTT sessions and a manual clock:
// the test plays each MQTT-hosted server on the channel the gateway opens, and the 2026 client
// through handle() and its Responder.
#include "bridge/modern/gateway.hpp"

#include <catch2/catch.hpp>
#include <rapidjson/document.h>

#include "tests/support/memory_channel.hpp"

using namespace mcpmqtt;
using namespace mcpmqtt::test;
using namespace std::chrono_literals;
using bridge::CloseReason;
using bridge::ModernGateway;

namespace {

rapidjson::Document doc(std::string_view text) {
  rapidjson::Document d;
  d.Parse(text.data(), text.size());
  REQUIRE_FALSE(d.HasParseError());
  return d;
}

jsonrpc::Message msg(const std::string& text) {
  auto m = jsonrpc::Message::parse(text);
  REQUIRE(m);
  return *m;
}

std::string str(const rapidjson::Value& v) {
  return v.IsString() ? std::string(v.GetString(), v.GetStringLength()) : std::string();
}

// One MQTT session as the server sees it.
struct FakeSession {
  std::string server_name;
  std::shared_ptr<bridge::Channel> channel;
  std::vector<jsonrpc::Message> got;  // what the gateway sent the server
  std::optional<CloseReason> hung_up;

  // The messages received since the last call, as texts.
  std::vector<std::string> take() {
    std::vector<std::string> out;
    for (const auto& m : got)
      out.emplace_back(m.text());
    got.clear();
    return out;
  }
  // The last request of `method` received (and everything before it dropped).
  jsonrpc::Message expect(const std::string& method) {
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (got[i].is_request() && got[i].method() == method) {
        auto m = got[i];
        got.erase(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        return m;
      }
    }
    FAIL("no " << method << " request reached the server; got " << got.size() << " message(s)");
    return got.front();
  }
  void send(const std::string& text) { channel->send(msg(text)); }
  void reply(const jsonrpc::Message& request, const std::string& result_json) {
    channel->send(jsonrpc::Message::result(request.id(), result_json));
  }
  // Answers the gateway's initialize.
  void initialize(const std::string& caps =
                      R"({"tools":{"listChanged":true},"logging":{},"tasks":{"list":{}}})") {
    auto init = expect("initialize");
    reply(init, R"({"protocolVersion":"2025-11-25","capabilities":)" + caps +
                    R"(,"serverInfo":{"name":"srv","version":"1.2"},"instructions":"Be nice."})");
  }
};

struct Answer {
  std::vector<jsonrpc::Message> notes;
  std::optional<jsonrpc::Message> final;
  unsigned status = 0;
  rapidjson::Document json() const {
    REQUIRE(final);
    return doc(final->text());
  }
};

struct Harness {
  ManualScheduler clock;
  std::vector<std::shared_ptr<FakeSession>> sessions;
  std::shared_ptr<ModernGateway> gateway;

  explicit Harness(ModernGateway::Options o = {}) {
    if (o.state_secret.empty()) o.state_secret = std::string(32, 'k');
    gateway = ModernGateway::create(
        o, clock,
        [this](const std::string& name, const bridge::Principal&,
               std::shared_ptr<bridge::Channel> ch) {
          auto s = std::make_shared<FakeSession>();
          s->server_name = name;
          s->channel = ch;
          std::weak_ptr<FakeSession> weak = s;
          ch->start(bridge::Channel::Receiver{[weak](jsonrpc::Message m) {
                                                if (auto self = weak.lock())
                                                  self->got.push_back(std::move(m));
                                              },
                                              [weak](const CloseReason& why) {
                                                if (auto self = weak.lock()) self->hung_up = why;
                                              }});
          sessions.push_back(s);
        });
  }

  std::shared_ptr<Answer> call(const std::string& text, const std::string& principal = "p1",
                               std::optional<modern::Headers> headers = std::nullopt,
                               const std::string& server = "srv/a",
                               ModernGateway::CallId* id = nullptr,
                               std::vector<std::pair<std::string, std::string>> params = {}) {
    auto a = std::make_shared<Answer>();
    ModernGateway::Responder r;
    r.notify = [a](const jsonrpc::Message& m) { a->notes.push_back(m); };
    r.finish = [a](const jsonrpc::Message& m, unsigned status) {
      a->final = m;
      a->status = status;
    };
    auto cid = gateway->handle({server, bridge::Principal::keyed(principal), 1, msg(text),
                                std::move(headers), std::move(params)},
                               r);
    if (id) *id = cid;
    return a;
  }
};

const std::string kCaps = R"({"elicitation":{"form":{}},"sampling":{},"roots":{}})";

std::string meta(const std::string& caps = kCaps, const std::string& extra = "") {
  return R"("_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":)" +
         caps + R"(,"io.modelcontextprotocol/clientInfo":{"name":"cli","version":"9"})" + extra +
         "}";
}

std::string req(const std::string& id, const std::string& method, const std::string& params) {
  return R"({"jsonrpc":"2.0","id":)" + id + R"(,"method":")" + method + R"(","params":{)" + params +
         "}}";
}

std::string tool_call(const std::string& id, const std::string& name, const std::string& extra = "",
                      const std::string& caps = kCaps, const std::string& meta_extra = "") {
  return req(
      id, "tools/call",
      R"("name":")" + name + R"(","arguments":{"x":1})" + extra + "," + meta(caps, meta_extra));
}

}  // namespace

TEST_CASE(
    "modern gateway basic/index: every admission error carries the request's id and its HTTP "
    "status, and opens no session",
    "[modern-gateway][admission]") {
  Harness h;
  auto a = h.call(req("101", "server/discover",
                      R"("_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"})"));
  CHECK(a->status == 400);
  CHECK(a->final->error().code == -32602);
  CHECK(a->final->id() == jsonrpc::Id::integer(101));
  a = h.call(req(
      "\"s-1\"", "server/discover",
      R"("_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}})"));
  CHECK(a->status == 400);
  CHECK(a->final->error().code == -32022);
  CHECK(a->final->id() == jsonrpc::Id::string("s-1"));
  a = h.call(req("3", "server/discover", meta()), "p1",
             modern::Headers{"2025-11-25", "server/discover", std::nullopt});
  CHECK(a->status == 400);
  CHECK(a->final->error().code == -32020);
  a = h.call(req("4", "tools/call", R"("name":"x",)" + meta()), "p1",
             modern::Headers{"2026-07-28", "tools/call", std::nullopt});
  CHECK(a->status == 400);
  CHECK(a->final->error().code == -32020);
  a = h.call(req("20", "ping", meta()));
  CHECK(a->status == 404);
  CHECK(a->final->error().code == -32601);
  CHECK(a->final->id() == jsonrpc::Id::integer(20));
  a = h.call(req("21", "subscriptions/listen", meta()));  // no notifications filter
  CHECK(a->status == 200);
  CHECK(a->final->error().code == -32602);
  CHECK(h.sessions.empty());
}

TEST_CASE(
    "modern gateway server/discover: answered from the MQTT server's initialize result, then from "
    "the cache",
    "[modern-gateway][discover]") {
  Harness h;
  auto a = h.call(req("\"server-discover-probe-1\"", "server/discover", meta()));
  REQUIRE(h.sessions.size() == 1);
  auto& s = *h.sessions[0];
  CHECK(s.server_name == "srv/a");
  // 002 §Initialization with exactly the request's capabilities and clientInfo.
  auto init = s.expect("initialize");
  const auto p = doc(init.text());
  CHECK(str(p["params"]["protocolVersion"]) == "2025-11-25");
  CHECK(modern::canonical_json(p["params"]["capabilities"]) == modern::canonical_json(kCaps));
  CHECK(str(p["params"]["clientInfo"]["name"]) == "cli");
  CHECK_FALSE(a->final);
  s.reply(
      init,
      R"({"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"tasks":{"list":{}}},"serverInfo":{"name":"srv","version":"1.2"},"instructions":"Be nice."})");
  CHECK(s.take() ==
        std::vector<std::string>{R"({"jsonrpc":"2.0","method":"notifications/initialized"})"});
  REQUIRE(a->final);
  CHECK(a->status == 200);
  auto r = a->json();
  CHECK(str(r["id"]) == "server-discover-probe-1");
  const auto& res = r["result"];
  CHECK(str(res["supportedVersions"][0]) == "2026-07-28");
  CHECK(res["capabilities"].HasMember("tools"));
  CHECK_FALSE(res["capabilities"].HasMember("tasks"));
  CHECK(str(res["instructions"]) == "Be nice.");
  CHECK(str(res["resultType"]) == "complete");
  CHECK(res["ttlMs"].GetInt() == 0);
  CHECK(str(res["cacheScope"]) == "private");
  CHECK(str(res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]) == "srv");
  CHECK_FALSE(res.HasMember("serverInfo"));
  // Again, with other capabilities: from the cache, no second session.
  auto b = h.call(req("2", "server/discover", meta("{}")));
  REQUIRE(b->final);
  CHECK(str(b->json()["result"]["supportedVersions"][0]) == "2026-07-28");
  CHECK(h.sessions.size() == 1);
  CHECK(h.gateway->stats().idle == 1);
}

TEST_CASE(
    "modern gateway: a request runs on a pooled session with the envelope removed and its own id, "
    "the result gets resultType, cache fields and serverInfo",
    "[modern-gateway][pool]") {
  Harness h;
  auto a = h.call(req("7", "tools/list", meta("{}", R"(,"progressToken":"t1")")));
  REQUIRE(h.sessions.size() == 1);
  auto& s = *h.sessions[0];
  s.initialize();
  auto list = s.expect("tools/list");
  auto p = doc(list.text());
  CHECK(p["id"].IsInt64());
  CHECK_FALSE(p["params"]["_meta"].HasMember("io.modelcontextprotocol/protocolVersion"));
  CHECK(str(p["params"]["_meta"]["progressToken"]) == "t1");
  s.reply(list, R"({"tools":[{"name":"echo","inputSchema":{"type":"object"}}]})");
  REQUIRE(a->final);
  auto r = a->json();
  CHECK(r["id"].GetInt() == 7);
  CHECK(str(r["result"]["resultType"]) == "complete");
  CHECK(r["result"]["ttlMs"].GetInt() == 0);
  CHECK(str(r["result"]["cacheScope"]) == "private");
  CHECK(str(r["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["version"]) == "1.2");

  // The same principal and capabilities: the same session, no second initialize.
  auto b = h.call(req("7", "tools/list", meta("{}")));
  CHECK(h.sessions.size() == 1);
  auto list2 = s.expect("tools/list");
  CHECK(list2.id() != list.id());
  s.reply(list2, R"({"tools":[]})");
  CHECK(b->final);
  // Other capabilities, or another principal: a session of their own (basic/index
  // §Statelessness: a request never runs on a session initialized with capabilities it did not
  // declare).
  h.call(req("8", "tools/list", meta(R"({"sampling":{}})")));
  h.call(req("9", "tools/list", meta("{}")), "p2");
  REQUIRE(h.sessions.size() == 3);
  CHECK(doc(h.sessions[1]->expect("initialize").text())["params"]["capabilities"].HasMember(
      "sampling"));
  CHECK(doc(h.sessions[2]->expect("initialize").text())["params"]["capabilities"].ObjectEmpty());
}

TEST_CASE(
    "modern gateway: errors from a 2025 server as a 2026 client expects them (-32002 → -32602 "
    "with data.uri, -32601 → 404, -32021 → 400, others in-band)",
    "[modern-gateway][errors]") {
  Harness h;
  auto a = h.call(req("1", "resources/read", R"("uri":"test://nope",)" + meta()));
  auto& s = *h.sessions[0];
  s.initialize();
  auto read = s.expect("resources/read");
  s.channel->send(jsonrpc::Message::error(read.id(), {-32002, "Resource not found", ""}));
  REQUIRE(a->final);
  CHECK(a->status == 200);
  CHECK(a->final->error().code == -32602);
  CHECK(a->final->error().data_json == R"({"uri":"test://nope"})");

  a = h.call(req("2", "prompts/list", meta()));
  auto pl = s.expect("prompts/list");
  s.channel->send(jsonrpc::Message::error(pl.id(), {-32601, "Method not found", ""}));
  CHECK(a->status == 404);
  CHECK(a->final->id() == jsonrpc::Id::integer(2));

  a = h.call(tool_call("3", "test_missing_capability"));
  auto call = s.expect("tools/call");
  s.channel->send(
      jsonrpc::Message::error(call.id(), {-32021, "Missing required client capabilities: sampling",
                                          R"({"requiredCapabilities":{"sampling":{}}})"}));
  CHECK(a->status == 400);
  CHECK(a->final->error().code == -32021);

  a = h.call(tool_call("4", "nope"));
  call = s.expect("tools/call");
  s.channel->send(jsonrpc::Message::error(call.id(), {-32602, "Tool nope not found", ""}));
  CHECK(a->status == 200);
  CHECK(a->final->error().code == -32602);
}

TEST_CASE(
    "modern gateway 2026-07-28 §Progress and logging: progress on the request's own stream, "
    "notifications/message only with a logLevel and at or above it, list changes never",
    "[modern-gateway][progress][logging]") {
  Harness h;
  auto a = h.call(tool_call("5", "progress", "", kCaps, R"(,"progressToken":42)"));
  auto& s = *h.sessions[0];
  s.initialize();
  auto call = s.expect("tools/call");
  CHECK(s.got.empty());  // no logging/setLevel without a logLevel
  s.send(
      R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":42,"progress":1,"total":2}})");
  s.send(
      R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":99,"progress":1}})");
  s.send(
      R"({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":"x"}})");
  s.send(R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})");
  REQUIRE(a->notes.size() == 1);
  CHECK(a->notes[0].method() == "notifications/progress");
  CHECK(a->notes[0].progress_token() == jsonrpc::Id::integer(42));
  s.reply(call, R"({"content":[]})");
  REQUIRE(a->final);

  // With a logLevel: logging/setLevel first (the server declared logging), then the request;
  // messages below the level are dropped.
  auto b = h.call(
      tool_call("6", "progress", "", kCaps, R"(,"io.modelcontextprotocol/logLevel":"warning")"));
  auto set = s.expect("logging/setLevel");
  CHECK(str(doc(set.text())["params"]["level"]) == "warning");
  auto call2 = s.expect("tools/call");
  s.reply(set, "{}");
  s.send(
      R"({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"low"}})");
  s.send(
      R"({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":"high"}})");
  REQUIRE(b->notes.size() == 1);
  CHECK(b->notes[0].text().find("high") != std::string::npos);
  s.reply(call2, R"({"content":[]})");
  // The same level again: no second setLevel.
  h.call(tool_call("7", "progress", "", kCaps, R"(,"io.modelcontextprotocol/logLevel":"warning")"));
  CHECK(s.got.size() == 1);
  CHECK(s.got[0].method() == "tools/call");
}

TEST_CASE(
    "modern gateway pool: bounded per key, requests wait in a bounded line, idle sessions close",
    "[modern-gateway][pool]") {
  ModernGateway::Options o;
  o.max_sessions_per_key = 2;
  o.max_waiting = 1;
  o.queue_timeout = 5s;
  o.idle_timeout = 60s;
  Harness h(o);
  auto a = h.call(tool_call("1", "sleep"));
  auto b = h.call(tool_call("2", "sleep"));
  REQUIRE(h.sessions.size() == 2);
  h.sessions[0]->initialize();
  h.sessions[1]->initialize();
  auto call_a = h.sessions[0]->expect("tools/call");
  auto call_b = h.sessions[1]->expect("tools/call");
  // A third waits (no third session), a fourth finds the line full: 503.
  auto c = h.call(tool_call("3", "sleep"));
  CHECK(h.sessions.size() == 2);
  CHECK_FALSE(c->final);
  CHECK(h.gateway->stats().waiting == 1);
  auto d = h.call(tool_call("4", "sleep"));
  REQUIRE(d->final);
  CHECK(d->status == 503);
  CHECK(d->final->error().code == -32000);
  CHECK(d->final->id() == jsonrpc::Id::integer(4));
  CHECK(d->final->error().message.find("max_waiting") != std::string::npos);
  // The first finishes: the waiting one runs on its session.
  h.sessions[0]->reply(call_a, R"({"content":[]})");
  REQUIRE(a->final);
  auto call_c = h.sessions[0]->expect("tools/call");
  CHECK(h.gateway->stats().waiting == 0);
  // A fifth waits and times out.
  auto e = h.call(tool_call("5", "sleep"));
  h.clock.advance(5s);
  REQUIRE(e->final);
  CHECK(e->status == 503);
  CHECK(e->final->id() == jsonrpc::Id::integer(5));
  // Idle sessions close after idle_timeout.
  h.sessions[0]->reply(call_c, R"({"content":[]})");
  h.sessions[1]->reply(call_b, R"({"content":[]})");
  CHECK(b->final);
  CHECK(c->final);
  CHECK(h.gateway->stats().idle == 2);
  h.clock.advance(59s);
  CHECK(h.gateway->session_count() == 2);
  h.clock.advance(1s);
  CHECK(h.gateway->session_count() == 0);
  REQUIRE(h.sessions[0]->hung_up);
  CHECK(h.sessions[0]->hung_up->kind == CloseReason::Kind::timeout);
}

TEST_CASE(
    "modern gateway pool: the line of waiting requests is bounded in bytes too "
    "(ingress.modern.max_waiting_bytes), past it a request gets 503 at once",
    "[modern-gateway][pool][limits]") {
  ModernGateway::Options o;
  o.max_sessions_per_key = 1;
  o.max_waiting = 100;
  o.max_waiting_bytes = 3000;
  o.queue_timeout = 5s;
  Harness h(o);
  auto a = h.call(tool_call("1", "sleep"));
  REQUIRE(h.sessions.size() == 1);
  h.sessions[0]->initialize();
  auto call_a = h.sessions[0]->expect("tools/call");
  // Requests of about 1 KiB wait for the one session: the line takes a few, then 503.
  const std::string pad = R"(,"pad":")" + std::string(1000, 'p') + "\"";
  std::vector<decltype(a)> waiting;
  decltype(a) refused;
  for (int i = 2; i < 20 && !refused; ++i) {
    auto c = h.call(tool_call(std::to_string(i), "sleep", pad));
    if (c->final)
      refused = c;
    else
      waiting.push_back(c);
  }
  REQUIRE(refused);
  CHECK(waiting.size() >= 1);
  CHECK(waiting.size() <= 3);
  CHECK(refused->status == 503);
  CHECK(refused->final->error().code == -32000);
  CHECK(refused->final->error().message.find("max_waiting_bytes") != std::string::npos);
  CHECK(h.gateway->stats().waiting == waiting.size());
  // The line moves on as before.
  h.sessions[0]->reply(call_a, R"({"content":[]})");
  REQUIRE(a->final);
  h.sessions[0]->expect("tools/call");
  CHECK(h.gateway->stats().waiting == waiting.size() - 1);
}

TEST_CASE(
    "modern gateway pool: when full, an idle session of another client makes room, and a "
    "server that is not online gets 503",
    "[modern-gateway][pool]") {
  ModernGateway::Options o;
  o.max_sessions = 1;
  Harness h(o);
  auto a = h.call(req("1", "tools/list", meta()), "p1");
  h.sessions[0]->initialize();
  h.sessions[0]->reply(h.sessions[0]->expect("tools/list"), R"({"tools":[]})");
  REQUIRE(a->final);
  auto b = h.call(req("1", "tools/list", meta()), "p2");
  REQUIRE(h.sessions.size() == 2);
  CHECK(h.sessions[0]->hung_up);
  // The Ingress answers initialize with -32000 when no instance came online in time.
  auto init = h.sessions[1]->expect("initialize");
  h.sessions[1]->channel->send(jsonrpc::Message::error(
      init.id(), {-32000, "no MCP server named \"srv/a\" is online (waited 1000 ms)", ""}));
  REQUIRE(b->final);
  CHECK(b->status == 503);
  CHECK(b->final->error().message.find("is online") != std::string::npos);
  CHECK(h.gateway->session_count() == 0);
}

TEST_CASE(
    "modern gateway basic/patterns/mrtr: server→client requests become one input_required round, "
    "the retry answers them and resumes the waiting request, over two rounds",
    "[modern-gateway][mrtr]") {
  Harness h;
  auto a = h.call(tool_call("1", "ask_sampling"));
  auto& s = *h.sessions[0];
  s.initialize();
  auto call = s.expect("tools/call");
  // The SDK's legacy shim sends a round's requests at once; the quiet window closes the round.
  s.send(
      R"({"jsonrpc":"2.0","id":0,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5,"_meta":{"progressToken":0}}})");
  s.send(R"({"jsonrpc":"2.0","id":1,"method":"roots/list"})");
  CHECK_FALSE(a->final);
  h.clock.advance(20ms);
  REQUIRE(a->final);
  CHECK(a->status == 200);
  auto r = a->json();
  CHECK(r["id"].GetInt() == 1);
  const auto& ir = r["result"];
  CHECK(str(ir["resultType"]) == "input_required");
  CHECK_FALSE(ir.HasMember("ttlMs"));
  REQUIRE(ir["inputRequests"].HasMember("sampling-1"));
  CHECK(str(ir["inputRequests"]["sampling-1"]["method"]) == "sampling/createMessage");
  CHECK(ir["inputRequests"]["sampling-1"]["params"]["maxTokens"].GetInt() == 5);
  CHECK_FALSE(ir["inputRequests"]["sampling-1"].HasMember("id"));
  CHECK(str(ir["inputRequests"]["roots-1"]["method"]) == "roots/list");
  CHECK_FALSE(ir["inputRequests"]["roots-1"].HasMember("params"));
  const std::string state1 = str(ir["requestState"]);
  CHECK(state1.rfind("v1.", 0) == 0);
  CHECK(str(ir["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]) == "srv");
  CHECK(h.gateway->stats().parked == 1);

  // The retry: a new id, the same params, the answers and the state.
  auto b = h.call(tool_call(
      "2", "ask_sampling",
      R"(,"inputResponses":{"sampling-1":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"},"roots-1":{"roots":[]}},"requestState":")" +
          state1 + "\""));
  auto answers = s.take();
  REQUIRE(answers.size() == 2);
  CHECK(
      answers[0] ==
      R"({"jsonrpc":"2.0","id":0,"result":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}})");
  CHECK(answers[1] == R"({"jsonrpc":"2.0","id":1,"result":{"roots":[]}})");
  CHECK_FALSE(b->final);
  // Round two: the egress's keys travel (design note: mcp-mqtt-bridge/inputKey, inputRound).
  s.send(
      R"({"jsonrpc":"2.0","id":2,"method":"elicitation/create","params":{"message":"Name?","requestedSchema":{"type":"object"},"_meta":{"mcp-mqtt-bridge/inputKey":"user_name","mcp-mqtt-bridge/inputRound":{"size":1}}}})");
  REQUIRE(b->final);  // the round's size is known: no quiet window
  auto r2 = b->json();
  CHECK(r2["id"].GetInt() == 2);
  const auto& ir2 = r2["result"];
  REQUIRE(ir2["inputRequests"].HasMember("user_name"));
  CHECK_FALSE(ir2["inputRequests"]["user_name"]["params"].HasMember("_meta"));
  const std::string state2 = str(ir2["requestState"]);
  CHECK(state2 != state1);
  // The first state is spent.
  auto replay = h.call(
      tool_call("3", "ask_sampling", R"(,"inputResponses":{},"requestState":")" + state1 + "\""));
  CHECK(replay->final->error().code == -32602);
  CHECK(replay->final->error().data_json == R"({"reason":"invalid_request_state"})");
  // Round three: the result, under the retry's id.
  auto c = h.call(tool_call(
      "4", "ask_sampling",
      R"(,"inputResponses":{"user_name":{"action":"accept","content":{"name":"n"}}},"requestState":")" +
          state2 + "\""));
  CHECK(s.take() ==
        std::vector<std::string>{
            R"({"jsonrpc":"2.0","id":2,"result":{"action":"accept","content":{"name":"n"}}})"});
  s.reply(call, R"({"content":[{"type":"text","text":"done"}]})");
  REQUIRE(c->final);
  CHECK(c->json()["id"].GetInt() == 4);
  CHECK(str(c->json()["result"]["resultType"]) == "complete");
  CHECK(h.gateway->stats().parked == 0);
  CHECK(h.gateway->stats().idle == 1);
}

TEST_CASE(
    "modern gateway mrtr §Error Handling: missing keys are asked again, extra ones ignored, "
    "malformed ones refused with the state still good",
    "[modern-gateway][mrtr]") {
  Harness h;
  auto a = h.call(tool_call("1", "t"));
  auto& s = *h.sessions[0];
  s.initialize();
  s.expect("tools/call");
  s.send(R"({"jsonrpc":"2.0","id":10,"method":"elicitation/create","params":{"message":"a"}})");
  s.send(R"({"jsonrpc":"2.0","id":11,"method":"elicitation/create","params":{"message":"b"}})");
  h.clock.advance(20ms);
  const auto state = str(a->json()["result"]["requestState"]);
  // Malformed: an answer that is not an object.
  auto bad = h.call(tool_call(
      "2", "t", R"(,"inputResponses":{"elicitation-1":12345},"requestState":")" + state + "\""));
  CHECK(bad->status == 200);
  CHECK(bad->final->error().code == -32602);
  CHECK(s.got.empty());
  // One answer and an extra key: the other is asked again, under a new state.
  auto part = h.call(tool_call(
      "3", "t",
      R"(,"inputResponses":{"elicitation-1":{"action":"decline"},"nonsense":{"x":1}},"requestState":")" +
          state + "\""));
  CHECK(s.take() ==
        std::vector<std::string>{R"({"jsonrpc":"2.0","id":10,"result":{"action":"decline"}})"});
  REQUIRE(part->final);
  const auto answer = part->json();
  const auto& ir = answer["result"];
  CHECK(str(ir["resultType"]) == "input_required");
  CHECK(ir["inputRequests"].MemberCount() == 1);
  CHECK(ir["inputRequests"].HasMember("elicitation-2"));
}

TEST_CASE(
    "modern gateway mrtr §Server Requirements 4-5: a tampered, expired or foreign requestState "
    "is -32602 invalid_request_state, in-band",
    "[modern-gateway][mrtr]") {
  ModernGateway::Options o;
  o.input_timeout = 60s;
  Harness h(o);
  auto a = h.call(tool_call("1", "t"));
  auto& s = *h.sessions[0];
  s.initialize();
  s.expect("tools/call");
  s.send(R"({"jsonrpc":"2.0","id":10,"method":"roots/list"})");
  h.clock.advance(20ms);
  const auto state = str(a->json()["result"]["requestState"]);
  const std::string answers = R"(,"inputResponses":{"roots-1":{"roots":[]}},"requestState":")";
  auto expect_invalid = [&](const std::shared_ptr<Answer>& r) {
    REQUIRE(r->final);
    CHECK(r->status == 200);
    CHECK(r->final->error().code == -32602);
    CHECK(r->final->error().message == "Invalid or expired requestState");
    CHECK(r->final->error().data_json == R"({"reason":"invalid_request_state"})");
  };
  expect_invalid(h.call(tool_call("2", "t", answers + state + "-TAMPERED\"")));
  auto flipped = state;
  flipped[5] = flipped[5] == 'A' ? 'B' : 'A';
  expect_invalid(h.call(tool_call("3", "t", answers + flipped + "\"")));
  expect_invalid(h.call(tool_call("4", "t", answers + state + "\""), "another-principal"));
  // Other params than the original request's, or another method.
  expect_invalid(h.call(req(
      "5", "tools/call", R"("name":"t","arguments":{"x":2})" + answers + state + "\"," + meta())));
  expect_invalid(h.call(req(
      "6", "prompts/get", R"("name":"t","arguments":{"x":1})" + answers + state + "\"," + meta())));
  // Another capability set: another pool key, refused too.
  expect_invalid(h.call(tool_call("7", "t", answers + state + "\"", "{}")));
  CHECK(s.got.empty());  // none of those reached the server
  // A state from a bridge with another secret.
  {
    ModernGateway::Options other;
    other.state_secret = std::string(32, 'z');
    Harness h2(other);
    auto x = h2.call(tool_call("1", "t"));
    h2.sessions[0]->initialize();
    h2.sessions[0]->expect("tools/call");
    h2.sessions[0]->send(R"({"jsonrpc":"2.0","id":10,"method":"roots/list"})");
    h2.clock.advance(20ms);
    expect_invalid(
        h.call(tool_call("8", "t", answers + str(x->json()["result"]["requestState"]) + "\"")));
  }
  // Expired: after input_timeout the upstream request is cancelled, the session closed, and the
  // state refused.
  h.clock.advance(60s);
  auto cancelled = s.take();
  REQUIRE(cancelled.size() == 2);
  CHECK(cancelled[0].find("notifications/cancelled") != std::string::npos);
  CHECK(cancelled[1].find(R"("id":10,"error")") != std::string::npos);
  REQUIRE(s.hung_up);
  expect_invalid(h.call(tool_call("9", "t", answers + state + "\"")));
  CHECK(h.gateway->session_count() == 0);
}

TEST_CASE(
    "modern gateway mrtr: an upstream answer that comes while parked waits for the retry, a "
    "request that needs an undeclared capability gets -32021",
    "[modern-gateway][mrtr]") {
  Harness h;
  auto a = h.call(tool_call("1", "t"));
  auto& s = *h.sessions[0];
  s.initialize();
  auto call = s.expect("tools/call");
  s.send(R"({"jsonrpc":"2.0","id":10,"method":"roots/list"})");
  h.clock.advance(20ms);
  const auto state = str(a->json()["result"]["requestState"]);
  s.channel->send(jsonrpc::Message::error(call.id(), {-32001, "request timed out", ""}));
  CHECK(
      s.take() ==
      std::vector<std::string>{
          R"({"jsonrpc":"2.0","id":10,"error":{"code":-32603,"message":"roots/list was not answered: the request they belong to has ended"}})"});
  CHECK(h.gateway->stats().idle == 1);  // the session went back to the pool
  auto b = h.call(tool_call(
      "2", "t", R"(,"inputResponses":{"roots-1":{"roots":[]}},"requestState":")" + state + "\""));
  REQUIRE(b->final);
  CHECK(b->final->error().code == -32001);
  CHECK(b->final->id() == jsonrpc::Id::integer(2));

  // Sampling requested of a request that declared only elicitation (mrtr §Server Requirements 7).
  auto c = h.call(tool_call("3", "t", "", R"({"elicitation":{}})"));
  auto& s2 = *h.sessions[1];
  s2.initialize();
  s2.expect("tools/call");
  s2.send(R"({"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{"messages":[]}})");
  REQUIRE(c->final);
  CHECK(c->status == 400);
  CHECK(c->final->error().code == -32021);
  CHECK(c->final->error().data_json == R"({"requiredCapabilities":{"sampling":{}}})");
  auto sent = s2.take();
  REQUIRE(sent.size() == 2);
  CHECK(sent[0].find(R"("id":5,"error")") != std::string::npos);
  CHECK(sent[1].find("notifications/cancelled") != std::string::npos);
  CHECK(s2.hung_up);
}

TEST_CASE(
    "modern gateway: server→client requests outside an input_required method get -32601, ping "
    "is answered",
    "[modern-gateway][mrtr]") {
  Harness h;
  auto a = h.call(req("1", "tools/list", meta()));
  auto& s = *h.sessions[0];
  s.initialize();
  auto list = s.expect("tools/list");
  s.send(R"({"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{"message":"x"}})");
  s.send(R"({"jsonrpc":"2.0","id":4,"method":"ping"})");
  auto sent = s.take();
  REQUIRE(sent.size() == 2);
  CHECK(sent[0].find(R"("id":3,"error":{"code":-32601)") != std::string::npos);
  CHECK(sent[1] == R"({"jsonrpc":"2.0","id":4,"result":{}})");
  s.reply(list, R"({"tools":[]})");
  CHECK(str(a->json()["result"]["resultType"]) == "complete");
}

TEST_CASE(
    "modern gateway: a cancelled request is cancelled upstream and its session closed, not reused",
    "[modern-gateway][cancel]") {
  Harness h;
  ModernGateway::CallId id = 0;
  auto a = h.call(tool_call("1", "sleep"), "p1", std::nullopt, "srv/a", &id);
  auto& s = *h.sessions[0];
  s.initialize();
  auto call = s.expect("tools/call");
  h.gateway->cancel(id);
  auto sent = s.take();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0] == R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":)" +
                       call.id().to_json() +
                       R"x(,"reason":"the client cancelled the request (its stream closed)"}})x");
  CHECK(s.hung_up);
  CHECK_FALSE(a->final);
  CHECK(h.gateway->session_count() == 0);
  // stdio: notifications/cancelled names the request by its id on that connection.
  auto b = h.call(tool_call("\"x\"", "sleep"));
  auto& s2 = *h.sessions[1];
  s2.initialize();
  s2.expect("tools/call");
  h.gateway->cancel_request(1, jsonrpc::Id::string("x"));
  CHECK(s2.hung_up);
  CHECK_FALSE(b->final);
}

TEST_CASE(
    "modern gateway 000: subscriptions/listen on a session of its own — acknowledgement first, "
    "tagged notifications only, graceful end with subscriptionId",
    "[modern-gateway][listen]") {
  Harness h;
  ModernGateway::CallId id = 0;
  auto a = h.call(req("\"listen:0\"", "subscriptions/listen",
                      R"("notifications":{"toolsListChanged":true},)" + meta()),
                  "p1", std::nullopt, "srv/a", &id);
  auto& s = *h.sessions[0];
  s.initialize();
  auto listen = s.expect("subscriptions/listen");
  CHECK(listen.id() == jsonrpc::Id::string("listen:0"));
  CHECK(doc(listen.text())["params"]["notifications"]["toolsListChanged"].GetBool());
  CHECK_FALSE(doc(listen.text())["params"].HasMember("_meta"));
  // What the ingress's SubscriptionHub sends on that session.
  s.send(R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})");  // untagged
  s.send(
      R"({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"listen:0"},"notifications":{"toolsListChanged":true}}})");
  s.send(R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})");
  s.send(
      R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"listen:0"}}})");
  REQUIRE(a->notes.size() == 2);
  CHECK(a->notes[0].method() == "notifications/subscriptions/acknowledged");
  CHECK(a->notes[1].subscription_id() == jsonrpc::Id::string("listen:0"));
  CHECK_FALSE(a->final);
  CHECK(h.gateway->stats().listening == 1);
  // The server goes away: the hub's last word, then the close. A graceful result either way.
  s.channel->send(jsonrpc::Message::error(jsonrpc::Id::string("listen:0"), -32000, "gone"));
  s.channel->close({CloseReason::Kind::peer_gone, "server went offline"});
  REQUIRE(a->final);
  auto r = a->json();
  CHECK(str(r["id"]) == "listen:0");
  CHECK(str(r["result"]["resultType"]) == "complete");
  CHECK(str(r["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"]) == "listen:0");
  CHECK(str(r["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]) == "srv");
  CHECK(h.gateway->session_count() == 0);

  // Nothing honoured: the acknowledgement, then the result at once.
  auto b = h.call(req("40", "subscriptions/listen", R"("notifications":{},)" + meta()));
  auto& s2 = *h.sessions[1];
  s2.initialize();
  s2.expect("subscriptions/listen");
  s2.send(
      R"({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":40},"notifications":{}}})");
  REQUIRE(b->notes.size() == 1);
  REQUIRE(b->final);
  CHECK(b->json()["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"].GetInt() == 40);
  CHECK(s2.hung_up);

  // The client closes its stream: the session ends, no result.
  auto c = h.call(
      req("41", "subscriptions/listen", R"("notifications":{"promptsListChanged":true},)" + meta()),
      "p1", std::nullopt, "srv/a", &id);
  auto& s3 = *h.sessions[2];
  s3.initialize();
  s3.expect("subscriptions/listen");
  h.gateway->cancel(id);
  CHECK(s3.hung_up);
  CHECK_FALSE(c->final);
}

TEST_CASE("modern gateway: close_all answers what is pending and refuses what comes later",
          "[modern-gateway]") {
  Harness h;
  auto run = h.call(tool_call("1", "sleep"));
  auto listen = h.call(req("2", "subscriptions/listen",
                           R"("notifications":{"toolsListChanged":true},)" + meta("{}")));
  h.sessions[0]->initialize();
  h.sessions[1]->initialize();
  h.sessions[1]->expect("subscriptions/listen");
  h.sessions[1]->send(
      R"({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":2},"notifications":{"toolsListChanged":true}}})");
  h.gateway->close_all({CloseReason::Kind::shutdown, "the bridge is stopping"});
  REQUIRE(run->final);
  CHECK(run->final->error().code == -32000);
  REQUIRE(listen->final);
  CHECK(str(listen->json()["result"]["resultType"]) == "complete");
  CHECK(h.sessions[0]->hung_up);
  CHECK(h.sessions[1]->hung_up);
  auto late = h.call(tool_call("3", "sleep"));
  CHECK(late->status == 503);
}

TEST_CASE(
    "modern gateway streamable-http §Standard Request Headers (SEP-2243): Mcp-Param-{Name} of a "
    "listed tool must mirror its argument, else -32020 / 400",
    "[modern-gateway][headers]") {
  Harness h;
  const modern::Headers list_headers{"2026-07-28", "tools/list", std::nullopt};
  auto a = h.call(req("1", "tools/list", meta()), "p1", list_headers);
  auto& s = *h.sessions[0];
  s.initialize();
  s.reply(
      s.expect("tools/list"),
      R"({"tools":[{"name":"geo","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"number","x-mcp-header":"N"}}}}]})");
  REQUIRE(a->final);
  const modern::Headers call_headers{"2026-07-28", "tools/call", "geo"};
  auto call = [&](const std::string& id, const std::string& args,
                  std::vector<std::pair<std::string, std::string>> params) {
    return h.call(req(id, "tools/call", R"("name":"geo","arguments":)" + args + "," + meta()), "p1",
                  call_headers, "srv/a", nullptr, std::move(params));
  };
  // Base64 form decoded, numbers compared as numbers: through to the server.
  auto ok =
      call("2", R"({"region":"Hello","n":1})", {{"region", "=?base64?SGVsbG8=?="}, {"n", "1.0"}});
  CHECK_FALSE(ok->final);
  s.reply(s.expect("tools/call"), R"({"content":[]})");
  CHECK(ok->status == 200);
  // Missing, malformed, different: refused before the server sees them.
  for (const auto& [args, params] :
       std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>>{
           {R"({"region":"Hello"})", {}},
           {R"({"region":"Hello"})", {{"region", "=?base64?SGVsbG8?="}}},
           {R"({"region":"Hello"})", {{"region", "=?base64?SGVs!!!bG8=?="}}},
           {R"({"region":"Hello"})", {{"region", "Bye"}}},
           {R"({"n":2})", {{"n", "3"}}}}) {
    INFO(args);
    auto r = call("3", args, params);
    REQUIRE(r->final);
    CHECK(r->status == 400);
    CHECK(r->final->error().code == -32020);
    CHECK(r->final->id() == jsonrpc::Id::integer(3));
  }
  CHECK(s.got.empty());
  // An argument that is absent or null needs no header; an unknown tool is not checked.
  auto none = call("4", R"({"region":null})", {});
  s.reply(s.expect("tools/call"), R"({"content":[]})");
  CHECK(none->status == 200);
  auto other =
      h.call(req("5", "tools/call", R"("name":"other","arguments":{"region":"x"},)" + meta()), "p1",
             modern::Headers{"2026-07-28", "tools/call", "other"});
  s.reply(s.expect("tools/call"), R"({"content":[]})");
  CHECK(other->status == 200);
}

TEST_CASE(
    "modern gateway: a session that ends while its run gathers a round takes the round timer "
    "with it, whichever end closed it",
    "[modern-gateway][teardown]") {
  const std::string sampling =
      R"({"jsonrpc":"2.0","id":0,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}})";
  SECTION("the server goes away") {
    Harness h;
    auto a = h.call(tool_call("1", "ask_sampling"));
    auto& s = *h.sessions[0];
    s.initialize();
    s.expect("tools/call");
    s.send(sampling);
    CHECK(h.clock.armed() == 1);  // the round's quiet window
    s.channel->close({CloseReason::Kind::peer_gone, "the server went away"});
    REQUIRE(a->final);
    CHECK(a->final->error().code == -32000);
    CHECK(a->final->error().message.find("was not answered") != std::string::npos);
    CHECK(h.clock.armed() == 0);
    h.clock.advance(10min);
    CHECK(h.gateway->session_count() == 0);
    CHECK(h.gateway->stats().parked == 0);
  }
  SECTION("the client cancels: the gateway closes the session") {
    Harness h;
    ModernGateway::CallId id = 0;
    auto a = h.call(tool_call("1", "ask_sampling"), "p1", std::nullopt, "srv/a", &id);
    auto& s = *h.sessions[0];
    s.initialize();
    s.expect("tools/call");
    s.send(sampling);
    CHECK(h.clock.armed() == 1);
    h.gateway->cancel(id);
    const auto got = s.take();  // the cancellation, then the input request's error
    REQUIRE(got.size() == 2);
    CHECK(got[0].find("notifications/cancelled") != std::string::npos);
    CHECK(s.hung_up);
    CHECK(h.clock.armed() == 0);
    h.clock.advance(10min);
    CHECK_FALSE(a->final);
    CHECK(h.gateway->session_count() == 0);
  }
}

TEST_CASE(
    "modern gateway: a session that ends under a parked run leaves only the park timer, and the "
    "retry hears how it ended and takes that timer too",
    "[modern-gateway][teardown]") {
  ModernGateway::Options o;
  o.input_timeout = 60s;
  Harness h(o);
  auto a = h.call(tool_call("1", "ask_sampling"));
  auto& s = *h.sessions[0];
  s.initialize();
  s.expect("tools/call");
  s.send(
      R"({"jsonrpc":"2.0","id":0,"method":"roots/list","params":{"_meta":{"mcp-mqtt-bridge/inputRound":{"size":1}}}})");
  REQUIRE(a->final);
  const std::string state = str(a->json()["result"]["requestState"]);
  CHECK(h.clock.armed() == 1);  // the park timer
  s.channel->close({CloseReason::Kind::peer_gone, "the server went away"});
  CHECK(h.clock.armed() == 1);  // the state lives on: the retry must hear what happened
  auto b = h.call(
      tool_call("2", "ask_sampling",
                R"(,"inputResponses":{"roots-1":{"roots":[]}},"requestState":")" + state + "\""));
  REQUIRE(b->final);
  CHECK(b->final->error().code == -32000);
  CHECK(b->final->error().message.find("the MQTT session ended") != std::string::npos);
  CHECK(h.clock.armed() == 0);
  h.clock.advance(2min);
  CHECK(h.gateway->stats().parked == 0);
}

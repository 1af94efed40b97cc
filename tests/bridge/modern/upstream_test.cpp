// The egress adapter for 2026-07-28 servers (bridge/modern/upstream.hpp), between a real splice
// and in-memory channels, on a manual clock: the MQTT client's side is `client`, the server is
// `server` (and `probe`, the short-lived copy a stdio server is probed on).
#include "bridge/modern/upstream.hpp"

#include <catch2/catch.hpp>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "bridge/relay/splice.hpp"
#include "tests/support/memory_channel.hpp"

using namespace mcpmqtt;
using namespace mcpmqtt::test;
using namespace std::chrono_literals;
using bridge::CloseReason;
using bridge::ModernUpstream;
using bridge::Splice;
using Era = ModernUpstream::Era;

namespace {

// The JSON text of a member path ("params._meta.x"; array indexes are numbers), a string's
// value without quotes, or nullopt.
std::optional<std::string> at(const std::string& json, const std::string& path) {
  rapidjson::Document d;
  d.Parse(json.c_str(), json.size());
  if (d.HasParseError()) return std::nullopt;
  const rapidjson::Value* v = &d;
  std::size_t start = 0;
  while (!path.empty()) {
    const auto dot = path.find('.', start);
    // Keys of the protocol hold dots and slashes: "{...}" quotes a key.
    std::string part;
    std::size_t next;
    if (path[start] == '{') {
      const auto close = path.find('}', start);
      part = path.substr(start + 1, close - start - 1);
      next = close + 1 < path.size() ? close + 2 : std::string::npos;
    } else {
      part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      next = dot == std::string::npos ? std::string::npos : dot + 1;
    }
    if (v->IsObject()) {
      auto it = v->FindMember(part.c_str());
      if (it == v->MemberEnd()) return std::nullopt;
      v = &it->value;
    } else if (v->IsArray()) {
      const auto i = static_cast<rapidjson::SizeType>(std::stoul(part));
      if (i >= v->Size()) return std::nullopt;
      v = &(*v)[i];
    } else {
      return std::nullopt;
    }
    if (next == std::string::npos) break;
    start = next;
  }
  if (v->IsString()) return std::string(v->GetString(), v->GetStringLength());
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v->Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

const std::string kVersionKey = "{io.modelcontextprotocol/protocolVersion}";
const std::string kCapsKey = "{io.modelcontextprotocol/clientCapabilities}";
const std::string kInfoKey = "{io.modelcontextprotocol/clientInfo}";
const std::string kLevelKey = "{io.modelcontextprotocol/logLevel}";
const std::string kSubKey = "{io.modelcontextprotocol/subscriptionId}";
const std::string kInputKey = "{mcp-mqtt-bridge/inputKey}";
const std::string kRoundKey = "{mcp-mqtt-bridge/inputRound}";

const std::string kInitialize =
    R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",)"
    R"("capabilities":{"elicitation":{},"sampling":{},"roots":{"listChanged":true}},)"
    R"("clientInfo":{"name":"mqtt-client","version":"3"}}})";

const std::string kDiscovered =
    R"({"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true},)"
    R"("prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},)"
    R"("logging":{}},"instructions":"Use the tools.","resultType":"complete","ttlMs":0,)"
    R"("cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":)"
    R"({"name":"srv2","version":"2.4.0"}}})";

std::string result_for(const std::string& id_json, const std::string& result) {
  return R"({"jsonrpc":"2.0","id":)" + id_json + R"(,"result":)" + result + "}";
}

std::string quoted(const std::string& s) {
  return "\"" + s + "\"";
}

struct Fixture {
  std::shared_ptr<MemoryChannel> client = std::make_shared<MemoryChannel>("mqtt client");
  std::shared_ptr<MemoryChannel> server = std::make_shared<MemoryChannel>("server");
  std::shared_ptr<MemoryChannel> probe;  // created when the adapter asks for one
  ManualScheduler clock;
  std::shared_ptr<ModernUpstream::EraMemory> memory;
  std::shared_ptr<ModernUpstream> adapter;
  std::shared_ptr<Splice> splice;
  std::optional<CloseReason> closed;

  struct Setup {
    ModernUpstream::Mode mode = ModernUpstream::Mode::automatic;
    bool probe_channel = false;
    std::shared_ptr<ModernUpstream::EraMemory> memory;
    std::size_t max_rounds = 10;
    std::size_t max_pending = 4096;  // the splice's, per direction
    std::shared_ptr<modern::ToolHeaders> tool_headers;
    Setup headers(std::shared_ptr<modern::ToolHeaders> h) const {
      auto s = *this;
      s.tool_headers = std::move(h);
      return s;
    }
    Setup pending(std::size_t n) const {
      auto s = *this;
      s.max_pending = n;
      return s;
    }
    Setup modern() const {
      auto s = *this;
      s.mode = ModernUpstream::Mode::modern;
      return s;
    }
    Setup probing() const {
      auto s = *this;
      s.probe_channel = true;
      return s;
    }
    Setup remembering(std::shared_ptr<ModernUpstream::EraMemory> m) const {
      auto s = *this;
      s.memory = std::move(m);
      return s;
    }
    Setup rounds(std::size_t n) const {
      auto s = *this;
      s.max_rounds = n;
      return s;
    }
  };

  Fixture() : Fixture(Setup{}) {}
  explicit Fixture(Setup s) {
    memory = s.memory ? s.memory : std::make_shared<ModernUpstream::EraMemory>();
    ModernUpstream::Options o;
    o.mode = s.mode;
    o.memory = memory;
    o.discover_timeout = 5000ms;
    o.max_input_rounds = s.max_rounds;
    o.server_name = "test/modern";
    o.tool_headers = s.tool_headers;
    o.log_prefix = "[test]";
    if (s.probe_channel) {
      o.probe_channel = [this] {
        probe = std::make_shared<MemoryChannel>("probe");
        return probe;
      };
    }
    adapter = ModernUpstream::create(server, clock, o);
    Splice::Options so;
    so.timeout_for = [](const std::string& method) {
      if (method == "tools/call") return std::chrono::milliseconds(60000);
      return std::chrono::milliseconds(30000);
    };
    so.log_prefix = "[test]";
    so.max_pending = s.max_pending;
    Splice::Hooks h;
    h.on_closed = [this](const CloseReason& why) { closed = why; };
    splice = Splice::create(client, adapter, clock, so, h);
    splice->start();
  }

  // The one message the server got (and clears them).
  std::string server_got() {
    auto got = server->take();
    REQUIRE(got.size() == 1);
    return got[0];
  }
  std::string client_got() {
    auto got = client->take();
    REQUIRE(got.size() == 1);
    return got[0];
  }

  // After a DiscoverResult listing 2026-07-28, the adapter tries the client's initialize on
  // `on` (the server, or the probe copy): a 2026-only server refuses it, as the v2 SDK's
  // `legacy: 'reject'` does, and the session goes modern on the next turn of the loop.
  void refuse_initialize(MemoryChannel& on) {
    auto got = on.take();
    REQUIRE(got.size() == 1);
    REQUIRE(at(got[0], "method") == "initialize");
    const auto id = jsonrpc::Message::parse(got[0])->id().to_json();
    on.inject(R"({"jsonrpc":"2.0","id":)" + id +
              R"(,"error":{"code":-32022,"message":"Unsupported protocol version: 2025-06-18",)"
              R"("data":{"supported":["2026-07-28"],"requested":"2025-06-18"}}})");
    clock.advance(0ms);
  }

  // A session the adapter has found modern: initialize, discover answered, initialize refused,
  // listen acknowledged. Returns the listen's id (JSON).
  std::string modern_session(const std::string& discovered = kDiscovered) {
    client->inject(kInitialize);
    const auto discover = server_got();
    REQUIRE(at(discover, "method") == "server/discover");
    server->inject(result_for(quoted(*at(discover, "id")), discovered));
    refuse_initialize(*server);
    const auto init = client_got();
    REQUIRE(at(init, "id") == "1");
    REQUIRE(at(init, "result.protocolVersion") == "2025-06-18");
    client->inject(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
    auto sent = server->take();
    if (sent.empty()) return {};
    REQUIRE(sent.size() == 1);
    REQUIRE(at(sent[0], "method") == "subscriptions/listen");
    const auto id = quoted(*at(sent[0], "id"));
    ack(id, R"({"toolsListChanged":true})");
    return id;
  }

  void ack(const std::string& listen_id, const std::string& honoured) {
    server->inject(
        R"({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":)" +
        honoured + R"(,"_meta":{"io.modelcontextprotocol/subscriptionId":)" + listen_id + "}}}");
  }
};

const std::string kCallElicit =
    R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask","arguments":{"q":1},"_meta":{"progressToken":"tok"}}})";

}  // namespace

// ---- negotiation -----------------------------------------------------------------------------

TEST_CASE(
    "modern egress negotiation (server/discover): a DiscoverResult listing 2026-07-28 and an "
    "initialize refused make the session modern: initialize is answered from the DiscoverResult",
    "[modern-upstream][server/discover]") {
  Fixture f;
  f.client->inject(kInitialize);
  const auto discover = f.server_got();
  CHECK(at(discover, "method") == "server/discover");
  // basic/index §_meta: the envelope made of the client's initialize.
  CHECK(at(discover, "params._meta." + kVersionKey) == "2026-07-28");
  CHECK(at(discover, "params._meta." + kCapsKey) ==
        R"({"elicitation":{},"sampling":{},"roots":{"listChanged":true}})");
  CHECK(at(discover, "params._meta." + kInfoKey) == R"({"name":"mqtt-client","version":"3"})");
  CHECK_FALSE(at(discover, "params._meta." + kLevelKey));
  CHECK(f.client->take().empty());
  f.server->inject(result_for(quoted(*at(discover, "id")), kDiscovered));
  // Does it speak 2025 too? The client's initialize, refused: a 2026-only server.
  CHECK(f.client->take().empty());
  f.refuse_initialize(*f.server);
  const auto init = f.client_got();
  CHECK(at(init, "id") == "1");
  CHECK(at(init, "result.protocolVersion") == "2025-06-18");
  CHECK(at(init, "result.capabilities.resources.subscribe") == "true");
  CHECK(at(init, "result.serverInfo") == R"({"name":"srv2","version":"2.4.0"})");
  CHECK(at(init, "result.instructions") == "Use the tools.");
  CHECK(f.adapter->era() == Era::modern);
  CHECK(f.memory->get() == Era::modern);
  // The server declares listChanged for three lists and subscribe: one listen for them.
  const auto listen = f.server_got();
  CHECK(at(listen, "method") == "subscriptions/listen");
  CHECK(at(listen, "params.notifications") ==
        R"({"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true})");
  CHECK(at(listen, "params._meta." + kVersionKey) == "2026-07-28");
  // notifications/initialized has no 2026 counterpart: consumed.
  f.client->inject(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  CHECK(f.server->take().empty());
  // The splice saw initialize answered.
  CHECK(f.splice->pending(Splice::Side::client) == 0);
}

TEST_CASE(
    "modern egress negotiation (a dual-era server): discover lists 2026-07-28 and initialize is "
    "answered too: the session stays 2025, nothing translated, and the next session skips the "
    "probe",
    "[modern-upstream][server/discover]") {
  auto memory = std::make_shared<ModernUpstream::EraMemory>();
  std::vector<std::pair<Era, std::string>> told;
  memory->on_change([&](Era e, const std::string& why) { told.emplace_back(e, why); });
  {
    Fixture f(Fixture::Setup{}.remembering(memory));
    f.client->inject(kInitialize);
    const auto discover = f.server_got();
    f.server->inject(result_for(quoted(*at(discover, "id")), kDiscovered));
    // The client's own initialize, unchanged: on HTTP it opens the upstream session it keeps.
    CHECK(f.server_got() == kInitialize);
    CHECK(f.client->take().empty());
    const std::string init_result =
        R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"logging":{}},"serverInfo":{"name":"dual","version":"1"}}})";
    f.server->inject(init_result);
    CHECK(f.client_got() == init_result);
    CHECK(f.adapter->era() == Era::legacy);
    CHECK(memory->get() == Era::both);
    CHECK(memory->why().find("speaks both eras") != std::string::npos);
    REQUIRE(told.size() == 1);
    CHECK(told[0].first == Era::both);
    CHECK(told[0].second == memory->why());
    // What only its 2025 side offers passes unchanged: setLevel, subscribe, its own requests.
    for (const std::string m :
         {R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
          R"({"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"info"}})",
          R"({"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"a://b"}})"}) {
      f.client->inject(m);
      CHECK(f.server_got() == m);
    }
    const std::string elicit =
        R"({"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{"message":"?"}})";
    f.server->inject(elicit);
    CHECK(f.client_got() == elicit);
  }
  Fixture next(Fixture::Setup{}.remembering(memory));
  next.client->inject(kInitialize);
  CHECK(next.server_got() == kInitialize);
}

TEST_CASE(
    "modern egress negotiation (a dual-era stdio server): the copy answers discover and "
    "initialize - the session's own child gets only the client's initialize",
    "[modern-upstream][server/discover]") {
  Fixture f(Fixture::Setup{}.probing());
  f.client->inject(kInitialize);
  REQUIRE(f.probe);
  auto sent = f.probe->take();
  REQUIRE(sent.size() == 1);
  f.probe->inject(result_for(quoted(*at(sent[0], "id")), kDiscovered));
  sent = f.probe->take();
  REQUIRE(sent.size() == 1);
  CHECK(at(sent[0], "method") == "initialize");
  CHECK(at(sent[0], "params.capabilities") == at(kInitialize, "params.capabilities"));
  CHECK(f.server->take().empty());
  f.probe->inject(result_for(quoted(*at(sent[0], "id")),
                             R"({"protocolVersion":"2025-06-18","capabilities":{}})"));
  CHECK(f.probe->closed);
  CHECK(f.client->take().empty());
  CHECK(f.server_got() == kInitialize);
  f.server->inject(R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18"}})");
  CHECK(at(f.client_got(), "result.protocolVersion") == "2025-06-18");
  CHECK(f.adapter->era() == Era::legacy);
  CHECK(f.memory->get() == Era::both);
}

namespace {

// The initialize of the bridge's own ingress serving 2026-07-28 clients (its gateway).
const std::string kGatewayInitialize =
    R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",)"
    R"("capabilities":{"elicitation":{}},"clientInfo":{"name":"client2026","version":"1"},)"
    R"("_meta":{"mcp-mqtt-bridge/readsInputKeys":true}}})";

}  // namespace

TEST_CASE(
    "modern egress negotiation (a dual-era server): a session of the bridge's ingress serving "
    "2026-07-28 clients is spoken to in 2026-07-28, which keeps the server's input keys - one "
    "of a 2025 client in 2025",
    "[modern-upstream][server/discover]") {
  SECTION("known to speak both eras") {
    auto memory = std::make_shared<ModernUpstream::EraMemory>();
    memory->set(Era::both, "learnt before");
    Fixture gw(Fixture::Setup{}.remembering(memory));
    gw.client->inject(kGatewayInitialize);
    const auto discover = gw.server_got();
    CHECK(at(discover, "method") == "server/discover");
    gw.server->inject(result_for(quoted(*at(discover, "id")), kDiscovered));
    CHECK(at(gw.client_got(), "result.serverInfo.name") == "srv2");
    CHECK(gw.adapter->era() == Era::modern);
    CHECK(memory->get() == Era::both);
    Fixture plain(Fixture::Setup{}.remembering(memory));
    plain.client->inject(kInitialize);
    CHECK(plain.server_got() == kInitialize);
  }
  SECTION("nothing known, over HTTP: straight to 2026-07-28, no initialize tried") {
    Fixture gw;
    gw.client->inject(kGatewayInitialize);
    const auto discover = gw.server_got();
    gw.server->inject(result_for(quoted(*at(discover, "id")), kDiscovered));
    CHECK(at(gw.client_got(), "result.serverInfo.name") == "srv2");
    CHECK(gw.adapter->era() == Era::modern);
    CHECK(gw.memory->get() == Era::unknown);  // a 2025 session finds out
    CHECK(at(gw.server_got(), "method") == "subscriptions/listen");
  }
  SECTION("nothing known, over stdio: the copy is asked both, the session goes 2026-07-28") {
    Fixture gw(Fixture::Setup{}.probing());
    gw.client->inject(kGatewayInitialize);
    REQUIRE(gw.probe);
    auto sent = gw.probe->take();
    gw.probe->inject(result_for(quoted(*at(sent[0], "id")), kDiscovered));
    sent = gw.probe->take();
    REQUIRE(sent.size() == 1);
    CHECK(at(sent[0], "method") == "initialize");
    gw.probe->inject(result_for(quoted(*at(sent[0], "id")), R"({"protocolVersion":"2025-11-25"})"));
    CHECK(gw.probe->closed);
    CHECK(at(gw.client_got(), "result.serverInfo.name") == "srv2");
    CHECK(gw.adapter->era() == Era::modern);
    CHECK(gw.memory->get() == Era::both);
    CHECK(at(gw.server_got(), "method") == "subscriptions/listen");
  }
}

TEST_CASE(
    "modern egress negotiation: a copy that answers discover but not initialize within the "
    "probe timeout is a 2026-only server",
    "[modern-upstream][server/discover]") {
  Fixture f(Fixture::Setup{}.probing());
  f.client->inject(kInitialize);
  REQUIRE(f.probe);
  auto sent = f.probe->take();
  f.probe->inject(result_for(quoted(*at(sent[0], "id")), kDiscovered));
  CHECK(at(f.probe->take().at(0), "method") == "initialize");
  f.clock.advance(4999ms);
  CHECK(f.client->take().empty());
  f.clock.advance(1ms);
  f.clock.advance(0ms);
  CHECK(f.probe->closed);
  CHECK(at(f.client_got(), "result.serverInfo.name") == "srv2");
  CHECK(f.adapter->era() == Era::modern);
  CHECK(f.memory->why().find("no answer to initialize within 5 s") != std::string::npos);
}

TEST_CASE(
    "modern egress negotiation (server/discover): an error answer falls back to initialize, "
    "then everything passes unchanged, and the next session skips the probe",
    "[modern-upstream][server/discover]") {
  auto memory = std::make_shared<ModernUpstream::EraMemory>();
  {
    Fixture f(Fixture::Setup{}.remembering(memory));
    f.client->inject(kInitialize);
    const auto discover = f.server_got();
    f.server->inject(R"({"jsonrpc":"2.0","id":)" + quoted(*at(discover, "id")) +
                     R"(,"error":{"code":-32601,"message":"Method not found"}})");
    // Decided on the next turn of the loop (an upstream that is going away closes first).
    CHECK(f.server->take().empty());
    f.clock.advance(0ms);
    CHECK(f.server_got() == kInitialize);
    const std::string init_result =
        R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"old","version":"1"}}})";
    f.server->inject(init_result);
    CHECK(f.client_got() == init_result);
    CHECK(f.adapter->era() == Era::legacy);
    CHECK(memory->get() == Era::legacy);
    // Legacy: unchanged both ways, the server's own requests included.
    const std::string call =
        R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}})";
    f.client->inject(call);
    CHECK(f.server_got() == call);
    const std::string sampling =
        R"({"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"messages":[]}})";
    f.server->inject(sampling);
    CHECK(f.client_got() == sampling);
    const std::string ping = R"({"jsonrpc":"2.0","id":3,"method":"ping"})";
    f.client->inject(ping);
    CHECK(f.server_got() == ping);
  }
  Fixture next(Fixture::Setup{}.remembering(memory));
  next.client->inject(kInitialize);
  CHECK(next.server_got() == kInitialize);
}

TEST_CASE(
    "modern egress negotiation (stdio §Backward Compatibility): no answer within the probe "
    "timeout falls back to initialize: the probe is cancelled and a late answer ignored",
    "[modern-upstream][server/discover]") {
  Fixture f;
  f.client->inject(kInitialize);
  const auto discover = f.server_got();
  f.clock.advance(4999ms);
  CHECK(f.server->take().empty());
  f.clock.advance(1ms);
  auto sent = f.server->take();
  REQUIRE(sent.size() == 2);
  CHECK(at(sent[0], "method") == "notifications/cancelled");
  CHECK(at(sent[0], "params.requestId") == at(discover, "id"));
  CHECK(sent[1] == kInitialize);
  f.server->inject(result_for(quoted(*at(discover, "id")), kDiscovered));
  CHECK(f.client->take().empty());
  CHECK(f.adapter->era() == Era::unknown);
  f.server->inject(R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18"}})");
  CHECK(at(f.client_got(), "result.protocolVersion") == "2025-06-18");
  CHECK(f.adapter->era() == Era::legacy);
  CHECK(f.memory->get() == Era::legacy);
}

TEST_CASE(
    "modern egress negotiation (basic/versioning §Backward Compatibility): initialize refused "
    "with -32022 naming 2026-07-28 switches to discover and the session goes modern",
    "[modern-upstream][server/discover]") {
  auto memory = std::make_shared<ModernUpstream::EraMemory>();
  memory->set(Era::legacy);  // an earlier session timed the probe out
  Fixture f(Fixture::Setup{}.remembering(memory));
  f.client->inject(kInitialize);
  CHECK(f.server_got() == kInitialize);
  f.server->inject(
      R"({"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"Unsupported protocol version: 2025-06-18","data":{"supported":["2026-07-28"],"requested":"2025-06-18"}}})");
  CHECK(f.client->take().empty());  // the refusal never reaches the client
  const auto discover = f.server_got();
  CHECK(at(discover, "method") == "server/discover");
  f.server->inject(result_for(quoted(*at(discover, "id")), kDiscovered));
  const auto init = f.client_got();
  CHECK(at(init, "result.serverInfo.name") == "srv2");
  CHECK(f.adapter->era() == Era::modern);
  CHECK(memory->get() == Era::modern);
}

TEST_CASE(
    "modern egress negotiation: -32022 on initialize, then discover failing too, gives the "
    "client the server's own -32022",
    "[modern-upstream][server/discover]") {
  auto memory = std::make_shared<ModernUpstream::EraMemory>();
  memory->set(Era::legacy);
  Fixture f(Fixture::Setup{}.remembering(memory));
  f.client->inject(kInitialize);
  f.server->take();
  const std::string refused =
      R"({"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"Unsupported protocol version: 2025-06-18","data":{"supported":["2026-07-28"],"requested":"2025-06-18"}}})";
  f.server->inject(refused);
  const auto discover = f.server_got();
  f.server->inject(R"({"jsonrpc":"2.0","id":)" + quoted(*at(discover, "id")) +
                   R"(,"error":{"code":-32603,"message":"broken"}})");
  f.clock.advance(0ms);
  CHECK(f.client_got() == refused);
  // -32022 naming only 2025 versions is an ordinary error: passed on at once.
  Fixture g(Fixture::Setup{}.remembering(memory));
  g.client->inject(kInitialize);
  g.server->take();
  const std::string old =
      R"({"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"no","data":{"supported":["2024-11-05"]}}})";
  g.server->inject(old);
  CHECK(g.client_got() == old);
  CHECK(g.server->take().empty());
}

TEST_CASE(
    "modern egress negotiation: a stdio server is probed on a copy of it: the session's own "
    "child sees nothing before the verdict, and the copy is closed",
    "[modern-upstream][server/discover]") {
  SECTION("modern") {
    Fixture f(Fixture::Setup{}.probing());
    f.client->inject(kInitialize);
    CHECK(f.server->take().empty());
    REQUIRE(f.probe);
    CHECK(f.probe->started);
    auto sent = f.probe->take();
    REQUIRE(sent.size() == 1);
    CHECK(at(sent[0], "method") == "server/discover");
    f.probe->inject(result_for(quoted(*at(sent[0], "id")), kDiscovered));
    // The initialize that tells whether the server speaks 2025 too goes to the copy as well.
    CHECK_FALSE(f.probe->closed);
    CHECK(f.server->take().empty());
    f.refuse_initialize(*f.probe);
    CHECK(f.probe->closed);
    CHECK(at(f.client_got(), "result.serverInfo.name") == "srv2");
    // The session's own child: straight to 2026 requests (here the listen).
    CHECK(at(f.server_got(), "method") == "subscriptions/listen");
  }
  SECTION("the copy exits without answering: legacy") {
    Fixture f(Fixture::Setup{}.probing());
    f.client->inject(kInitialize);
    REQUIRE(f.probe);
    f.probe->peer_close({CloseReason::Kind::exited, "child exited with status 1"});
    f.clock.advance(0ms);
    CHECK(f.server_got() == kInitialize);
    CHECK(f.memory->get() == Era::legacy);
  }
  SECTION("a remembered modern verdict: discover on the session's own child, no copy") {
    auto memory = std::make_shared<ModernUpstream::EraMemory>();
    memory->set(Era::modern);
    Fixture f(Fixture::Setup{}.probing().remembering(memory));
    f.client->inject(kInitialize);
    CHECK_FALSE(f.probe);
    CHECK(at(f.server_got(), "method") == "server/discover");
  }
}

TEST_CASE(
    "modern egress negotiation: \"protocol\": \"modern\" never sends initialize: a server that "
    "does not offer 2026-07-28 fails initialize and ends the session",
    "[modern-upstream][server/discover]") {
  Fixture f(Fixture::Setup{}.modern().probing());
  f.client->inject(kInitialize);
  CHECK_FALSE(f.probe);  // the verdict is given: discover on the session's own upstream
  const auto discover = f.server_got();
  f.server->inject(result_for(quoted(*at(discover, "id")),
                              R"({"supportedVersions":["2027-01-01"],"capabilities":{}})"));
  f.clock.advance(0ms);
  const auto init = f.client_got();
  CHECK(at(init, "error.code") == "-32603");
  CHECK(at(init, "error.message")->find("lists no version the bridge speaks (2027-01-01)") !=
        std::string::npos);
  CHECK(f.server->closed);
  CHECK(f.client->closed);
  CHECK(f.closed);
}

TEST_CASE(
    "modern egress negotiation: an upstream that goes away during the probe answers "
    "initialize with its reason",
    "[modern-upstream][server/discover]") {
  Fixture f;
  f.client->inject(kInitialize);
  const auto discover = f.server_got();
  // What the HTTP client does when the server cannot be reached: every request in flight gets
  // the error, then the channel closes.
  const std::string why = "upstream http://127.0.0.1:9/mcp unreachable: Connection refused";
  f.server->inject(R"({"jsonrpc":"2.0","id":)" + quoted(*at(discover, "id")) +
                   R"(,"error":{"code":-32000,"message":")" + why + R"("}})");
  f.server->peer_close({CloseReason::Kind::peer_gone, why});
  const auto init = f.client_got();
  CHECK(at(init, "error.code") == "-32000");
  CHECK(at(init, "error.message") == why);
  CHECK(f.client->closed);
  f.clock.advance(10ms);
  CHECK(f.server->take().empty());
}

TEST_CASE("modern egress: a request sent before initialize is answered waits for the verdict",
          "[modern-upstream]") {
  Fixture f;
  f.client->inject(kInitialize);
  const auto discover = f.server_got();
  f.client->inject(R"({"jsonrpc":"2.0","id":2,"method":"ping"})");
  f.client->inject(R"({"jsonrpc":"2.0","id":3,"method":"tools/list"})");
  CHECK(f.client->take().empty());
  f.server->inject(result_for(quoted(*at(discover, "id")), kDiscovered));
  f.refuse_initialize(*f.server);
  const auto got = f.client->take();
  REQUIRE(got.size() == 2);
  CHECK(at(got[0], "id") == "1");
  CHECK(got[1] == R"({"jsonrpc":"2.0","id":2,"result":{}})");
  const auto sent = f.server->take();
  REQUIRE(sent.size() == 2);
  CHECK(at(sent[0], "method") == "subscriptions/listen");
  CHECK(at(sent[1], "method") == "tools/list");
}

// ---- requests in modern mode
// ---------------------------------------------------------------------

TEST_CASE(
    "modern egress (basic/index §_meta): every request carries the envelope, under an id of the "
    "bridge's: the result comes back under the client's id",
    "[modern-upstream][basic/index]") {
  Fixture f;
  f.modern_session();
  f.client->inject(kCallElicit);
  const auto call = f.server_got();
  CHECK(at(call, "method") == "tools/call");
  CHECK(at(call, "id") != "7");
  CHECK(at(call, "params.name") == "ask");
  CHECK(at(call, "params.arguments") == R"({"q":1})");
  CHECK(at(call, "params._meta.progressToken") == "tok");
  CHECK(at(call, "params._meta." + kVersionKey) == "2026-07-28");
  CHECK(at(call, "params._meta." + kCapsKey) ==
        R"({"elicitation":{},"sampling":{},"roots":{"listChanged":true}})");
  CHECK(at(call, "params._meta." + kInfoKey) == R"({"name":"mqtt-client","version":"3"})");
  // The server declares logging and the client set no level: everything, as a 2025 server
  // would send until told otherwise.
  CHECK(at(call, "params._meta." + kLevelKey) == "debug");
  // Progress and log messages of the request reach the client as they are.
  const std::string progress =
      R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok","progress":1,"total":2}})";
  f.server->inject(progress);
  CHECK(f.client_got() == progress);
  f.server->inject(
      result_for(quoted(*at(call, "id")),
                 R"({"content":[{"type":"text","text":"hi"}],"resultType":"complete"})"));
  const auto result = f.client_got();
  CHECK(at(result, "id") == "7");
  CHECK(at(result, "result.content.0.text") == "hi");
  CHECK(f.adapter->calls_in_flight() == 0);
  // Errors too; and a method 2026-07-28 removed but the server may still know goes as is.
  f.client->inject(R"({"jsonrpc":"2.0","id":8,"method":"completion/complete","params":{}})");
  const auto complete = f.server_got();
  CHECK(at(complete, "params._meta." + kVersionKey) == "2026-07-28");
  f.server->inject(R"({"jsonrpc":"2.0","id":)" + quoted(*at(complete, "id")) +
                   R"(,"error":{"code":-32602,"message":"bad ref","data":{"x":1}}})");
  CHECK(f.client_got() ==
        R"({"jsonrpc":"2.0","id":8,"error":{"code":-32602,"message":"bad ref","data":{"x":1}}})");
}

TEST_CASE(
    "modern egress: ping and logging/setLevel are answered by the bridge: the level travels "
    "in later envelopes (basic/index §_meta logLevel)",
    "[modern-upstream][basic/index]") {
  Fixture f;
  f.modern_session();
  f.client->inject(R"({"jsonrpc":"2.0","id":2,"method":"ping"})");
  CHECK(f.client_got() == R"({"jsonrpc":"2.0","id":2,"result":{}})");
  f.client->inject(
      R"({"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"warning"}})");
  CHECK(f.client_got() == R"({"jsonrpc":"2.0","id":3,"result":{}})");
  CHECK(f.server->take().empty());
  f.client->inject(R"({"jsonrpc":"2.0","id":4,"method":"tools/list"})");
  CHECK(at(f.server_got(), "params._meta." + kLevelKey) == "warning");
  f.client->inject(
      R"({"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"loud"}})");
  const auto bad = f.client_got();
  CHECK(at(bad, "error.code") == "-32602");
  CHECK(f.server->take().empty());
  // A server without the logging capability: setLevel is not found, as it would be there.
  Fixture g;
  g.modern_session(
      R"({"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}}})");
  g.client->inject(
      R"({"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"info"}})");
  CHECK(at(g.client_got(), "error.code") == "-32601");
  g.client->inject(R"({"jsonrpc":"2.0","id":3,"method":"tools/list"})");
  CHECK_FALSE(at(g.server_got(), "params._meta." + kLevelKey));
}

TEST_CASE(
    "modern egress: resources/subscribe opens a new listen with the URI, answered once it is "
    "acknowledged: the old listen is then closed (subscriptions §Cancellation)",
    "[modern-upstream][subscriptions]") {
  Fixture f;
  const auto first = f.modern_session();
  f.client->inject(
      R"({"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"test://watched"}})");
  const auto second = f.server_got();
  CHECK(at(second, "method") == "subscriptions/listen");
  CHECK(at(second, "params.notifications.resourceSubscriptions") == R"(["test://watched"])");
  CHECK(at(second, "params.notifications.toolsListChanged") == "true");
  CHECK(f.client->take().empty());  // not before the acknowledgement
  // The old listen still speaks until the new one is acknowledged.
  f.server->inject(
      R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":)" +
      first + "}}}");
  CHECK(f.client_got() == R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})");
  const auto second_id = quoted(*at(second, "id"));
  f.ack(second_id, R"({"resourceSubscriptions":["test://watched"]})");
  CHECK(f.client_got() == R"({"jsonrpc":"2.0","id":2,"result":{}})");
  const auto cancel = f.server_got();
  CHECK(at(cancel, "method") == "notifications/cancelled");
  CHECK(quoted(*at(cancel, "params.requestId")) == first);
  // Now only the new listen speaks; its notifications lose their subscriptionId.
  f.server->inject(
      R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":)" +
      first + "}}}");
  CHECK(f.client->take().empty());
  f.server->inject(
      R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://watched","_meta":{"io.modelcontextprotocol/subscriptionId":)" +
      second_id + R"(,"other":1}}})");
  CHECK(
      f.client_got() ==
      R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://watched","_meta":{"other":1}}})");
  CHECK(f.adapter->subscriptions() == std::set<std::string>{"test://watched"});
  // Subscribing again changes nothing; unsubscribing opens a listen without the URI.
  f.client->inject(
      R"({"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"test://watched"}})");
  CHECK(f.client_got() == R"({"jsonrpc":"2.0","id":3,"result":{}})");
  CHECK(f.server->take().empty());
  f.client->inject(
      R"({"jsonrpc":"2.0","id":4,"method":"resources/unsubscribe","params":{"uri":"test://watched"}})");
  const auto third = f.server_got();
  CHECK_FALSE(at(third, "params.notifications.resourceSubscriptions"));
  CHECK(f.client->take().empty());  // updates of the URI may still come until the switch
  f.ack(quoted(*at(third, "id")), R"({"toolsListChanged":true})");
  CHECK(f.client_got() == R"({"jsonrpc":"2.0","id":4,"result":{}})");
  CHECK(f.adapter->subscriptions().empty());
  // Bad input.
  f.client->inject(R"({"jsonrpc":"2.0","id":5,"method":"resources/subscribe","params":{}})");
  CHECK(at(f.client_got(), "error.code") == "-32602");
}

TEST_CASE("modern egress: a listen that served for a while and ends is reopened at once",
          "[modern-upstream][subscriptions]") {
  Fixture f;
  const auto first = f.modern_session();
  f.clock.advance(30000ms);
  // The stream gave out (HTTP: the client's idle timeout): an error for the listen request.
  f.server->inject(R"({"jsonrpc":"2.0","id":)" + first +
                   R"(,"error":{"code":-32000,"message":"stream cut"}})");
  f.clock.advance(0ms);
  const auto again = f.server_got();
  CHECK(at(again, "method") == "subscriptions/listen");
}

TEST_CASE(
    "modern egress: a listen that ends young is reopened with backoff: one the server refuses "
    "fails the subscriptions waiting for it",
    "[modern-upstream][subscriptions]") {
  Fixture f;
  const auto first = f.modern_session();
  // The server ends the listen (stdio: notifications/cancelled naming it).
  f.server->inject(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":)" +
                   first + "}}");
  CHECK(f.server->take().empty());
  f.clock.advance(499ms);
  CHECK(f.server->take().empty());
  f.clock.advance(1ms);
  const auto again = f.server_got();
  CHECK(at(again, "method") == "subscriptions/listen");
  // Not acknowledged in time: cancelled, then tried again after twice the delay.
  f.clock.advance(5000ms);
  CHECK(at(f.server_got(), "method") == "notifications/cancelled");
  f.clock.advance(999ms);
  CHECK(f.server->take().empty());
  f.clock.advance(1ms);
  const auto third = f.server_got();
  CHECK(at(third, "method") == "subscriptions/listen");
  // A subscription meanwhile: the unacknowledged listen is superseded by one with the URI.
  f.client->inject(
      R"({"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"test://a"}})");
  auto sent = f.server->take();
  REQUIRE(sent.size() == 2);
  CHECK(at(sent[0], "method") == "notifications/cancelled");
  CHECK(at(sent[0], "params.requestId") == at(third, "id"));
  const auto fourth = sent[1];
  CHECK(at(fourth, "params.notifications.resourceSubscriptions") == R"(["test://a"])");
  f.server->inject(R"({"jsonrpc":"2.0","id":)" + quoted(*at(fourth, "id")) +
                   R"(,"error":{"code":-32601,"message":"Method not found"}})");
  const auto refused = f.client_got();
  CHECK(at(refused, "id") == "2");
  CHECK(at(refused, "error.code") == "-32603");
  // Nothing is retried after a refusal.
  f.clock.advance(60000ms);
  CHECK(f.server->take().empty());
}

// ---- input_required
// ------------------------------------------------------------------------------

TEST_CASE(
    "modern egress (basic/patterns/mrtr): input_required with one key becomes one request to "
    "the MQTT client: its answer goes back in a retry under a new id",
    "[modern-upstream][mrtr]") {
  Fixture f;
  f.modern_session();
  f.client->inject(kCallElicit);
  const auto call = f.server_got();
  const std::string schema =
      R"({"type":"object","properties":{"name":{"type":"string"}},"required":["name"]})";
  f.server->inject(result_for(
      quoted(*at(call, "id")),
      R"({"resultType":"input_required","inputRequests":{"user_name":{"method":"elicitation/create","params":{"message":"Name?","requestedSchema":)" +
          schema + R"(,"mode":"form"}}}})"));
  const auto ask = f.client_got();
  CHECK(at(ask, "method") == "elicitation/create");
  CHECK(at(ask, "params.message") == "Name?");
  CHECK(at(ask, "params.requestedSchema") == schema);
  CHECK(at(ask, "params._meta." + kInputKey) == "user_name");
  CHECK(at(ask, "params._meta." + kRoundKey) == R"({"size":1})");
  CHECK(f.server->take().empty());
  f.client->inject(
      result_for(quoted(*at(ask, "id")), R"({"action":"accept","content":{"name":"Ada"}})"));
  const auto retry = f.server_got();
  CHECK(at(retry, "method") == "tools/call");
  CHECK(at(retry, "id") != at(call, "id"));  // mrtr §Client Requirements 3
  CHECK(at(retry, "params.name") == "ask");
  CHECK(at(retry, "params.arguments") == R"({"q":1})");
  CHECK(at(retry, "params.inputResponses") ==
        R"({"user_name":{"action":"accept","content":{"name":"Ada"}}})");
  CHECK_FALSE(at(retry, "params.requestState"));  // never added when the server gave none
  CHECK(at(retry, "params._meta.progressToken") == "tok");
  CHECK(at(retry, "params._meta." + kVersionKey) == "2026-07-28");
  f.server->inject(
      result_for(quoted(*at(retry, "id")), R"({"content":[],"resultType":"complete"})"));
  CHECK(f.client_got() ==
        R"({"jsonrpc":"2.0","id":7,"result":{"content":[],"resultType":"complete"}})");
}

TEST_CASE(
    "modern egress (basic/patterns/mrtr): a round of three keys asks all three at once and "
    "retries once every answer is in",
    "[modern-upstream][mrtr]") {
  Fixture f;
  f.modern_session();
  f.client->inject(R"({"jsonrpc":"2.0","id":9,"method":"prompts/get","params":{"name":"p"}})");
  const auto get = f.server_got();
  f.server->inject(result_for(
      quoted(*at(get, "id")),
      R"({"resultType":"input_required","requestState":"s1","inputRequests":{)"
      R"("e":{"method":"elicitation/create","params":{"message":"m"}},)"
      R"("s":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}},)"
      R"("r":{"method":"roots/list"}}})"));
  const auto asks = f.client->take();
  REQUIRE(asks.size() == 3);
  std::map<std::string, std::string> by_key;
  for (const auto& a : asks) {
    CHECK(at(a, "params._meta." + kRoundKey) == R"({"size":3})");
    by_key[*at(a, "params._meta." + kInputKey)] = a;
  }
  CHECK(at(by_key["e"], "method") == "elicitation/create");
  CHECK(at(by_key["s"], "method") == "sampling/createMessage");
  CHECK(at(by_key["r"], "method") == "roots/list");
  CHECK(at(by_key["r"], "params") ==
        R"({"_meta":{"mcp-mqtt-bridge/inputKey":"r","mcp-mqtt-bridge/inputRound":{"size":3}}})");
  f.client->inject(
      result_for(quoted(*at(by_key["r"], "id")), R"({"roots":[{"uri":"file:///x"}]})"));
  f.client->inject(result_for(quoted(*at(by_key["e"], "id")), R"({"action":"decline"})"));
  CHECK(f.server->take().empty());
  f.client->inject(
      result_for(quoted(*at(by_key["s"], "id")),
                 R"({"role":"assistant","content":{"type":"text","text":"x"},"model":"m"})"));
  const auto retry = f.server_got();
  CHECK(at(retry, "params.inputResponses.r") == R"({"roots":[{"uri":"file:///x"}]})");
  CHECK(at(retry, "params.inputResponses.e") == R"({"action":"decline"})");
  CHECK(at(retry, "params.inputResponses.s.model") == "m");
  CHECK(at(retry, "params.requestState") == "s1");
  CHECK(at(retry, "params.name") == "p");
}

TEST_CASE(
    "modern egress (basic/patterns/mrtr §Client Requirements 2): several rounds, each retry "
    "echoing that round's requestState byte for byte and only that round's answers",
    "[modern-upstream][mrtr]") {
  Fixture f(Fixture::Setup{}.rounds(2));
  f.modern_session();
  f.client->inject(kCallElicit);
  auto attempt = f.server_got();
  // A state with escapes, non-ASCII and a character RapidJSON would write differently.
  const std::string state1_json = R"("v1.\u00e9t\u00E9\"\\\/\u2028.x")";
  const std::string state1 = "v1.\xC3\xA9t\xC3\xA9\"\\/\xE2\x80\xA8.x";
  f.server->inject(result_for(
      quoted(*at(attempt, "id")),
      R"({"resultType":"input_required","requestState":)" + state1_json +
          R"(,"inputRequests":{"first":{"method":"sampling/createMessage","params":{"messages":[]}}}})"));
  auto ask = f.client_got();
  f.client->inject(result_for(quoted(*at(ask, "id")), R"({"n":1})"));
  attempt = f.server_got();
  CHECK(at(attempt, "params.requestState") == state1);
  CHECK(at(attempt, "params.inputResponses") == R"({"first":{"n":1}})");
  f.server->inject(result_for(
      quoted(*at(attempt, "id")),
      R"({"resultType":"input_required","requestState":"state-2","inputRequests":{"second":{"method":"sampling/createMessage","params":{}}}})"));
  ask = f.client_got();
  CHECK(at(ask, "params._meta." + kInputKey) == "second");
  f.client->inject(result_for(quoted(*at(ask, "id")), R"({"n":2})"));
  attempt = f.server_got();
  CHECK(at(attempt, "params.requestState") == "state-2");
  CHECK(at(attempt, "params.inputResponses") == R"({"second":{"n":2}})");  // replaced, not added
  // A third round is one too many here (max_input_rounds 2).
  f.server->inject(result_for(
      quoted(*at(attempt, "id")),
      R"({"resultType":"input_required","requestState":"state-3","inputRequests":{"third":{"method":"roots/list"}}})"));
  const auto gave_up = f.client_got();
  CHECK(at(gave_up, "id") == "7");
  CHECK(at(gave_up, "error.code") == "-32603");
  CHECK(at(gave_up, "error.message")->find("more than 2 times") != std::string::npos);
}

TEST_CASE(
    "modern egress (basic/patterns/mrtr): a round with only requestState is retried after a "
    "pause",
    "[modern-upstream][mrtr]") {
  Fixture f;
  f.modern_session();
  f.client->inject(kCallElicit);
  const auto attempt = f.server_got();
  f.server->inject(result_for(quoted(*at(attempt, "id")),
                              R"({"resultType":"input_required","requestState":"later"})"));
  CHECK(f.client->take().empty());
  f.clock.advance(249ms);
  CHECK(f.server->take().empty());
  f.clock.advance(1ms);
  const auto retry = f.server_got();
  CHECK(at(retry, "params.requestState") == "later");
  CHECK(at(retry, "params.inputResponses") == "{}");
}

TEST_CASE(
    "modern egress: the MQTT client's error answer to an input request fails the call with "
    "that error: the round's other input requests are cancelled",
    "[modern-upstream][mrtr]") {
  Fixture f;
  f.modern_session();
  f.client->inject(kCallElicit);
  const auto attempt = f.server_got();
  f.server->inject(result_for(
      quoted(*at(attempt, "id")),
      R"({"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{}},"b":{"method":"roots/list"}}})"));
  auto asks = f.client->take();
  REQUIRE(asks.size() == 2);
  const auto& failing = at(asks[0], "params._meta." + kInputKey) == "a" ? asks[0] : asks[1];
  const auto& other = &failing == &asks[0] ? asks[1] : asks[0];
  f.client->inject(R"({"jsonrpc":"2.0","id":)" + quoted(*at(failing, "id")) +
                   R"(,"error":{"code":-32601,"message":"Method not found","data":{"why":"no"}}})");
  const auto got = f.client->take();
  REQUIRE(got.size() == 2);
  CHECK(at(got[0], "method") == "notifications/cancelled");
  CHECK(at(got[0], "params.requestId") == at(other, "id"));
  CHECK(at(got[1], "id") == "7");
  CHECK(at(got[1], "error.code") == "-32601");
  CHECK(at(got[1], "error.message") ==
        "elicitation/create (input \"a\") to the MQTT client failed: Method not found");
  CHECK(at(got[1], "error.data") == R"({"why":"no"})");
  CHECK(f.server->take().empty());
  CHECK(f.splice->pending(Splice::Side::server) == 0);
}

TEST_CASE(
    "modern egress: an input request the splice refuses (too many in flight) fails the call: "
    "the rest of the round is not sent",
    "[modern-upstream][mrtr]") {
  Fixture f(Fixture::Setup{}.pending(1));
  f.modern_session();
  f.client->inject(kCallElicit);
  const auto attempt = f.server_got();
  f.server->inject(result_for(
      quoted(*at(attempt, "id")),
      R"({"resultType":"input_required","inputRequests":{"a":{"method":"roots/list"},"b":{"method":"roots/list"}}})"));
  const auto got = f.client->take();
  REQUIRE(got.size() == 3);
  CHECK(at(got[0], "method") == "roots/list");
  CHECK(at(got[1], "method") == "notifications/cancelled");
  CHECK(at(got[1], "params.requestId") == at(got[0], "id"));
  CHECK(at(got[2], "id") == "7");
  CHECK(
      at(got[2], "error.message")->find("to the MQTT client failed: too many requests in flight") !=
      std::string::npos);
  CHECK(f.adapter->calls_in_flight() == 0);
  CHECK(f.splice->pending(Splice::Side::server) == 0);
}

TEST_CASE(
    "modern egress: malformed input_required, and input_required on a method that cannot "
    "have it, are errors for the client",
    "[modern-upstream][mrtr]") {
  Fixture f;
  f.modern_session();
  f.client->inject(kCallElicit);
  auto attempt = f.server_got();
  f.server->inject(result_for(quoted(*at(attempt, "id")), R"({"resultType":"input_required"})"));
  auto e = f.client_got();
  CHECK(at(e, "error.code") == "-32603");
  CHECK(at(e, "error.message")->find("neither inputRequests nor requestState") !=
        std::string::npos);
  f.client->inject(R"({"jsonrpc":"2.0","id":8,"method":"tools/list"})");
  attempt = f.server_got();
  f.server->inject(result_for(quoted(*at(attempt, "id")),
                              R"({"resultType":"input_required","requestState":"x"})"));
  e = f.client_got();
  CHECK(at(e, "id") == "8");
  CHECK(at(e, "error.message")->find("allows only on tools/call") != std::string::npos);
}

// ---- cancellation ------------------------------------------------------------------------------

TEST_CASE(
    "modern egress: the client's cancellation reaches the attempt in flight upstream, with the "
    "envelope: a late answer is dropped",
    "[modern-upstream][cancellation]") {
  Fixture f;
  f.modern_session();
  f.client->inject(kCallElicit);
  const auto attempt = f.server_got();
  f.client->inject(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}})");
  const auto cancel = f.server_got();
  CHECK(at(cancel, "method") == "notifications/cancelled");
  CHECK(at(cancel, "params.requestId") == at(attempt, "id"));
  CHECK(at(cancel, "params._meta." + kVersionKey) == "2026-07-28");
  f.server->inject(result_for(quoted(*at(attempt, "id")), R"({"content":[]})"));
  CHECK(f.client->take().empty());
  CHECK(f.adapter->calls_in_flight() == 0);
}

TEST_CASE(
    "modern egress: cancelling while input requests wait at the client cancels them: the "
    "splice's timeout does the same",
    "[modern-upstream][cancellation]") {
  Fixture f;
  f.modern_session();
  f.client->inject(kCallElicit);
  const auto attempt = f.server_got();
  f.server->inject(result_for(
      quoted(*at(attempt, "id")),
      R"({"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{}}}})"));
  const auto ask = f.client_got();
  // The splice times elicitation/create out after 30 s (the call's own 60 s are not up).
  f.clock.advance(30000ms);
  const auto got = f.client->take();
  // The call fails with the input request's timeout, and the client hears it was cancelled.
  REQUIRE(got.size() == 2);
  CHECK(at(got[0], "id") == "7");
  CHECK(at(got[0], "error.code") == "-32001");
  CHECK(at(got[0], "error.message")
            ->starts_with(
                "elicitation/create (input \"a\") to the MQTT client failed: request timed out"));
  CHECK(at(got[1], "method") == "notifications/cancelled");
  CHECK(at(got[1], "params.requestId") == at(ask, "id"));
  CHECK(f.server->take().empty());

  f.client->inject(kCallElicit);
  const auto second = f.server_got();
  f.server->inject(result_for(
      quoted(*at(second, "id")),
      R"({"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{}}}})"));
  const auto ask2 = f.client_got();
  f.client->inject(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}})");
  const auto cancelled = f.client_got();
  CHECK(at(cancelled, "method") == "notifications/cancelled");
  CHECK(at(cancelled, "params.requestId") == at(ask2, "id"));
  CHECK(f.server->take().empty());  // nothing upstream is in flight for it
  f.client->inject(result_for(quoted(*at(ask2, "id")), R"({"action":"accept"})"));
  CHECK(f.server->take().empty());
}

// ---- the server's own messages, errors and close
// -------------------------------------------------

TEST_CASE("modern egress: a request from the server while negotiating is refused",
          "[modern-upstream]") {
  Fixture f;
  f.client->inject(kInitialize);
  f.server->take();
  f.server->inject(R"({"jsonrpc":"2.0","id":"early","method":"roots/list"})");
  const auto refused = f.server_got();
  CHECK(at(refused, "id") == "early");
  CHECK(at(refused, "error.code") == "-32600");
  CHECK(f.client->take().empty());
}

TEST_CASE("modern egress: a request from a 2026-07-28 server is refused (there are none)",
          "[modern-upstream]") {
  Fixture f;
  f.modern_session();
  f.server->inject(R"({"jsonrpc":"2.0","id":"x","method":"roots/list"})");
  const auto refused = f.server_got();
  CHECK(at(refused, "id") == "x");
  CHECK(at(refused, "error.code") == "-32601");
  CHECK(f.client->take().empty());
}

TEST_CASE(
    "modern egress: when the upstream closes, every request of the client still pending is "
    "answered and the client's session ends",
    "[modern-upstream]") {
  Fixture f;
  f.modern_session();
  f.client->inject(kCallElicit);
  const auto attempt = f.server_got();
  f.client->inject(R"({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"b"}})");
  const auto other = f.server_got();
  f.server->inject(result_for(
      quoted(*at(other, "id")),
      R"({"resultType":"input_required","inputRequests":{"a":{"method":"roots/list"}}})"));
  CHECK(at(f.client_got(), "method") == "roots/list");
  f.client->inject(
      R"({"jsonrpc":"2.0","id":9,"method":"resources/subscribe","params":{"uri":"test://w"}})");
  CHECK(at(f.server_got(), "method") == "subscriptions/listen");
  f.server->peer_close({CloseReason::Kind::exited, "child exited with status 3"});
  const auto got = f.client->take();
  REQUIRE(got.size() == 3);
  std::set<std::string> answered;
  for (const auto& m : got) {
    CHECK(at(m, "error.code") == "-32000");
    CHECK(at(m, "error.message")->find("child exited with status 3") != std::string::npos);
    answered.insert(*at(m, "id"));
  }
  CHECK(answered == std::set<std::string>{"7", "8", "9"});
  CHECK(f.client->closed);
  REQUIRE(f.closed);
  CHECK(f.closed->detail == "child exited with status 3");
  f.clock.advance(60000ms);
  CHECK(f.client->take().empty());
}

TEST_CASE("modern egress: closing the session closes the upstream and the probe copy",
          "[modern-upstream]") {
  Fixture f(Fixture::Setup{}.probing());
  f.client->inject(kInitialize);
  REQUIRE(f.probe);
  f.splice->close({CloseReason::Kind::shutdown, "the bridge is stopping"});
  CHECK(f.server->closed);
  CHECK(f.probe->closed);
  CHECK(at(f.client_got(), "error.message") ==
        "initialize was not answered: the bridge is stopping");
  f.clock.advance(60000ms);
  CHECK(f.server->take().empty());
}

TEST_CASE(
    "modern egress (SEP-2243): a tools/call before anyone listed the tools waits for a listing of "
    "the adapter's own, page by page, so the HTTP client can send its Mcp-Param headers - a "
    "client's own complete listing teaches as well, and tools/list_changed forgets",
    "[modern-upstream][streamable-http]") {
  auto headers = std::make_shared<modern::ToolHeaders>();
  Fixture f(Fixture::Setup{}.headers(headers));
  const auto listen = f.modern_session();
  f.client->inject(
      R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"a","arguments":{"r":"x"}}})");
  auto page = f.server_got();
  CHECK(at(page, "method") == "tools/list");
  CHECK(at(page, "params._meta." + kVersionKey) == "2026-07-28");
  CHECK_FALSE(at(page, "params.cursor"));
  f.server->inject(result_for(
      quoted(*at(page, "id")),
      R"({"tools":[{"name":"a","inputSchema":{"properties":{"r":{"x-mcp-header":"Region"}}}}],"nextCursor":"p2","resultType":"complete"})"));
  page = f.server_got();
  CHECK(at(page, "params.cursor") == "p2");
  CHECK_FALSE(headers->listed());
  f.server->inject(result_for(quoted(*at(page, "id")), R"({"tools":[],"resultType":"complete"})"));
  CHECK(headers->listed());
  REQUIRE(headers->of("a").size() == 1);
  // Now the call, and nothing the adapter listed reached the client.
  const auto call = f.server_got();
  CHECK(at(call, "method") == "tools/call");
  CHECK(f.client->take().empty());
  f.server->inject(
      result_for(quoted(*at(call, "id")), R"({"content":[],"resultType":"complete"})"));
  CHECK(at(f.client_got(), "id") == "5");
  // The next call goes at once.
  f.client->inject(R"({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"a"}})");
  CHECK(at(f.server_got(), "method") == "tools/call");
  // The tools changed: learn again, here from the client's own listing.
  f.server->inject(
      R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":)" +
      listen + "}}}");
  CHECK(at(f.client_got(), "method") == "notifications/tools/list_changed");
  CHECK_FALSE(headers->listed());
  f.client->inject(R"({"jsonrpc":"2.0","id":7,"method":"tools/list"})");
  const auto list = f.server_got();
  f.server->inject(result_for(
      quoted(*at(list, "id")),
      R"({"tools":[{"name":"b","inputSchema":{"properties":{"k":{"x-mcp-header":"Key"}}}}],"resultType":"complete"})"));
  CHECK(at(f.client_got(), "id") == "7");
  CHECK(headers->listed());
  CHECK(headers->of("b").size() == 1);
}

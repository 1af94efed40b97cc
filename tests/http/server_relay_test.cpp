// The HTTP side of relaying between replicas (http/server_relay.hpp): sealed session ids, the
// wire form of relayed requests and answers, and RemoteExchange's frames played back into an
// exchange.
#include "http/server_relay.hpp"

#include <catch2/catch.hpp>

#include "bridge/modern/request_state.hpp"
#include "bridge/modern/round_state.hpp"

using namespace mcpmqtt::http;
namespace bhttp = boost::beast::http;

namespace {

// An Exchange that records what it was asked, as one line per operation.
class RecordingExchange : public Exchange {
 public:
  std::vector<std::string> ops;
  std::function<void()> on_gone;
  void watch(std::function<void()> f) override { on_gone = std::move(f); }
  void reply(Response r) override {
    ops.push_back("reply " + std::to_string(r.result_int()) + " " +
                  std::string(r[bhttp::field::content_type]) + " " +
                  std::string(r["Mcp-Session-Id"]) + " " + r.body());
  }
  void open_stream(Response head) override {
    ops.push_back("open " + std::to_string(head.result_int()) + " " +
                  std::string(head[bhttp::field::content_type]));
  }
  void push(std::string bytes) override { ops.push_back("push " + bytes); }
  void push_event(std::string_view id, std::string_view data, bool last) override {
    ops.push_back("event " + std::string(id) + " " + std::string(data) + (last ? " last" : ""));
  }
  void end() override { ops.push_back("end"); }
  void abort() override { ops.push_back("abort"); }
};

const std::string kSecret(40, 'k');

}  // namespace

TEST_CASE(
    "replica session ids: {replica}.{random}.{MAC} name their owner, and no one without the "
    "secret can make or alter one",
    "[http][relay]") {
  SessionIds r1("r1", kSecret);
  SessionIds r2("r2-b_c", kSecret);
  const auto a = r1.mint();
  const auto b = r1.mint();
  CHECK(a != b);
  CHECK(a.rfind("r1.", 0) == 0);
  // 002 §Session Management: visible ASCII only.
  for (char c : a)
    CHECK((c >= 0x21 && c <= 0x7e));
  CHECK(r1.owner(a) == std::optional<std::string>("r1"));
  CHECK(r2.owner(a) == std::optional<std::string>("r1"));  // any replica with the secret reads it
  CHECK(r2.owner(r2.mint()) == std::optional<std::string>("r2-b_c"));
  // Another secret, an altered owner, random part or MAC, other forms: no owner.
  SessionIds other("r1", std::string(40, 'x'));
  CHECK_FALSE(other.owner(a));
  auto renamed = "r2" + a.substr(2);
  CHECK_FALSE(r1.owner(renamed));
  auto altered = a;
  altered[4] = altered[4] == 'A' ? 'B' : 'A';
  CHECK_FALSE(r1.owner(altered));
  auto mac_altered = a;
  mac_altered.back() = mac_altered.back() == 'A' ? 'B' : 'A';
  CHECK_FALSE(r1.owner(mac_altered));
  for (const char* s : {"", ".", "..", "r1..", "0123456789abcdef0123456789abcdef", "r1.x.y",
                        ".AAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA"}) {
    INFO(s);
    CHECK_FALSE(r1.owner(s));
  }
}

TEST_CASE("relay wire: lists of byte strings, and malformed ones refused", "[http][relay]") {
  const std::string binary("a\0b", 3);
  const auto w = relay_wire::encode({"one", "", binary});
  auto parts = relay_wire::decode(w);
  REQUIRE(parts);
  REQUIRE(parts->size() == 3);
  CHECK((*parts)[0] == "one");
  CHECK((*parts)[1].empty());
  CHECK((*parts)[2] == binary);
  CHECK_FALSE(relay_wire::decode(""));
  CHECK_FALSE(relay_wire::decode(w.substr(0, w.size() - 1)));   // truncated
  CHECK_FALSE(relay_wire::decode(w + "x"));                     // trailing bytes
  CHECK_FALSE(relay_wire::decode(std::string("\0\0\0\0", 4)));  // no parts
  CHECK_FALSE(relay_wire::decode(std::string("\xff\xff\xff\xff", 4)));
  CHECK_FALSE(relay_wire::decode(w, 2));  // more parts than allowed
}

TEST_CASE(
    "relay wire: a relayed request keeps its method, path, fields, body and principal (never "
    "more than it had)",
    "[http][relay]") {
  RelayedRequest r;
  r.owner = "r1";
  r.method = bhttp::verb::get;
  r.target = "/servers/demo%2Ftest/mcp";
  r.headers = {{"Mcp-Session-Id", "r1.x.y"}, {"Last-Event-ID", "7"}};
  r.body = "";
  r.principal.key = "oauth:https://as|alice";
  r.principal.issuer = "https://as";
  r.principal.subject = "alice";
  r.principal.scopes = {"mcp:demo"};
  r.principal.unrestricted = false;
  r.principal.server_filters = {"demo/#"};
  r.principal.expires_at = 1700000000;
  const auto wire = relay_wire::encode_request(r);
  auto parts = relay_wire::decode(wire);
  REQUIRE(parts);
  auto back = relay_wire::decode_request(*parts);
  REQUIRE(back);
  CHECK(back->method == bhttp::verb::get);
  CHECK(back->target == r.target);
  CHECK(back->headers == r.headers);
  CHECK(back->principal.key == r.principal.key);
  CHECK(back->principal.subject == "alice");
  CHECK_FALSE(back->principal.unrestricted);
  CHECK(back->principal.server_filters == r.principal.server_filters);
  CHECK(back->principal.expires_at == 1700000000);
  CHECK_FALSE(back->principal.access_token);  // none was there, none is made up
  CHECK(back->principal.may_reach("demo/test"));
  CHECK_FALSE(back->principal.may_reach("other/x"));

  // Methods other than those of an MCP endpoint, a principal without a key: refused.
  auto bad = relay_wire::encode({"request", "PUT", "/mcp", R"({"key":"anonymous"})", ""});
  CHECK_FALSE(relay_wire::decode_request(*relay_wire::decode(bad)));
  CHECK_FALSE(relay_wire::decode_principal(R"({"key":""})"));
  CHECK_FALSE(relay_wire::decode_principal(R"({"key":"a","filters":[1]})"));
  CHECK_FALSE(relay_wire::decode_principal("not json"));
}

TEST_CASE(
    "relay wire: what the owner's session does with a RemoteExchange is played into the "
    "relaying replica's exchange operation by operation, in order",
    "[http][relay]") {
  std::vector<std::pair<std::string, bool>> frames;
  RemoteExchange remote([&](std::string f, bool last) { frames.emplace_back(std::move(f), last); });
  Response head{bhttp::status::ok, 11};
  head.set(bhttp::field::content_type, "text/event-stream");
  head.set(bhttp::field::connection, "keep-alive");  // hop-by-hop: not relayed
  remote.open_stream(head);
  remote.push(": keepalive\n\n");
  remote.push_event("e1", R"({"jsonrpc":"2.0","method":"x"})");
  remote.push_event("e2", R"({"jsonrpc":"2.0","id":1,"result":{}})", true);
  remote.end();
  remote.push("after the end");  // nothing leaves after the last frame
  REQUIRE(frames.size() == 5);
  CHECK(frames.back().second);
  CHECK(remote.complete());

  RecordingExchange local;
  std::vector<relay_wire::Applied> applied;
  for (const auto& [f, last] : frames)
    applied.push_back(relay_wire::apply(*relay_wire::decode(f), local));
  CHECK(applied.back() == relay_wire::Applied::done);
  CHECK(applied.front() == relay_wire::Applied::more);
  CHECK(local.ops ==
        std::vector<std::string>{"open 200 text/event-stream", "push : keepalive\n\n",
                                 R"(event e1 {"jsonrpc":"2.0","method":"x"})",
                                 R"(event e2 {"jsonrpc":"2.0","id":1,"result":{}} last)", "end"});

  // A JSON reply, with its session id.
  frames.clear();
  RemoteExchange json([&](std::string f, bool last) { frames.emplace_back(std::move(f), last); });
  Response r{bhttp::status::not_found, 11};
  r.set(bhttp::field::content_type, "application/json");
  r.set("Mcp-Session-Id", "r1.a.b");
  r.body() = R"({"jsonrpc":"2.0","id":3,"error":{"code":-32001,"message":"x"}})";
  json.reply(r);
  REQUIRE(frames.size() == 1);
  RecordingExchange local2;
  CHECK(relay_wire::apply(*relay_wire::decode(frames[0].first), local2) ==
        relay_wire::Applied::done);
  CHECK(local2.ops == std::vector<std::string>{"reply 404 application/json r1.a.b " + r.body()});

  // gone(): the owner's on_gone runs once, and nothing is sent after it.
  int gone = 0;
  frames.clear();
  RemoteExchange watched(
      [&](std::string f, bool last) { frames.emplace_back(std::move(f), last); });
  watched.watch([&] { ++gone; });
  watched.gone();
  watched.gone();
  watched.reply(r);
  CHECK(gone == 1);
  CHECK(frames.empty());
  int late = 0;
  watched.watch([&] { ++late; });  // watching a gone exchange runs at once
  CHECK(late == 1);

  // Malformed frames are refused, not half played.
  RecordingExchange local3;
  CHECK(relay_wire::apply(*relay_wire::decode(relay_wire::encode({"reply", "99", ""})), local3) ==
        relay_wire::Applied::malformed);
  CHECK(relay_wire::apply(*relay_wire::decode(relay_wire::encode({"what"})), local3) ==
        relay_wire::Applied::malformed);
  CHECK(local3.ops.empty());
}

TEST_CASE(
    "requestState names the replica holding its parked request (mrtr §Server Requirements 4-5: "
    "the owner still checks the MAC)",
    "[http][relay][modern]") {
  using namespace mcpmqtt::bridge;
  RequestStateCodec codec(kSecret);
  const auto state =
      mint_round_state(codec, {7, "n", 1}, {"p", "k", "tools/call", "r2"}, "d", 1000);
  CHECK(round_state_replica(state) == "r2");
  CHECK(round_state_replica(
            mint_round_state(codec, {7, "n", 1}, {"p", "k", "tools/call", ""}, "d", 1000))
            .empty());
  CHECK(round_state_replica("garbage").empty());
  CHECK(round_state_replica("v1.!!!.x").empty());
}

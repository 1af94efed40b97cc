#include "bridge/relay/subscription_hub.hpp"

#include <catch2/catch.hpp>

using namespace mcpmqtt;
using bridge::SubscriptionHub;
using jsonrpc::Id;
using jsonrpc::Message;

namespace {

Message msg(const std::string& text) {
  auto m = Message::parse(text);
  REQUIRE(m);
  return *m;
}

// A hub that has seen the server's initialize result with these capabilities.
SubscriptionHub initialized(const std::string& capabilities) {
  SubscriptionHub hub;
  CHECK_FALSE(hub.from_client(msg(R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}})"))
                  .consumed);
  CHECK_FALSE(
      hub.from_server(msg(R"({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25",)"
                          R"("capabilities":)" +
                          capabilities + R"(,"serverInfo":{"name":"s","version":"1"}}})"))
          .consumed);
  return hub;
}

const std::string kAll = R"({"tools":{"listChanged":true},"prompts":{"listChanged":true},)"
                         R"("resources":{"listChanged":true,"subscribe":true}})";

Message listen(const std::string& id, const std::string& notifications) {
  return msg(R"({"jsonrpc":"2.0","id":)" + id +
             R"(,"method":"subscriptions/listen","params":{"notifications":)" + notifications +
             "}}");
}

Message updated(const std::string& uri) {
  return msg(R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":")" +
             uri + R"("}})");
}

Message cancelled(const std::string& id) {
  return msg(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":)" + id +
             "}}");
}

std::vector<std::string> texts(const std::vector<Message>& ms) {
  std::vector<std::string> out;
  for (const auto& m : ms)
    out.emplace_back(m.text());
  return out;
}

std::string ack(const std::string& id, const std::string& notifications) {
  return R"({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{)"
         R"("_meta":{"io.modelcontextprotocol/subscriptionId":)" +
         id + R"(},"notifications":)" + notifications + "}}";
}

std::string tagged_update(const std::string& id, const std::string& uri) {
  return R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":{)"
         R"("io.modelcontextprotocol/subscriptionId":)" +
         id + R"(},"uri":")" + uri + R"("}})";
}

}  // namespace

TEST_CASE("hub (000 §Acknowledgment): the acknowledgement holds only what the server declared",
          "[hub]") {
  auto hub = initialized(R"({"tools":{"listChanged":true},"resources":{}})");
  auto a = hub.from_client(listen(
      "1",
      R"({"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["a://x"]})"));
  CHECK(a.consumed);
  CHECK(a.subscribe.empty());  // no resources.subscribe capability: nothing to ask for
  CHECK(texts(a.to_client) == std::vector<std::string>{ack("1", R"({"toolsListChanged":true})")});
  CHECK(hub.listen_count() == 1);
}

TEST_CASE("hub: a listen's URIs are subscribed upstream and acknowledged once the server agreed",
          "[hub]") {
  auto hub = initialized(kAll);
  auto a =
      hub.from_client(listen(R"("L")", R"({"resourceSubscriptions":["a://1","a://2","a://1"]})"));
  CHECK(a.consumed);
  CHECK(a.to_client.empty());  // the acknowledgement waits for the server
  CHECK(a.subscribe == std::vector<std::string>{"a://1", "a://2"});
  CHECK(hub.subscribed("a://1", std::nullopt).to_client.empty());
  auto b = hub.subscribed("a://2", std::string("no such resource"));
  CHECK(texts(b.to_client) ==
        std::vector<std::string>{ack(R"("L")", R"({"resourceSubscriptions":["a://1"]})")});
  CHECK(hub.subscribed_upstream("a://1"));
  CHECK_FALSE(hub.subscribed_upstream("a://2"));
  // Only the honoured URI is delivered.
  CHECK(texts(hub.from_server(updated("a://1")).to_client) ==
        std::vector<std::string>{tagged_update(R"("L")", "a://1")});
  auto none = hub.from_server(updated("a://2"));
  CHECK(none.consumed);
  CHECK(none.to_client.empty());
}

TEST_CASE("hub: resource updates reach only the listens and sessions that asked for the URI",
          "[hub]") {
  auto hub = initialized(kAll);
  hub.from_client(listen("1", R"({"toolsListChanged":true})"));
  hub.from_client(listen("2", R"({"resourceSubscriptions":["a://x"]})"));
  hub.subscribed("a://x", std::nullopt);
  // A listen for list changes only never sees a resource update.
  CHECK(texts(hub.from_server(updated("a://x")).to_client) ==
        std::vector<std::string>{tagged_update("2", "a://x")});
  // An update nobody subscribed to is dropped: the capability topic is shared by all clients.
  auto other = hub.from_server(updated("a://other"));
  CHECK(other.consumed);
  CHECK(other.to_client.empty());
  // A legacy subscription (the server answered it) gets the update untagged.
  auto sub = msg(
      R"({"jsonrpc":"2.0","id":9,"method":"resources/subscribe","params":{"uri":"a://other"}})");
  CHECK_FALSE(hub.from_client(sub).consumed);
  CHECK_FALSE(hub.from_server(msg(R"({"jsonrpc":"2.0","id":9,"result":{}})")).consumed);
  CHECK(texts(hub.from_server(updated("a://other")).to_client) ==
        std::vector<std::string>{std::string(updated("a://other").text())});
}

TEST_CASE("hub: a legacy subscription the server refused delivers nothing", "[hub]") {
  auto hub = initialized(kAll);
  hub.from_client(
      msg(R"({"jsonrpc":"2.0","id":9,"method":"resources/subscribe","params":{"uri":"a://r"}})"));
  hub.from_server(msg(R"({"jsonrpc":"2.0","id":9,"error":{"code":-32602,"message":"no"}})"));
  CHECK(hub.from_server(updated("a://r")).to_client.empty());
  CHECK(hub.interest("a://r") == 0);
}

TEST_CASE("hub: list changes go to the session and, tagged, to each listen that asked", "[hub]") {
  auto hub = initialized(kAll);
  hub.from_client(listen("1", R"({"toolsListChanged":true})"));
  hub.from_client(listen("2", R"({"promptsListChanged":true})"));
  hub.from_client(listen("3", R"({"toolsListChanged":true,"resourcesListChanged":true})"));
  const auto changed = msg(R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})");
  auto a = hub.from_server(changed);
  CHECK(a.consumed);
  const std::string tag = R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed",)"
                          R"("params":{"_meta":{"io.modelcontextprotocol/subscriptionId":)";
  CHECK(texts(a.to_client) ==
        std::vector<std::string>{std::string(changed.text()), tag + "1}}}", tag + "3}}}"});
  auto r =
      hub.from_server(msg(R"({"jsonrpc":"2.0","method":"notifications/resources/list_changed"})"));
  CHECK(r.to_client.size() == 2);
  CHECK(bridge::subscription_id(r.to_client[1]) == Id::integer(3));
}

TEST_CASE("hub: tagging keeps the notification's params and other _meta members", "[hub]") {
  auto hub = initialized(kAll);
  hub.from_client(listen(R"("s-1")", R"({"resourceSubscriptions":["a://x"]})"));
  hub.subscribed("a://x", std::nullopt);
  auto out = hub.from_server(msg(
      R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a://x",)"
      R"("title":"T","_meta":{"trace":{"n":[1,2]},"io.modelcontextprotocol/subscriptionId":"forged"}}})"));
  REQUIRE(out.to_client.size() == 1);
  const auto& m = out.to_client[0];
  CHECK(bridge::subscription_id(m) == Id::string("s-1"));
  const auto* p = m.params();
  REQUIRE(p);
  CHECK(std::string((*p)["uri"].GetString()) == "a://x");
  CHECK(std::string((*p)["title"].GetString()) == "T");
  CHECK((*p)["_meta"]["trace"]["n"][1].GetInt() == 2);
  CHECK((*p)["_meta"].MemberCount() == 2);
}

TEST_CASE("hub: one upstream subscription feeds many listens, released with the last", "[hub]") {
  auto hub = initialized(kAll);
  CHECK(hub.from_client(listen("1", R"({"resourceSubscriptions":["a://x"]})")).subscribe ==
        std::vector<std::string>{"a://x"});
  // A second listen while the subscribe is in flight waits for the same outcome.
  auto second = hub.from_client(listen("2", R"({"resourceSubscriptions":["a://x"]})"));
  CHECK(second.subscribe.empty());
  CHECK(second.to_client.empty());
  CHECK(hub.subscribed("a://x", std::nullopt).to_client.size() == 2);  // both acknowledged
  auto third = hub.from_client(listen("3", R"({"resourceSubscriptions":["a://x"]})"));
  CHECK(third.subscribe.empty());
  CHECK(third.to_client.size() == 1);  // acknowledged at once
  CHECK(hub.interest("a://x") == 3);

  auto c1 = hub.from_client(cancelled("1"));
  CHECK(c1.consumed);  // the server never saw the listen
  CHECK(c1.unsubscribe.empty());
  CHECK(texts(hub.from_server(updated("a://x")).to_client) ==
        std::vector<std::string>{tagged_update("2", "a://x"), tagged_update("3", "a://x")});
  CHECK(hub.from_client(cancelled("2")).unsubscribe.empty());
  CHECK(hub.from_client(cancelled("3")).unsubscribe == std::vector<std::string>{"a://x"});
  CHECK_FALSE(hub.subscribed_upstream("a://x"));
  CHECK(hub.listen_count() == 0);
  CHECK(hub.from_server(updated("a://x")).to_client.empty());
  // A later listen for the same URI starts over, and only it hears of updates.
  CHECK(hub.from_client(listen("4", R"({"resourceSubscriptions":["a://x"]})")).subscribe ==
        std::vector<std::string>{"a://x"});
  CHECK(hub.subscribed("a://x", std::nullopt).to_client.size() == 1);
  CHECK(texts(hub.from_server(updated("a://x")).to_client) ==
        std::vector<std::string>{tagged_update("4", "a://x")});
}

TEST_CASE("hub: a listen cancelled while its subscribe is in flight undoes it", "[hub]") {
  auto hub = initialized(kAll);
  hub.from_client(listen("1", R"({"resourceSubscriptions":["a://x"]})"));
  CHECK(hub.from_client(cancelled("1")).unsubscribe.empty());
  auto late = hub.subscribed("a://x", std::nullopt);
  CHECK(late.unsubscribe == std::vector<std::string>{"a://x"});
  CHECK(late.to_client.empty());
}

TEST_CASE("hub: a legacy unsubscribe keeps the upstream subscription that listens still use",
          "[hub]") {
  auto hub = initialized(kAll);
  hub.from_client(
      msg(R"({"jsonrpc":"2.0","id":5,"method":"resources/subscribe","params":{"uri":"a://x"}})"));
  hub.from_server(msg(R"({"jsonrpc":"2.0","id":5,"result":{}})"));
  auto l = hub.from_client(listen("1", R"({"resourceSubscriptions":["a://x"]})"));
  CHECK(l.subscribe.empty());  // already subscribed by the client itself
  CHECK(l.to_client.size() == 1);
  auto u = hub.from_client(
      msg(R"({"jsonrpc":"2.0","id":6,"method":"resources/unsubscribe","params":{"uri":"a://x"}})"));
  CHECK(u.consumed);
  CHECK(texts(u.to_client) == std::vector<std::string>{R"({"jsonrpc":"2.0","id":6,"result":{}})"});
  CHECK(hub.subscribed_upstream("a://x"));
  // Updates now reach only the listen.
  CHECK(texts(hub.from_server(updated("a://x")).to_client) ==
        std::vector<std::string>{tagged_update("1", "a://x")});
  // Without listens, the client's unsubscribe goes to the server.
  CHECK(hub.from_client(cancelled("1")).unsubscribe == std::vector<std::string>{"a://x"});
}

TEST_CASE("hub: a cancellation for another request passes through to the server", "[hub]") {
  auto hub = initialized(kAll);
  hub.from_client(listen("1", "{}"));
  CHECK_FALSE(hub.from_client(cancelled("2")).consumed);
  CHECK(hub.listen_count() == 1);
}

TEST_CASE("hub: malformed listens are refused with -32602 and leave nothing behind", "[hub]") {
  auto hub = initialized(kAll);
  for (const auto* bad :
       {R"([])", R"({"toolsListChanged":"yes"})", R"({"resourceSubscriptions":"a://x"})",
        R"({"resourceSubscriptions":[1]})"}) {
    auto a = hub.from_client(listen("7", bad));
    CHECK(a.consumed);
    REQUIRE(a.to_client.size() == 1);
    CHECK(a.to_client[0].kind() == jsonrpc::Kind::error);
    CHECK(a.to_client[0].error().code == jsonrpc::code::invalid_params);
    CHECK(a.to_client[0].error().message.find("subscriptions/listen") != std::string::npos);
  }
  CHECK(hub.listen_count() == 0);
  // No filter at all: an empty acknowledgement.
  auto empty = hub.from_client(msg(R"({"jsonrpc":"2.0","id":8,"method":"subscriptions/listen"})"));
  CHECK(texts(empty.to_client) == std::vector<std::string>{ack("8", "{}")});
  // The same id again while it is open.
  auto dup = hub.from_client(listen("8", "{}"));
  REQUIRE(dup.to_client.size() == 1);
  CHECK(dup.to_client[0].error().code == jsonrpc::code::invalid_request);
}

TEST_CASE("hub: listens and URIs per listen are bounded", "[hub]") {
  SubscriptionHub hub({/*max_listens=*/2, /*max_uris_per_listen=*/2});
  hub.from_client(listen("1", "{}"));
  hub.from_client(listen("2", "{}"));
  auto third = hub.from_client(listen("3", "{}"));
  REQUIRE(third.to_client.size() == 1);
  CHECK(third.to_client[0].kind() == jsonrpc::Kind::error);
  CHECK(third.to_client[0].error().message.find("2 open subscriptions") != std::string::npos);
  hub.from_client(cancelled("1"));
  auto many = hub.from_client(listen("4", R"({"resourceSubscriptions":["a","b","c"]})"));
  REQUIRE(many.to_client.size() == 1);
  CHECK(many.to_client[0].error().code == jsonrpc::code::invalid_params);
}

TEST_CASE("hub: the end answers each open listen, with a result when graceful", "[hub]") {
  auto hub = initialized(kAll);
  hub.from_client(listen("1", "{}"));
  hub.from_client(listen(R"("b")", "{}"));
  CHECK(texts(hub.close(true, "the bridge is stopping")) ==
        std::vector<std::string>{R"({"jsonrpc":"2.0","id":1,"result":{}})",
                                 R"({"jsonrpc":"2.0","id":"b","result":{}})"});
  CHECK(hub.listen_count() == 0);
  hub.from_client(listen("3", "{}"));
  auto errors = hub.close(false, "server s-1 went offline");
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].error().code == jsonrpc::code::connection_closed);
  CHECK(errors[0].error().message.find("server s-1 went offline") != std::string::npos);
}

TEST_CASE("hub: other traffic passes untouched", "[hub]") {
  auto hub = initialized(kAll);
  CHECK_FALSE(hub.from_client(msg(R"({"jsonrpc":"2.0","id":3,"method":"tools/list"})")).consumed);
  CHECK_FALSE(hub.from_server(msg(R"({"jsonrpc":"2.0","method":"notifications/message",)"
                                  R"("params":{"level":"info","data":"x"}})"))
                  .consumed);
  CHECK_FALSE(bridge::subscription_id(msg(R"({"jsonrpc":"2.0","method":"n"})")));
}

TEST_CASE(
    "hub (SEP-1803 §In-Band): an update of a sub-resource reaches the sessions and listens whose "
    "URI covers it, each once, and no one else",
    "[hub][events]") {
  auto hub = initialized(kAll);
  hub.from_client(listen("1", R"({"resourceSubscriptions":["event://x/tick"]})"));
  hub.from_client(
      listen("2", R"({"resourceSubscriptions":["event://x/tick","event://x/tick/7"]})"));
  hub.from_client(listen("3", R"({"resourceSubscriptions":["event://x/tick/7"]})"));
  hub.from_client(listen("4", R"({"resourceSubscriptions":["event://x/tic"]})"));
  for (auto uri : {"event://x/tick", "event://x/tick/7", "event://x/tic"})
    hub.subscribed(uri, std::nullopt);
  CHECK(texts(hub.from_server(updated("event://x/tick/7")).to_client) ==
        std::vector<std::string>{tagged_update("1", "event://x/tick/7"),
                                 tagged_update("2", "event://x/tick/7"),
                                 tagged_update("3", "event://x/tick/7")});
  CHECK(texts(hub.from_server(updated("event://x/tick?a=1")).to_client) ==
        std::vector<std::string>{tagged_update("1", "event://x/tick?a=1"),
                                 tagged_update("2", "event://x/tick?a=1")});
  CHECK(texts(hub.from_server(updated("event://x/tick#f")).to_client) ==
        std::vector<std::string>{tagged_update("1", "event://x/tick#f"),
                                 tagged_update("2", "event://x/tick#f")});
  // The other side of the boundary: a longer name is another resource.
  CHECK(hub.from_server(updated("event://x/ticks")).to_client.empty());
  CHECK(texts(hub.from_server(updated("event://x/tic")).to_client) ==
        std::vector<std::string>{tagged_update("4", "event://x/tic")});

  // A legacy subscription (resources/subscribe, 2025) follows the same rule, once.
  auto legacy = initialized(kAll);
  for (auto [id, uri] : {std::pair{8, "event://x/tick"}, std::pair{9, "event://x/tick/7"}}) {
    legacy.from_client(msg(R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
                           R"(,"method":"resources/subscribe","params":{"uri":")" + uri +
                           R"("}})"));
    legacy.from_server(msg(R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"result":{}})"));
  }
  for (auto uri : {"event://x/tick", "event://x/tick/7", "event://x/tick/7/8", "event://x/tick?a=1",
                   "event://x/tick#f"}) {
    INFO(uri);
    CHECK(texts(legacy.from_server(updated(uri)).to_client) ==
          std::vector<std::string>{std::string(updated(uri).text())});
  }
  for (auto uri : {"event://x/ticks", "event://x/tic", "event://x"}) {
    INFO(uri);
    CHECK(legacy.from_server(updated(uri)).to_client.empty());
  }
}

TEST_CASE(
    "hub (SEP-1803): a tagged update carries its payload as written — escapes, numbers beyond "
    "2^64, key order",
    "[hub][events]") {
  auto hub = initialized(kAll);
  hub.from_client(listen("1", R"({"resourceSubscriptions":["event://x/tick"]})"));
  hub.subscribed("event://x/tick", std::nullopt);
  const std::string payload =
      R"({"z":1,"huge":123456789012345678901234567890,"f":1.10,"s":"\u00e9\/"})";
  auto out = hub.from_server(msg(
      R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"event://x/tick/7", "payload" : )" +
      payload + R"(,"_meta":{"k":"v"}}})"));
  CHECK(
      texts(out.to_client) ==
      std::vector<std::string>{
          R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":{)"
          R"("io.modelcontextprotocol/subscriptionId":1,"k":"v"},"uri":"event://x/tick/7","payload":)" +
          payload + "}}"});
}

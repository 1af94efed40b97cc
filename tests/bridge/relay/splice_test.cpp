#include "bridge/relay/splice.hpp"

#include <algorithm>

#include <catch2/catch.hpp>

#include "tests/support/memory_channel.hpp"

using namespace mcpmqtt;
using namespace mcpmqtt::test;
using namespace std::chrono_literals;
using bridge::CloseReason;
using bridge::Splice;

namespace {

struct SpliceFixture {
  std::shared_ptr<MemoryChannel> client = std::make_shared<MemoryChannel>("client");
  std::shared_ptr<MemoryChannel> server = std::make_shared<MemoryChannel>("server");
  ManualScheduler clock;
  std::optional<CloseReason> closed;
  std::shared_ptr<Splice> splice;

  explicit SpliceFixture(Splice::Hooks hooks = {}, std::size_t max_pending = 4096) {
    Splice::Options o;
    o.timeout_for = [](const std::string& method) {
      if (method == "tools/call") return std::chrono::milliseconds(60000);
      if (method == "ping") return std::chrono::milliseconds(10000);
      return std::chrono::milliseconds(30000);
    };
    o.max_pending = max_pending;
    o.log_prefix = "[test]";
    auto user_closed = hooks.on_closed;
    hooks.on_closed = [this, user_closed](const CloseReason& why) {
      closed = why;
      if (user_closed) user_closed(why);
    };
    splice = Splice::create(client, server, clock, o, hooks);
    splice->start();
  }
};

const std::string kCall =
    R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"progressToken":"p1"}}})";

}  // namespace

TEST_CASE("splice: messages pass both ways unchanged, each request matched to its response",
          "[splice]") {
  SpliceFixture f;
  CHECK(f.client->started);
  CHECK(f.server->started);
  f.client->inject(kCall);
  CHECK(f.server->take() == std::vector<std::string>{kCall});
  // The server asks the client something meanwhile, with the same id: ids are per direction.
  const std::string sampling =
      R"({"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}})";
  f.server->inject(sampling);
  CHECK(f.client->take() == std::vector<std::string>{sampling});
  f.client->inject(R"({"jsonrpc":"2.0","id":1,"result":{"role":"assistant"}})");
  f.server->inject(R"({"jsonrpc":"2.0","id":1,"result":{"content":[]}})");
  CHECK(f.server->take() ==
        std::vector<std::string>{R"({"jsonrpc":"2.0","id":1,"result":{"role":"assistant"}})"});
  CHECK(f.client->take() ==
        std::vector<std::string>{R"({"jsonrpc":"2.0","id":1,"result":{"content":[]}})"});
  CHECK(f.splice->pending(Splice::Side::client) == 0);
  CHECK(f.splice->pending(Splice::Side::server) == 0);
  // Nothing in flight, no timer: a session that goes quiet leaves none to fire (issue 34).
  CHECK(f.clock.armed() == 0);
  f.clock.advance(std::chrono::minutes(10));
  CHECK(f.client->sent.empty());
  CHECK(f.server->sent.empty());
  // Notifications pass through too.
  f.server->inject(
      R"({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}})");
  CHECK(f.client->take().size() == 1);
}

TEST_CASE(
    "splice (issue 34): the timeouts' timer stays for a session asking one request after "
    "another, and goes when nothing is in flight after a pause or the first request",
    "[splice]") {
  SpliceFixture f;
  auto call = [&](int id) {
    f.client->inject(R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
                     R"(,"method":"tools/call","params":{"name":"echo"}})");
    f.server->take();
    f.server->inject(R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"result":{}})");
    REQUIRE(f.client->take().size() == 1);
  };
  call(1);  // the first: nothing to tell the pace by
  CHECK(f.clock.armed() == 0);
  f.clock.advance(10ms);
  call(2);  // soon after: the next is likely soon too
  CHECK(f.clock.armed() == 1);
  f.clock.advance(10ms);
  call(3);
  CHECK(f.clock.armed() == 1);
  // The timer kept finds nothing due when it fires, and is not armed again.
  f.clock.advance(std::chrono::minutes(2));
  CHECK(f.clock.armed() == 0);
  CHECK(f.client->sent.empty());
  call(4);  // after a pause
  CHECK(f.clock.armed() == 0);
  // And a timer kept still times out what is asked next.
  f.clock.advance(10ms);
  call(5);
  CHECK(f.clock.armed() == 1);
  f.clock.advance(10ms);
  f.client->inject(R"({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo"}})");
  f.server->take();
  f.clock.advance(60s);
  const auto timed_out = f.client->take();
  REQUIRE(timed_out.size() == 1);
  CHECK(timed_out[0].find("-32001") != std::string::npos);
}

TEST_CASE(
    "splice 004 §Timeouts: an unanswered request gets -32001 and the responder is told to "
    "cancel",
    "[splice]") {
  SpliceFixture f;
  f.client->inject(kCall);
  f.server->take();
  f.clock.advance(59999ms);
  CHECK(f.client->sent.empty());
  f.clock.advance(1ms);
  auto to_client = f.client->take();
  REQUIRE(to_client.size() == 1);
  CHECK(
      to_client[0] ==
      R"x({"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"request timed out: no response to tools/call from the server within 60 s (mcp-mqtt-bridge)"}})x");
  auto to_server = f.server->take();
  REQUIRE(to_server.size() == 1);
  CHECK(
      to_server[0] ==
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"request timed out after 60 s in mcp-mqtt-bridge"}})");
  // The late response goes nowhere.
  f.server->inject(R"({"jsonrpc":"2.0","id":1,"result":{}})");
  CHECK(f.client->sent.empty());
  CHECK_FALSE(f.closed);
}

TEST_CASE(
    "splice: a response a hook held back answers its request when delivered later, once, and "
    "not after the request timed out",
    "[splice]") {
  std::vector<jsonrpc::Message> held;
  Splice::Hooks hooks;
  hooks.on_message = [&](Splice::Side from, jsonrpc::Message& m) {
    if (from != Splice::Side::server || !m.is_response()) return Splice::Verdict::pass;
    held.push_back(m);
    return Splice::Verdict::drop;
  };
  SpliceFixture f(hooks);
  f.client->inject(R"({"jsonrpc":"2.0","id":1,"method":"resources/list"})");
  f.client->inject(R"({"jsonrpc":"2.0","id":2,"method":"resources/list"})");
  f.server->take();
  f.server->inject(R"({"jsonrpc":"2.0","id":1,"result":{"resources":[]}})");
  f.server->inject(R"({"jsonrpc":"2.0","id":2,"result":{"resources":[]}})");
  REQUIRE(held.size() == 2);
  CHECK(f.client->sent.empty());
  // Delivered later, rewritten: it answers request 1, and its timer is gone.
  f.splice->deliver_held(
      Splice::Side::server,
      *jsonrpc::Message::parse(R"({"jsonrpc":"2.0","id":1,"result":{"resources":[{"uri":"a"}]}})"));
  CHECK(
      f.client->take() ==
      std::vector<std::string>{R"({"jsonrpc":"2.0","id":1,"result":{"resources":[{"uri":"a"}]}})"});
  CHECK(f.splice->pending(Splice::Side::client) == 1);
  f.clock.advance(30s);  // request 2 times out while held
  auto timed_out = f.client->take();
  REQUIRE(timed_out.size() == 1);
  CHECK(timed_out[0].find("-32001") != std::string::npos);
  f.splice->deliver_held(Splice::Side::server, held[1]);
  f.splice->deliver_held(Splice::Side::server, held[0]);  // a second time: already answered
  CHECK(f.client->sent.empty());
  CHECK(f.splice->pending(Splice::Side::client) == 0);
}

TEST_CASE(
    "splice 004 §Timeouts: requests of different timeouts time out each at its own time, in "
    "the order they fall due, with one timer armed for them all",
    "[splice]") {
  SpliceFixture f;
  f.client->inject(R"({"jsonrpc":"2.0","id":"call","method":"tools/call","params":{}})");  // 60 s
  f.clock.advance(1s);
  f.client->inject(R"({"jsonrpc":"2.0","id":"list","method":"tools/list"})");    // 30 s: at 31 s
  f.client->inject(R"({"jsonrpc":"2.0","id":"ping","method":"ping"})");          // 10 s: at 11 s
  f.server->inject(R"({"jsonrpc":"2.0","id":"sample","method":"roots/list"})");  // at 31 s
  f.server->take();
  f.client->take();
  CHECK(f.clock.armed() == 1);
  f.clock.advance(9999ms);  // 10.999 s
  CHECK(f.client->sent.empty());
  f.clock.advance(1ms);
  auto ping = f.client->take();
  REQUIRE(ping.size() == 1);
  CHECK(ping[0].find(R"("id":"ping","error":{"code":-32001)") != std::string::npos);
  // The list request is answered: it never times out; the server's request still does, at 31 s.
  f.server->inject(R"({"jsonrpc":"2.0","id":"list","result":{"tools":[]}})");
  CHECK(f.client->take().size() == 1);
  f.server->take();
  f.clock.advance(19999ms);  // 30.999 s
  CHECK(f.server->sent.empty());
  f.clock.advance(1ms);
  auto to_server = f.server->take();
  REQUIRE(to_server.size() == 1);  // the error for roots/list
  CHECK(to_server[0].find(R"("id":"sample","error":{"code":-32001)") != std::string::npos);
  CHECK(f.client->sent.size() == 1);  // notifications/cancelled for roots/list
  f.client->take();
  f.clock.advance(28999ms);  // 59.999 s
  CHECK(f.client->sent.empty());
  f.clock.advance(1ms);
  auto call = f.client->take();
  REQUIRE(call.size() == 1);
  CHECK(call[0].find(R"("id":"call","error":{"code":-32001)") != std::string::npos);
  CHECK(f.clock.armed() == 0);
  CHECK(f.splice->pending(Splice::Side::client) == 0);
  CHECK(f.splice->pending(Splice::Side::server) == 0);
}

TEST_CASE("splice: progress restarts the clock, up to ten times the timeout", "[splice]") {
  SpliceFixture f;
  f.client->inject(kCall);
  f.server->take();
  for (int i = 0; i < 5; ++i) {
    f.clock.advance(50s);
    f.server->inject(
        R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p1","progress":)" +
        std::to_string(i) + "}}");
  }
  // 250 s in, well past 60 s, and still waiting: each progress restarted the clock.
  auto seen = f.client->take();
  CHECK(seen.size() == 5);  // the progress notifications
  f.clock.advance(59s);
  CHECK(f.client->sent.empty());
  // Keep the progress coming: the cap (600 s from the start) still ends it.
  for (int i = 0; i < 20 && f.client->sent.size() < 2; ++i) {
    f.clock.advance(50s);
    f.server->inject(
        R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p1","progress":99}})");
  }
  auto last = f.client->take();
  REQUIRE_FALSE(last.empty());
  bool timed_out = false;
  for (const auto& m : last)
    timed_out |= m.find("-32001") != std::string::npos;
  CHECK(timed_out);
  CHECK(f.clock.now().time_since_epoch() <= 651s);
}

TEST_CASE("splice: notifications/cancelled is passed on and the late response dropped",
          "[splice]") {
  SpliceFixture f;
  f.client->inject(kCall);
  f.server->take();
  f.client->inject(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"user"}})");
  CHECK(
      f.server->take() ==
      std::vector<std::string>{
          R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"user"}})"});
  f.server->inject(R"({"jsonrpc":"2.0","id":1,"result":{}})");
  CHECK(f.client->sent.empty());
  // The cancelled request never times out.
  f.clock.advance(std::chrono::minutes(10));
  CHECK(f.client->sent.empty());
  CHECK(f.server->sent.empty());
  CHECK(f.clock.armed() == 0);
  // A cancellation for nothing in flight goes nowhere.
  f.client->inject(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":77}})");
  CHECK(f.server->sent.empty());
}

TEST_CASE(
    "splice: when the server goes away every pending client request is answered with the "
    "reason, and the client is closed",
    "[splice]") {
  SpliceFixture f;
  f.client->inject(kCall);
  f.client->inject(R"({"jsonrpc":"2.0","id":"p","method":"ping"})");
  f.server->take();
  f.server->peer_close({CloseReason::Kind::exited, "child exited with status 1"});
  auto answers = f.client->take();
  REQUIRE(answers.size() == 2);
  std::sort(answers.begin(), answers.end());
  CHECK(
      answers[0] ==
      R"({"jsonrpc":"2.0","id":"p","error":{"code":-32000,"message":"ping was not answered: child exited with status 1"}})");
  CHECK(
      answers[1] ==
      R"({"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"tools/call was not answered: child exited with status 1"}})");
  CHECK(f.client->closed);
  REQUIRE(f.client->closed_by_owner);
  CHECK(f.client->closed_by_owner->kind == CloseReason::Kind::exited);
  REQUIRE(f.closed);
  CHECK(f.closed->detail == "child exited with status 1");
  CHECK(f.clock.armed() == 0);
}

TEST_CASE(
    "splice: when the client goes away pending server requests are answered and the server "
    "is closed",
    "[splice]") {
  SpliceFixture f;
  f.server->inject(R"({"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{}})");
  f.client->take();
  f.client->peer_close({CloseReason::Kind::peer_gone, "client c1 is gone"});
  CHECK(
      f.server->take() ==
      std::vector<std::string>{
          R"({"jsonrpc":"2.0","id":5,"error":{"code":-32000,"message":"sampling/createMessage was not answered: client c1 is gone"}})"});
  CHECK(f.server->closed);
  CHECK(f.closed);
}

TEST_CASE("splice: closing from outside answers both sides and closes both", "[splice]") {
  SpliceFixture f;
  f.client->inject(kCall);
  f.server->inject(R"({"jsonrpc":"2.0","id":"r","method":"roots/list"})");
  f.client->take();
  f.server->take();
  f.splice->close({CloseReason::Kind::shutdown, "the bridge is stopping"});
  CHECK(
      f.client->take() ==
      std::vector<std::string>{
          R"({"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"tools/call was not answered: the bridge is stopping"}})"});
  CHECK(
      f.server->take() ==
      std::vector<std::string>{
          R"({"jsonrpc":"2.0","id":"r","error":{"code":-32000,"message":"roots/list was not answered: the bridge is stopping"}})"});
  CHECK(f.client->closed);
  CHECK(f.server->closed);
  // Nothing passes after closing.
  f.client->inject(kCall);
  CHECK(f.server->sent.empty());
}

TEST_CASE("splice: a duplicate id in flight and too many requests are refused", "[splice]") {
  SpliceFixture f({}, /*max_pending=*/2);
  f.client->inject(kCall);
  f.client->inject(kCall);
  CHECK(f.server->take().size() == 1);
  CHECK(
      f.client->take() ==
      std::vector<std::string>{
          R"({"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"request id 1 is already in use by a request in flight"}})"});
  f.client->inject(R"({"jsonrpc":"2.0","id":2,"method":"ping"})");
  f.client->inject(R"({"jsonrpc":"2.0","id":3,"method":"ping"})");
  CHECK(f.server->take().size() == 1);
  CHECK(
      f.client->take() ==
      std::vector<std::string>{
          R"({"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"too many requests in flight (2); wait for responses before sending more"}})"});
}

TEST_CASE("splice: initialize that is never answered ends the session", "[splice]") {
  SpliceFixture f;
  f.client->inject(R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}})");
  f.clock.advance(30s);
  auto to_client = f.client->take();
  REQUIRE(to_client.size() == 1);
  CHECK(to_client[0].find("no response to initialize from the server within 30 s") !=
        std::string::npos);
  REQUIRE(f.closed);
  CHECK(f.closed->kind == CloseReason::Kind::timeout);
  CHECK(f.closed->detail == "the server did not answer initialize within 30 s");
  CHECK(f.server->closed);
  CHECK(f.client->closed);
}

TEST_CASE("splice: the bridge's own requests get their responses, not the client", "[splice]") {
  SpliceFixture f;
  std::vector<std::string> got;
  f.splice->request_to_server("resources/subscribe", R"({"uri":"test://x"})",
                              [&](const jsonrpc::Message& m) { got.emplace_back(m.text()); });
  auto sent = f.server->take();
  REQUIRE(sent.size() == 1);
  CHECK(
      sent[0] ==
      R"({"jsonrpc":"2.0","id":"mcpmqtt-bridge-1","method":"resources/subscribe","params":{"uri":"test://x"}})");
  f.server->inject(R"({"jsonrpc":"2.0","id":"mcpmqtt-bridge-1","result":{}})");
  CHECK(got ==
        std::vector<std::string>{R"({"jsonrpc":"2.0","id":"mcpmqtt-bridge-1","result":{}})"});
  CHECK(f.client->sent.empty());

  f.splice->request_to_server("ping", "",
                              [&](const jsonrpc::Message& m) { got.emplace_back(m.text()); });
  f.server->take();
  f.clock.advance(10s);
  REQUIRE(got.size() == 2);
  CHECK(
      got[1] ==
      R"({"jsonrpc":"2.0","id":"mcpmqtt-bridge-2","error":{"code":-32001,"message":"request timed out: no response to ping from the server within 10 s"}})");
  CHECK(
      f.server->take() ==
      std::vector<std::string>{
          R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"mcpmqtt-bridge-2","reason":"timed out in mcp-mqtt-bridge"}})"});
}

TEST_CASE("splice: hooks see every message and may drop or replace it", "[splice]") {
  Splice::Hooks h;
  h.on_message = [](Splice::Side from, jsonrpc::Message& m) {
    if (from == Splice::Side::server && m.method() == "notifications/resources/updated") {
      return Splice::Verdict::drop;
    }
    if (m.is_request()) m = m.with_id(m.id());  // a replacement of the same kind and id
    return Splice::Verdict::pass;
  };
  SpliceFixture f(h);
  f.server->inject(
      R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"u"}})");
  CHECK(f.client->sent.empty());
  f.client->inject(R"({"jsonrpc":"2.0","id":9,"method":"ping"})");
  CHECK(f.server->take() ==
        std::vector<std::string>{R"({"jsonrpc":"2.0","id":9,"method":"ping"})"});
}

TEST_CASE("splice: an error with a null id is passed on and an unknown response is dropped",
          "[splice]") {
  SpliceFixture f;
  f.server->inject(
      R"({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}})");
  CHECK(f.client->take().size() == 1);
  f.server->inject(R"({"jsonrpc":"2.0","id":42,"result":{}})");
  CHECK(f.client->sent.empty());
}

TEST_CASE("splice: the bridge can ask the client too (a liveness ping)", "[splice]") {
  SpliceFixture f;
  std::vector<std::string> got;
  f.splice->request_to(Splice::Side::client, "ping", "",
                       [&](const jsonrpc::Message& m) { got.emplace_back(m.text()); });
  CHECK(f.client->take() ==
        std::vector<std::string>{R"({"jsonrpc":"2.0","id":"mcpmqtt-bridge-1","method":"ping"})"});
  // A response with that id from the *server* is not the answer.
  f.server->inject(R"({"jsonrpc":"2.0","id":"mcpmqtt-bridge-1","result":{}})");
  CHECK(got.empty());
  f.client->inject(R"({"jsonrpc":"2.0","id":"mcpmqtt-bridge-1","result":{}})");
  CHECK(got ==
        std::vector<std::string>{R"({"jsonrpc":"2.0","id":"mcpmqtt-bridge-1","result":{}})"});
  // The session closing answers what is still pending.
  f.splice->request_to(Splice::Side::client, "ping", "",
                       [&](const jsonrpc::Message& m) { got.emplace_back(m.text()); });
  f.client->peer_close({CloseReason::Kind::peer_gone, "client gone"});
  REQUIRE(got.size() == 2);
  CHECK(
      got[1] ==
      R"({"jsonrpc":"2.0","id":"mcpmqtt-bridge-2","error":{"code":-32000,"message":"client gone"}})");
}

TEST_CASE("splice: last words for the client come before the close, and only to an open client",
          "[splice]") {
  std::vector<std::string> reasons;
  Splice::Hooks hooks;
  hooks.on_closing = [&](const CloseReason& why) {
    reasons.push_back(why.detail);
    return std::vector<jsonrpc::Message>{jsonrpc::Message::result(jsonrpc::Id::integer(9), "{}")};
  };
  SECTION("the server goes away") {
    SpliceFixture f(hooks);
    f.client->inject(kCall);
    f.server->take();
    f.server->peer_close({CloseReason::Kind::peer_gone, "server s1 went offline"});
    const auto got = f.client->take();
    REQUIRE(got.size() == 2);
    CHECK(got[0] == R"({"jsonrpc":"2.0","id":9,"result":{}})");
    CHECK(got[1].find("server s1 went offline") != std::string::npos);
    CHECK(f.client->closed);
    CHECK(reasons == std::vector<std::string>{"server s1 went offline"});
  }
  SECTION("closed from outside") {
    SpliceFixture f(hooks);
    f.splice->close({CloseReason::Kind::shutdown, "the bridge is stopping"});
    CHECK(f.client->take() == std::vector<std::string>{R"({"jsonrpc":"2.0","id":9,"result":{}})"});
    CHECK(reasons == std::vector<std::string>{"the bridge is stopping"});
  }
  SECTION("the client goes away: nobody to tell") {
    SpliceFixture f(hooks);
    f.client->peer_close({CloseReason::Kind::peer_gone, "client gone"});
    CHECK(f.client->take().empty());
    CHECK(reasons.empty());
  }
}

TEST_CASE(
    "splice: an interrupted server's requests in flight are answered at once with a retriable "
    "error and cancelled there, initialize stays pending (issue 33, federation)",
    "[splice]") {
  SpliceFixture f;
  f.client->inject(R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}})");
  f.server->inject(R"({"jsonrpc":"2.0","id":0,"result":{}})");
  f.client->take();
  f.client->inject(kCall);
  f.client->inject(R"({"jsonrpc":"2.0","id":"r","method":"resources/read","params":{"uri":"u"}})");
  std::vector<std::string> own;
  f.splice->request_to_server("ping", "",
                              [&](const jsonrpc::Message& m) { own.emplace_back(m.text()); });
  // The server asked the client something: that is the client's to answer, not lost.
  f.server->inject(R"({"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{}})");
  f.server->take();
  f.client->take();

  f.server->peer_interrupted("server s announced itself again");
  auto answers = f.client->take();
  std::sort(answers.begin(), answers.end());
  CHECK(
      answers ==
      std::vector<std::string>{
          R"({"jsonrpc":"2.0","id":"r","error":{"code":-32000,"message":"resources/read may not have reached the server, or its answer was lost: server s announced itself again; retry it","data":{"retriable":true}}})",
          R"({"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"tools/call may not have reached the server, or its answer was lost: server s announced itself again; retry it","data":{"retriable":true}}})"});
  REQUIRE(own.size() == 1);
  CHECK(own[0].find(R"("code":-32000)") != std::string::npos);
  auto cancelled = f.server->take();
  CHECK(cancelled.size() == 3);
  for (const auto& c : cancelled)
    CHECK(c.find(R"("method":"notifications/cancelled")") != std::string::npos);
  CHECK(f.splice->pending(Splice::Side::client) == 0);
  // A late answer finds nothing to answer; the session goes on both ways.
  f.server->inject(R"({"jsonrpc":"2.0","id":1,"result":{}})");
  CHECK(f.client->sent.empty());
  f.client->inject(R"({"jsonrpc":"2.0","id":7,"result":{}})");
  CHECK(f.server->take() == std::vector<std::string>{R"({"jsonrpc":"2.0","id":7,"result":{}})"});
  CHECK_FALSE(f.splice->closed());
  // Nothing of the old deadlines is left to fire.
  f.clock.advance(70s);
  CHECK(f.client->sent.empty());

  // An initialize in flight is the channel's to send again: it stays pending.
  SpliceFixture g;
  g.client->inject(R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}})");
  g.server->take();
  g.server->peer_interrupted("again");
  CHECK(g.client->sent.empty());
  CHECK(g.server->sent.empty());
  g.server->inject(R"({"jsonrpc":"2.0","id":0,"result":{}})");
  CHECK(g.client->take() == std::vector<std::string>{R"({"jsonrpc":"2.0","id":0,"result":{}})"});
}

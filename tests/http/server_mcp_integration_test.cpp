// The Streamable HTTP server end to end over real HTTP on loopback port 0, with a fake backend
// that is a tiny MCP server: sessions, SSE and JSON responses, progress, server requests,
// the GET stream and its backlog, resumption, keep-alive, DELETE, idle timeout, backend closes
// and failed initializes (002 §Streamable HTTP).
#include <set>

#include "tests/http/server_test_support.hpp"
#include "tests/support/sanitizers.hpp"
#include "tests/support/wait.hpp"

using namespace mcpmqtt::test;
using mcpmqtt::bridge::CloseReason;
using mcpmqtt::jsonrpc::Kind;

namespace {

std::string stream_of(const std::string& event_id) {
  return event_id.substr(0, event_id.find('-'));
}

std::string text_of(const Message& m) {
  const auto* r = m.result_value();
  if (!r || !r->IsObject() || !r->HasMember("content")) return {};
  return (*r)["content"][0]["text"].GetString();
}

}  // namespace

TEST_CASE("http: initialize over SSE gives a session id, a priming event and the response",
          "[http][integration]") {
  TestServer ts;
  RawClient c(ts.endpoint);
  c.send(bhttp::verb::post, "/mcp", post_headers(ts.host()), initialize_body(1, "2025-11-25"));
  auto head = c.read_header();
  REQUIRE(head.ok);
  CHECK(head.status == 200);
  CHECK(head.header("content-type") == "text/event-stream");
  CHECK(head.header("cache-control") == "no-cache, no-transform");
  const auto sid = head.header("mcp-session-id");
  CHECK(sid.size() == 32);

  auto priming = c.next_event();
  REQUIRE(priming);
  CHECK(priming->has_id);
  CHECK(priming->retry == 1000);
  CHECK(priming->data.empty());
  auto ev = c.next_event();
  REQUIRE(ev);
  CHECK(ev->event == "message");
  CHECK(stream_of(ev->id) == stream_of(priming->id));
  CHECK(ev->id != priming->id);
  auto res = ev->message();
  REQUIRE(res);
  CHECK(res->id() == Id::integer(1));
  CHECK(res->kind() == Kind::result);
  CHECK(at(*res, {"result", "protocolVersion"}) == "2025-11-25");
  CHECK(c.wait_end());  // the stream closes after its last response

  // Keep-alive: the same connection carries the next request.
  auto ack = c.request(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid, "2025-11-25"),
                       kInitialized);
  CHECK(ack.status == 202);
  CHECK(ack.body.empty());
  CHECK_FALSE(ack.has("mcp-session-id"));
  REQUIRE(ts.backend.wait_received(0, "notifications/initialized"));
  auto got = ts.backend.received(0);
  REQUIRE(got.size() == 2);
  CHECK(got[0].method() == "initialize");
  CHECK(ts.backend.session(0)->server_name == "demo/everything");
}

TEST_CASE("http: clients of revisions before 2025-11-25 get no priming event",
          "[http][integration]") {
  TestServer ts;
  for (const char* version : {"2024-11-05", "2025-03-26", "2025-06-18"}) {
    INFO(version);
    RawClient c(ts.endpoint);
    c.send(bhttp::verb::post, "/mcp", post_headers(ts.host()), initialize_body(1, version));
    auto head = c.read_header();
    REQUIRE(head.status == 200);
    auto first = c.next_event();
    REQUIRE(first);
    CHECK_FALSE(first->data.empty());
    CHECK(at(*first->message(), {"result", "protocolVersion"}) == version);
    CHECK(c.wait_end());
    const auto sid = head.header("mcp-session-id");
    // Later streams of that session have no priming event either.
    c.send(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid, version),
           request_body(2, "tools/list"));
    REQUIRE(c.read_header().status == 200);
    auto next = c.next_event();
    REQUIRE(next);
    CHECK(next->message()->id() == Id::integer(2));
    CHECK(c.wait_end());
  }
}

TEST_CASE("http: requests get their responses on their own SSE stream, in a batch too",
          "[http][integration]") {
  TestServer ts;
  const auto sid = open_session(ts);
  RawClient c(ts.endpoint);
  c.send(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid, "2025-11-25"),
         request_body(2, "tools/list"));
  auto head = c.read_header();
  CHECK(head.status == 200);
  CHECK(head.header("mcp-session-id") == sid);
  auto priming = c.next_event();
  REQUIRE(priming);
  CHECK(priming->data.empty());
  auto res = c.next_message();
  REQUIRE(res);
  CHECK(res->message()->id() == Id::integer(2));
  CHECK(at(*res->message(), {"result", "tools", "0", "name"}) == "echo");
  CHECK(c.wait_end());

  // A batch: one stream carries both responses, then ends.
  c.send(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid),
         "[" + request_body(3, "ping") + "," + tool_call(4, "echo") + "," +
             R"({"jsonrpc":"2.0","method":"notifications/roots/list_changed"}])");
  REQUIRE(c.read_header().status == 200);
  std::set<std::string> ids;
  while (auto e = c.next_message())
    ids.insert(e->message()->id().to_string());
  CHECK(c.stream_ended());
  CHECK(ids == std::set<std::string>{"3", "4"});
  REQUIRE(ts.backend.wait_received(0, "notifications/roots/list_changed"));
}

TEST_CASE("http: JSON response mode answers with one body per POST", "[http][integration]") {
  TestServer ts(config_with([](auto& c) { c.json_response = true; }));
  RawClient c(ts.endpoint);
  auto init = c.request(bhttp::verb::post, "/mcp", post_headers(ts.host()), initialize_body());
  CHECK(init.status == 200);
  CHECK(init.header("content-type") == "application/json");
  const auto sid = init.header("mcp-session-id");
  CHECK(sid.size() == 32);
  auto m = Message::parse(init.body);
  REQUIRE(m);
  CHECK(m->id() == Id::integer(1));
  CHECK(m->kind() == Kind::result);
  CHECK(c.request(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid), kInitialized).status ==
        202);

  auto one =
      c.request(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid), tool_call(2, "echo"));
  CHECK(one.status == 200);
  CHECK(one.header("content-type") == "application/json");
  auto r = Message::parse(one.body);
  REQUIRE(r);
  CHECK(text_of(*r) == "hello");

  // A batch answered by an array, in request order, whatever order the server answered in.
  auto batch = c.request(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid),
                         "[" + tool_call(5, "progress", R"(,"_meta":{"progressToken":"p"})") + "," +
                             request_body(3, "ping") + "]");
  CHECK(batch.status == 200);
  auto parsed = mcpmqtt::jsonrpc::parse_body(batch.body);
  REQUIRE(parsed);
  CHECK(parsed->batch);
  REQUIRE(parsed->messages.size() == 2);
  CHECK(parsed->messages[0].id() == Id::integer(5));
  CHECK(parsed->messages[1].id() == Id::integer(3));

  // Progress cannot ride a JSON body: it waits for (and arrives on) the GET stream.
  c.send(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid));
  REQUIRE(c.read_header().status == 200);
  auto p1 = c.next_message();
  REQUIRE(p1);
  CHECK(p1->message()->method() == "notifications/progress");
}

TEST_CASE("http: progress travels on the stream of the request that carried its token",
          "[http][integration]") {
  TestServer ts;
  const auto sid = open_session(ts);
  RawClient get(ts.endpoint);
  get.send(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid));
  REQUIRE(get.read_header().status == 200);
  REQUIRE(get.next_event());  // priming

  RawClient c(ts.endpoint);
  c.send(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid),
         tool_call(7, "progress", R"(,"_meta":{"progressToken":"tok-7"})"));
  REQUIRE(c.read_header().status == 200);
  std::vector<Message> got;
  while (auto e = c.next_message())
    got.push_back(*e->message());
  CHECK(c.stream_ended());
  REQUIRE(got.size() == 3);
  CHECK(got[0].method() == "notifications/progress");
  CHECK(at(got[0], {"params", "progress"}) == "1");
  CHECK(at(got[1], {"params", "progress"}) == "2");
  CHECK(got[2].id() == Id::integer(7));
  CHECK(text_of(got[2]) == "progress done");
  // Nothing of it went to the GET stream.
  CHECK_FALSE(get.next_message(300ms));
}

TEST_CASE(
    "http: a server request during a tool call reaches the client, whose answer "
    "completes the call",
    "[http][integration]") {
  TestServer ts;
  const auto sid = open_session(ts);
  RawClient c(ts.endpoint);
  c.send(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid), tool_call(9, "sample"));
  REQUIRE(c.read_header().status == 200);
  auto ask = c.next_message();
  REQUIRE(ask);
  auto request = ask->message();
  REQUIRE(request);
  CHECK(request->is_request());
  CHECK(request->method() == "sampling/createMessage");

  RawClient answer(ts.endpoint);
  auto accepted = answer.request(
      bhttp::verb::post, "/mcp", post_headers(ts.host(), sid),
      R"({"jsonrpc":"2.0","id":)" + request->id().to_json() +
          R"(,"result":{"role":"assistant","content":{"type":"text","text":"four"},"model":"m"}})");
  CHECK(accepted.status == 202);
  CHECK(accepted.body.empty());

  auto done = c.next_message();
  REQUIRE(done);
  CHECK(done->message()->id() == Id::integer(9));
  CHECK(text_of(*done->message()) == "sampled: four");
  CHECK(c.wait_end());
}

TEST_CASE(
    "http: server messages with no stream open wait, then arrive on the GET stream in "
    "order, and one GET stream per session",
    "[http][integration]") {
  TestServer ts;
  const auto sid = open_session(ts);
  ts.backend.send(0,
                  Message::notification("notifications/message", R"({"level":"info","data":1})"));
  ts.backend.send(0, Message::request(Id::string("srv-ping"), "ping"));
  ts.backend.send(0,
                  Message::notification("notifications/message", R"({"level":"info","data":2})"));

  RawClient g(ts.endpoint);
  g.send(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid));
  auto head = g.read_header();
  REQUIRE(head.status == 200);
  CHECK(head.header("content-type") == "text/event-stream");
  CHECK(head.header("mcp-session-id") == sid);
  auto priming = g.next_event();
  REQUIRE(priming);
  CHECK(priming->data.empty());
  auto m1 = g.next_message();
  auto m2 = g.next_message();
  auto m3 = g.next_message();
  REQUIRE((m1 && m2 && m3));
  CHECK(at(*m1->message(), {"params", "data"}) == "1");
  CHECK(m2->message()->id() == Id::string("srv-ping"));
  CHECK(at(*m3->message(), {"params", "data"}) == "2");

  // Live messages follow on the open stream.
  ts.backend.send(0, Message::notification("notifications/tools/list_changed"));
  auto live = g.next_message();
  REQUIRE(live);
  CHECK(live->message()->method() == "notifications/tools/list_changed");

  RawClient second(ts.endpoint);
  auto conflict = second.request(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid));
  CHECK(conflict.status == 409);
  CHECK(conflict.error_code() == -32000);

  // Once the first is closed, a new GET stream is accepted.
  g.close();
  std::optional<RawClient> third;
  CHECK(eventually([&] {
    third.emplace(ts.endpoint);
    third->send(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid));
    return third->read_header().status == 200;
  }));
}

TEST_CASE(
    "http: a cut POST stream resumes with Last-Event-ID: only its own events, then its "
    "response",
    "[http][integration]") {
  TestServer ts;
  const auto sid = open_session(ts);
  RawClient g(ts.endpoint);
  g.send(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid));
  REQUIRE(g.read_header().status == 200);
  REQUIRE(g.next_event());  // priming

  RawClient p(ts.endpoint);
  p.send(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid),
         tool_call(11, "slow", R"(,"_meta":{"progressToken":"t11"})"));
  REQUIRE(p.read_header().status == 200);
  auto priming = p.next_event();
  REQUIRE(priming);
  REQUIRE(priming->has_id);
  const auto stream = stream_of(priming->id);
  REQUIRE(ts.backend.wait_slow_calls(0, 1));
  auto progress = [](int n) {
    return Message::notification("notifications/progress",
                                 R"({"progressToken":"t11","progress":)" + std::to_string(n) + "}");
  };
  ts.backend.send(0, progress(1));
  auto first = p.next_message();
  REQUIRE(first);
  CHECK(stream_of(first->id) == stream);
  p.close();  // 002: a disconnect, not a cancellation

  ts.backend.send(0, progress(2));
  ts.backend.send(0, Message::notification("notifications/message", R"({"data":"x"})"));
  ts.backend.complete_slow(0, "finally");

  RawClient r(ts.endpoint);
  r.send(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid, first->id));
  REQUIRE(r.read_header().status == 200);
  std::vector<SseEvent> replayed;
  while (auto e = r.next_message())
    replayed.push_back(*e);
  CHECK(r.stream_ended());  // the stream had its response: it ends after the replay
  REQUIRE(replayed.size() >= 2);
  bool notification_replayed = false;
  for (const auto& e : replayed) {
    CHECK(stream_of(e.id) == stream);
    if (e.message()->method() == "notifications/message") notification_replayed = true;
  }
  CHECK(at(*replayed.front().message(), {"params", "progress"}) == "2");
  CHECK(replayed.back().message()->id() == Id::integer(11));
  CHECK(text_of(*replayed.back().message()) == "finally");
  // The notification went to exactly one stream: the POST stream (if the server had not yet
  // noticed the cut) or the GET stream.
  if (!notification_replayed) {
    auto on_get = g.next_message();
    REQUIRE(on_get);
    CHECK(stream_of(on_get->id) == "0");
    CHECK(on_get->message()->method() == "notifications/message");
  } else {
    CHECK_FALSE(g.next_message(300ms));
  }

  // A cursor this session never issued is refused without harm.
  RawClient bad(ts.endpoint);
  auto refused = bad.request(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid, "999-1"));
  CHECK(refused.status == 400);
  CHECK(refused.error_code() == -32000);
}

TEST_CASE("http: the GET stream resumes after Last-Event-ID and continues live",
          "[http][integration]") {
  TestServer ts;
  const auto sid = open_session(ts);
  RawClient g(ts.endpoint);
  g.send(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid));
  REQUIRE(g.read_header().status == 200);
  REQUIRE(g.next_event());
  auto note = [](int n) {
    return Message::notification("notifications/message",
                                 R"({"level":"info","data":)" + std::to_string(n) + "}");
  };
  ts.backend.send(0, note(1));
  ts.backend.send(0, note(2));
  auto n1 = g.next_message();
  REQUIRE(n1);
  CHECK(at(*n1->message(), {"params", "data"}) == "1");
  g.close();
  ts.backend.send(0, note(3));

  std::optional<RawClient> r;
  REQUIRE(eventually([&] {  // until the server noticed the old stream is gone
    r.emplace(ts.endpoint);
    r->send(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid, n1->id));
    return r->read_header().status == 200;
  }));
  auto a = r->next_message();
  auto b = r->next_message();
  REQUIRE((a && b));
  CHECK(at(*a->message(), {"params", "data"}) == "2");
  CHECK(at(*b->message(), {"params", "data"}) == "3");
  ts.backend.send(0, note(4));
  auto c = r->next_message();
  REQUIRE(c);
  CHECK(at(*c->message(), {"params", "data"}) == "4");
  CHECK(stream_of(c->id) == "0");
}

TEST_CASE("http: idle SSE streams get keep-alive comments", "[http][integration]") {
  TestServer ts(config_with([](auto& c) { c.limits.keepalive_interval_ms = 200; }));
  const auto sid = open_session(ts);
  RawClient g(ts.endpoint);
  g.send(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid));
  REQUIRE(g.read_header().status == 200);
  REQUIRE(g.next_event());  // priming
  for (int i = 0; i < 2; ++i) {
    auto ka = g.next_event(5s);
    REQUIRE(ka);
    CHECK(ka->comment_only);
  }
  // A POST stream waiting for a slow response gets them too.
  RawClient p(ts.endpoint);
  p.send(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid), tool_call(2, "slow"));
  REQUIRE(p.read_header().status == 200);
  REQUIRE(p.next_event());
  auto ka = p.next_event(5s);
  REQUIRE(ka);
  CHECK(ka->comment_only);
  ts.backend.complete_slow(0);
  auto res = p.next_message();
  REQUIRE(res);
  CHECK(res->message()->id() == Id::integer(2));
}

TEST_CASE("http: DELETE ends the session, and its id then gets 404", "[http][integration]") {
  TestServer ts;
  const auto sid = open_session(ts);
  RawClient c(ts.endpoint);
  auto del =
      c.request(bhttp::verb::delete_, "/mcp", {{"Host", ts.host()}, {"Mcp-Session-Id", sid}});
  CHECK(del.status == 200);
  REQUIRE(ts.backend.wait_closed(0));
  auto why = ts.backend.closed(0);
  CHECK(why->kind == CloseReason::Kind::normal);
  CHECK(why->detail == "client sent DELETE");

  auto post =
      c.request(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid), request_body(2, "ping"));
  CHECK(post.status == 404);
  CHECK(post.error_code() == -32001);
  auto get = c.request(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid));
  CHECK(get.status == 404);
  auto again =
      c.request(bhttp::verb::delete_, "/mcp", {{"Host", ts.host()}, {"Mcp-Session-Id", sid}});
  CHECK(again.status == 404);
  CHECK(ts.server().session_count() == 0);
}

TEST_CASE("http: a session with no request and no open stream times out", "[http][integration]") {
  TestServer ts(config_with([](auto& c) { c.limits.session_idle_timeout_ms = 300; }));
  const auto busy = open_session(ts);  // session 0 keeps a GET stream open
  RawClient g(ts.endpoint);
  g.send(bhttp::verb::get, "/mcp", get_headers(ts.host(), busy));
  REQUIRE(g.read_header().status == 200);
  const auto idle = open_session(ts);  // session 1 does nothing

  REQUIRE(ts.backend.wait_closed(1, 10s));
  auto why = ts.backend.closed(1);
  CHECK(why->kind == CloseReason::Kind::timeout);
  CHECK(why->detail ==
        "no HTTP request and no open stream for 300 ms "
        "(http.limits.session_idle_timeout_ms)");
  RawClient c(ts.endpoint);
  CHECK(c.request(bhttp::verb::post, "/mcp", post_headers(ts.host(), idle), request_body(2, "ping"))
            .status == 404);

  // The session with an open stream (older than the one that timed out) is alive.
  CHECK_FALSE(ts.backend.closed(0));
  c.send(bhttp::verb::post, "/mcp", post_headers(ts.host(), busy), request_body(3, "ping"));
  REQUIRE(c.read_header().status == 200);
  auto pong = sse_response(c);
  REQUIRE(pong);
  CHECK(pong->id() == Id::integer(3));
}

TEST_CASE("http: a session the backend closes ends its streams and then gets 404",
          "[http][integration]") {
  TestServer ts;
  const auto sid = open_session(ts);
  RawClient g(ts.endpoint);
  g.send(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid));
  REQUIRE(g.read_header().status == 200);
  RawClient p(ts.endpoint);
  p.send(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid), tool_call(5, "slow"));
  REQUIRE(p.read_header().status == 200);
  REQUIRE(ts.backend.wait_slow_calls(0, 1));
  ts.backend.send(0, Message::notification("notifications/message", R"({"data":"last words"})"));

  ts.backend.close(0, CloseReason{CloseReason::Kind::peer_gone, "server sid-1 went offline"});
  // The POST stream delivers what was sent, an error for its request, and ends.
  std::vector<Message> got;
  while (auto e = p.next_message())
    got.push_back(*e->message());
  CHECK(p.stream_ended());
  REQUIRE_FALSE(got.empty());
  CHECK(got.back().id() == Id::integer(5));
  CHECK(got.back().kind() == Kind::error);
  CHECK(got.back().error().code == -32000);
  CHECK(got.back().error().message.find("server sid-1 went offline") != std::string::npos);
  CHECK(g.wait_end());

  RawClient c(ts.endpoint);
  auto after =
      c.request(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid), request_body(6, "ping"));
  CHECK(after.status == 404);
  CHECK(after.error_code() == -32001);
  // The owner asked for the close, so it is not told about it.
  CHECK_FALSE(ts.backend.closed(0));
}

TEST_CASE("http: a failed initialize keeps no session and returns no session id",
          "[http][integration]") {
  TestServer ts;
  struct Case {
    const char* target;
    unsigned status;
    int code;
    const char* message;
  };
  for (const Case& k :
       {Case{"/servers/offline/x/mcp", 503, -32000, "MCP server offline/x is offline"},
        Case{"/servers/refusing/x/mcp", 200, -32602, "Unsupported protocol version"},
        Case{"/servers/silent/x/mcp", 503, -32000, "no instance of silent/x is online"},
        Case{"/servers/lazy%2Fx/mcp", 200, -32603, "cannot initialize"}}) {
    INFO(k.target);
    RawClient c(ts.endpoint);
    auto r = c.request(bhttp::verb::post, k.target, post_headers(ts.host()), initialize_body());
    CHECK(r.status == k.status);
    CHECK(r.header("content-type") == "application/json");
    CHECK_FALSE(r.has("mcp-session-id"));
    auto m = Message::parse(r.body);
    REQUIRE(m);
    CHECK(m->id() == Id::integer(1));
    CHECK(m->error().code == k.code);
    CHECK(m->error().message == k.message);
    CHECK(ts.server().session_count() == 0);
  }
  // The backend that sent an error without closing is told the session ended.
  REQUIRE(ts.backend.wait_closed(3));
  CHECK(ts.backend.closed(3)->kind == CloseReason::Kind::normal);
  CHECK(ts.backend.closed(3)->detail.find("initialize failed") != std::string::npos);
  CHECK(ts.backend.session(3)->server_name == "lazy/x");
}

TEST_CASE("http: a reader too far behind loses its stream but can resume it",
          "[http][integration]") {
  TestServer ts(config_with([](auto& c) {
    c.limits.stream_queue_messages = 4;
    c.limits.replay_buffer_events = 16;
    c.limits.session_backlog_messages = 16;
  }));
  const auto sid = open_session(ts);
  RawClient g(ts.endpoint);
  g.send(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid));
  REQUIRE(g.read_header().status == 200);
  auto priming = g.next_event();
  REQUIRE(priming);

  // A burst far larger than the stream's queue and the socket buffers, without the client
  // reading.
  const std::string filler(50000, 'x');
  for (int i = 0; i < 1000; ++i)
    ts.backend.send(
        0, Message::notification("notifications/message", R"({"n":)" + std::to_string(i) +
                                                              R"(,"pad":")" + filler + R"("})"));
  CHECK_FALSE(g.wait_end(10s));
  CHECK(g.stream_failed());

  // The replay buffer still holds the most recent events.
  std::optional<RawClient> r;
  REQUIRE(eventually([&] {
    r.emplace(ts.endpoint);
    r->send(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid, priming->id));
    return r->read_header().status == 200;
  }));
  int last = -1;
  while (auto e = r->next_message(2s)) {
    last = std::stoi(at(*e->message(), {"params", "n"}));
    if (last == 999) break;
  }
  CHECK(last == 999);
}

TEST_CASE(
    "http: an SSE reader too far behind in bytes (http.limits.stream_queue_bytes) loses its "
    "stream with a logged reason, and memory stays flat however much the server sends",
    "[http][integration][limits][rss]") {
  TestServer ts(config_with([](auto& c) {
    c.limits.stream_queue_messages = 1000000;  // only the bytes can be reached
    c.limits.stream_queue_bytes = 1 << 20;
    c.limits.replay_buffer_bytes = 1 << 20;
    c.limits.replay_buffer_events = 1000000;
    c.limits.session_backlog_bytes = 1 << 20;
    c.limits.session_backlog_messages = 1000000;
  }));
  const auto sid = open_session(ts);
  RawClient g(ts.endpoint);
  g.send(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid));
  REQUIRE(g.read_header().status == 200);
  auto priming = g.next_event();
  REQUIRE(priming);
  const auto before = rss_kib();
  // 160 MB for a reader that stopped reading: far more than the socket buffers and the bounds.
  const std::string filler(80000, 'x');
  for (int i = 0; i < 2000; ++i)
    ts.backend.send(
        0, Message::notification("notifications/message", R"({"n":)" + std::to_string(i) +
                                                              R"(,"pad":")" + filler + R"("})"));
  CHECK_FALSE(g.wait_end(10s));
  CHECK(g.stream_failed());
  CHECK(eventually([&] {
    return ts.server().metrics_text().find("mcpmqtt_http_slow_streams_closed_total 1") !=
           std::string::npos;
  }));
  ts.backend.send(0, Message::notification("notifications/message", R"({"n":"last"})"));
  // The session goes on: the most recent events are replayed after a resume.
  std::optional<RawClient> r;
  REQUIRE(eventually([&] {
    r.emplace(ts.endpoint);
    r->send(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid, priming->id));
    return r->read_header().status == 200;
  }));
  std::string last;
  while (auto e = r->next_message(2s)) {
    last = at(*e->message(), {"params", "n"});
    if (last == "last") break;
  }
  CHECK(last == "last");
  // Every message has gone through the session (written, held or dropped) by now.
  const auto after = rss_kib();
  INFO("VmRSS before " << before << " KiB, after " << after << " KiB");
  // ASan keeps freed memory in quarantine: resident memory says nothing there.
  if (kRssMeaningful) CHECK(after < before + 48 * 1024);
}

TEST_CASE("http: a reader that falls behind and catches up gets every event whole and in order",
          "[http][integration]") {
  // The first events go out on the socket the idle stream lends to the session; once the
  // client stops reading, one of them is cut by a full socket buffer and the stream's writer
  // takes over with its tail, then the events queued behind it.
  TestServer ts(config_with([](auto& c) { c.limits.stream_queue_messages = 100000; }));
  const auto sid = open_session(ts);
  RawClient g(ts.endpoint);
  g.send(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid));
  REQUIRE(g.read_header().status == 200);
  REQUIRE(g.next_event());  // priming
  constexpr int kEvents = 400;
  const std::string filler(20000, 'x');  // 8 MB in all: more than the socket buffers hold
  for (int i = 0; i < kEvents; ++i)
    ts.backend.send(
        0, Message::notification("notifications/message", R"({"n":)" + std::to_string(i) +
                                                              R"(,"pad":")" + filler + R"("})"));
  // Not synchronisation: the reader stays away a moment, so that the events pile up behind a
  // full socket buffer before it reads them.
  std::this_thread::sleep_for(200ms);
  for (int i = 0; i < kEvents; ++i) {
    auto e = g.next_message(10s);
    REQUIRE(e);
    REQUIRE(e->message());
    CHECK(at(*e->message(), {"params", "n"}) == std::to_string(i));
    CHECK(at(*e->message(), {"params", "pad"}) == filler);
  }
  // The stream goes on live afterwards.
  ts.backend.send(0, Message::notification("notifications/message", R"({"n":"live"})"));
  auto live = g.next_message(5s);
  REQUIRE(live);
  CHECK(at(*live->message(), {"params", "n"}) == "live");
}

TEST_CASE("http: two sessions may use the same request ids", "[http][integration]") {
  TestServer ts;
  const auto a = open_session(ts);
  const auto b = open_session(ts);
  RawClient pa(ts.endpoint), pb(ts.endpoint);
  pa.send(bhttp::verb::post, "/mcp", post_headers(ts.host(), a), tool_call(5, "slow"));
  pb.send(bhttp::verb::post, "/mcp", post_headers(ts.host(), b), tool_call(5, "slow"));
  REQUIRE(pa.read_header().status == 200);
  REQUIRE(pb.read_header().status == 200);
  REQUIRE(ts.backend.wait_slow_calls(0, 1));
  REQUIRE(ts.backend.wait_slow_calls(1, 1));
  ts.backend.complete_slow(1, "for b");
  ts.backend.complete_slow(0, "for a");
  auto ra = sse_response(pa);
  auto rb = sse_response(pb);
  REQUIRE((ra && rb));
  CHECK(text_of(*ra) == "for a");
  CHECK(text_of(*rb) == "for b");

  // Within one session, an id still pending is refused.
  RawClient p1(ts.endpoint), p2(ts.endpoint);
  p1.send(bhttp::verb::post, "/mcp", post_headers(ts.host(), a), tool_call(8, "slow"));
  REQUIRE(p1.read_header().status == 200);
  REQUIRE(ts.backend.wait_slow_calls(0, 1));
  auto dup =
      p2.request(bhttp::verb::post, "/mcp", post_headers(ts.host(), a), tool_call(8, "echo"));
  CHECK(dup.status == 400);
  CHECK(dup.error_code() == -32600);
  CHECK(dup.error_message().find("already in use") != std::string::npos);
  ts.backend.complete_slow(0);
  CHECK(sse_response(p1));
}

TEST_CASE("http: a cancelled request's stream ends without a response", "[http][integration]") {
  TestServer ts;
  const auto sid = open_session(ts);
  RawClient p(ts.endpoint);
  p.send(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid), tool_call(4, "slow"));
  REQUIRE(p.read_header().status == 200);
  REQUIRE(ts.backend.wait_slow_calls(0, 1));
  RawClient c(ts.endpoint);
  auto accepted =
      c.request(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid),
                R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}})");
  CHECK(accepted.status == 202);
  CHECK(p.wait_end());
  REQUIRE(ts.backend.wait_received(0, "notifications/cancelled"));
  ts.backend.complete_slow(0);  // a late answer goes nowhere and harms nothing
  auto ping =
      c.request(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid), request_body(5, "ping"));
  CHECK(ping.status == 200);
}

TEST_CASE(
    "http: with the backlog full of server requests, a further one is answered with an "
    "error instead of being lost",
    "[http][integration]") {
  TestServer ts(config_with([](auto& c) { c.limits.session_backlog_messages = 2; }));
  const auto sid = open_session(ts);
  ts.backend.send(0, Message::notification("notifications/message", R"({"data":"old"})"));
  ts.backend.send(0, Message::request(Id::string("q1"), "ping"));
  ts.backend.send(0, Message::request(Id::string("q2"), "ping"));  // the notification gives way
  ts.backend.send(0, Message::request(Id::string("q3"), "ping"));  // nothing gives way
  REQUIRE(ts.backend.wait_response(0, Id::string("q3")));
  auto answer = ts.backend.received(0).back();
  CHECK(answer.kind() == Kind::error);
  CHECK(answer.error().code == -32000);
  CHECK(answer.error().message.find("backlog") != std::string::npos);

  // The two held requests arrive when the client opens its GET stream.
  RawClient g(ts.endpoint);
  g.send(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid));
  REQUIRE(g.read_header().status == 200);
  auto a = g.next_message();
  auto b = g.next_message();
  REQUIRE((a && b));
  CHECK(a->message()->id() == Id::string("q1"));
  CHECK(b->message()->id() == Id::string("q2"));
}

// StreamRouter: which stream of a Streamable HTTP session each server→client message takes,
// event ids, replay buffers and the session backlog (design.md "Routing rules"; 002
// §Streamable HTTP, §Resumability and Redelivery).
#include "bridge/relay/stream_router.hpp"

#include <cstdio>
#include <set>

#include <catch2/catch.hpp>

#include "tests/support/sanitizers.hpp"

using mcpmqtt::bridge::StreamRouter;
using mcpmqtt::jsonrpc::Id;
using mcpmqtt::jsonrpc::Message;
using To = StreamRouter::Routed::To;

namespace {

Message parse_message(const std::string& text) {
  auto m = Message::parse(text);
  INFO(text);
  REQUIRE(m.has_value());
  return m.value();
}

Message request(int id, const std::string& token_json = "") {
  if (token_json.empty())
    return parse_message(R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
                         R"(,"method":"tools/call","params":{"name":"x"}})");
  return parse_message(R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
                       R"(,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":)" +
                       token_json + "}}}");
}

Message result(int id) {
  return parse_message(R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"result":{}})");
}

Message notification(const std::string& method) {
  return parse_message(R"({"jsonrpc":"2.0","method":")" + method + R"("})");
}

Message progress(const std::string& token_json, int n = 1) {
  return parse_message(
      R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":)" +
      token_json + R"(,"progress":)" + std::to_string(n) + "}}");
}

Message server_request(int id) {
  return parse_message(R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
                       R"(,"method":"sampling/createMessage","params":{}})");
}

StreamRouter::StreamOptions sse(bool attached = true) {
  StreamRouter::StreamOptions o;
  o.attached = attached;
  return o;
}

StreamRouter::StreamOptions json(bool batch = false) {
  StreamRouter::StreamOptions o;
  o.format = StreamRouter::Format::json;
  o.batch = batch;
  return o;
}

StreamRouter::StreamId open(StreamRouter& r, std::vector<Message> body,
                            StreamRouter::StreamOptions o = sse()) {
  auto s = r.open_post(body, std::move(o));
  INFO((s ? "" : s.error()));
  REQUIRE(s.has_value());
  return *s;
}

StreamRouter::Limits limits(std::size_t backlog, std::size_t replay, std::size_t retained = 8) {
  return StreamRouter::Limits{backlog, replay, retained};
}

}  // namespace

TEST_CASE("router: a response goes to the stream of the POST that carried its request",
          "[router]") {
  StreamRouter r({});
  const auto a = open(r, {request(1)});
  const auto b = open(r, {request(2)});
  CHECK(a != b);

  auto rb = r.route(result(2));
  CHECK(rb.to == To::stream);
  CHECK(rb.stream == b);
  REQUIRE(rb.event);
  CHECK(rb.event->id == std::to_string(b) + "-1");
  CHECK(rb.event->message.id() == Id::integer(2));
  CHECK(rb.write);
  CHECK(rb.finished);

  auto ra = r.route(result(1));
  CHECK(ra.stream == a);
  CHECK(ra.finished);
  CHECK_FALSE(r.pending(Id::integer(1)));
  CHECK_FALSE(r.attached(a));
}

TEST_CASE("router: a stream carrying several requests finishes with its last response",
          "[router]") {
  StreamRouter r({});
  const auto s = open(r, {request(1), request(2), notification("notifications/x"), request(3)});
  auto r1 = r.route(result(1));
  CHECK((r1.stream == s && !r1.finished));
  auto r3 = r.route(result(3));
  CHECK((r3.stream == s && !r3.finished));
  auto r2 = r.route(result(2));
  CHECK(r2.stream == s);
  CHECK(r2.finished);
  CHECK(r2.write);
  CHECK(r.finished(s));
}

TEST_CASE("router: a response nobody waits for goes nowhere, with the reason", "[router]") {
  StreamRouter r({});
  open(r, {request(1)});
  auto routed = r.route(result(99));
  CHECK(routed.to == To::nowhere);
  CHECK(routed.why == "no request with id 99 is pending in this session");
  CHECK_FALSE(routed.expected);
  CHECK_FALSE(routed.refuse_request);
}

TEST_CASE("router: progress goes to the stream of the request that carried its token", "[router]") {
  StreamRouter r({});
  const auto a = open(r, {request(1, R"("tok-a")")});
  const auto b = open(r, {request(2, "7")});
  CHECK(r.route(progress("7")).stream == b);
  CHECK(r.route(progress(R"("tok-a")")).stream == a);
  // A progress token is an id of its own: 7 and "7" differ.
  CHECK(r.route(progress(R"("7")")).stream == a);  // unknown token: oldest in-flight POST

  r.route(result(2));  // b finished: its token is gone
  CHECK(r.route(progress("7")).stream == a);
  r.route(result(1));
  CHECK(r.route(progress(R"("tok-a")")).to == To::backlog);
}

TEST_CASE("router: unsolicited messages take the oldest POST in flight, else GET, else backlog",
          "[router]") {
  StreamRouter r({});
  CHECK(r.route(notification("notifications/message")).to == To::backlog);
  CHECK(r.backlog_size() == 1);

  REQUIRE(r.open_get());
  auto g = r.route(notification("notifications/message"));
  CHECK(g.to == To::stream);
  CHECK(g.stream == StreamRouter::kGetStream);
  CHECK(g.write);

  const auto p1 = open(r, {request(1)});
  const auto p2 = open(r, {request(2)});
  CHECK(r.route(server_request(100)).stream == p1);
  CHECK(r.route(notification("notifications/message")).stream == p1);

  r.detach(p1);  // a disconnected POST stream is not in flight
  CHECK(r.route(notification("notifications/message")).stream == p2);
  r.route(result(2));
  CHECK(r.route(notification("notifications/message")).stream == StreamRouter::kGetStream);

  r.detach(StreamRouter::kGetStream);
  CHECK(r.route(server_request(101)).to == To::backlog);
  CHECK(r.backlog_size() == 2);
}

TEST_CASE("router: JSON streams take only their responses, answered in request order", "[router]") {
  StreamRouter r({});
  const auto s = open(r, {request(1), notification("notifications/x"), request(2)}, json(true));
  CHECK_FALSE(r.accepts_unsolicited(s));
  CHECK(r.route(notification("notifications/message")).to == To::backlog);
  CHECK(r.route(progress("5")).to == To::backlog);

  auto r2 = r.route(result(2));
  CHECK(r2.to == To::stream);
  CHECK_FALSE(r2.event);
  CHECK_FALSE(r2.finished);
  auto r1 = r.route(result(1));
  CHECK(r1.finished);
  CHECK(r1.write);
  CHECK(r1.json_batch);
  REQUIRE(r1.json_body.size() == 2);
  CHECK(r1.json_body[0].id() == Id::integer(1));
  CHECK(r1.json_body[1].id() == Id::integer(2));
  CHECK_FALSE(r.holds(s));  // nothing to resume on a JSON response

  const auto single = open(r, {request(3)}, json(false));
  auto r3 = r.route(result(3));
  CHECK(r3.stream == single);
  CHECK_FALSE(r3.json_batch);
  CHECK(r3.json_body.size() == 1);
}

TEST_CASE("router: a JSON stream whose client left finishes without a write", "[router]") {
  StreamRouter r({});
  const auto s = open(r, {request(1)}, json());
  r.detach(s);
  auto routed = r.route(result(1));
  CHECK(routed.finished);
  CHECK_FALSE(routed.write);
  CHECK(routed.json_body.size() == 1);
}

TEST_CASE("router: a full backlog drops its oldest notification and never a request", "[router]") {
  StreamRouter r(limits(3, 16));
  r.route(notification("n/a"));
  r.route(server_request(10));
  r.route(notification("n/b"));
  CHECK(r.backlog_size() == 3);

  auto c = r.route(notification("n/c"));
  CHECK(c.to == To::backlog);
  REQUIRE(c.evicted.size() == 1);
  CHECK(c.evicted[0].method() == "n/a");

  auto q11 = r.route(server_request(11));
  CHECK(q11.to == To::backlog);
  REQUIRE(q11.evicted.size() == 1);
  CHECK(q11.evicted[0].method() == "n/b");

  auto q12 = r.route(server_request(12));
  REQUIRE(q12.evicted.size() == 1);
  CHECK(q12.evicted[0].method() == "n/c");
  CHECK(r.backlog_size() == 3);

  // Only requests held: a notification is dropped, a request refused.
  auto d = r.route(notification("n/d"));
  CHECK(d.to == To::nowhere);
  CHECK_FALSE(d.refuse_request);
  CHECK(d.why.find("backlog (3 messages, 4194304 bytes) is full of requests") != std::string::npos);
  auto q13 = r.route(server_request(13));
  CHECK(q13.to == To::nowhere);
  CHECK(q13.refuse_request);

  // The held requests arrive, in order, when a stream opens.
  REQUIRE(r.open_get());
  auto events = r.drain_backlog(StreamRouter::kGetStream);
  REQUIRE(events.size() == 3);
  CHECK(events[0].message.id() == Id::integer(10));
  CHECK(events[1].message.id() == Id::integer(11));
  CHECK(events[2].message.id() == Id::integer(12));
  CHECK(r.backlog_size() == 0);
}

TEST_CASE("router: a backlog of 0 holds nothing", "[router]") {
  StreamRouter r(limits(0, 16));
  CHECK(r.route(notification("n/a")).to == To::nowhere);
  CHECK(r.route(server_request(1)).refuse_request);
}

TEST_CASE("router: the backlog drains onto a POST stream that opens, with its event ids",
          "[router]") {
  StreamRouter r({});
  r.route(notification("n/1"));
  r.route(server_request(5));
  const auto s = open(r, {request(1)});
  CHECK(r.priming_event_id(s) == std::to_string(s) + "-0");
  auto events = r.drain_backlog(s);
  REQUIRE(events.size() == 2);
  CHECK(events[0].id == std::to_string(s) + "-1");
  CHECK(events[0].message.method() == "n/1");
  CHECK(events[1].id == std::to_string(s) + "-2");
  auto rr = r.route(result(1));
  CHECK(rr.event->id == std::to_string(s) + "-3");

  // Not onto JSON or detached streams.
  r.route(notification("n/2"));
  const auto j = open(r, {request(2)}, json());
  CHECK(r.drain_backlog(j).empty());
  const auto d = open(r, {request(3)}, sse(false));
  CHECK(r.drain_backlog(d).empty());
  CHECK(r.backlog_size() == 1);
}

TEST_CASE("router: event ids are unique in the session and name their stream", "[router]") {
  StreamRouter r({});
  REQUIRE(r.open_get());
  std::set<std::string> ids;
  std::vector<StreamRouter::StreamId> streams;
  for (int i = 1; i <= 4; ++i)
    streams.push_back(open(r, {request(i, std::to_string(100 + i))}));
  ids.insert(r.priming_event_id(StreamRouter::kGetStream));
  for (int round = 0; round < 3; ++round) {
    for (int i = 1; i <= 4; ++i) {
      auto routed = r.route(progress(std::to_string(100 + i), round));
      REQUIRE(routed.event);
      CHECK(ids.insert(routed.event->id).second);
      auto parsed = StreamRouter::parse_event_id(routed.event->id);
      REQUIRE(parsed);
      CHECK(parsed->first == streams[static_cast<std::size_t>(i - 1)]);
    }
    auto g = r.route(notification("n/x"));
    CHECK(g.stream == streams[0]);
  }
  for (int i = 1; i <= 4; ++i) {
    auto routed = r.route(result(i));
    CHECK(ids.insert(routed.event->id).second);
  }
  for (int i = 0; i < 3; ++i) {
    auto g = r.route(notification("n/x"));
    CHECK(g.stream == StreamRouter::kGetStream);
    CHECK(ids.insert(g.event->id).second);
  }
}

TEST_CASE("router: event id syntax", "[router]") {
  auto ok = StreamRouter::parse_event_id("3-17");
  REQUIRE(ok);
  CHECK(ok->first == 3);
  CHECK(ok->second == 17);
  CHECK(StreamRouter::parse_event_id("0-0"));
  CHECK(StreamRouter::event_id(12, 5) == "12-5");
  for (const char* bad : {"", "3", "-1", "3-", "a-1", "03-1", "3-01", "3-1x", "3--1", " 3-1",
                          "18446744073709551616-1"}) {
    INFO(bad);
    CHECK_FALSE(StreamRouter::parse_event_id(bad));
  }
}

TEST_CASE("router: a detached stream keeps its events, and a resume replays only what followed",
          "[router]") {
  StreamRouter r({});
  const auto s = open(r, {request(1, "9")});
  const auto other = open(r, {request(2)});
  auto first = r.route(progress("9", 1));
  CHECK(first.write);
  r.detach(s);  // 002: a disconnect is not a cancellation
  CHECK(r.pending(Id::integer(1)));
  auto second = r.route(progress("9", 2));
  CHECK(second.stream == s);
  CHECK_FALSE(second.write);
  r.route(notification("n/other"));  // goes to the other stream, never replayed on s
  auto last = r.route(result(1));
  CHECK(last.stream == s);
  CHECK(last.finished);
  CHECK_FALSE(last.write);

  auto resumed = r.resume(first.event->id);
  REQUIRE(resumed);
  CHECK(resumed->stream == s);
  CHECK(resumed->finished);
  CHECK_FALSE(resumed->replaced);
  CHECK_FALSE(resumed->incomplete);
  REQUIRE(resumed->events.size() == 2);
  CHECK(resumed->events[0].id == second.event->id);
  CHECK(resumed->events[1].id == last.event->id);
  CHECK(resumed->events[1].message.id() == Id::integer(1));

  auto all = r.resume(std::to_string(s) + "-0");
  REQUIRE(all);
  CHECK(all->events.size() == 3);
  CHECK(r.holds(other));
}

TEST_CASE("router: resuming an unfinished stream re-attaches it", "[router]") {
  StreamRouter r({});
  const auto s = open(r, {request(1)});
  r.detach(s);
  CHECK(r.route(notification("n/x")).to == To::backlog);  // not in flight while detached
  auto resumed = r.resume(std::to_string(s) + "-0");
  REQUIRE(resumed);
  CHECK(resumed->events.empty());
  CHECK_FALSE(resumed->finished);
  CHECK(r.attached(s));
  auto routed = r.route(result(1));
  CHECK(routed.write);
  CHECK(routed.finished);
}

TEST_CASE("router: resuming an attached stream replaces its connection", "[router]") {
  StreamRouter r({});
  REQUIRE(r.open_get());
  auto n = r.route(notification("n/x"));
  auto resumed = r.resume("0-0");
  REQUIRE(resumed);
  CHECK(resumed->replaced);
  REQUIRE(resumed->events.size() == 1);
  CHECK(resumed->events[0].id == n.event->id);
  CHECK(r.attached(StreamRouter::kGetStream));
}

TEST_CASE("router: resume refuses ids it did not send and streams it no longer holds", "[router]") {
  StreamRouter r(limits(8, 8, 2));
  CHECK_FALSE(r.resume("nonsense"));
  CHECK(r.resume("nonsense").error().find("is not an event id of this server") !=
        std::string::npos);
  CHECK_FALSE(r.resume("0-0"));  // no GET stream yet
  CHECK_FALSE(r.resume("5-1"));  // no such stream

  std::vector<StreamRouter::StreamId> s;
  for (int i = 1; i <= 3; ++i) {
    s.push_back(open(r, {request(i)}));
    r.route(result(i));
  }
  CHECK_FALSE(r.holds(s[0]));  // only the 2 newest finished streams are kept
  CHECK(r.holds(s[1]));
  CHECK(r.holds(s[2]));
  auto forgotten = r.resume(std::to_string(s[0]) + "-0");
  REQUIRE_FALSE(forgotten);
  CHECK(forgotten.error().find("is no longer held") != std::string::npos);
  CHECK_FALSE(r.resume(std::to_string(s[1]) + "-2"));  // beyond what the stream sent
  CHECK(r.resume(std::to_string(s[1]) + "-1"));
  // JSON streams send no events, so none can be resumed.
  const auto j = open(r, {request(9)}, json());
  CHECK_FALSE(r.resume(std::to_string(j) + "-0"));
}

TEST_CASE("router: finished streams kept for resumption are bounded in bytes, the newest kept",
          "[router]") {
  StreamRouter::Limits l = limits(8, 8, 8);
  l.retained_bytes = 3200;
  StreamRouter r(l);
  const std::string big = "\"" + std::string(1000, 'x') + "\"";
  std::vector<StreamRouter::StreamId> s;
  for (int i = 1; i <= 4; ++i) {
    s.push_back(open(r, {request(i)}));
    r.route(Message::result(Id::integer(i), big));
  }
  // Four responses of ~1,030 bytes each, 3,200 bytes allowed: the oldest goes.
  CHECK_FALSE(r.holds(s[0]));
  CHECK(r.holds(s[1]));
  CHECK(r.holds(s[3]));
  CHECK(r.resume(std::to_string(s[3]) + "-0"));
  // A response larger than the whole allowance, written to its client: nothing is kept.
  const auto huge = open(r, {request(9)});
  r.route(Message::result(Id::integer(9), "\"" + std::string(5000, 'y') + "\""));
  CHECK_FALSE(r.holds(huge));
  CHECK_FALSE(r.holds(s[1]));
  CHECK_FALSE(r.holds(s[3]));
  // The same for a client that went away before it came: kept, for its resume.
  const auto away = open(r, {request(10)}, sse(false));
  r.route(Message::result(Id::integer(10), "\"" + std::string(5000, 'z') + "\""));
  CHECK(r.holds(away));
  auto back = r.resume(std::to_string(away) + "-0");
  REQUIRE(back);
  REQUIRE(back->events.size() == 1);
  CHECK(back->events[0].message.id() == Id::integer(10));
}

TEST_CASE("router: replay buffers are bounded and give up notifications before responses",
          "[router]") {
  StreamRouter r(limits(8, 2));
  const auto s = open(r, {request(1, "4"), request(2)}, sse(false));
  auto p1 = r.route(progress("4", 1));
  auto p2 = r.route(progress("4", 2));
  CHECK(p2.evicted.empty());
  auto r1 = r.route(result(1));
  REQUIRE(r1.evicted.size() == 1);  // p1 was never written: reported
  CHECK(r1.evicted[0].method() == "notifications/progress");
  auto r2 = r.route(result(2));
  REQUIRE(r2.evicted.size() == 1);  // p2 goes before the response
  CHECK(r2.evicted[0].method() == "notifications/progress");
  CHECK(r2.finished);

  auto resumed = r.resume(p1.event->id);
  REQUIRE(resumed);
  CHECK(resumed->incomplete);
  REQUIRE(resumed->events.size() == 2);
  CHECK(resumed->events[0].message.id() == Id::integer(1));
  CHECK(resumed->events[1].message.id() == Id::integer(2));
  CHECK(s == resumed->stream);
}

TEST_CASE("router: with only responses held, the oldest response is given up and reported",
          "[router]") {
  StreamRouter r(limits(8, 1));
  open(r, {request(1), request(2)}, sse(false));
  r.route(result(1));
  auto r2 = r.route(result(2));
  REQUIRE(r2.evicted.size() == 1);
  CHECK(r2.evicted[0].id() == Id::integer(1));
}

TEST_CASE("router: events already written leave the replay buffer without a report", "[router]") {
  StreamRouter r(limits(8, 1));
  REQUIRE(r.open_get());
  for (int i = 0; i < 5; ++i)
    CHECK(r.route(notification("n/x")).evicted.empty());
}

TEST_CASE("router: a cancelled request needs no response", "[router]") {
  StreamRouter r({});
  const auto s = open(r, {request(1)});
  CHECK_FALSE(r.cancel(Id::integer(42)));
  auto c = r.cancel(Id::integer(1));
  REQUIRE(c);
  CHECK(c->stream == s);
  CHECK(c->finished);
  CHECK(c->write);
  CHECK_FALSE(c->event);
  auto late = r.route(result(1));
  CHECK(late.to == To::nowhere);
  CHECK(late.expected);
  CHECK(late.why == "the client cancelled request 1");

  // A JSON body still answers every request: an error stands in for the cancelled one.
  const auto j = open(r, {request(2), request(3)}, json(true));
  CHECK(r.cancel(Id::integer(2))->finished == false);
  auto done = r.route(result(3));
  CHECK(done.stream == j);
  REQUIRE(done.json_body.size() == 2);
  CHECK(done.json_body[0].id() == Id::integer(2));
  CHECK(done.json_body[0].kind() == mcpmqtt::jsonrpc::Kind::error);
  CHECK(done.json_body[0].error().code == -32000);
  CHECK(done.json_body[1].kind() == mcpmqtt::jsonrpc::Kind::result);
}

TEST_CASE("router: request ids in use are refused, and answered ids may be used again",
          "[router]") {
  StreamRouter r({});
  open(r, {request(1)});
  auto again = r.open_post({request(1)}, sse());
  REQUIRE_FALSE(again);
  CHECK(again.error() ==
        "request id 1 is already in use by a pending request of this session; use a new id");
  auto twice = r.open_post({request(2), request(2)}, sse());
  REQUIRE_FALSE(twice);
  CHECK(twice.error() == "request id 2 appears twice in this batch");
  CHECK_FALSE(r.pending(Id::integer(2)));
  auto none = r.open_post({notification("n/x")}, sse());
  CHECK_FALSE(none);
  r.route(result(1));
  CHECK(r.open_post({request(1)}, sse()));
}

TEST_CASE("router: two sessions may use the same ids", "[router]") {
  StreamRouter a({}), b({});
  const auto sa = open(a, {request(1, "1")});
  const auto sb1 = open(b, {request(7)});
  const auto sb2 = open(b, {request(1, "1")});
  CHECK(sa == sb1);  // stream numbers are per session too
  CHECK(b.route(progress("1")).stream == sb2);
  CHECK(a.route(progress("1")).stream == sa);
  CHECK(b.route(result(1)).stream == sb2);
  CHECK(a.pending(Id::integer(1)));
  CHECK(a.route(result(1)).stream == sa);
}

TEST_CASE("router: one GET stream at a time", "[router]") {
  StreamRouter r({});
  CHECK(r.open_get());
  CHECK_FALSE(r.open_get());
  r.detach(StreamRouter::kGetStream);
  CHECK(r.open_get());
}

TEST_CASE("router: the GET stream keeps its numbering across connections", "[router]") {
  StreamRouter r({});
  REQUIRE(r.open_get());
  const auto priming1 = r.priming_event_id(StreamRouter::kGetStream);
  CHECK(priming1 == "0-1");
  auto n1 = r.route(notification("n/1"));
  CHECK(n1.event->id == "0-2");
  r.detach(StreamRouter::kGetStream);
  REQUIRE(r.open_get());
  const auto priming2 = r.priming_event_id(StreamRouter::kGetStream);
  CHECK(priming2 == "0-3");
  auto n2 = r.route(notification("n/2"));
  CHECK(n2.event->id == "0-4");
  auto after = r.resume(priming2);
  REQUIRE(after);
  REQUIRE(after->events.size() == 1);
  CHECK(after->events[0].id == "0-4");
}

TEST_CASE("router: a stream opened detached replays everything once attached", "[router]") {
  StreamRouter r({});
  const auto s = open(r, {request(1)}, sse(false));
  r.route(notification("n/x"));  // not onto a detached stream
  auto res = r.route(result(1));
  CHECK_FALSE(res.write);
  auto replay = r.attach_from_start(s);
  CHECK(replay.finished);
  REQUIRE(replay.events.size() == 1);
  CHECK(replay.events[0].id == std::to_string(s) + "-1");
  CHECK(r.backlog_size() == 1);
}

TEST_CASE("router: pending requests, all or only on attached streams", "[router]") {
  StreamRouter r({});
  open(r, {request(1), request(2)});
  const auto d = open(r, {request(3)});
  r.detach(d);
  r.route(result(2));
  CHECK(r.pending_requests(false) == std::vector<Id>{Id::integer(1), Id::integer(3)});
  CHECK(r.pending_requests(true) == std::vector<Id>{Id::integer(1)});
  CHECK(r.attached_count() == 1);
}

TEST_CASE(
    "router 000: notifications tagged with a subscriptionId go to that listen's stream only, "
    "and nowhere once it ended",
    "[router]") {
  StreamRouter r({});
  StreamRouter::StreamOptions listen;
  listen.listen = true;
  const auto l = open(r, {request(1)}, listen);
  const auto l2 = open(r, {request(2)}, listen);
  const auto call = open(r, {request(3)});
  REQUIRE(r.open_get());
  auto tagged = [](int sid) {
    return parse_message(
        R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":)" +
        std::to_string(sid) + R"(},"uri":"a://x"}})");
  };
  CHECK(r.route(tagged(1)).stream == l);
  CHECK(r.route(tagged(2)).stream == l2);
  // Untagged traffic never lands on a listen stream: the in-flight call takes it.
  CHECK(r.route(notification("notifications/message")).stream == call);
  CHECK(r.drain_backlog(l).empty());
  auto end = r.route(result(1));
  CHECK(end.stream == l);
  CHECK(end.finished);
  auto late = r.route(tagged(1));
  CHECK(late.to == StreamRouter::Routed::To::nowhere);
  CHECK(late.expected);
  CHECK(r.route(tagged(7)).to == StreamRouter::Routed::To::nowhere);
}

TEST_CASE(
    "router 000 §Cancellation: an attached listen stream keeps no replay buffer (closing it "
    "cancels the listen, so nothing resumes it)",
    "[router]") {
  StreamRouter r({});
  StreamRouter::StreamOptions listen;
  listen.listen = true;
  const auto l = open(r, {request(1)}, listen);
  for (int i = 0; i < 100; ++i) {
    auto routed = r.route(parse_message(
        R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1}}})"));
    CHECK(routed.evicted.empty());  // written ones go quietly
  }
  auto resumed = r.resume(StreamRouter::event_id(l, 1));
  REQUIRE(resumed);
  CHECK(resumed->incomplete);
  CHECK(resumed->events.empty());
}

// ---- bytes: every queue toward a slow peer bounded in bytes as well ---------------------------

namespace {

// Resident memory of this process, from /proc/self/status.
std::size_t rss_kib() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  REQUIRE(f);
  char line[256];
  std::size_t kib = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "VmRSS: %zu kB", &kib) == 1) break;
  }
  std::fclose(f);
  return kib;
}

Message big_notification(std::size_t bytes) {
  return parse_message(R"({"jsonrpc":"2.0","method":"notifications/message","params":{"data":")" +
                       std::string(bytes, 'x') + R"("}})");
}

Message big_result(int id, std::size_t bytes) {
  return parse_message(R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"result":{"text":")" +
                       std::string(bytes, 'y') + R"("}})");
}

StreamRouter::Limits byte_limits(std::size_t backlog_bytes, std::size_t replay_bytes) {
  StreamRouter::Limits l;
  l.backlog_messages = 1000000;
  l.replay_events = 1000000;
  l.backlog_bytes = backlog_bytes;
  l.replay_bytes = replay_bytes;
  return l;
}

}  // namespace

TEST_CASE(
    "router: the session backlog is bounded in bytes, drops notifications first, refuses a "
    "request when only requests are held, and memory stays flat",
    "[router][limits]") {
  StreamRouter r(byte_limits(1 << 20, 1 << 20));
  const auto before = rss_kib();
  // 128 MiB of notifications for a client that never opens a stream.
  std::size_t evicted = 0;
  for (int i = 0; i < 2048; ++i) {
    auto routed = r.route(big_notification(64 * 1024));
    CHECK(routed.to == To::backlog);
    evicted += routed.evicted.size();
    REQUIRE(r.backlog_bytes() <= (1u << 20));
  }
  CHECK(evicted > 2000);
  CHECK(r.backlog_size() < 20);
  const auto after = rss_kib();
  INFO("VmRSS before " << before << " KiB, after " << after << " KiB");
  // ASan keeps freed memory in quarantine: resident memory says nothing there.
  if (mcpmqtt::test::kRssMeaningful)
    CHECK(after < before + 16 * 1024);  // far below the 128 MiB that went through

  // Requests push the notifications out; once only requests are held, the next is refused.
  StreamRouter q(byte_limits(4000, 1 << 20));
  q.route(notification("n/a"));
  int id = 1;
  for (; id < 100; ++id) {
    auto routed = q.route(server_request(id));
    if (routed.to == To::nowhere) {
      CHECK(routed.refuse_request);
      CHECK(routed.why.find("4000 bytes) is full of requests") != std::string::npos);
      break;
    }
  }
  CHECK(id < 100);
  CHECK(q.backlog_bytes() <= 4000);
}

TEST_CASE(
    "router: a replay buffer is bounded in bytes, and a response it cannot keep for an absent "
    "client becomes a -32000 error for the same id, so every request is still answered",
    "[router][limits]") {
  StreamRouter r(byte_limits(1 << 20, 1 << 20));
  std::vector<Message> body;
  for (int i = 1; i <= 64; ++i)
    body.push_back(request(i));
  const auto s = open(r, body, sse(false));  // the client went away before the answers
  const auto before = rss_kib();
  std::size_t replaced = 0;
  for (int i = 1; i <= 64; ++i) {
    auto routed = r.route(big_result(i, 256 * 1024));  // 16 MiB of results in all
    replaced += routed.evicted.size();
    REQUIRE(r.held_bytes() <= (1u << 20) + 256 * 1024 + 1024);
  }
  CHECK(replaced > 50);
  const auto after = rss_kib();
  INFO("VmRSS before " << before << " KiB, after " << after << " KiB");
  // ASan keeps freed memory in quarantine: resident memory says nothing there.
  if (mcpmqtt::test::kRssMeaningful) CHECK(after < before + 8 * 1024);

  // The client comes back: one answer per request, the newest in full, the older ones errors.
  auto resumed = r.attach_from_start(s);
  REQUIRE(resumed.events.size() == 64);
  std::set<std::string> ids_seen;
  std::size_t errors = 0;
  for (const auto& e : resumed.events) {
    ids_seen.insert(e.message.id().to_json());
    if (e.message.kind() == mcpmqtt::jsonrpc::Kind::error) {
      ++errors;
      CHECK(e.message.error().code == -32000);
      CHECK(e.message.error().message.find("http.limits.replay_buffer_bytes") != std::string::npos);
    }
  }
  CHECK(ids_seen.size() == 64);
  CHECK(errors == replaced);
  CHECK(resumed.events.back().message.kind() == mcpmqtt::jsonrpc::Kind::result);
}

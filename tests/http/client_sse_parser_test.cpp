#include "http/client_sse_parser.hpp"

#include <catch2/catch.hpp>

using mcpmqtt::http::SseParser;
using Events = std::vector<SseParser::Event>;

namespace {

Events feed_whole(SseParser& p, std::string_view text) {
  Events out;
  REQUIRE(p.feed(text, out));
  return out;
}

// The same text fed one byte at a time must give the same events.
Events feed_bytes(SseParser& p, std::string_view text) {
  Events out;
  for (char c : text)
    REQUIRE(p.feed(std::string_view(&c, 1), out));
  return out;
}

// ... and in pieces of every size from 2 to 7.
Events feed_chunks(SseParser& p, std::string_view text, std::size_t size) {
  Events out;
  for (std::size_t i = 0; i < text.size(); i += size)
    REQUIRE(p.feed(text.substr(i, size), out));
  return out;
}

void same(const Events& a, const Events& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].type == b[i].type);
    CHECK(a[i].data == b[i].data);
    CHECK(a[i].id == b[i].id);
  }
}

constexpr std::string_view kStream =
    "\xEF\xBB\xBF"
    ": keep-alive comment\r\n"
    "id: 1\r\n"
    "retry: 2500\r\n"
    "data:\r\n"
    "\r\n"
    "event: message\n"
    "id: 2\n"
    "data: {\"jsonrpc\":\"2.0\",\n"
    "data:  \"method\":\"notifications/progress\"}\n"
    "\n"
    "data:no-space\r"
    "id\r"
    "\r"
    "event: other\r\n"
    "data: x\r\n"
    "\r\n"
    "data: incomplete, never dispatched";

}  // namespace

TEST_CASE("SSE parser: fields, multi-line data, ids, retry, comments", "[http][client]") {
  SseParser p(1024);
  const Events events = feed_whole(p, kStream);
  REQUIRE(events.size() == 4);
  // A `data:` line with no value makes an event with empty data (the priming event).
  CHECK(events[0].type == "message");
  CHECK(events[0].data.empty());
  CHECK(events[0].id == "1");
  CHECK(events[1].data == "{\"jsonrpc\":\"2.0\",\n \"method\":\"notifications/progress\"}");
  CHECK(events[1].id == "2");
  // `id` with no colon resets the last event id to empty.
  CHECK(events[2].data == "no-space");
  CHECK(events[2].id == "");
  CHECK(events[3].type == "other");
  CHECK(events[3].data == "x");
  CHECK(p.retry() == std::chrono::milliseconds(2500));
  CHECK(p.last_event_id().empty());
  CHECK_FALSE(p.failed());
}

TEST_CASE("SSE parser: byte by byte and in chunks gives the same events", "[http][client]") {
  SseParser whole(1024);
  const Events expected = feed_whole(whole, kStream);
  SseParser bytes(1024);
  same(feed_bytes(bytes, kStream), expected);
  for (std::size_t size = 2; size <= 7; ++size) {
    SseParser chunks(1024);
    INFO("chunk size " << size);
    same(feed_chunks(chunks, kStream, size), expected);
  }
}

TEST_CASE("SSE parser: a CRLF split between pieces is one line end", "[http][client]") {
  SseParser p(1024);
  Events out;
  REQUIRE(p.feed("data: a\r", out));
  REQUIRE(p.feed("\ndata: b\r", out));
  REQUIRE(p.feed("\n\r", out));
  REQUIRE(out.size() == 1);
  CHECK(out[0].data == "a\nb");
  REQUIRE(p.feed("\n", out));  // LF after CR: part of the CRLF that ended the event
  CHECK(out.size() == 1);
}

TEST_CASE("SSE parser: an id without data is committed (priming event)", "[http][client]") {
  SseParser p(1024);
  Events out;
  REQUIRE(p.feed("id: evt-7\nretry: 100\n\n", out));
  CHECK(out.empty());
  CHECK(p.last_event_id() == "evt-7");
  CHECK(p.retry() == std::chrono::milliseconds(100));
  // An id not yet followed by the blank line is not committed.
  REQUIRE(p.feed("id: evt-8\ndata: x\n", out));
  CHECK(p.last_event_id() == "evt-7");
  REQUIRE(p.feed("\n", out));
  CHECK(p.last_event_id() == "evt-8");
  REQUIRE(out.size() == 1);
  CHECK(out[0].id == "evt-8");
}

TEST_CASE("SSE parser: odd fields are ignored as WHATWG says", "[http][client]") {
  SseParser p(1024);
  Events out;
  using namespace std::string_view_literals;
  REQUIRE(p.feed("retry: 12x\nretry:\nunknown: 1\nid: a\0b\ndata:  two spaces\n\ndata\n\n"sv, out));
  REQUIRE(out.size() == 2);
  CHECK(out[0].data == " two spaces");  // only one leading space is removed
  CHECK(out[0].id.empty());             // an id containing NUL is ignored
  CHECK(out[1].data.empty());           // "data" with no colon: an empty value
  CHECK_FALSE(p.retry());
  Events more;
  REQUIRE(p.feed("retry: 99999999999999999999\n\n", more));
  CHECK(p.retry() == std::chrono::hours(24));
}

TEST_CASE("SSE parser: an event or a line over the limit fails the parser", "[http][client]") {
  SseParser small(16);
  Events out;
  CHECK(small.feed("data: 0123456789\n", out));
  CHECK_FALSE(small.feed("data: 0123456789\n", out));
  CHECK(small.failed());
  CHECK_FALSE(small.feed("\n", out));
  CHECK(out.empty());

  SseParser line(16);
  CHECK_FALSE(line.feed(": a comment that goes on and on", out));
  CHECK(line.failed());

  // Exactly at the limit is fine.
  SseParser exact(16);
  CHECK(exact.feed("data:0123456789a\n\n", out));
  REQUIRE(out.size() == 1);
  CHECK(out[0].data == "0123456789a");
}

TEST_CASE("SSE parser: a stream that is only a BOM or comments has no events", "[http][client]") {
  SseParser p(1024);
  Events out;
  REQUIRE(p.feed("\xEF\xBB", out));
  CHECK_FALSE(p.got_bytes());
  REQUIRE(p.feed("\xBF", out));
  CHECK_FALSE(p.got_bytes());
  REQUIRE(p.feed(":ping\n\n", out));
  CHECK(p.got_bytes());
  CHECK(out.empty());
  // A partial BOM followed by other bytes is data, not a BOM.
  SseParser q(1024);
  REQUIRE(q.feed("\xEF", out));
  REQUIRE(q.feed("data: x\n\n", out));
  REQUIRE(out.size() == 0);  // the line "\xEFdata: x" is an unknown field
}

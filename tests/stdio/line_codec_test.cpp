#include "stdio/line_codec.hpp"

#include <catch2/catch.hpp>

namespace mcpmqtt::stdio {
namespace {

using jsonrpc::Id;

TEST_CASE("parse_line: one message", "[stdio]") {
  const auto p = parse_line(R"({"jsonrpc":"2.0","id":1,"method":"ping"})", {});
  REQUIRE(p.messages.size() == 1);
  CHECK(p.rejected.empty());
  CHECK_FALSE(p.batch);
  CHECK(p.messages[0].method() == "ping");
  CHECK(p.line.empty());
}

TEST_CASE("parse_line: a batch keeps its order", "[stdio]") {
  const auto p = parse_line(
      R"([{"jsonrpc":"2.0","method":"a"}, {"jsonrpc":"2.0","id":"b","result":{}} ])", {});
  CHECK(p.batch);
  REQUIRE(p.messages.size() == 2);
  CHECK(p.messages[0].method() == "a");
  CHECK(p.messages[1].id() == Id::string("b"));
}

TEST_CASE("parse_line: what is rejected, and what is owed an answer", "[stdio]") {
  SECTION("invalid JSON: parse error, id null, answered") {
    const auto p = parse_line("Starting server...", {});
    REQUIRE(p.rejected.size() == 1);
    CHECK(p.messages.empty());
    CHECK(p.rejected[0].failure.error.code == jsonrpc::code::parse_error);
    CHECK(p.rejected[0].failure.id.is_null());
    CHECK(p.rejected[0].answer);
    CHECK(p.line == "Starting server...");
  }
  SECTION("an invalid request keeps its id") {
    const auto p = parse_line(R"({"jsonrpc":"2.0","id":"r1","method":""})", {});
    REQUIRE(p.rejected.size() == 1);
    CHECK(p.rejected[0].failure.error.code == jsonrpc::code::invalid_request);
    CHECK(p.rejected[0].failure.id == Id::string("r1"));
    CHECK(p.rejected[0].answer);
  }
  SECTION("a malformed response is not answered") {
    for (const char* text :
         {R"({"jsonrpc":"2.0","result":{}})", R"({"jsonrpc":"2.0","id":1,"error":{"message":"x"}})",
          R"({"jsonrpc":"2.0","id":1,"result":1,"error":{}})"}) {
      INFO(text);
      const auto p = parse_line(text, {});
      REQUIRE(p.rejected.size() == 1);
      CHECK_FALSE(p.rejected[0].answer);
    }
  }
  SECTION("a JSON value that is not an object is answered") {
    const auto p = parse_line("42", {});
    REQUIRE(p.rejected.size() == 1);
    CHECK(p.rejected[0].failure.error.code == jsonrpc::code::invalid_request);
    CHECK(p.rejected[0].answer);
  }
  SECTION("a batch with invalid elements: valid ones kept, each invalid one on its own") {
    const auto p = parse_line(
        R"([{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2},)"
        R"({"jsonrpc":"2.0","result":5},"x",{"jsonrpc":"2.0","method":"b","params":{"s":"],"}}])",
        {});
    CHECK(p.batch);
    REQUIRE(p.messages.size() == 2);
    CHECK(p.messages[0].method() == "a");
    CHECK(p.messages[1].method() == "b");
    REQUIRE(p.rejected.size() == 3);
    CHECK(p.rejected[0].failure.id == Id::integer(2));
    CHECK(p.rejected[0].failure.error.message.rfind("batch element 1: ", 0) == 0);
    CHECK(p.rejected[0].answer);
    CHECK_FALSE(p.rejected[1].answer);  // a response
    CHECK(p.rejected[2].failure.error.message.rfind("batch element 3: ", 0) == 0);
    CHECK(p.rejected[2].answer);
  }
  SECTION("an empty batch and a broken batch are rejected as a whole") {
    for (const char* text : {"[]", " [ ] ", R"([{"jsonrpc":"2.0","method":"a"},)"}) {
      INFO(text);
      const auto p = parse_line(text, {});
      CHECK(p.messages.empty());
      REQUIRE(p.rejected.size() == 1);
      CHECK(p.rejected[0].failure.id.is_null());
      CHECK(p.rejected[0].answer);
    }
  }
  SECTION("nesting beyond the limit inside a batch element") {
    jsonrpc::Limits limits;
    limits.max_depth = 5;
    const auto p = parse_line(
        R"([{"jsonrpc":"2.0","id":1,"method":"deep","params":{"a":{"b":{"c":{"d":{}}}}}},)"
        R"({"jsonrpc":"2.0","id":2,"method":"ok"}])",
        limits);
    REQUIRE(p.messages.size() == 1);
    CHECK(p.messages[0].id() == Id::integer(2));
    REQUIRE(p.rejected.size() == 1);
    CHECK(p.rejected[0].failure.error.message.find("nesting deeper") != std::string::npos);
  }
}

TEST_CASE("split_array_elements respects strings and nesting", "[stdio]") {
  const auto e = split_array_elements(R"( [ 1 , "a,]\"" , {"k":[1,2]}, [] ] )");
  REQUIRE(e.size() == 4);
  CHECK(e[0] == "1");
  CHECK(e[1] == R"("a,]\"")");
  CHECK(e[2] == R"({"k":[1,2]})");
  CHECK(e[3] == "[]");
  CHECK(split_array_elements("[]").empty());
  CHECK(split_array_elements("{}").empty());
  CHECK(split_array_elements("[1,").size() == 1);
}

TEST_CASE("excerpt escapes control bytes and cuts at a UTF-8 boundary", "[stdio]") {
  CHECK(excerpt("plain") == "plain");
  CHECK(excerpt("a\x1b[2Jb\tc") == "a\\x1b[2Jb\\x09c");
  CHECK(excerpt("abcdef", 3) == "abc… (6 bytes)");
  CHECK(excerpt("ab", 10, 5000) == "ab… (5000 bytes)");
  // "é" is two bytes; a cut in its middle backs up before it.
  CHECK(excerpt("aé", 2) == "a… (3 bytes)");
}

TEST_CASE("is_blank", "[stdio]") {
  CHECK(is_blank(""));
  CHECK(is_blank(" \t\r "));
  CHECK_FALSE(is_blank(" x "));
}

}  // namespace
}  // namespace mcpmqtt::stdio

TEST_CASE(
    "queue_full: a write queue is bounded in bytes and in messages, and a lone large line still "
    "goes",
    "[stdio]") {
  using mcpmqtt::stdio::queue_full;
  const mcpmqtt::stdio::QueueBound b{1000, 10};
  CHECK(queue_full("stdout", "why", b, 0, 0, 5000).empty());  // empty queue: any size
  CHECK(queue_full("stdout", "why", b, 900, 3, 100).empty());
  CHECK(queue_full("stdout", "why", b, 900, 3, 101) ==
        "stdout is full: 900 bytes wait to be written and 101 more would pass the limit of 1000 "
        "bytes; why");
  CHECK(queue_full("stdout", "why", b, 50, 9, 5).empty());
  CHECK(queue_full("the child's stdin", "the server is not reading its input", b, 50, 10, 5) ==
        "the child's stdin is full: 10 messages wait to be written, the limit; the server is not "
        "reading its input");
}

#include "bridge/jsonrpc/raw_json.hpp"

#include <catch2/catch.hpp>

using namespace mcpmqtt;

TEST_CASE("raw_json: members come back as written, in order", "[raw_json]") {
  const std::string text =
      R"( { "z" : 1 , "big":12345678901234567891,"s":"a\"}\u00e9","o":{"k":[1,{"x":"]"}]},)"
      R"("e":{},"n":null,"f":1.10 } )";
  auto m = raw_json::members(text);
  REQUIRE(m);
  REQUIRE(m->size() == 7);
  CHECK((*m)[0].name == "z");
  CHECK((*m)[0].value == "1");
  CHECK((*m)[1].value == "12345678901234567891");
  CHECK((*m)[2].value == R"("a\"}\u00e9")");
  CHECK((*m)[3].value == R"({"k":[1,{"x":"]"}]})");
  CHECK((*m)[4].value == "{}");
  CHECK((*m)[5].value == "null");
  CHECK((*m)[6].value == "1.10");
  CHECK(raw_json::member(text, "o") == std::optional<std::string_view>(R"({"k":[1,{"x":"]"}]})"));
  CHECK_FALSE(raw_json::member(text, "absent"));
  CHECK(raw_json::members("{}")->empty());
}

TEST_CASE("raw_json: what is not an object is refused", "[raw_json]") {
  CHECK_FALSE(raw_json::members("[1]"));
  CHECK_FALSE(raw_json::members(R"({"a":1)"));
  CHECK_FALSE(raw_json::members(R"({"a" 1})"));
  CHECK_FALSE(raw_json::members(R"({"a":"x)"));
  CHECK_FALSE(raw_json::members(""));
}

TEST_CASE("raw_json: a member's string value, escapes decoded, and anything else is not a string",
          "[raw_json]") {
  CHECK(raw_json::string_value(R"("2025-06-18")") == "2025-06-18");
  CHECK(raw_json::string_value(R"("")") == "");
  CHECK(raw_json::string_value(R"("a\"b\u00e9\n")") == "a\"b\xc3\xa9\n");
  CHECK_FALSE(raw_json::string_value("12"));
  CHECK_FALSE(raw_json::string_value("null"));
  CHECK_FALSE(raw_json::string_value(R"({"a":"b"})"));
  CHECK_FALSE(raw_json::string_value(R"(")"));
  CHECK_FALSE(raw_json::string_value(R"("a"b")"));
  const auto text = std::string(R"({"result":{"protocolVersion":"2025-11-25","x":1}})");
  const auto result = raw_json::member(text, "result");
  REQUIRE(result);
  CHECK(raw_json::string_value(*raw_json::member(*result, "protocolVersion")) == "2025-11-25");
  // A path: each member of the one before, nullopt where one is missing or not an object.
  CHECK(raw_json::member(text, {"result", "x"}) == "1");
  CHECK(raw_json::member(text, {"result", "protocolVersion"}) == R"("2025-11-25")");
  CHECK_FALSE(raw_json::member(text, {"result", "y"}));
  CHECK_FALSE(raw_json::member(text, {"result", "x", "z"}));
  CHECK_FALSE(raw_json::member(text, {"other", "x"}));
}

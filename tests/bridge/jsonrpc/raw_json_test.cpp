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

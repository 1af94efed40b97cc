#include "bridge/jsonrpc/json_access.hpp"

#include <catch2/catch.hpp>

using namespace mcpmqtt;

TEST_CASE("json_access: member finds a member and is safe on null and non-objects",
          "[json_access]") {
  rapidjson::Document d;
  d.Parse(R"({"params":{"_meta":{"progressToken":7}},"list":[1,2],"s":"x"})");
  REQUIRE(!d.HasParseError());
  const auto* token =
      jsonrpc::member(jsonrpc::member(jsonrpc::member(&d, "params"), "_meta"), "progressToken");
  REQUIRE(token);
  CHECK(token->GetInt() == 7);
  CHECK(jsonrpc::member(&d, "absent") == nullptr);
  CHECK(jsonrpc::member(nullptr, "params") == nullptr);
  CHECK(jsonrpc::member(jsonrpc::member(&d, "absent"), "x") == nullptr);
  CHECK(jsonrpc::member(jsonrpc::member(&d, "list"), "0") == nullptr);
  CHECK(jsonrpc::member(jsonrpc::member(&d, "s"), "x") == nullptr);
}

TEST_CASE("json_access: to_json writes compact text", "[json_access]") {
  rapidjson::Document d;
  d.Parse(R"( { "a" : [ 1 , "b" , null ] , "c" : { } } )");
  REQUIRE(!d.HasParseError());
  CHECK(jsonrpc::to_json(d) == R"({"a":[1,"b",null],"c":{}})");
  CHECK(jsonrpc::to_json(d["a"]) == R"([1,"b",null])");
}

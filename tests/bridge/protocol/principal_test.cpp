// The principal on MQTT: what MCP-META on CONNECT says of it (004 §User Property).
#include "bridge/protocol/principal.hpp"

#include <catch2/catch.hpp>

namespace bridge = mcpmqtt::bridge;

TEST_CASE(
    "004 §User Property MCP-META: an OAuth principal's issuer, subject and client id are merged "
    "into the configured meta, never its token",
    "[principal]") {
  bridge::Principal p;
  p.key = "oauth:https://auth.example|alice";
  p.issuer = "https://auth.example";
  p.subject = "alice";
  p.client_id = "desktop-app";
  p.scopes = {"mcp:all"};
  p.access_token = std::make_shared<const std::string>("eyJ.secret.token");
  const std::string meta = R"({"implementation":"mcp-mqtt-bridge","version":"1.0"})";
  CHECK(bridge::connect_meta_with(meta, p) ==
        R"({"implementation":"mcp-mqtt-bridge","version":"1.0","principal":)"
        R"({"iss":"https://auth.example","sub":"alice","client_id":"desktop-app"}})");
  // Without a client id, and replacing a configured "principal".
  p.client_id.clear();
  CHECK(bridge::connect_meta_with(R"({"principal":"configured","a":1})", p) ==
        R"({"a":1,"principal":{"iss":"https://auth.example","sub":"alice"}})");
  // Characters JSON must escape stay escaped.
  p.subject = "a\"b\\c";
  CHECK(bridge::connect_meta_with("{}", p) ==
        R"({"principal":{"iss":"https://auth.example","sub":"a\"b\\c"}})");
}

TEST_CASE("004 §User Property MCP-META: anonymous, static-token and stdio principals add nothing",
          "[principal]") {
  const std::string meta = R"({"implementation":"mcp-mqtt-bridge"})";
  CHECK(bridge::connect_meta_with(meta, bridge::Principal{}) == meta);
  CHECK(bridge::connect_meta_with(meta, bridge::Principal::keyed("token:9f86d081")) == meta);
  CHECK(bridge::connect_meta_with(meta, bridge::Principal::keyed("stdio")) == meta);
  bridge::Principal p;
  p.subject = "alice";
  CHECK(bridge::connect_meta_with("not an object", p) == "not an object");
}

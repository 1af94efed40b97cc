#include <catch2/catch.hpp>

#include "http/client_channel.hpp"

using namespace mcpmqtt;

TEST_CASE("upstream spec: built from an mcpServers entry", "[http][client]") {
  config::ServerEntry e;
  e.name = "tools/weather";
  e.url = "https://weather.example:8443/mcp?tenant=1";
  e.headers = {{"Authorization", "Bearer abc"}};
  e.tls_verify = false;
  auto spec = http::make_upstream_spec(e);
  REQUIRE(spec);
  CHECK(spec->name == "tools/weather");
  CHECK(spec->url.tls);
  CHECK(spec->url.host == "weather.example");
  CHECK(spec->url.port == 8443);
  CHECK(spec->url.target == "/mcp?tenant=1");
  REQUIRE(spec->headers.size() == 1);
  CHECK(spec->headers[0].first == "Authorization");
  CHECK(spec->headers[0].second == "Bearer abc");
  CHECK_FALSE(spec->tls_verify);
  CHECK(spec->ca_file.empty());
}

TEST_CASE("upstream spec: mistakes name the configuration key", "[http][client]") {
  config::ServerEntry e;
  e.name = "tools/x";
  e.url = "http://user:pw@h/mcp";
  auto bad_url = http::make_upstream_spec(e);
  REQUIRE_FALSE(bad_url);
  CHECK(bad_url.error().rfind("mcpServers.\"tools/x\".url: credentials in the URL", 0) == 0);

  e.url = "http://h/mcp";
  e.headers = {{"Host", "other"}};
  auto bad_header = http::make_upstream_spec(e);
  REQUIRE_FALSE(bad_header);
  CHECK(bad_header.error() ==
        "mcpServers.\"tools/x\".headers: header \"Host\" is set by the Streamable HTTP "
        "transport and cannot be configured");
}

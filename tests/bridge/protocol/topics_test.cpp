#include "bridge/protocol/topics.hpp"

#include <catch2/catch.hpp>

using namespace mcpmqtt::topics;

TEST_CASE("004 §Message Topics: every topic is built as the table says", "[topics]") {
  CHECK(server_control("sid1", "demo/everything") == "$mcp-server/sid1/demo/everything");
  CHECK(server_capability("sid1", "demo/everything") ==
        "$mcp-server/capability/sid1/demo/everything");
  CHECK(server_presence("sid1", "demo/everything") == "$mcp-server/presence/sid1/demo/everything");
  CHECK(server_presence_filter("#") == "$mcp-server/presence/+/#");
  CHECK(server_presence_filter("vehicle/+/status") == "$mcp-server/presence/+/vehicle/+/status");
  CHECK(client_presence("c-1") == "$mcp-client/presence/c-1");
  CHECK(client_capability("c-1") == "$mcp-client/capability/c-1");
  CHECK(rpc("c-1", "sid1", "demo/everything") == "$mcp-rpc/c-1/sid1/demo/everything");
}

TEST_CASE("every built topic parses back to its parts", "[topics]") {
  const std::string sid = "srv-9f", name = "a/b/c", cid = "cli.7";
  auto p = parse(server_control(sid, name));
  REQUIRE(p);
  CHECK(p->kind == Kind::server_control);
  CHECK(p->server_id == sid);
  CHECK(p->server_name == name);

  p = parse(server_capability(sid, name));
  REQUIRE(p);
  CHECK(p->kind == Kind::server_capability);
  CHECK(p->server_id == sid);
  CHECK(p->server_name == name);

  p = parse(server_presence(sid, name));
  REQUIRE(p);
  CHECK(p->kind == Kind::server_presence);
  CHECK(p->server_id == sid);
  CHECK(p->server_name == name);

  p = parse(client_presence(cid));
  REQUIRE(p);
  CHECK(p->kind == Kind::client_presence);
  CHECK(p->client_id == cid);

  p = parse(client_capability(cid));
  REQUIRE(p);
  CHECK(p->kind == Kind::client_capability);
  CHECK(p->client_id == cid);

  p = parse(rpc(cid, sid, name));
  REQUIRE(p);
  CHECK(p->kind == Kind::rpc);
  CHECK(p->client_id == cid);
  CHECK(p->server_id == sid);
  CHECK(p->server_name == name);
}

TEST_CASE("topics outside the scheme, or with invalid parts, do not parse", "[topics]") {
  for (const char* t : {
           "",
           "x",
           "$mcp-server",
           "$mcp-server/",
           "$mcp-server/sid",
           "$mcp-server/sid/",
           "$mcp-server/sid/a//b",
           "$mcp-server/capability/sid",
           "$mcp-server/presence/sid",
           "$mcp-server/presence/+/#",
           "$mcp-client/presence/",
           "$mcp-client/presence/a/b",
           "$mcp-client/capability/a+b",
           "$mcp-rpc/c/s",
           "$mcp-rpc/c",
           "$mcp-rpc//s/n",
           "$mcp-rpc/c/s/",
           "mcp-server/sid/name",
           "$MCP-SERVER/sid/name",
       }) {
    INFO(t);
    CHECK_FALSE(parse(t));
  }
}

TEST_CASE("ids: no slash, plus or hash, and server-ids are not the reserved words", "[topics]") {
  CHECK(is_valid_id("mcp-bridge-1a2b"));
  CHECK(is_valid_id("UPPER_and.dots-and:colons"));
  CHECK(check_id("") == "must not be empty");
  CHECK(check_id("a/b") == "must not contain '/', '+' or '#'");
  CHECK(check_id("a+b") == "must not contain '/', '+' or '#'");
  CHECK(check_id("a#b") == "must not contain '/', '+' or '#'");
  CHECK(check_id(std::string("a\0b", 3)) == "must be UTF-8 without NUL characters");
  CHECK(check_id("\xc3\x28") == "must be UTF-8 without NUL characters");
  CHECK(check_id(std::string(257, 'x')) == "must be at most 256 bytes");
  CHECK(is_valid_id("caf\xc3\xa9"));
  CHECK(is_valid_id("capability"));  // fine as a client id
  CHECK_FALSE(is_valid_server_id("capability"));
  CHECK_FALSE(is_valid_server_id("presence"));
  CHECK(is_valid_server_id("capabilities"));
}

TEST_CASE("server-names are '/'-separated levels without wildcards", "[topics]") {
  CHECK(is_valid_server_name("demo"));
  CHECK(is_valid_server_name("server-type/sub-type/name"));
  CHECK(is_valid_server_name("with space/ok"));
  CHECK(check_server_name("") == "must not be empty");
  CHECK(check_server_name("a/+/b") == "must not contain '+' or '#'");
  CHECK(check_server_name("a/#") == "must not contain '+' or '#'");
  for (const char* n : {"/a", "a/", "a//b", "/"}) {
    INFO(n);
    CHECK(check_server_name(n) ==
          "must be levels separated by single '/', with no empty level (like type/sub-type/name)");
  }
}

TEST_CASE("server-name filters follow MQTT wildcard rules", "[topics]") {
  for (const char* f : {"#", "+", "a/#", "a/+/c", "+/+", "a/b", "+/#"}) {
    INFO(f);
    CHECK(is_valid_server_name_filter(f));
  }
  CHECK(check_server_name_filter("") == "must not be empty");
  CHECK(check_server_name_filter("a/#/b") == "'#' must be a whole level and the last one");
  CHECK(check_server_name_filter("a#") == "'#' must be a whole level and the last one");
  CHECK(check_server_name_filter("a+/b") == "'+' must be a whole level");
}

TEST_CASE("filter matching (MQTT 5.0 §4.7)", "[topics]") {
  struct Case {
    const char* filter;
    const char* name;
    bool match;
  };
  const Case cases[] = {
      {"#", "a", true},         {"#", "a/b/c", true},      {"a/#", "a", true},
      {"a/#", "a/b", true},     {"a/#", "b", false},       {"+", "a", true},
      {"+", "a/b", false},      {"a/+", "a/b", true},      {"a/+", "a/b/c", false},
      {"a/+/c", "a/b/c", true}, {"a/+/c", "a/b/d", false}, {"+/+/+", "a/b/c", true},
      {"a/b", "a/b", true},     {"a/b", "a/bc", false},    {"a/b", "a", false},
      {"a/+/#", "a/b", true},   {"a/+/#", "a", false},     {"vehicle/#", "vehicles/x", false},
  };
  for (const auto& c : cases) {
    INFO(c.filter << " vs " << c.name);
    CHECK(filter_matches(c.filter, c.name) == c.match);
  }
}

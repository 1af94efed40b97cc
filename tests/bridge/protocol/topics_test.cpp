#include "bridge/protocol/topics.hpp"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

using namespace mcpmqtt::topics;

namespace {
const Scheme kStd;  // 004's own prefix, $mcp-
}  // namespace

TEST_CASE("004 §Message Topics: every topic is built as the table says", "[topics]") {
  CHECK(kStd.server_control("sid1", "demo/everything") == "$mcp-server/sid1/demo/everything");
  CHECK(kStd.server_capability("sid1", "demo/everything") ==
        "$mcp-server/capability/sid1/demo/everything");
  CHECK(kStd.server_presence("sid1", "demo/everything") ==
        "$mcp-server/presence/sid1/demo/everything");
  CHECK(kStd.server_presence_filter("#") == "$mcp-server/presence/+/#");
  CHECK(kStd.server_presence_filter("vehicle/+/status") ==
        "$mcp-server/presence/+/vehicle/+/status");
  // 004 §Message Topics: the capability topic under a server-name filter.
  CHECK(kStd.server_capability_filter("vehicle/+/status") ==
        "$mcp-server/capability/+/vehicle/+/status");
  CHECK(kStd.client_presence("c-1") == "$mcp-client/presence/c-1");
  CHECK(kStd.client_capability("c-1") == "$mcp-client/capability/c-1");
  CHECK(kStd.rpc("c-1", "sid1", "demo/everything") == "$mcp-rpc/c-1/sid1/demo/everything");
}

TEST_CASE("every built topic parses back to its parts", "[topics]") {
  const std::string sid = "srv-9f", name = "a/b/c", cid = "cli.7";
  auto p = kStd.parse(kStd.server_control(sid, name));
  REQUIRE(p);
  CHECK(p->kind == Kind::server_control);
  CHECK(p->server_id == sid);
  CHECK(p->server_name == name);

  p = kStd.parse(kStd.server_capability(sid, name));
  REQUIRE(p);
  CHECK(p->kind == Kind::server_capability);
  CHECK(p->server_id == sid);
  CHECK(p->server_name == name);

  p = kStd.parse(kStd.server_presence(sid, name));
  REQUIRE(p);
  CHECK(p->kind == Kind::server_presence);
  CHECK(p->server_id == sid);
  CHECK(p->server_name == name);

  p = kStd.parse(kStd.client_presence(cid));
  REQUIRE(p);
  CHECK(p->kind == Kind::client_presence);
  CHECK(p->client_id == cid);

  p = kStd.parse(kStd.client_capability(cid));
  REQUIRE(p);
  CHECK(p->kind == Kind::client_capability);
  CHECK(p->client_id == cid);

  p = kStd.parse(kStd.rpc(cid, sid, name));
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
    CHECK_FALSE(kStd.parse(t));
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

TEST_CASE(
    "ids, server-names and filters are well-formed UTF-8: no overlong form, surrogate "
    "or code point above U+10FFFF (MQTT 5.0 §1.5.4)",
    "[topics]") {
  // tests/fuzz/topics_fuzzer checks against a decoding validator (corpus regression-topics-*):
  // these passed, and the broker refuses a topic holding them (a configured server-name then
  // never comes online).
  for (const char* wrong : {"\xed\xa0\x80", "\xed\xbf\xbf", "\xe0\x80\x80", "\xe0\x9f\xbf",
                            "\xf0\x80\x80\x80", "\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80",
                            "\xf5\x80\x80\x80", "\xf8\x88\x80\x80\x80", "\xc1\xbf"}) {
    const std::string s = std::string("a") + wrong;
    INFO(s);
    CHECK(check_id(s) == "must be UTF-8 without NUL characters");
    CHECK(check_server_name(s) == "must be UTF-8 without NUL characters");
    CHECK(check_server_name_filter(s) == "must be UTF-8 without NUL characters");
    CHECK_FALSE(kStd.parse(kStd.rpc("c", "s", s)));
  }
  // The edges that are allowed.
  for (const char* right : {"\xc2\x80", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xee\x80\x80",
                            "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf"}) {
    INFO(right);
    CHECK(is_valid_id(right));
    CHECK(is_valid_server_name(right));
  }
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

TEST_CASE("mqtt.topic_prefix: all six families, and the bridge's own, under another prefix",
          "[topics]") {
  const Scheme s("acme/mcp-");
  CHECK(s.prefix() == "acme/mcp-");
  CHECK(s.server_control("sid1", "demo/x") == "acme/mcp-server/sid1/demo/x");
  CHECK(s.server_capability("sid1", "demo/x") == "acme/mcp-server/capability/sid1/demo/x");
  CHECK(s.server_presence("sid1", "demo/x") == "acme/mcp-server/presence/sid1/demo/x");
  CHECK(s.server_presence_filter("#") == "acme/mcp-server/presence/+/#");
  CHECK(s.server_capability_filter("#") == "acme/mcp-server/capability/+/#");
  CHECK(s.client_presence("c-1") == "acme/mcp-client/presence/c-1");
  CHECK(s.client_capability("c-1") == "acme/mcp-client/capability/c-1");
  CHECK(s.rpc("c-1", "sid1", "demo/x") == "acme/mcp-rpc/c-1/sid1/demo/x");
  CHECK(s.bridge("relay/r1/request") == "acme/mcp-bridge/relay/r1/request");
  CHECK(kStd.bridge("replica/r1") == "$mcp-bridge/replica/r1");

  auto p = s.parse(s.rpc("c-1", "sid1", "demo/x"));
  REQUIRE(p);
  CHECK(p->kind == Kind::rpc);
  CHECK(p->client_id == "c-1");
  CHECK(p->server_name == "demo/x");
  p = s.parse(s.server_presence("sid1", "demo/x"));
  REQUIRE(p);
  CHECK(p->kind == Kind::server_presence);
  // A topic of another prefix is not ours, either way round.
  CHECK_FALSE(s.parse(kStd.rpc("c-1", "sid1", "demo/x")));
  CHECK_FALSE(kStd.parse(s.rpc("c-1", "sid1", "demo/x")));
  CHECK_FALSE(Scheme("mcp-").parse("acme/mcp-server/sid1/demo/x"));
}

TEST_CASE("mqtt.topic_prefix: what a prefix may hold", "[topics]") {
  CHECK(check_prefix("$mcp-").empty());
  CHECK(check_prefix("mcp-").empty());
  CHECK(check_prefix("acme/mcp-").empty());
  CHECK(check_prefix("tenant/a/").empty());
  CHECK_FALSE(check_prefix("").empty());
  CHECK_FALSE(check_prefix("a+/").empty());
  CHECK_FALSE(check_prefix("a/#/").empty());
  CHECK_FALSE(check_prefix(std::string("a\0b", 3)).empty());
  CHECK_FALSE(check_prefix("\xC0\xAF").empty());  // overlong '/'
  CHECK_FALSE(check_prefix(std::string(257, 'a')).empty());
  CHECK_THROWS_AS(Scheme("x/+/"), std::invalid_argument);
}

TEST_CASE("topics: the fast checks of every message agree with the ones that give reasons",
          "[topics]") {
  const std::vector<std::string> samples = {"",
                                            "a",
                                            "a/b",
                                            "/a",
                                            "a/",
                                            "a//b",
                                            "a/b/c",
                                            "a+b",
                                            "a#",
                                            "caf\xc3\xa9",
                                            "bad\xc3",
                                            std::string("nul\0x", 5),
                                            std::string(256, 'x'),
                                            std::string(257, 'x'),
                                            std::string(1024, 'y'),
                                            std::string(1025, 'y'),
                                            "type/sub-type/name",
                                            "with space/ok",
                                            "//"};
  for (const auto& s : samples) {
    INFO(s);
    CHECK(mcpmqtt::topics::is_valid_id(s) == mcpmqtt::topics::check_id(s).empty());
    CHECK(mcpmqtt::topics::is_valid_server_name(s) ==
          mcpmqtt::topics::check_server_name(s).empty());
  }
}

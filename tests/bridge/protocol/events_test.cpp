#include "bridge/protocol/events.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

using mcpmqtt::events::covering;
using mcpmqtt::events::covers;

TEST_CASE(
    "SEP-1803 §In-Band: a subscription covers its own URI and its sub-resources after '/', '?' "
    "or '#'",
    "[events]") {
  CHECK(covers("event://x/tick", "event://x/tick"));
  CHECK(covers("event://x/tick", "event://x/tick/7"));
  CHECK(covers("event://x/tick", "event://x/tick/7/8"));
  CHECK(covers("event://x/tick", "event://x/tick?a=1"));
  CHECK(covers("event://x/tick", "event://x/tick#f"));
  CHECK(covers("event://x/tick", "event://x/tick/"));
  CHECK(covers("event://x/tick/", "event://x/tick//a"));
}

TEST_CASE(
    "SEP-1803 §In-Band: the other side of the boundary — a longer name, a shorter one, another "
    "resource",
    "[events]") {
  CHECK_FALSE(covers("event://x/tick", "event://x/ticks"));
  CHECK_FALSE(covers("event://x/tick", "event://x/tic"));
  CHECK_FALSE(covers("event://x/tick", "event://x/tick-7"));
  CHECK_FALSE(covers("event://x/tick", "event://x/tock/7"));
  CHECK_FALSE(covers("event://x/tick/7", "event://x/tick"));
  CHECK_FALSE(covers("event://x/tick", "event://y/tick/7"));
  CHECK_FALSE(covers("event://x/tick", ""));
  CHECK_FALSE(covers("event://x/tick?a=1", "event://x/tick?a=12"));
}

TEST_CASE("covering() lists exactly the URIs whose subscriptions cover an update", "[events]") {
  const std::string u = "event://x/tick/7?a=1#f";
  const auto c = covering(u);
  CHECK(std::vector<std::string>(c.begin(), c.end()) ==
        std::vector<std::string>{u, "event://x/tick/7?a=1", "event://x/tick/7", "event://x/tick",
                                 "event://x", "event:/", "event:"});
  for (auto s : c)
    CHECK(covers(s, u));
  // Every covering prefix is in the list: none of the others covers it.
  for (std::size_t n = 0; n <= u.size(); ++n) {
    const auto s = std::string_view(u).substr(0, n);
    const bool listed = std::find(c.begin(), c.end(), s) != c.end();
    CHECK(listed == covers(s, u));
  }
}

TEST_CASE(
    "SEP-1803 §Event Resources: an event URI matches the RFC 6570 templates it is an expansion "
    "of, and no others",
    "[events]") {
  using mcpmqtt::events::template_matches;
  CHECK(template_matches("event://orders/{id}", "event://orders/42"));
  CHECK(template_matches("event://orders/{id}", "event://orders/"));  // an undefined variable
  CHECK_FALSE(template_matches("event://orders/{id}", "event://orders/42/lines"));
  CHECK_FALSE(template_matches("event://orders/{id}", "event://order/42"));
  CHECK(template_matches("event://orders/{id}/lines/{line}", "event://orders/7/lines/3"));
  CHECK_FALSE(template_matches("event://orders/{id}/lines/{line}", "event://orders/7/items/3"));
  CHECK(template_matches("event://files{+path}", "event://files/a/b/c.txt"));
  CHECK(template_matches("event://files{/dir,name}", "event://files/a/b"));
  CHECK(template_matches("event://search{?q,lang}", "event://search?q=x&lang=en"));
  CHECK_FALSE(template_matches("event://search{?q}", "event://search#q"));
  CHECK(template_matches("event://doc{#section}", "event://doc#intro"));
  CHECK(template_matches("event://x/tick", "event://x/tick"));  // no expression at all
  CHECK_FALSE(template_matches("event://x/tick", "event://x/tick/7"));
  // Ill-formed templates match nothing.
  CHECK_FALSE(template_matches("event://orders/{id", "event://orders/{id"));
  CHECK_FALSE(template_matches("event://orders/id}", "event://orders/id}"));
  CHECK_FALSE(template_matches("event://orders/{}", "event://orders/"));
}

TEST_CASE(
    "subscription:// resources are appended to a resources/list result, every byte of the "
    "server's own entries as written",
    "[events]") {
  using mcpmqtt::events::with_resources_appended;
  const std::string server =
      R"({"resources":[{"uri":"event://x/tick","name":"tick","_meta":{"eventSchema":{"type":"object"}},"n":18446744073709551617}],"_meta":{"k":1}})";
  const std::string ours = R"({"uri":"subscription://a1","name":"webhook a1"})";
  CHECK(
      with_resources_appended(server, ours) ==
      R"({"resources":[{"uri":"event://x/tick","name":"tick","_meta":{"eventSchema":{"type":"object"}},"n":18446744073709551617},{"uri":"subscription://a1","name":"webhook a1"}],"_meta":{"k":1}})");
  CHECK(with_resources_appended(R"({"resources": [ ]})", ours) ==
        R"({"resources": [ {"uri":"subscription://a1","name":"webhook a1"}]})");
  CHECK(with_resources_appended(server, "") == server);
  CHECK_FALSE(with_resources_appended(R"({"tools":[]})", ours));
  CHECK_FALSE(with_resources_appended(R"({"resources":{}})", ours));
}

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

#include "stdio/child_lifecycle.hpp"

#include <catch2/catch.hpp>

using namespace mcpmqtt::stdio;
using S = ChildState;

TEST_CASE("child lifecycle: the ending goes stdin, SIGTERM, SIGKILL, exit, release",
          "[child_lifecycle]") {
  ChildLifecycle life;
  CHECK(life.state() == S::running);
  CHECK(life.stdin_open());
  CHECK_FALSE(life.ending());
  REQUIRE(life.advance(S::flushing));
  CHECK(life.stdin_open());
  CHECK(life.ending());
  REQUIRE(life.advance(S::stdin_closed));
  CHECK_FALSE(life.stdin_open());
  REQUIRE(life.advance(S::term_sent));
  REQUIRE(life.advance(S::kill_sent));
  CHECK(life.ending());
  CHECK_FALSE(life.reaped());
  REQUIRE(life.advance(S::reaped));
  CHECK(life.reaped());
  CHECK_FALSE(life.ending());
  CHECK_FALSE(life.finished());
  REQUIRE(life.advance(S::finished));
  CHECK(life.reaped());
  CHECK(life.finished());
}

TEST_CASE("child lifecycle: the exit may come at any stage before it", "[child_lifecycle]") {
  for (S at :
       {S::running, S::stdin_lost, S::flushing, S::stdin_closed, S::term_sent, S::kill_sent}) {
    CAPTURE(to_string(at));
    CHECK(ChildLifecycle::allowed(at, S::reaped));
  }
  ChildLifecycle life;
  REQUIRE(life.advance(S::reaped));
  CHECK_FALSE(life.stdin_open());
  CHECK(life.advance(S::finished));
}

TEST_CASE("child lifecycle: a child that stops reading loses its stdin, then is ended",
          "[child_lifecycle]") {
  ChildLifecycle life;
  REQUIRE(life.advance(S::stdin_lost));
  CHECK_FALSE(life.stdin_open());
  CHECK_FALSE(life.ending());
  CHECK_FALSE(life.advance(S::flushing));  // nothing is left to flush
  REQUIRE(life.advance(S::stdin_closed));
  CHECK(life.ending());
}

TEST_CASE("child lifecycle: an illegal transition is refused and changes nothing",
          "[child_lifecycle]") {
  ChildLifecycle life;
  CHECK_FALSE(life.advance(S::term_sent));  // SIGTERM before stdin is closed
  CHECK_FALSE(life.advance(S::kill_sent));
  CHECK_FALSE(life.advance(S::finished));  // released before the child is reaped
  CHECK_FALSE(life.advance(S::running));
  CHECK(life.state() == S::running);

  REQUIRE(life.advance(S::stdin_closed));
  REQUIRE(life.advance(S::term_sent));
  CHECK_FALSE(life.advance(S::stdin_closed));  // no way back
  CHECK_FALSE(life.advance(S::term_sent));     // nor staying put
  CHECK(life.state() == S::term_sent);

  REQUIRE(life.advance(S::reaped));
  CHECK_FALSE(life.advance(S::reaped));  // reaped once
  CHECK_FALSE(life.advance(S::kill_sent));
  REQUIRE(life.advance(S::finished));
  for (S to : {S::running, S::stdin_lost, S::flushing, S::stdin_closed, S::term_sent, S::kill_sent,
               S::reaped, S::finished}) {
    CAPTURE(to_string(to));
    CHECK_FALSE(life.advance(to));
  }
  CHECK(life.state() == S::finished);
}

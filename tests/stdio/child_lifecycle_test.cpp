#include "stdio/child_lifecycle.hpp"

#include <catch2/catch.hpp>

using namespace mcpmqtt::stdio;

TEST_CASE("child lifecycle: the ending goes stdin, SIGTERM, SIGKILL, exit, release",
          "[child_lifecycle]") {
  ChildLifecycle life;
  CHECK(life.state() == ChildState::running);
  CHECK(life.stdin_open());
  CHECK_FALSE(life.ending());
  REQUIRE(life.advance(ChildState::flushing));
  CHECK(life.stdin_open());
  CHECK(life.ending());
  REQUIRE(life.advance(ChildState::stdin_closed));
  CHECK_FALSE(life.stdin_open());
  REQUIRE(life.advance(ChildState::term_sent));
  REQUIRE(life.advance(ChildState::kill_sent));
  CHECK(life.ending());
  CHECK_FALSE(life.reaped());
  REQUIRE(life.advance(ChildState::reaped));
  CHECK(life.reaped());
  CHECK_FALSE(life.ending());
  CHECK_FALSE(life.finished());
  REQUIRE(life.advance(ChildState::finished));
  CHECK(life.reaped());
  CHECK(life.finished());
}

TEST_CASE("child lifecycle: the exit may come at any stage before it", "[child_lifecycle]") {
  for (S at : {ChildState::running, ChildState::stdin_lost, ChildState::flushing,
               ChildState::stdin_closed, ChildState::term_sent, ChildState::kill_sent}) {
    CAPTURE(to_string(at));
    CHECK(ChildLifecycle::allowed(at, ChildState::reaped));
  }
  ChildLifecycle life;
  REQUIRE(life.advance(ChildState::reaped));
  CHECK_FALSE(life.stdin_open());
  CHECK(life.advance(ChildState::finished));
}

TEST_CASE("child lifecycle: a child that stops reading loses its stdin, then is ended",
          "[child_lifecycle]") {
  ChildLifecycle life;
  REQUIRE(life.advance(ChildState::stdin_lost));
  CHECK_FALSE(life.stdin_open());
  CHECK_FALSE(life.ending());
  CHECK_FALSE(life.advance(ChildState::flushing));  // nothing is left to flush
  REQUIRE(life.advance(ChildState::stdin_closed));
  CHECK(life.ending());
}

TEST_CASE("child lifecycle: an illegal transition is refused and changes nothing",
          "[child_lifecycle]") {
  ChildLifecycle life;
  CHECK_FALSE(life.advance(ChildState::term_sent));  // SIGTERM before stdin is closed
  CHECK_FALSE(life.advance(ChildState::kill_sent));
  CHECK_FALSE(life.advance(ChildState::finished));  // released before the child is reaped
  CHECK_FALSE(life.advance(ChildState::running));
  CHECK(life.state() == ChildState::running);

  REQUIRE(life.advance(ChildState::stdin_closed));
  REQUIRE(life.advance(ChildState::term_sent));
  CHECK_FALSE(life.advance(ChildState::stdin_closed));  // no way back
  CHECK_FALSE(life.advance(ChildState::term_sent));     // nor staying put
  CHECK(life.state() == ChildState::term_sent);

  REQUIRE(life.advance(ChildState::reaped));
  CHECK_FALSE(life.advance(ChildState::reaped));  // reaped once
  CHECK_FALSE(life.advance(ChildState::kill_sent));
  REQUIRE(life.advance(ChildState::finished));
  for (S to :
       {ChildState::running, ChildState::stdin_lost, ChildState::flushing, ChildState::stdin_closed,
        ChildState::term_sent, ChildState::kill_sent, ChildState::reaped, ChildState::finished}) {
    CAPTURE(to_string(to));
    CHECK_FALSE(life.advance(to));
  }
  CHECK(life.state() == ChildState::finished);
}

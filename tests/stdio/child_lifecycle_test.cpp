#include "stdio/child_lifecycle.hpp"

#include <catch2/catch.hpp>

using namespace mcpmqtt::stdio;
using LifeState = ChildState;  // unity batches: a name of this file's own

TEST_CASE("child lifecycle: the ending goes stdin, SIGTERM, SIGKILL, exit, release",
          "[child_lifecycle]") {
  ChildLifecycle life;
  CHECK(life.state() == LifeState::running);
  CHECK(life.stdin_open());
  CHECK_FALSE(life.ending());
  REQUIRE(life.advance(LifeState::flushing));
  CHECK(life.stdin_open());
  CHECK(life.ending());
  REQUIRE(life.advance(LifeState::stdin_closed));
  CHECK_FALSE(life.stdin_open());
  REQUIRE(life.advance(LifeState::term_sent));
  REQUIRE(life.advance(LifeState::kill_sent));
  CHECK(life.ending());
  CHECK_FALSE(life.reaped());
  REQUIRE(life.advance(LifeState::reaped));
  CHECK(life.reaped());
  CHECK_FALSE(life.ending());
  CHECK_FALSE(life.finished());
  REQUIRE(life.advance(LifeState::finished));
  CHECK(life.reaped());
  CHECK(life.finished());
}

TEST_CASE("child lifecycle: the exit may come at any stage before it", "[child_lifecycle]") {
  for (LifeState at : {LifeState::running, LifeState::stdin_lost, LifeState::flushing,
                       LifeState::stdin_closed, LifeState::term_sent, LifeState::kill_sent}) {
    CAPTURE(to_string(at));
    CHECK(ChildLifecycle::allowed(at, LifeState::reaped));
  }
  ChildLifecycle life;
  REQUIRE(life.advance(LifeState::reaped));
  CHECK_FALSE(life.stdin_open());
  CHECK(life.advance(LifeState::finished));
}

TEST_CASE("child lifecycle: a child that stops reading loses its stdin, then is ended",
          "[child_lifecycle]") {
  ChildLifecycle life;
  REQUIRE(life.advance(LifeState::stdin_lost));
  CHECK_FALSE(life.stdin_open());
  CHECK_FALSE(life.ending());
  CHECK_FALSE(life.advance(LifeState::flushing));  // nothing is left to flush
  REQUIRE(life.advance(LifeState::stdin_closed));
  CHECK(life.ending());
}

TEST_CASE("child lifecycle: an illegal transition is refused and changes nothing",
          "[child_lifecycle]") {
  ChildLifecycle life;
  CHECK_FALSE(life.advance(LifeState::term_sent));  // SIGTERM before stdin is closed
  CHECK_FALSE(life.advance(LifeState::kill_sent));
  CHECK_FALSE(life.advance(LifeState::finished));  // released before the child is reaped
  CHECK_FALSE(life.advance(LifeState::running));
  CHECK(life.state() == LifeState::running);

  REQUIRE(life.advance(LifeState::stdin_closed));
  REQUIRE(life.advance(LifeState::term_sent));
  CHECK_FALSE(life.advance(LifeState::stdin_closed));  // no way back
  CHECK_FALSE(life.advance(LifeState::term_sent));     // nor staying put
  CHECK(life.state() == LifeState::term_sent);

  REQUIRE(life.advance(LifeState::reaped));
  CHECK_FALSE(life.advance(LifeState::reaped));  // reaped once
  CHECK_FALSE(life.advance(LifeState::kill_sent));
  REQUIRE(life.advance(LifeState::finished));
  for (LifeState to :
       {LifeState::running, LifeState::stdin_lost, LifeState::flushing, LifeState::stdin_closed,
        LifeState::term_sent, LifeState::kill_sent, LifeState::reaped, LifeState::finished}) {
    CAPTURE(to_string(to));
    CHECK_FALSE(life.advance(to));
  }
  CHECK(life.state() == LifeState::finished);
}

#include "common/time_grid.hpp"

#include <catch2/catch.hpp>

using mcpmqtt::on_grid;
using namespace std::chrono_literals;

TEST_CASE(
    "time grid (issue 34): an instant goes to the step at or after it (up) or at or before it "
    "(down), one on a step stays, and no grid leaves it as it is",
    "[common][time_grid]") {
  using T = std::chrono::steady_clock::time_point;
  const T on_step{100s};
  const T between{100s + 300ms};
  CHECK(on_grid(between, 1s, true) == T{101s});
  CHECK(on_grid(between, 1s, false) == T{100s});
  CHECK(on_grid(on_step, 1s, true) == on_step);
  CHECK(on_grid(on_step, 1s, false) == on_step);
  CHECK(on_grid(between, 250ms, true) == T{100s + 500ms});
  CHECK(on_grid(between, 250ms, false) == T{100s + 250ms});
  CHECK(on_grid(between, 0ms, true) == between);
}

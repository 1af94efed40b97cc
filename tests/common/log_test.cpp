// log::Throttle: one line per interval, and how many were held back.
#include "common/log.hpp"

#include <thread>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;

TEST_CASE(
    "log throttle: the first line passes, repeats within the interval are counted, the "
    "next line that passes says how many",
    "[log]") {
  mcpmqtt::log::Throttle t(30ms);
  std::size_t held_back = 99;
  CHECK(t.allow(held_back));
  CHECK(held_back == 0);
  std::size_t denied = 0;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!t.allow(held_back) && std::chrono::steady_clock::now() < deadline) {
    ++denied;
    std::this_thread::sleep_for(1ms);
  }
  CHECK(denied > 0);
  CHECK(held_back == denied);
  // Right after a line got through, the next repeat is held back again.
  std::size_t unused = 0;
  CHECK_FALSE(t.allow(unused));
}

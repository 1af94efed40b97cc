// Waiting on a condition instead of sleeping: for effects a test cannot await directly (a
// directory updated on another thread, a child process that appeared, a connection the server
// noticed closing).
#pragma once

#include <chrono>
#include <thread>

namespace mcpmqtt::test {

// Checks `pred` every `every` until it holds (true) or `timeout` has passed (then one last
// check decides).
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(15),
                std::chrono::milliseconds every = std::chrono::milliseconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(every);
  }
  return pred();
}

}  // namespace mcpmqtt::test

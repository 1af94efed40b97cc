#include "tests/support/io.hpp"

#include <chrono>
#include <thread>

namespace mcpmqtt::test {

IoThreads::IoThreads(int threads) {
  work_.emplace(ioc_.get_executor());
  for (int i = 0; i < threads; ++i)
    threads_.emplace_back([this] { ioc_.run(); });
}

IoThreads::~IoThreads() {
  work_.reset();
  // Let what is under way finish first: a session's DISCONNECT, whose completion holds the
  // session until the broker has seen it leave, deferred Paho destruction… An operation stopped
  // half-way leaves its owner in a cycle with its stored completion, which LeakSanitizer reports
  // at exit. The threads return once nothing is left to run; bounded (a test may leave a connection
  // open: its keep-alive timer never ends).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (!ioc_.stopped() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ioc_.stop();
  for (auto& t : threads_)
    t.join();
}

}  // namespace mcpmqtt::test

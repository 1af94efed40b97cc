#include "tests/support/io.hpp"

namespace mcpmqtt::test {

IoThreads::IoThreads(int threads) {
  work_.emplace(ioc_.get_executor());
  for (int i = 0; i < threads; ++i)
    threads_.emplace_back([this] { ioc_.run(); });
}

IoThreads::~IoThreads() {
  work_.reset();
  // Let pending handlers (deferred Paho destruction among them) finish; bound the wait.
  ioc_.stop();
  for (auto& t : threads_)
    t.join();
}

}  // namespace mcpmqtt::test

// A way for foreign threads (Paho's) to post onto an Asio executor that may be shutting down.
//
// Paho invokes callbacks on its own threads and may do so until its client is destroyed, which
// can be after the io_context that owned the target strand is gone. Posting to a destroyed
// executor is undefined behaviour, so every post from a Paho thread goes through a ExecutorGate. A
// service attached to the io_context closes all of its gates in shutdown(), which runs before
// the context's scheduler and strands are torn down; a closed gate drops what it is given.
//
// Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/post.hpp>

namespace mcpmqtt::mqtt::paho {

class ExecutorGate {
 public:
  explicit ExecutorGate(boost::asio::any_io_executor ex) : ex_(std::move(ex)) {}

  template <typename F>
  void post(F&& f) {
    std::lock_guard lock(mu_);
    if (open_) boost::asio::post(ex_, std::forward<F>(f));
  }
  void close() {
    std::lock_guard lock(mu_);
    open_ = false;
    ex_ = boost::asio::any_io_executor();
  }

  // A gate on `ex`, closed when ex's execution context shuts down.
  static std::shared_ptr<ExecutorGate> open(const boost::asio::any_io_executor& ex);

 private:
  std::mutex mu_;
  bool open_ = true;
  boost::asio::any_io_executor ex_;
};

}  // namespace mcpmqtt::mqtt::paho

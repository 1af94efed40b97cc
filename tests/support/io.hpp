// Asio for tests: an io_context run by background threads, strands, running a function on a
// strand and waiting for its result, and a thread-safe inbox to await callbacks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

namespace mcpmqtt::test {

class IoThreads {
 public:
  explicit IoThreads(int threads = 2);
  ~IoThreads();
  IoThreads(const IoThreads&) = delete;
  IoThreads& operator=(const IoThreads&) = delete;

  boost::asio::io_context& context() { return ioc_; }
  boost::asio::any_io_executor strand() { return boost::asio::make_strand(ioc_); }

  // Runs `f` on `ex` and waits for it (10 s at most); returns its result.
  template <typename F>
  auto run(const boost::asio::any_io_executor& ex, F&& f) -> decltype(f()) {
    using R = decltype(f());
    std::promise<R> p;
    auto fut = p.get_future();
    boost::asio::post(ex, [&] {
      try {
        if constexpr (std::is_void_v<R>) {
          f();
          p.set_value();
        } else {
          p.set_value(f());
        }
      } catch (...) {
        p.set_exception(std::current_exception());
      }
    });
    if (fut.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      throw std::runtime_error("IoThreads::run: the strand did not run the function within 10 s");
    }
    return fut.get();
  }

 private:
  boost::asio::io_context ioc_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
};

// A queue that callbacks on any thread push into and the test pops from with a deadline.
template <typename T>
class Inbox {
 public:
  void push(T v) {
    // Notified under the lock: a popper that returns at once may destroy the inbox (a local of
    // the test), which must not happen while this thread is still inside notify_all().
    std::lock_guard lock(mu_);
    items_.push_back(std::move(v));
    cv_.notify_all();
  }
  std::optional<T> pop(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !items_.empty(); })) return std::nullopt;
    T v = std::move(items_.front());
    items_.pop_front();
    return v;
  }
  std::size_t size() const {
    std::lock_guard lock(mu_);
    return items_.size();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
};

}  // namespace mcpmqtt::test

// An io_context on a thread of its own, as the daemon runs one: for the OAuth pieces' tests
// (IssuerKeys, ClientCredentials, TokenIntrospection), which post to it and wait for answers.
#pragma once

#include <chrono>
#include <thread>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "tests/support/wait.hpp"

namespace mcpmqtt::test {

class OauthLoop {
 public:
  OauthLoop() : guard_(ioc_.get_executor()), thread_([this] { ioc_.run(); }) {}
  ~OauthLoop() {
    guard_.reset();
    // Stopped objects leave no work behind; anything left after this is cut.
    eventually([this] { return ioc_.stopped(); }, std::chrono::seconds(5));
    ioc_.stop();
    thread_.join();
  }
  OauthLoop(const OauthLoop&) = delete;
  OauthLoop& operator=(const OauthLoop&) = delete;
  boost::asio::any_io_executor executor() { return ioc_.get_executor(); }

 private:
  boost::asio::io_context ioc_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
};

}  // namespace mcpmqtt::test

// Drives an ClientChannel from a test thread: its own io_context and strand on a background
// thread; messages and the close reason it reports are collected and awaited with deadlines.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <catch2/catch.hpp>

#include "http/client_channel.hpp"
#include "tests/support/mcp_messages.hpp"

namespace mcpmqtt::test {

// A spec for tests: loopback-fast timeouts, everything else as in production.
inline http::UpstreamSpec test_spec(const std::string& url) {
  auto u = http::parse_url(url);
  REQUIRE(u);
  http::UpstreamSpec s;
  s.name = "test/upstream";
  s.url = *u;
  s.connect_timeout = std::chrono::seconds(5);
  s.response_timeout = std::chrono::seconds(10);
  s.stream_idle_timeout = std::chrono::seconds(10);
  s.reconnect_min = std::chrono::milliseconds(50);
  s.reconnect_max = std::chrono::milliseconds(400);
  return s;
}

class ClientHarness {
 public:
  explicit ClientHarness(http::UpstreamSpec spec)
      : ClientHarness([spec](const boost::asio::any_io_executor&) { return spec; }) {}
  // The spec made on the harness's event loop, for parts of it that run there too (an OAuth
  // client's token source), as the daemon runs them beside the sessions.
  explicit ClientHarness(
      std::function<http::UpstreamSpec(const boost::asio::any_io_executor&)> make_spec)
      : strand_(boost::asio::make_strand(ioc_)), guard_(ioc_.get_executor()) {
    thread_ = std::thread([this] { ioc_.run(); });
    on_strand([this, make_spec = std::move(make_spec)] {
      channel_ = http::ClientChannel::create(strand_, make_spec(ioc_.get_executor()));
      bridge::Channel::Receiver r;
      r.on_message = [this](jsonrpc::Message m) {
        std::lock_guard<std::mutex> l(m_);
        messages_.push_back(std::move(m));
        cv_.notify_all();
      };
      r.on_close = [this](const bridge::CloseReason& why) {
        std::lock_guard<std::mutex> l(m_);
        closes_.push_back(why);
        cv_.notify_all();
      };
      channel_->start(std::move(r));
    });
  }

  ~ClientHarness() {
    close();
    guard_.reset();
    thread_.join();  // the DELETE of close() is bounded by delete_timeout
  }

  void send(const std::string& json) {
    auto m = jsonrpc::Message::parse(json);
    REQUIRE(m);
    on_strand([this, m = *m] { channel_->send(m); });
  }

  // Several messages handed over in one go (one strand task), as an owner might.
  void send_all(const std::vector<std::string>& texts) {
    std::vector<jsonrpc::Message> ms;
    for (const auto& t : texts) {
      auto m = jsonrpc::Message::parse(t);
      REQUIRE(m);
      ms.push_back(*m);
    }
    on_strand([this, ms] {
      for (const auto& m : ms)
        channel_->send(m);
    });
  }

  // The owner's close: no on_close follows.
  void close() {
    if (closed_) return;
    closed_ = true;
    on_strand([this] {
      channel_->close(bridge::CloseReason{bridge::CloseReason::Kind::normal, "test done"});
    });
  }

  // The next message delivered; fails the test after the deadline.
  jsonrpc::Message next(std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
    std::unique_lock<std::mutex> l(m_);
    const bool got = cv_.wait_for(l, timeout, [&] { return !messages_.empty(); });
    if (!got) FAIL("no message from the channel within " << timeout.count() << " ms");
    auto m = messages_.front();
    messages_.pop_front();
    return m;
  }

  // Messages delivered so far and not yet taken.
  std::size_t queued() {
    std::lock_guard<std::mutex> l(m_);
    return messages_.size();
  }

  bridge::CloseReason wait_close(std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
    std::unique_lock<std::mutex> l(m_);
    const bool got = cv_.wait_for(l, timeout, [&] { return !closes_.empty(); });
    if (!got) FAIL("the channel did not close itself within " << timeout.count() << " ms");
    closed_ = true;
    return closes_.front();
  }

  std::size_t close_count() {
    std::lock_guard<std::mutex> l(m_);
    return closes_.size();
  }

  // Runs `fn` on the channel's strand and waits for it.
  template <typename F>
  auto query(F fn) {
    std::promise<decltype(fn())> p;
    auto f = p.get_future();
    boost::asio::post(strand_, [&] { p.set_value(fn()); });
    return f.get();
  }
  std::string session_id() {
    return query([this] { return channel_->session_id(); });
  }
  std::string protocol_version() {
    return query([this] { return channel_->protocol_version(); });
  }

 private:
  template <typename F>
  void on_strand(F fn) {
    boost::asio::post(strand_, std::move(fn));
  }

  boost::asio::io_context ioc_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
  std::shared_ptr<http::ClientChannel> channel_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<jsonrpc::Message> messages_;
  std::deque<bridge::CloseReason> closes_;
  bool closed_ = false;
};

// The initialize request the client tests send (a 2025 session).
inline const std::string kClientInitialize = initialize_body(1, "2025-06-18");

// Initializes the session: sends initialize, checks its result, sends notifications/initialized.
inline void initialize(ClientHarness& c) {
  c.send(kClientInitialize);
  const auto m = c.next();
  REQUIRE(m.kind() == jsonrpc::Kind::result);
  REQUIRE(m.id() == jsonrpc::Id::integer(1));
  c.send(kInitialized);
}

}  // namespace mcpmqtt::test

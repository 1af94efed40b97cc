// A directions::Ingress driven directly, as the HTTP server and the modern gateway drive it: each
// session attached with a principal on a strand of the test's IoThreads, its downstream a
// bridge::LocalChannel whose messages and close land in inboxes the test waits on. The directory
// is the test's to fill (apply_presence), so no presence observer runs. Header-only: the support
// library does not link the directions library.
//
// Used from the test thread; the inboxes are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "bridge/relay/local_channel.hpp"
#include "config/config.hpp"
#include "directions/ingress.hpp"
#include "tests/support/io.hpp"

namespace mcpmqtt::test {

// The mqtt section of the default configuration (so MCPMQTT_MQTT_CLIENT chooses the engine)
// with `url` as the broker.
inline config::MqttConfig mqtt_config(const std::string& url) {
  auto loaded = config::defaults();
  config::Overrides o;
  o.broker_url = url;
  config::apply_overrides(loaded, o);
  INFO(config::format_problems(loaded.problems, url));
  REQUIRE(loaded.ok());
  return loaded.config->mqtt;
}

class IngressDriver {
 public:
  // One downstream session.
  struct Session {
    boost::asio::any_io_executor strand;
    std::shared_ptr<bridge::LocalChannel> channel;
    // Shared with the channel's callbacks, which may outlive the test's Session.
    std::shared_ptr<Inbox<std::string>> messages = std::make_shared<Inbox<std::string>>();
    std::shared_ptr<Inbox<std::string>> closes = std::make_shared<Inbox<std::string>>();
    IoThreads* io = nullptr;

    // The client sends `text` (one JSON-RPC message).
    void send(const std::string& text) {
      auto m = jsonrpc::Message::parse(text);
      REQUIRE(m);
      io->run(strand, [&] { channel->deliver(*m); });
    }
    // The next message to the client, or nullopt after the timeout.
    std::optional<std::string> next(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
      return messages->pop(timeout);
    }
  };

  explicit IngressDriver(config::MqttConfig mqtt, int presence_wait_ms = 2000) {
    directions::Ingress::Options o;
    o.mqtt = std::move(mqtt);
    o.ingress.presence_wait_ms = presence_wait_ms;
    o.connect_meta_json = R"({"implementation":"mcp-mqtt-bridge tests"})";
    ingress_ = directions::Ingress::create(o, directory_);
  }
  ~IngressDriver() {
    auto done = std::make_shared<std::promise<void>>();
    auto ex = io_.strand();
    io_.run(ex, [&] {
      ingress_->close_all({bridge::CloseReason::Kind::shutdown, "test over"}, ex,
                          std::chrono::seconds(3), [done] { done->set_value(); });
    });
    done->get_future().wait_for(std::chrono::seconds(5));
    // Each session's MQTT connection closes after the session ends: wait for it (bounded), or
    // its pending disconnect would die with the io_context.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (const auto& f : finished_) {
      while (!*f && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  IngressDriver(const IngressDriver&) = delete;
  IngressDriver& operator=(const IngressDriver&) = delete;

  bridge::Directory& directory() { return *directory_; }
  directions::Ingress& ingress() { return *ingress_; }

  // A server instance online, as its retained presence would say (params.meta: `meta_json`).
  void online(const std::string& server_id, const std::string& server_name,
              const std::string& meta_json = "{}") {
    const std::string presence =
        R"({"jsonrpc":"2.0","method":"notifications/server/online","params":{"server_name":")" +
        server_name + R"(","description":"test server","meta":)" + meta_json + "}}";
    REQUIRE(directory_->apply_presence(server_id, server_name, presence) ==
            bridge::Directory::Change::added);
  }

  // A session of `principal` (none: unknown) with `server_name`, attached and started.
  std::unique_ptr<Session> open(const std::string& server_name,
                                std::optional<bridge::Principal> principal) {
    auto s = std::make_unique<Session>();
    s->io = &io_;
    s->strand = io_.strand();
    bridge::LocalChannel::Peer peer;
    peer.on_message = [messages = s->messages](jsonrpc::Message m) {
      messages->push(std::string(m.text()));
    };
    peer.on_closed = [closes = s->closes](const bridge::CloseReason& why) {
      closes->push(std::string(bridge::to_string(why.kind)) + ": " + why.detail);
    };
    s->channel = bridge::LocalChannel::create("[test downstream]", std::move(peer));
    auto finished = std::make_shared<std::atomic<bool>>(false);
    finished_.push_back(finished);
    io_.run(s->strand, [&] {
      ingress_->attach(
          server_name, s->channel, s->strand, {}, [finished] { *finished = true; },
          std::move(principal));
    });
    return s;
  }

 private:
  IoThreads io_;
  std::shared_ptr<bridge::Directory> directory_ = std::make_shared<bridge::Directory>();
  std::shared_ptr<directions::Ingress> ingress_;
  std::vector<std::shared_ptr<std::atomic<bool>>> finished_;  // per session: its MQTT side closed
};

}  // namespace mcpmqtt::test

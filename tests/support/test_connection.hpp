// A mqtt::BrokerConnection for tests: made on a strand of the test's IoThreads, every handler
// recorded in an Inbox the test waits on with a deadline, operations run on the strand and awaited
// with a bound, and a clean disconnect (bounded) when it goes away. Header-only: the support
// library does not link the MQTT library.
//
// Used from the test thread; the inboxes are thread-safe.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "config/config.hpp"
#include "directions/options.hpp"
#include "mqtt/broker_connection.hpp"
#include "tests/support/io.hpp"
#include "tests/support/observer.hpp"

namespace mcpmqtt::test {

// The broker settings of the default configuration (so MCPMQTT_MQTT_CLIENT chooses the engine)
// for `url`, as the daemon hands them to the MQTT side; `engine` replaces the engine when given.
inline mqtt::BrokerOptions broker_options(const std::string& url,
                                          std::optional<config::MqttClient> engine = std::nullopt) {
  auto loaded = config::defaults();
  config::Overrides o;
  o.broker_url = url;
  config::apply_overrides(loaded, o);
  INFO(config::format_problems(loaded.problems, url));
  REQUIRE(loaded.ok());
  auto m = loaded.config->mqtt;
  if (engine) m.client = *engine;
  return directions::broker_options(m);
}

// Options of a client-role connection with a random id and no reconnect delays to speak of.
inline mqtt::ConnectionOptions connection_options(
    const std::string& url, const std::string& id_prefix,
    std::optional<config::MqttClient> engine = std::nullopt) {
  mqtt::ConnectionOptions o;
  o.broker = broker_options(url, engine);
  o.broker.reconnect_min_ms = 100;
  o.broker.reconnect_max_ms = 1000;
  o.client_id = random_id(id_prefix);
  return o;
}

class TestConnection {
 public:
  struct Up {
    mqtt::ConnackInfo info;
    bool reconnected = false;
  };
  struct Failed {
    std::string why;
    bool retrying = false;
  };
  struct Message {
    std::string topic;
    std::string payload;
    int qos = 0;
    bool retained = false;
    std::optional<std::string> response_topic;
    std::optional<std::string> correlation_data;
  };
  struct Result {
    bool ok = false;
    std::string why;
  };
  // Everything the handlers report; shared with them, so a late callback finds it alive.
  struct Events {
    Inbox<Up> connected;
    Inbox<std::string> lost;
    Inbox<Failed> failed;
    Inbox<Message> messages;
  };

  // Creates the connection and, when `connect`, starts connecting.
  TestConnection(IoThreads& io, mqtt::ConnectionOptions options, bool connect = true)
      : io_(io), strand_(io.strand()), events_(std::make_shared<Events>()) {
    mqtt::BrokerConnection::Handlers h;
    auto ev = events_;
    h.on_connected = [ev](const mqtt::ConnackInfo& info, bool reconnected) {
      ev->connected.push({info, reconnected});
    };
    h.on_connection_lost = [ev](const std::string& why) { ev->lost.push(why); };
    h.on_connect_failed = [ev](const std::string& why, bool retrying) {
      ev->failed.push({why, retrying});
    };
    h.on_message = [ev](const mqtt::Incoming& in) {
      ev->messages.push(
          {in.topic, *in.payload, in.qos, in.retained, in.response_topic, in.correlation_data});
    };
    conn_ = mqtt::BrokerConnection::create(strand_, std::move(options), std::move(h));
    if (connect) this->connect();
  }
  ~TestConnection() {
    try {
      disconnect();
    } catch (...) {
    }
  }
  TestConnection(const TestConnection&) = delete;
  TestConnection& operator=(const TestConnection&) = delete;

  Events& events() { return *events_; }
  const boost::asio::any_io_executor& strand() const { return strand_; }
  mqtt::BrokerConnection& connection() { return *conn_; }

  void connect() {
    io_.run(strand_, [this] { conn_->connect(); });
  }
  // Waits for on_connected; fails the test (with the connect failures seen) when it does not
  // come within the timeout.
  Up wait_connected(std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
    auto up = events_->connected.pop(timeout);
    if (!up) {
      std::string failures;
      while (auto f = events_->failed.pop(std::chrono::milliseconds(0)))
        failures += "\n  " + f->why;
      FAIL("no on_connected within " << timeout.count() << " ms; connect failures:" << failures);
    }
    return *up;
  }
  bool connected() {
    return io_.run(strand_, [this] { return conn_->connected(); });
  }

  // Runs `op(done)` on the strand and waits (bounded) for its completion.
  template <typename Op>
  std::optional<Result> await(Op op, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    auto results = std::make_shared<Inbox<Result>>();
    io_.run(strand_, [&] {
      op([results](bool ok, const std::string& why) { results->push({ok, why}); });
    });
    return results->pop(timeout);
  }
  std::optional<Result> subscribe(const std::string& filter, bool no_local = false,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return await([&](mqtt::Done done) { conn_->subscribe(filter, no_local, std::move(done)); },
                 timeout);
  }
  std::optional<Result> publish(const std::string& topic, const std::string& payload,
                                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return await([&](mqtt::Done done) { conn_->publish(topic, payload, false, std::move(done)); },
                 timeout);
  }
  std::optional<Result> publish(const std::string& topic, const std::string& payload,
                                mqtt::PublishOptions options,
                                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return await(
        [&](mqtt::Done done) {
          conn_->publish(topic, std::make_shared<const std::string>(payload), std::move(options),
                         std::move(done));
        },
        timeout);
  }

  // A clean DISCONNECT, bounded; idempotent.
  void disconnect(std::chrono::milliseconds timeout = std::chrono::seconds(1)) {
    if (!conn_) return;
    auto closed = std::make_shared<std::promise<void>>();
    auto future = closed->get_future();
    io_.run(strand_, [&] { conn_->disconnect(timeout, [closed] { closed->set_value(); }); });
    future.wait_for(timeout + std::chrono::seconds(5));
    // Released on the strand: its last handlers may still be queued there.
    io_.run(strand_, [this] { conn_.reset(); });
  }

 private:
  IoThreads& io_;
  boost::asio::any_io_executor strand_;
  std::shared_ptr<Events> events_;
  std::shared_ptr<mqtt::BrokerConnection> conn_;
};

}  // namespace mcpmqtt::test

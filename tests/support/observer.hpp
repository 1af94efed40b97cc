// A plain MQTT v5 client for tests, written directly on Paho and independent of the bridge's own
// MQTT adapter, so tests observe the bridge from outside: what was published, on which topic,
// retained or not, with which user properties.
//
// Thread-safe for use from one test thread (Paho delivers into an internal queue).
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mqtt {  // Eclipse Paho
class async_client;
class token;
}  // namespace mqtt

namespace mcpmqtt::test {

struct Received {
  std::string topic;
  std::string payload;
  bool retained = false;
  int qos = 0;
  std::vector<std::pair<std::string, std::string>> user_properties;
  // The value of a user property, or nullopt.
  std::optional<std::string> property(const std::string& name) const;
};

class Observer {
 public:
  struct Options {
    std::string client_id;  // empty: a random one
    std::string will_topic;
    std::string will_payload;
    bool will_retained = false;
    std::string username, password;
    std::string ca_file;  // for mqtts:// brokers

    static Options with_id(std::string id) {
      Options o;
      o.client_id = std::move(id);
      return o;
    }
  };
  explicit Observer(const std::string& url) : Observer(url, Options{}) {}
  Observer(const std::string& url, Options options);
  ~Observer();
  Observer(const Observer&) = delete;
  Observer& operator=(const Observer&) = delete;

  const std::string& client_id() const { return client_id_; }
  void subscribe(const std::string& filter, bool no_local = false, int qos = 1);
  void unsubscribe(const std::string& filter);
  void publish(const std::string& topic, const std::string& payload, bool retained = false,
               int qos = 1, const std::vector<std::pair<std::string, std::string>>& props = {});
  // The next message, or nullopt after the timeout.
  std::optional<Received> next(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // The first message matching `pred` (others are dropped), or nullopt after the timeout.
  std::optional<Received> wait_for(const std::function<bool(const Received&)>& pred,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // The first message on exactly this topic.
  std::optional<Received> wait_on(const std::string& topic,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Everything that arrives within the window.
  std::vector<Received> drain(std::chrono::milliseconds window);
  void disconnect();
  bool connected() const;

 private:
  // Waits for `token` and keeps it for a while: Paho C++ 1.2 signals a token's condition
  // variable after unlocking it, so a waiter that destroyed the token at once would race the
  // signalling thread (ThreadSanitizer reports it). Tokens go once 32 later ones have completed,
  // or with the client (declared after this, so destroyed first, its threads joined).
  void settle(const std::shared_ptr<::mqtt::token>& token,
              std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  std::string client_id_;
  std::deque<std::shared_ptr<::mqtt::token>> settled_;
  std::unique_ptr<::mqtt::async_client> client_;
};

// A random id usable as an MQTT client id.
std::string random_id(const std::string& prefix = "test");

}  // namespace mcpmqtt::test

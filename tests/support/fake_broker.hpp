// A scripted MQTT 5 broker for tests that must see exactly what a client sends (CONNECT
// properties, the will, subscription options) or must send what Mosquitto never sends (CONNACK
// user properties such as MCP-SERVER-NAME). It decodes packets itself, acknowledges CONNECT,
// SUBSCRIBE, UNSUBSCRIBE, PUBLISH (QoS 1) and PINGREQ, records everything, and routes nothing.
// It grants every subscription but those to filters starting with "refused/", which it refuses
// with reason code 0x87 (Not authorized).
//
// Thread-safe: one thread per connection; the recorded packets are guarded by a mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace mcpmqtt::test {

using UserProperties = std::vector<std::pair<std::string, std::string>>;

struct ConnectPacket {
  int protocol_level = 0;
  bool clean_start = false;
  int keep_alive = 0;
  std::optional<std::uint32_t> session_expiry;
  UserProperties user_properties;
  std::string client_id;
  bool will = false;
  int will_qos = 0;
  bool will_retain = false;
  std::string will_topic;
  std::string will_payload;
  UserProperties will_user_properties;
  std::optional<std::string> username;
  std::optional<std::string> password;
};

struct SubscribePacket {
  std::string client_id;
  std::vector<std::pair<std::string, int>> filters;  // filter, options byte (QoS | NoLocal<<2 ...)
};

struct PublishPacket {
  std::string client_id;
  std::string topic;
  std::string payload;
  int qos = 0;
  bool retain = false;
  UserProperties user_properties;
};

class FakeBroker {
 public:
  // Returns the CONNACK user properties for the n-th connection (0-based).
  using ConnackProperties = std::function<UserProperties(int connection, const ConnectPacket&)>;

  explicit FakeBroker(ConnackProperties connack = {});
  ~FakeBroker();
  FakeBroker(const FakeBroker&) = delete;
  FakeBroker& operator=(const FakeBroker&) = delete;

  std::string url() const { return "mqtt://127.0.0.1:" + std::to_string(port_); }

  // Wait for the n-th packet of a kind (0-based), or nullopt after the timeout.
  std::optional<ConnectPacket> connect(
      std::size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  std::optional<SubscribePacket> subscribe(
      std::size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  std::optional<PublishPacket> publish(
      std::size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  std::vector<std::string> unsubscribed() const;  // the filters of every UNSUBSCRIBE, in order
  std::vector<std::vector<std::string>> unsubscribe_packets() const;

 private:
  void accept_loop();
  void serve(int fd, int connection);

  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  ConnackProperties connack_;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::vector<std::thread> workers_;
  std::vector<int> fds_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ConnectPacket> connects_;
  std::vector<SubscribePacket> subscribes_;
  std::vector<PublishPacket> publishes_;
  std::vector<std::vector<std::string>> unsubscribes_;
};

}  // namespace mcpmqtt::test

// A scripted MQTT 5 broker for tests that must see exactly what a client sends (CONNECT
// properties, the will, subscription options, the DISCONNECT that says why) or must send what
// Mosquitto never sends (CONNACK user properties such as MCP-SERVER-NAME, bytes that break the
// protocol, silence on an open socket, a Maximum Packet Size). It decodes packets itself,
// acknowledges CONNECT, SUBSCRIBE, UNSUBSCRIBE, PUBLISH (QoS 1) and PINGREQ, records everything,
// and routes nothing. It grants every subscription but those to filters starting with "refused/",
// which it refuses with reason code 0x87 (Not authorized).
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
  std::optional<std::uint32_t> receive_maximum;      // 0x21
  std::optional<std::uint32_t> topic_alias_maximum;  // 0x22
  std::optional<std::uint32_t> maximum_packet_size;  // 0x27
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
  std::optional<std::string> response_topic;    // 0x08
  std::optional<std::string> correlation_data;  // 0x09
  std::size_t packet_size = 0;                  // the whole packet, fixed header included
};

struct DisconnectPacket {
  int connection = 0;  // which connection sent it (0-based, in the order they were accepted)
  std::optional<int> reason_code;  // absent when the packet had no body (0x00)
};

// A PUBACK, PUBREC, PUBREL or PUBCOMP a client sent (MQTT 5.0 §3.4-§3.7).
struct AckPacket {
  int type = 0;  // 4 PUBACK, 5 PUBREC, 6 PUBREL, 7 PUBCOMP
  unsigned packet_id = 0;
  int reason_code = 0;
};

// Building blocks of MQTT packets (MQTT 5.0 §1.5, §2.1), for tests that write raw bytes.
namespace wire {
std::string varint(std::size_t v);       // Variable Byte Integer (§1.5.5)
std::string u16(std::size_t v);          // Two Byte Integer
std::string utf8(const std::string& s);  // UTF-8 Encoded String (§1.5.4)
std::string packet(unsigned char type_flags, const std::string& body);  // fixed header + body
}  // namespace wire

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
  // The n-th DISCONNECT a client sent (0-based), or nullopt after the timeout.
  std::optional<DisconnectPacket> disconnect(
      std::size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // The n-th PUBACK, PUBREC, PUBREL or PUBCOMP a client sent (0-based), or nullopt.
  std::optional<AckPacket> ack(std::size_t n,
                               std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Waits until `n` PINGREQs were answered (all connections together).
  bool wait_pings(std::size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // True once the client closed connection `connection` (EOF or error on its socket).
  bool wait_closed(int connection, std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // The Maximum Packet Size (MQTT 5.0 §3.2.2.3.6) the CONNACKs that follow announce; 0: none. It
  // is only announced: packets of any size are still taken.
  void announce_maximum_packet_size(std::uint32_t bytes) { maximum_packet_size_ = bytes; }

  // Silent: every connection stops reading and writing, its socket left open — a broker that
  // hangs, or a network path that drops everything. Off again: it answers what was sent
  // meanwhile.
  void set_silent(bool silent) { silent_ = silent; }
  // Writes raw bytes to connection `connection` (0-based); false when it is not open.
  bool inject(int connection, const std::string& bytes);

 private:
  void accept_loop();
  void serve(int fd, int connection);
  bool read_exact(int fd, std::string& out, std::size_t n);
  void send(int fd, const std::string& data);

  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  ConnackProperties connack_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> silent_{false};
  std::atomic<std::uint32_t> maximum_packet_size_{0};
  std::thread acceptor_;
  std::vector<std::thread> workers_;
  // Writes from the connection threads and from inject(): one at a time, never to a closed fd.
  std::mutex write_mu_;
  std::vector<int> fds_;  // by connection; -1 once closed
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ConnectPacket> connects_;
  std::vector<SubscribePacket> subscribes_;
  std::vector<PublishPacket> publishes_;
  std::vector<std::vector<std::string>> unsubscribes_;
  std::vector<DisconnectPacket> disconnects_;
  std::vector<AckPacket> acks_;
  std::vector<int> closed_;  // connections the client closed
  std::size_t pings_ = 0;
};

}  // namespace mcpmqtt::test

// The ejabberd test helper works: a private node's mod_mqtt carries MQTT v5 messages (live,
// retained, 1 MiB, with user properties, under No Local) on topics without '$', refuses
// publications and wills on '$' topics with the reason codes the helper's header describes, and
// survives kill() + restart() on its port beside a second node.
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "tests/support/ejabberd.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/observer.hpp"
#include "tests/support/prerequisite.hpp"

using mcpmqtt::test::Ejabberd;
using mcpmqtt::test::missing_prerequisite;
using mcpmqtt::test::Observer;
using mcpmqtt::test::random_id;
using mcpmqtt::test::wait_for_port;
using namespace std::chrono_literals;

namespace {

// Observer options with the credentials ejabberd's anonymous login wants.
Observer::Options ejabberd_login() {
  Observer::Options o;
  o.username = Ejabberd::username();
  o.password = Ejabberd::password();
  return o;
}

// A bare MQTT v5 client on a blocking socket: it shows what a client library hides (the reason
// codes of CONNACK, PUBACK and SUBACK; a connection that stays up after a refusal), and it
// connects at once, where a second Paho client in one process waits for the library's poll loop
// (about 2 s).
class EjabberdWire {
 public:
  struct Message {
    std::string topic;
    std::string payload;
    bool retained = false;
  };

  explicit EjabberdWire(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval tv{5, 0};  // for the rest of a packet whose first byte came
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~EjabberdWire() { ::close(fd_); }
  EjabberdWire(const EjabberdWire&) = delete;
  EjabberdWire& operator=(const EjabberdWire&) = delete;

  // CONNECT (clean start; the credentials and a QoS 0 will when not empty): the CONNACK's
  // reason code, or -1 when none came.
  int connect(const std::string& username, const std::string& password,
              const std::string& will_topic = "") {
    std::string body;
    put_string(body, "MQTT");
    body.push_back(5);
    unsigned char flags = 0x02;
    if (!username.empty()) flags |= 0x80;
    if (!password.empty()) flags |= 0x40;
    if (!will_topic.empty()) flags |= 0x04;
    body.push_back(static_cast<char>(flags));
    body += std::string("\x00\x0a\x00", 3);  // keep alive 10 s, no properties
    put_string(body, random_id("wire"));
    if (!will_topic.empty()) {
      body.push_back(0);  // no will properties
      put_string(body, will_topic);
      put_string(body, "gone");
    }
    if (!username.empty()) put_string(body, username);
    if (!password.empty()) put_string(body, password);
    send_packet(0x10, body);
    auto connack = read_packet(5s);
    if (!connack || connack->first != 0x20 || connack->second.size() < 2) return -1;
    return static_cast<unsigned char>(connack->second[1]);
  }

  // PUBLISH with user properties: at QoS 1 the PUBACK's reason code, or -1 when the connection
  // closed without one; 0 at QoS 0.
  int publish(const std::string& topic, const std::string& payload, int qos = 1,
              bool retain = false,
              const std::vector<std::pair<std::string, std::string>>& user_properties = {}) {
    const std::uint16_t id = ++packet_id_;
    std::string body;
    put_string(body, topic);
    if (qos > 0) put_id(body, id);
    std::string props;
    for (const auto& [k, v] : user_properties) {
      props.push_back(0x26);
      put_string(props, k);
      put_string(props, v);
    }
    put_varint(body, props.size());
    body += props;
    body += payload;
    send_packet(static_cast<unsigned char>(0x30 | (qos << 1) | (retain ? 1 : 0)), body);
    if (qos == 0) return 0;
    for (;;) {
      auto p = read_packet(5s);
      if (!p) return -1;
      if (p->first == 0x40 && p->second.size() >= 2 && id_at(p->second, 0) == id) {
        // A PUBACK of two bytes (the packet id only) means Success.
        return p->second.size() == 2 ? 0 : static_cast<unsigned char>(p->second[2]);
      }
      keep_if_message(*p);
    }
  }

  // SUBSCRIBE at QoS 1: the SUBACK's reason code, or -1.
  int subscribe(const std::string& filter, bool no_local = false) {
    const std::uint16_t id = ++packet_id_;
    std::string body;
    put_id(body, id);
    body.push_back(0);  // no properties
    put_string(body, filter);
    body.push_back(static_cast<char>(0x01 | (no_local ? 0x04 : 0)));
    send_packet(0x82, body);
    for (;;) {
      auto p = read_packet(5s);
      if (!p) return -1;
      if (p->first == 0x90 && p->second.size() >= 3 && id_at(p->second, 0) == id) {
        std::size_t at = 2;
        const std::size_t props = get_varint(p->second, at);
        at += props;
        return at < p->second.size() ? static_cast<unsigned char>(p->second[at]) : -1;
      }
      keep_if_message(*p);
    }
  }

  // The next PUBLISH received (acknowledged when QoS 1), or nullopt after the timeout.
  std::optional<Message> next_message(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (messages_.empty()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      auto p = read_packet(left);
      if (!p) return std::nullopt;
      keep_if_message(*p);
    }
    Message m = std::move(messages_.front());
    messages_.pop_front();
    return m;
  }

 private:
  static void put_string(std::string& out, const std::string& s) {
    out.push_back(static_cast<char>(s.size() >> 8));
    out.push_back(static_cast<char>(s.size() & 0xff));
    out += s;
  }
  static void put_id(std::string& out, std::uint16_t id) {
    out.push_back(static_cast<char>(id >> 8));
    out.push_back(static_cast<char>(id & 0xff));
  }
  static std::uint16_t id_at(const std::string& s, std::size_t at) {
    return static_cast<std::uint16_t>((static_cast<unsigned char>(s[at]) << 8) |
                                      static_cast<unsigned char>(s[at + 1]));
  }
  static void put_varint(std::string& out, std::size_t n) {
    for (;;) {
      const auto digit = static_cast<char>(n % 128);
      n /= 128;
      out.push_back(n > 0 ? static_cast<char>(digit | 0x80) : digit);
      if (n == 0) break;
    }
  }
  static std::size_t get_varint(const std::string& s, std::size_t& at) {
    std::size_t n = 0;
    for (int shift = 0; shift < 28 && at < s.size(); shift += 7) {
      const auto digit = static_cast<unsigned char>(s[at++]);
      n |= static_cast<std::size_t>(digit & 0x7f) << shift;
      if ((digit & 0x80) == 0) break;
    }
    return n;
  }
  void send_packet(unsigned char type, const std::string& body) {
    std::string packet(1, static_cast<char>(type));
    put_varint(packet, body.size());
    packet += body;
    REQUIRE(::send(fd_, packet.data(), packet.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(packet.size()));
  }
  bool read_exactly(char* out, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      const auto r = ::recv(fd_, out + got, n - got, 0);
      if (r <= 0) return false;
      got += static_cast<std::size_t>(r);
    }
    return true;
  }
  // One packet: its first byte and its body; nullopt when nothing came within the timeout or the
  // connection closed.
  std::optional<std::pair<unsigned char, std::string>> read_packet(
      std::chrono::milliseconds timeout) {
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
    char type = 0;
    if (!read_exactly(&type, 1)) return std::nullopt;
    std::string length_bytes;
    for (int i = 0; i < 4; ++i) {
      char digit = 0;
      if (!read_exactly(&digit, 1)) return std::nullopt;
      length_bytes.push_back(digit);
      if ((digit & 0x80) == 0) break;
    }
    std::size_t at = 0;
    std::string body(get_varint(length_bytes, at), '\0');
    if (!body.empty() && !read_exactly(body.data(), body.size())) return std::nullopt;
    return std::make_pair(static_cast<unsigned char>(type), std::move(body));
  }
  // A PUBLISH goes to the queue next_message() reads (acknowledged at QoS 1); anything else is
  // dropped.
  void keep_if_message(const std::pair<unsigned char, std::string>& p) {
    if ((p.first & 0xf0) != 0x30) return;
    const std::string& b = p.second;
    const int qos = (p.first >> 1) & 0x03;
    std::size_t at = 2 + id_at(b, 0);
    Message m;
    m.topic = b.substr(2, at - 2);
    m.retained = (p.first & 0x01) != 0;
    if (qos > 0) {
      const std::uint16_t id = id_at(b, at);
      at += 2;
      std::string ack;
      put_id(ack, id);
      send_packet(0x40, ack);
    }
    const std::size_t props = get_varint(b, at);
    m.payload = b.substr(at + props);
    messages_.push_back(std::move(m));
  }

  int fd_ = -1;
  std::uint16_t packet_id_ = 0;
  std::deque<Message> messages_;
};

}  // namespace

// One test case for all of it: each node takes 1.5–3 s to start, and three starts (two nodes,
// one restart) prove everything.
TEST_CASE(
    "ejabberd helper: MQTT v5 messages flow on plain topics, dollar topics are refused, two nodes "
    "run side by side, and kill and restart keep the port",
    "[integration][ejabberd]") {
  if (const auto why = Ejabberd::missing(); !why.empty()) {
    missing_prerequisite(why);
    return;
  }
  Ejabberd broker;
  Ejabberd other;
  REQUIRE(broker.url() == "mqtt://127.0.0.1:" + std::to_string(broker.port()));
  CHECK(broker.port() != other.port());
  const std::string user = Ejabberd::username();
  const std::string password = Ejabberd::password();
  const std::string topic = "mcp-server/presence/" + random_id("sid") + "/test";

  // Independent brokers: a subscriber of the other node sees nothing of this one's traffic.
  EjabberdWire on_other(other.port());
  REQUIRE(on_other.connect(user, password) == 0x00);
  CHECK(on_other.subscribe(topic) == 0x01);

  // A client library of its own (Paho, the Observer) reads what a bare client writes.
  Observer reader(broker.url(), ejabberd_login());
  reader.subscribe(topic);
  EjabberdWire writer(broker.port());
  REQUIRE(writer.connect(user, password) == 0x00);
  CHECK(writer.publish(topic, R"({"jsonrpc":"2.0","method":"notifications/server/online"})", 1,
                       false, {{"MCP-COMPONENT-TYPE", "mcp-server"}}) == 0x00);
  auto live = reader.next(5s);
  REQUIRE(live);
  CHECK(live->topic == topic);
  CHECK_FALSE(live->retained);
  CHECK(live->payload == R"({"jsonrpc":"2.0","method":"notifications/server/online"})");
  CHECK(live->property("MCP-COMPONENT-TYPE") == "mcp-server");

  // 1 MiB, under the listener's max_payload_size.
  CHECK(writer.publish(topic, std::string(1 << 20, 'x')) == 0x00);
  auto big = reader.next(10s);
  REQUIRE(big);
  CHECK(big->payload.size() == std::size_t{1} << 20);

  // A retained message reaches a later subscriber, flagged retained; an empty retained payload
  // clears it.
  CHECK(writer.publish(topic, "kept", 1, true) == 0x00);
  CHECK(reader.next(5s));  // the live copy
  {
    EjabberdWire late(broker.port());
    REQUIRE(late.connect(user, password) == 0x00);
    CHECK(late.subscribe(topic) == 0x01);
    auto kept = late.next_message(5s);
    REQUIRE(kept);
    CHECK(kept->payload == "kept");
    CHECK(kept->retained);
  }
  CHECK(writer.publish(topic, "", 1, true) == 0x00);
  CHECK(reader.next(5s));  // the live, empty copy
  {
    EjabberdWire later(broker.port());
    REQUIRE(later.connect(user, password) == 0x00);
    CHECK(later.subscribe(topic) == 0x01);
    CHECK_FALSE(later.next_message(300ms));
  }

  // No Local: a subscriber does not get its own publications back.
  CHECK(writer.subscribe(topic, /*no_local=*/true) == 0x01);
  CHECK(writer.publish(topic, "from-writer") == 0x00);
  auto at_reader = reader.next(5s);
  REQUIRE(at_reader);
  CHECK(at_reader->payload == "from-writer");
  CHECK_FALSE(writer.next_message(300ms));

  // '$' topics: a QoS 1 PUBLISH gets PUBACK 0x90 (Topic Name invalid) and the connection stays
  // up; a QoS 0 one is dropped; nothing reaches a subscriber of the '$' filter (which ejabberd
  // grants).
  const std::string dollar = "$mcp-server/presence/" + random_id("sid") + "/test";
  EjabberdWire dollar_reader(broker.port());
  REQUIRE(dollar_reader.connect(user, password) == 0x00);
  CHECK(dollar_reader.subscribe("$mcp-server/#") == 0x01);
  const int refused = writer.publish(dollar, "refused");
  INFO(broker.log());
  CHECK(refused == 0x90);
  writer.publish(dollar, "dropped", 0);
  CHECK(writer.publish(topic, "after the refusal") == 0x00);  // still connected
  auto after = reader.next(5s);
  REQUIRE(after);
  CHECK(after->payload == "after the refusal");
  CHECK_FALSE(dollar_reader.next_message(300ms));
  // No subscriber: PUBACK 0x10 (No matching subscribers), a success.
  CHECK(writer.publish("nobody/" + random_id("listens"), "x") == 0x10);

  // A will on a '$' topic is refused at CONNECT with 0x90; a login without credentials with
  // 0x87 (Not authorized).
  CHECK(EjabberdWire(broker.port()).connect(user, password, dollar) == 0x90);
  CHECK(EjabberdWire(broker.port()).connect("", "") == 0x87);

  // Nothing of the above reached the other node.
  CHECK_FALSE(on_other.next_message(100ms));

  // kill(): the VM is gone and its port refuses connections; restart() brings a fresh node up on
  // the same port (the killed node's retained message with it gone).
  CHECK(writer.publish(topic, "retained before the kill", 1, true) == 0x00);
  const auto pid = broker.pid();
  const auto port = broker.port();
  broker.kill();
  CHECK_FALSE(broker.running());
  CHECK_FALSE(mcpmqtt::test::pid_alive(pid));
  CHECK_FALSE(wait_for_port(port, 300ms));  // refused, as by a dead broker
  broker.restart();
  INFO(broker.log());
  CHECK(broker.running());
  CHECK(broker.port() == port);
  EjabberdWire again(broker.port());
  REQUIRE(again.connect(user, password) == 0x00);
  CHECK(again.subscribe(topic) == 0x01);
  CHECK_FALSE(again.next_message(300ms));

  // The other node went on meanwhile.
  CHECK(other.running());
  CHECK(on_other.publish(topic, "still there") == 0x00);
  auto own = on_other.next_message(5s);
  REQUIRE(own);
  CHECK(own->payload == "still there");
}

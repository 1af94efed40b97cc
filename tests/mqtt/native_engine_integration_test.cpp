// The native MQTT engine (mqtt.client "native") over real sockets where it does what Paho does
// not or cannot be made to show: QoS 2 both ways with Mosquitto (through the Engine directly: a
// BrokerConnection publishes at mqtt.qos, 0 or 1), WebSocket upgrades that fail, and 10,000
// connections to one Mosquitto. The MQTT protocol itself (keep-alive, QoS flows, topic aliases, a
// broker that breaks the rules) is tested without sockets in client_protocol_test.cpp. Every
// connection here names the native engine itself; the file is left out of the Paho registration.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mqtt/engine.hpp"
#include "tests/support/io.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/observer.hpp"
#include "tests/support/test_connection.hpp"

namespace config = mcpmqtt::config;
namespace mq = mcpmqtt::mqtt;
using namespace mcpmqtt::test;
using namespace std::chrono_literals;

namespace {

constexpr auto kNative = config::MqttClient::native;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// An HTTP server that answers every request 404, as a web server does for a WebSocket path it
// does not serve (Mosquitto itself upgrades on any path). One thread; stops when destroyed.
class HttpNotFound {
 public:
  HttpNotFound() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd_, 8) == 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~HttpNotFound() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  std::uint16_t port() const { return port_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::string request;
      while (!stop_ && request.find("\r\n\r\n") == std::string::npos) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 100) <= 0) continue;
        char buf[1024];
        const auto n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        request.append(buf, static_cast<std::size_t>(n));
      }
      const std::string answer =
          "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      (void)!::write(c, answer.data(), answer.size());
      ::close(c);
    }
  }
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A counter callbacks on any thread bump and the test waits on with a deadline.
class Counter {
 public:
  void add(int n = 1) {
    {
      std::lock_guard lock(mu_);
      value_ += n;
    }
    cv_.notify_all();
  }
  int value() const {
    std::lock_guard lock(mu_);
    return value_;
  }
  bool wait_for(int at_least, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return value_ >= at_least; });
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int value_ = 0;
};

}  // namespace

// ---- QoS 2
// ----------------------------------------------------------------------------------------

// QoS 2 both ways with a real broker and a client nobody here wrote (Paho): the Engine directly,
// since a BrokerConnection publishes and subscribes at mqtt.qos (0 or 1).
TEST_CASE(
    "native engine QoS 2 with Mosquitto (MQTT 5.0 §4.3.3): publications both ways between the "
    "engine and a Paho client arrive exactly once",
    "[mqtt][native][qos2]") {
  Mosquitto broker;
  Observer peer(broker.url());
  peer.subscribe("qos2/out/#", false, 2);
  IoThreads io;
  auto strand = io.strand();
  struct Got {
    std::string topic, payload;
    int qos;
  };
  auto got = std::make_shared<Inbox<Got>>();
  auto lost = std::make_shared<Inbox<std::string>>();
  mq::Engine::Events ev;
  ev.on_message = [got](const mq::ReceivedMessage& m) {
    got->push({std::string(m.topic), *m.payload, m.qos});
  };
  ev.on_lost = [lost](const std::string& why) { lost->push(why); };
  auto engine = io.run(strand, [&] { return mq::make_native_engine(strand, ev); });

  mq::EngineConnect p;
  p.host = "127.0.0.1";
  p.port = broker.port();
  p.client_id = random_id("qos2");
  auto connected = std::make_shared<Inbox<mq::ConnectOutcome>>();
  io.run(strand, [&] { engine->connect(p, [connected](const auto& r) { connected->push(r); }); });
  auto up = connected->pop();
  REQUIRE(up);
  INFO(up->why);
  REQUIRE(up->ok);
  CHECK(up->connack.maximum_qos == 2);

  constexpr int kCount = 20;
  auto acks = std::make_shared<Inbox<mq::AckOutcome>>();
  io.run(strand, [&] {
    for (int i = 0; i < kCount; ++i) {
      mq::PublishRequest r;
      r.topic = "qos2/out/" + std::to_string(i);
      r.payload = std::make_shared<const std::string>(std::to_string(i));
      r.qos = 2;
      engine->publish(std::move(r), [acks](const mq::AckOutcome& a) { acks->push(a); });
    }
  });
  for (int i = 0; i < kCount; ++i) {
    auto a = acks->pop();
    REQUIRE(a);
    INFO(a->why);
    CHECK(a->ok);
  }
  std::multiset<std::string> at_peer;
  for (int i = 0; i < kCount; ++i) {
    auto m = peer.next(5s);
    REQUIRE(m);
    CHECK(m->qos == 2);
    CHECK(m->topic == "qos2/out/" + m->payload);
    at_peer.insert(m->payload);
  }
  CHECK_FALSE(peer.next(500ms));
  for (int i = 0; i < kCount; ++i)
    CHECK(at_peer.count(std::to_string(i)) == 1);

  io.run(strand, [&] {
    engine->subscribe({{"qos2/in/#", 2, false}},
                      [acks](const mq::AckOutcome& a) { acks->push(a); });
  });
  auto suback = acks->pop();
  REQUIRE(suback);
  CHECK(suback->ok);
  CHECK(suback->reason_codes == std::vector<std::uint8_t>{0x02});  // Granted QoS 2
  for (int i = 0; i < kCount; ++i)
    peer.publish("qos2/in/" + std::to_string(i), std::to_string(i), false, 2);
  std::multiset<std::string> at_engine;
  for (int i = 0; i < kCount; ++i) {
    auto m = got->pop(5s);
    REQUIRE(m);
    CHECK(m->qos == 2);
    CHECK(m->topic == "qos2/in/" + m->payload);
    at_engine.insert(m->payload);
  }
  CHECK_FALSE(got->pop(500ms));
  for (int i = 0; i < kCount; ++i)
    CHECK(at_engine.count(std::to_string(i)) == 1);
  CHECK_FALSE(lost->pop(0ms));

  auto closed = std::make_shared<Inbox<bool>>();
  io.run(strand, [&] { engine->disconnect(1s, [closed] { closed->push(true); }); });
  CHECK(closed->pop(5s));
  io.run(strand, [&] { engine.reset(); });
}

// ---- WebSocket upgrades that fail ---------------------------------------------------------------

TEST_CASE(
    "native engine WebSocket (MQTT 5.0 §6): an upgrade refused with HTTP 404, or sent to a plain "
    "MQTT port, fails the connect naming the WebSocket upgrade",
    "[mqtt][native][websocket]") {
  IoThreads io;
  SECTION("a path the server does not serve") {
    HttpNotFound http;
    const std::string url = "ws://127.0.0.1:" + std::to_string(http.port()) + "/wrong/path";
    auto o = connection_options(url, "ws-404", kNative);
    CHECK(o.broker.ws_path == "/wrong/path");
    o.reconnect = false;
    TestConnection c(io, o);
    auto failed = c.events().failed.pop(15s);
    REQUIRE(failed);
    INFO(failed->why);
    CHECK(contains(failed->why, "cannot connect to " + url));
    CHECK(contains(failed->why, "WebSocket upgrade at /wrong/path failed: HTTP 404 Not Found"));
  }
  SECTION("Mosquitto's plain MQTT listener") {
    Mosquitto broker;
    const std::string url = "ws://127.0.0.1:" + std::to_string(broker.port());
    auto o = connection_options(url, "ws-tcp", kNative);
    o.reconnect = false;
    TestConnection c(io, o);
    auto failed = c.events().failed.pop(15s);
    REQUIRE(failed);
    INFO(failed->why);
    CHECK(contains(failed->why,
                   "cannot connect to " + url + "/mqtt: WebSocket upgrade at /mqtt failed: "));
    // No HTTP response came: the message must not claim a status.
    CHECK_FALSE(contains(failed->why, "HTTP"));
  }
}

// ---- many connections ---------------------------------------------------------------------------

// The ingress holds one MQTT connection per MCP session: thousands on one broker. Each one here
// is a CONNECT with a will and a SUBSCRIBE. MCPMQTT_TEST_CONNECTIONS lowers the count (the
// sanitizer build sets it); the release build runs 10,000.
TEST_CASE(
    "native engine: 10,000 connections to one Mosquitto, each with a will and a subscription, "
    "all connect, receive, and leave cleanly",
    "[mqtt][native][scale]") {
  int count = 10000;
  if (const char* v = std::getenv("MCPMQTT_TEST_CONNECTIONS"); v && *v) count = std::atoi(v);
  REQUIRE(count > 0);
  INFO(count << " connections");
  // One descriptor per connection here and one in Mosquitto, which inherits the limit.
  rlimit lim{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &lim) == 0);
  lim.rlim_cur = lim.rlim_max;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &lim) == 0);
  REQUIRE(lim.rlim_cur >= static_cast<rlim_t>(count) + 1024);

  Mosquitto::Options bo;
  bo.extra_config = "sys_interval 1\n";
  Mosquitto broker(bo);
  Observer watcher(broker.url());
  watcher.subscribe("$SYS/broker/clients/connected");
  watcher.subscribe("fleet/will/#");
  // Whether `r` is Mosquitto's count of connected clients and says `expected`; the last count
  // seen goes in the report when one is not reached.
  std::string last_count = "none";
  auto is_count = [&](const Received& r, const std::string& expected) {
    if (r.topic != "$SYS/broker/clients/connected") return false;
    last_count = r.payload;
    return r.payload == expected;
  };
  auto connected_count = [&](int expected, std::chrono::milliseconds timeout) {
    return watcher.wait_for(
        [&](const Received& r) { return is_count(r, std::to_string(expected)); }, timeout);
  };

  IoThreads io(2);
  // Shared with the handlers: a late callback after a failed REQUIRE finds them alive.
  struct Counters {
    Counter up, subscribed, refused, delivered, lost, closed, released;
  };
  auto n = std::make_shared<Counters>();
  struct Client {
    boost::asio::any_io_executor strand;
    std::shared_ptr<mq::BrokerConnection> conn;
  };
  std::vector<Client> clients(static_cast<std::size_t>(count));
  const auto started = std::chrono::steady_clock::now();
  for (auto& cl : clients) {
    auto o = connection_options(broker.url(), "fleet", kNative);
    o.will = mq::Will{"fleet/will/" + o.client_id, "gone", false};
    mq::BrokerConnection::Handlers h;
    h.on_connected = [n](const mq::ConnackInfo&, bool) { n->up.add(); };
    h.on_message = [n](const mq::Incoming&) { n->delivered.add(); };
    h.on_connection_lost = [n](const std::string&) { n->lost.add(); };
    cl.strand = io.strand();
    cl.conn = mq::BrokerConnection::create(cl.strand, std::move(o), std::move(h));
    boost::asio::post(cl.strand, [c = cl.conn, n] {
      c->subscribe("fleet/all", false,
                   [n](bool ok, const std::string&) { (ok ? n->subscribed : n->refused).add(); });
      c->connect();
    });
  }
  const bool all_up = n->up.wait_for(count, 120s);
  const auto took = std::chrono::steady_clock::now() - started;
  INFO(n->up.value() << " connected after "
                     << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                     << " ms");
  REQUIRE(all_up);
  REQUIRE(n->subscribed.wait_for(count, 60s));
  CHECK(n->refused.value() == 0);
  // Mosquitto counts them (and the watcher).
  const bool counted = connected_count(count + 1, 30s).has_value();
  UNSCOPED_INFO("Mosquitto's last count of connected clients: " << last_count);
  CHECK(counted);

  // Every subscription delivers.
  watcher.publish("fleet/all", "to everyone");
  CHECK(n->delivered.wait_for(count, 60s));

  // The wills are there: one connection dropped without DISCONNECT has its will published.
  const std::string dropped = clients.front().conn->client_id();
  boost::asio::post(clients.front().strand,
                    [c = std::move(clients.front().conn)]() mutable { c.reset(); });
  auto will = watcher.wait_on("fleet/will/" + dropped, 15s);
  REQUIRE(will);
  CHECK(will->payload == "gone");

  // All the others leave with DISCONNECT: gone from the broker, and no will published
  // (MQTT 5.0 §3.14.4).
  for (std::size_t i = 1; i < clients.size(); ++i) {
    boost::asio::post(clients[i].strand,
                      [c = clients[i].conn, n] { c->disconnect(2s, [n] { n->closed.add(); }); });
  }
  CHECK(n->closed.wait_for(count - 1, 60s));
  int wills = 0;
  const auto gone = watcher.wait_for(
      [&](const Received& r) {
        if (r.topic.rfind("fleet/will/", 0) == 0) ++wills;
        return is_count(r, "1");
      },
      30s);
  UNSCOPED_INFO("Mosquitto's last count of connected clients: " << last_count);
  CHECK(gone);
  CHECK(wills == 0);
  CHECK(n->lost.value() == 0);
  for (std::size_t i = 1; i < clients.size(); ++i) {
    boost::asio::post(clients[i].strand, [c = std::move(clients[i].conn), n]() mutable {
      c.reset();
      n->released.add();
    });
  }
  CHECK(n->released.wait_for(count - 1, 30s));
}

// Connection behaviour against a real Mosquitto: the sockets' TCP options and bursts.
#include <atomic>
#include <filesystem>
#include <future>
#include <set>
#include <string>

#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "mqtt/connection.hpp"
#include "mqtt/tcp_nodelay.hpp"
#include "tests/support/fake_broker.hpp"
#include "tests/support/io.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/observer.hpp"

namespace config = mcpmqtt::config;
namespace mq = mcpmqtt::mqtt;
using namespace mcpmqtt::test;
using namespace std::chrono_literals;

namespace {

// A Connection (default options but the broker and the QoS) that has had its CONNACK;
// disconnects when the test is over.
struct Connected {
  IoThreads io;
  boost::asio::any_io_executor strand = io.strand();
  std::shared_ptr<mq::Connection> conn;
  Inbox<std::string> topics;                    // of the messages that arrived
  Inbox<std::pair<bool, std::string>> results;  // of the operations given record()

  mq::Done record() {
    return [this](bool ok, const std::string& why) { results.push({ok, why}); };
  }

  Connected(const std::string& broker_url, const std::string& id_prefix, int qos = 1) {
    auto loaded = config::defaults();
    config::Overrides o;
    o.broker_url = broker_url;
    config::apply_overrides(loaded, o);
    mq::ConnectionOptions opts;
    opts.broker = loaded.config->mqtt;
    opts.broker.qos = qos;
    opts.client_id = random_id(id_prefix);
    Inbox<bool> up;
    mq::Connection::Handlers h;
    h.on_connected = [&up](const mq::ConnackInfo&, bool) { up.push(true); };
    h.on_message = [this](const mq::Incoming& in) { topics.push(in.topic); };
    conn = mq::Connection::create(strand, opts, h);
    io.run(strand, [this] { conn->connect(); });
    REQUIRE(up.pop());
  }
  ~Connected() {
    std::promise<void> done;
    io.run(strand, [&] { conn->disconnect(1s, [&] { done.set_value(); }); });
    done.get_future().wait_for(5s);
  }
};

// Our TCP sockets connected to 127.0.0.1:port, with their TCP_NODELAY setting.
std::vector<int> nodelay_of_sockets_to(std::uint16_t port) {
  std::vector<int> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(e.path().filename().string());
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;
    if (peer.sin_family != AF_INET || ntohs(peer.sin_port) != port) continue;
    int v = -1;
    socklen_t vl = sizeof v;
    ::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &vl);
    out.push_back(v);
  }
  return out;
}

}  // namespace

// Paho C never sets TCP_NODELAY (see mqtt/tcp_nodelay.hpp): without it a QoS 1 round trip
// waits ~88 ms for Nagle and delayed ACKs.
TEST_CASE("MQTT connections have TCP_NODELAY set", "[mqtt][nodelay]") {
  Mosquitto broker;
  Connected c(broker.url(), "nodelay");
  CHECK(mq::tcp_nodelay_active());
  const auto sockets = nodelay_of_sockets_to(broker.port());
  REQUIRE_FALSE(sockets.empty());
  for (int v : sockets)
    CHECK(v == 1);
}

// A server endpoint answers many sessions on one connection; at shutdown it tells every client
// at once. Paho C refuses a publish once 100 (its default) are queued and not yet written —
// even while connected — so a burst must not be capped by that default. It is also far more
// than the broker's Receive Maximum (Mosquitto: 20), so the connection's own flow control
// carries most of it (MQTT 5 §4.9). At QoS 0 (no acknowledgements) the same window counts
// publications Paho has not yet written.
TEST_CASE("a burst of 2,000 publishes on one connection all reach the broker", "[mqtt][burst]") {
  const int qos = GENERATE(1, 0);
  INFO("mqtt.qos " << qos);
  Mosquitto broker;
  Observer watcher(broker.url());
  watcher.subscribe("burst/#");
  Connected c(broker.url(), "burst", qos);
  constexpr int kCount = 2000;
  std::atomic<int> failed{0};
  c.io.run(c.strand, [&] {
    for (int i = 0; i < kCount; ++i)
      c.conn->publish("burst/" + std::to_string(i), std::string(200, 'x'), false,
                      [&](bool ok, const std::string&) {
                        if (!ok) failed++;
                      });
  });
  int received = 0;
  while (received < kCount && watcher.next(5s))
    ++received;
  CHECK(received == kCount);
  CHECK(failed == 0);
}

// A session's three filters (004 §Initialization) go in one subscribe call, with one
// completion once the broker answered for all of them; one unsubscribe call ends them together.
TEST_CASE(
    "one subscribe call of several filters completes once and every filter delivers, and one "
    "unsubscribe call ends them all",
    "[mqtt][subscribe]") {
  Mosquitto broker;
  Observer peer(broker.url());
  Connected c(broker.url(), "subs");

  c.io.run(c.strand, [&] {
    c.conn->subscribe({{"open/a", false}, {"open/b", true}, {"open/c", false}}, c.record());
  });
  auto all = c.results.pop();
  REQUIRE(all);
  CHECK(all->first);
  CHECK_FALSE(c.results.pop(300ms));  // once
  for (const char* t : {"open/a", "open/b", "open/c"})
    peer.publish(t, "{}");
  std::set<std::string> seen;
  for (int i = 0; i < 3; ++i) {
    auto t = c.topics.pop(5s);
    REQUIRE(t);
    seen.insert(*t);
  }
  CHECK(seen == std::set<std::string>{"open/a", "open/b", "open/c"});

  c.io.run(c.strand, [&] { c.conn->subscribe("open/d", false, c.record()); });
  REQUIRE(c.results.pop());
  c.io.run(c.strand, [&] { c.conn->unsubscribe({"open/a", "open/b", "open/c"}, c.record()); });
  auto gone = c.results.pop();
  REQUIRE(gone);
  CHECK(gone->first);
  CHECK_FALSE(c.results.pop(300ms));
  for (const char* t : {"open/a", "open/b", "open/c", "open/d"})
    peer.publish(t, "{}");
  auto only = c.topics.pop(5s);
  REQUIRE(only);
  CHECK(*only == "open/d");
  CHECK_FALSE(c.topics.pop(300ms));
}

// What goes on the wire: filters without options share a SUBSCRIBE, a filter with No Local has
// one of its own (see Connection::send_subscribe), an unsubscribe call is one UNSUBSCRIBE. A
// SUBACK reason code of 0x80 or above refuses that filter (MQTT 5.0 §3.9.3): the call fails with
// the broker's reason.
TEST_CASE(
    "a subscribe call shares one SUBSCRIBE among its filters without options and fails with "
    "the reason when the broker refuses one of them",
    "[mqtt][subscribe]") {
  FakeBroker broker;
  Connected c(broker.url(), "wire");

  c.io.run(c.strand, [&] {
    c.conn->subscribe({{"rpc/x", true}, {"cap/x", false}, {"presence/x", false}}, c.record());
  });
  auto granted = c.results.pop();
  REQUIRE(granted);
  CHECK(granted->first);
  std::vector<std::vector<std::pair<std::string, int>>> packets;
  for (std::size_t i = 0; i < 2; ++i) {
    auto s = broker.subscribe(i);
    REQUIRE(s);
    packets.push_back(s->filters);
  }
  CHECK_FALSE(broker.subscribe(2, 300ms));
  CHECK(packets.at(0) == std::vector<std::pair<std::string, int>>{{"rpc/x", 1 | 0x04}});
  CHECK(packets.at(1) == std::vector<std::pair<std::string, int>>{{"cap/x", 1}, {"presence/x", 1}});

  c.io.run(c.strand, [&] {
    c.conn->subscribe({{"granted/y", false}, {"refused/y", false}}, c.record());
  });
  auto refused = c.results.pop();
  REQUIRE(refused);
  CHECK_FALSE(refused->first);
  CHECK(refused->second.find("the broker refused it") != std::string::npos);
  CHECK_FALSE(c.results.pop(300ms));

  c.io.run(c.strand, [&] { c.conn->unsubscribe({"rpc/x", "cap/x", "presence/x"}, c.record()); });
  auto gone = c.results.pop();
  REQUIRE(gone);
  CHECK(gone->first);
  CHECK(broker.unsubscribe_packets() ==
        std::vector<std::vector<std::string>>{{"rpc/x", "cap/x", "presence/x"}});
}

// BrokerConnection behaviour against a real Mosquitto: the sockets' TCP options and bursts.
#include <atomic>
#include <csignal>
#include <future>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "mqtt/broker_connection.hpp"
#include "tests/support/engine.hpp"
#include "tests/support/fake_broker.hpp"
#include "tests/support/io.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/observer.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/test_connection.hpp"

namespace config = mcpmqtt::config;
namespace mq = mcpmqtt::mqtt;
using namespace mcpmqtt::test;
using namespace std::chrono_literals;

namespace {

// A BrokerConnection (default options but the broker and the QoS) that has had its CONNACK;
// disconnects when the test is over.
struct Connected {
  IoThreads io;
  boost::asio::any_io_executor strand = io.strand();
  std::shared_ptr<mq::BrokerConnection> conn;
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
    opts.broker = mcpmqtt::directions::broker_options(loaded.config->mqtt);
    opts.broker.qos = qos;
    opts.client_id = random_id(id_prefix);
    Inbox<bool> up;
    mq::BrokerConnection::Handlers h;
    h.on_connected = [&up](const mq::ConnackInfo&, bool) { up.push(true); };
    h.on_message = [this](const mq::Incoming& in) { topics.push(in.topic); };
    conn = mq::BrokerConnection::create(strand, opts, h);
    io.run(strand, [this] { conn->connect(); });
    REQUIRE(up.pop());
  }
  ~Connected() {
    std::promise<void> done;
    io.run(strand, [&] { conn->disconnect(1s, [&] { done.set_value(); }); });
    done.get_future().wait_for(5s);
  }
};

}  // namespace

// Without TCP_NODELAY a QoS 1 round trip waits ~40-88 ms for Nagle and delayed ACKs. The native
// engine sets it on its socket; Paho C never does (see mqtt/paho/tcp_nodelay.hpp).
TEST_CASE("MQTT connections have TCP_NODELAY set", "[mqtt][nodelay]") {
  Mosquitto broker;
  Connected c(broker.url(), "nodelay");
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
  // What is measured is what reaches the broker; the observer only reads it back. Mosquitto drops
  // messages for a subscriber more than max_queued_messages (1,000) behind, and the observer
  // (Paho, its own thread) falls that far behind the native engine on a busy machine: let the
  // broker hold them all.
  Mosquitto::Options bo;
  bo.extra_config = "max_queued_messages " + std::to_string(2 * 2000) + "\n";
  Mosquitto broker(bo);
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
  INFO(broker.log());
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

// What goes on the wire: the filters of a subscribe call share a SUBSCRIBE, each with its own
// options (MQTT 5.0 §3.8.3.1), and an unsubscribe call is one UNSUBSCRIBE. Paho C++ 1.2 cannot
// give a many-filter SUBSCRIBE its options, so on Paho a filter with No Local has a packet of its
// own (mqtt/paho/paho_engine.cpp). A SUBACK reason code of 0x80 or above refuses that filter
// (MQTT 5.0 §3.9.3): the call fails with the broker's reason.
TEST_CASE(
    "a subscribe call shares a SUBSCRIBE among its filters, each with its options, and fails "
    "with the reason when the broker refuses one of them",
    "[mqtt][subscribe]") {
  FakeBroker broker;
  Connected c(broker.url(), "wire");
  const bool paho = paho_under_test();
  INFO("engine " << engine_name(engine_under_test()));

  c.io.run(c.strand, [&] {
    c.conn->subscribe({{"rpc/x", true}, {"cap/x", false}, {"presence/x", false}}, c.record());
  });
  auto granted = c.results.pop();
  REQUIRE(granted);
  CHECK(granted->first);
  using Filters = std::vector<std::pair<std::string, int>>;
  std::vector<Filters> packets;
  const std::size_t expected = paho ? 2 : 1;
  for (std::size_t i = 0; i < expected; ++i) {
    auto s = broker.subscribe(i);
    REQUIRE(s);
    packets.push_back(s->filters);
  }
  CHECK_FALSE(broker.subscribe(expected, 300ms));
  if (paho) {
    CHECK(packets.at(0) == Filters{{"rpc/x", 1 | 0x04}});
    CHECK(packets.at(1) == Filters{{"cap/x", 1}, {"presence/x", 1}});
  } else {
    CHECK(packets.at(0) == Filters{{"rpc/x", 1 | 0x04}, {"cap/x", 1}, {"presence/x", 1}});
  }

  c.io.run(c.strand, [&] {
    c.conn->subscribe({{"granted/y", false}, {"refused/y", false}}, c.record());
  });
  auto refused = c.results.pop();
  REQUIRE(refused);
  CHECK_FALSE(refused->first);
  CHECK(refused->second.find("the broker refused the subscription to refused/y") !=
        std::string::npos);
  CHECK_FALSE(c.results.pop(300ms));

  c.io.run(c.strand, [&] { c.conn->unsubscribe({"rpc/x", "cap/x", "presence/x"}, c.record()); });
  auto gone = c.results.pop();
  REQUIRE(gone);
  CHECK(gone->first);
  CHECK(broker.unsubscribe_packets() ==
        std::vector<std::vector<std::string>>{{"rpc/x", "cap/x", "presence/x"}});
}

// A server endpoint that stops publishes `disconnected` to each of its sessions and its empty
// presence (004 §Server Shutdown), far more than the broker's Receive Maximum takes at once. The
// disconnect waits for them to leave the window before the DISCONNECT: a DISCONNECT sent first
// would end the connection with them still queued, and (reason 0x00) discard the will as well.
TEST_CASE(
    "disconnect sends what waits for the broker's Receive Maximum before DISCONNECT, and the "
    "broker then discards the will (MQTT 5.0 §3.14.4)",
    "[mqtt][disconnect]") {
  Mosquitto::Options bo;
  bo.extra_config = "max_inflight_messages 2\nmax_queued_messages 1000\n";
  Mosquitto broker(bo);
  Observer watcher(broker.url());
  watcher.subscribe("drain/#");
  IoThreads io;
  auto o = connection_options(broker.url(), "drain");
  o.will = mq::Will{"drain/will", "gone", false};
  TestConnection c(io, o);
  const auto up = c.wait_connected();
  REQUIRE(up.info.receive_maximum == 2);  // what makes the 200 below wait for the window

  constexpr int kCount = 200;
  std::atomic<int> ok{0};
  auto closed = std::make_shared<std::promise<void>>();
  io.run(c.strand(), [&] {
    for (int i = 0; i < kCount; ++i)
      c.connection().publish("drain/" + std::to_string(i), "{}", false,
                             [&ok](bool good, const std::string&) { ok += good ? 1 : 0; });
    c.connection().disconnect(10s, [closed] { closed->set_value(); });
  });
  REQUIRE(closed->get_future().wait_for(15s) == std::future_status::ready);
  CHECK(ok == kCount);
  for (int i = 0; i < kCount; ++i) {
    auto m = watcher.next(5s);
    REQUIRE(m);
    CHECK(m->topic == "drain/" + std::to_string(i));  // in order, none lost
  }
  CHECK_FALSE(watcher.next(300ms));  // a clean DISCONNECT: no will (the broker sends one at once)
}

// When the broker stops acknowledging, the queued publications cannot go out within the
// disconnect's timeout. Then the connection closes without DISCONNECT, so that the broker
// publishes the will (MQTT 5.0 §3.1.2.5): the peers still hear that we left (a server's will
// clears its presence, 004 §Server Shutdown), and the publications that never left fail.
// Native engine only (tag [native], which the Paho registration leaves out): Paho's client
// sends DISCONNECT 0x00 when it is destroyed, and the broker then discards the will.
TEST_CASE(
    "a disconnect that cannot send what is queued within its timeout closes without DISCONNECT "
    "and the broker publishes the will (MQTT 5.0 §3.1.2.5)",
    "[mqtt][disconnect][native]") {
  Mosquitto::Options bo;
  bo.extra_config = "max_inflight_messages 1\n";
  Mosquitto broker(bo);
  Observer watcher(broker.url());
  watcher.subscribe("stuck/#");
  IoThreads io;
  auto o = connection_options(broker.url(), "stuck");
  o.will = mq::Will{"stuck/will", "gone", false};
  o.reconnect = false;
  TestConnection c(io, o);
  REQUIRE(c.wait_connected().info.receive_maximum == 1);

  // A broker that hangs with the connection open: nothing is acknowledged.
  REQUIRE(::kill(broker.pid(), SIGSTOP) == 0);
  struct Resume {
    pid_t pid;
    ~Resume() { ::kill(pid, SIGCONT); }
  } resume{broker.pid()};

  constexpr int kCount = 10;
  auto failed = std::make_shared<std::atomic<int>>(0);
  auto closed = std::make_shared<std::promise<void>>();
  const auto start = std::chrono::steady_clock::now();
  io.run(c.strand(), [&] {
    for (int i = 0; i < kCount; ++i)
      c.connection().publish("stuck/" + std::to_string(i), "{}", false,
                             [failed](bool good, const std::string&) {
                               if (!good) ++*failed;
                             });
    c.connection().disconnect(500ms, [closed] { closed->set_value(); });
  });
  REQUIRE(closed->get_future().wait_for(10s) == std::future_status::ready);
  CHECK(std::chrono::steady_clock::now() - start < 3s);  // bounded by the timeout, not the broker
  // The first went out and waits for its PUBACK; the other nine never left the window.
  CHECK(*failed >= kCount - 1);

  REQUIRE(::kill(broker.pid(), SIGCONT) == 0);
  std::vector<std::string> topics;
  while (auto m = watcher.next(5s)) {
    topics.push_back(m->topic);
    if (m->topic == "stuck/will") break;
  }
  INFO(broker.log());
  REQUIRE_FALSE(topics.empty());
  CHECK(topics.back() == "stuck/will");
  CHECK(topics.size() <= 2);  // at most the one that had gone out, then the will
}

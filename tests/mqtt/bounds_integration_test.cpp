// Issue 20 §Limits that hold: what the MQTT side holds for a slow broker or a hasty client is
// bounded in bytes as well as messages, and full means an error to whoever sent, never a silent
// drop. A scripted broker that stops reading stands for the slow one.
#include <catch2/catch.hpp>

#include "bridge/protocol/topics.hpp"
#include "mqtt/server_endpoint.hpp"
#include "tests/support/fake_broker.hpp"
#include "tests/support/io.hpp"
#include "tests/support/test_connection.hpp"
#include "tests/support/wait.hpp"

namespace bridge = mcpmqtt::bridge;
namespace jsonrpc = mcpmqtt::jsonrpc;
namespace mq = mcpmqtt::mqtt;
namespace topics = mcpmqtt::topics;
using namespace mcpmqtt::test;
using namespace std::chrono_literals;

namespace {

// A QoS 0 PUBLISH from the broker to the client (MQTT 5.0 §3.3) from MCP client `sender`: the
// user properties 004 §User Property puts on every message (0x26: User Property).
std::string publish_packet(const std::string& topic, const std::string& payload,
                           const std::string& sender) {
  const std::string props = "\x26" + wire::utf8("MCP-COMPONENT-TYPE") + wire::utf8("mcp-client") +
                            "\x26" + wire::utf8("MCP-MQTT-CLIENT-ID") + wire::utf8(sender);
  return wire::packet(0x30, wire::utf8(topic) + wire::varint(props.size()) + props + payload);
}

mq::BrokerConnection::Held held(IoThreads& io, TestConnection& c) {
  return io.run(c.strand(), [&] { return c.connection().held(); });
}

}  // namespace

TEST_CASE(
    "bounds: publications the broker has not acknowledged are bounded in bytes (in flight, then "
    "queued): past the bound a publish fails naming it, and nothing more is held",
    "[mqtt][bounds]") {
  FakeBroker broker;
  IoThreads io;
  auto o = connection_options(broker.url(), "bounds");
  o.max_in_flight_bytes = 1000;
  o.max_queued_bytes = 3000;
  TestConnection c(io, o);
  c.wait_connected();
  broker.set_silent(true);  // reads nothing: no PUBACK comes back
  const std::string payload(600, 'x');
  auto results = std::make_shared<Inbox<TestConnection::Result>>();
  auto publish = [&](int n) {
    io.run(c.strand(), [&] {
      for (int i = 0; i < n; ++i)
        c.connection().publish("bounds/t", std::make_shared<const std::string>(payload), false,
                               [results](bool ok, const std::string& why) {
                                 results->push({ok, why});
                               });
    });
  };
  // One goes in flight (600 of 1000 bytes); the next would pass 1000, so it and four more wait
  // in the queue (3000 bytes); the seventh has no room.
  publish(7);
  auto refused = results->pop(5s);
  REQUIRE(refused);
  CHECK_FALSE(refused->ok);
  CHECK(refused->why ==
        "the publications waiting for the broker's acknowledgements would exceed 3000 bytes "
        "(3000 queued, this one 600)");
  auto h = held(io, c);
  CHECK(h.in_flight_messages == 1);
  CHECK(h.in_flight_bytes == 600);
  CHECK(h.queued_messages == 5);
  CHECK(h.queued_bytes == 3000);
  // A thousand more: each refused at once, and what is held stays where it was.
  publish(1000);
  for (int i = 0; i < 1000; ++i) {
    auto r = results->pop(5s);
    REQUIRE(r);
    REQUIRE_FALSE(r->ok);
  }
  h = held(io, c);
  CHECK(h.queued_bytes == 3000);
  CHECK(h.in_flight_bytes == 600);
  // The broker reads again: every held publication goes out and is acknowledged.
  broker.set_silent(false);
  for (int i = 0; i < 6; ++i) {
    auto r = results->pop(10s);
    REQUIRE(r);
    CHECK(r->ok);
  }
  CHECK(eventually([&] { return held(io, c).queued_messages == 0; }));
  CHECK(held(io, c).in_flight_bytes == 0);
}

TEST_CASE(
    "bounds: a publication larger than the in-flight bound still goes when nothing else is in "
    "flight",
    "[mqtt][bounds]") {
  FakeBroker broker;
  IoThreads io;
  auto o = connection_options(broker.url(), "bounds-big");
  o.max_in_flight_bytes = 100;
  TestConnection c(io, o);
  c.wait_connected();
  auto r = c.publish("bounds/big", std::string(5000, 'y'));
  REQUIRE(r);
  CHECK(r->ok);
  auto p = broker.publish(0);
  REQUIRE(p);
  CHECK(p->payload.size() == 5000);
}

TEST_CASE(
    "bounds: 004 §Initialization — RPC messages that arrive before the initialize is answered are "
    "held up to a bound, and requests past it get a JSON-RPC error at once, never a silent drop",
    "[mqtt][bounds][server]") {
  FakeBroker broker;
  IoThreads io;
  const std::string sid = random_id("srv");
  const std::string name = "test/bounds";
  mq::ServerEndpoint::Options o;
  o.broker = broker_options(broker.url());
  o.server_id = sid;
  o.server_name = name;
  o.max_early_messages = 3;
  Inbox<std::string> delivered;
  std::shared_ptr<mq::ClientLink> kept;
  mq::ServerEndpoint::Handlers h;
  h.on_initialize = [&](std::shared_ptr<mq::ClientLink> link, jsonrpc::Message) {
    kept = link;
    link->start({[&](jsonrpc::Message m) { delivered.push(std::string(m.text())); },
                 [](const bridge::CloseReason&) {}});
  };
  auto strand = io.strand();
  auto endpoint = mq::ServerEndpoint::create(
      strand, [&] { return io.strand(); }, o, h);
  io.run(strand, [&] { endpoint->start(); });
  // The control topic's SUBSCRIBE and the presence are there: the endpoint is online.
  REQUIRE(broker.subscribe(0));
  REQUIRE(broker.publish(0));
  // The broker stops reading: the SUBSCRIBE for the client's topics stays unanswered while its
  // messages arrive.
  broker.set_silent(true);
  const std::string cid = "client-early";
  REQUIRE(broker.inject(
      0,
      publish_packet(
          topics::standard().server_control(sid, name),
          R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})",
          cid)));
  for (int id = 2; id <= 7; ++id)
    REQUIRE(broker.inject(0, publish_packet(topics::standard().rpc(cid, sid, name),
                                            R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
                                                R"(,"method":"tools/list"})",
                                            cid)));
  broker.set_silent(false);
  // Requests 5, 6 and 7 are refused on the client's RPC topic, naming the bound.
  std::vector<std::string> refused;
  for (std::size_t n = 1; refused.size() < 3; ++n) {
    auto p = broker.publish(n, 10s);
    REQUIRE(p);
    if (p->topic == topics::standard().rpc(cid, sid, name)) refused.push_back(p->payload);
  }
  for (int i = 0; i < 3; ++i) {
    INFO(refused[i]);
    CHECK(refused[i].find(R"("id":)" + std::to_string(5 + i)) != std::string::npos);
    CHECK(refused[i].find("more than 3 messages or 4194304 bytes arrived before the initialize "
                          "response") != std::string::npos);
  }
  // The session starts with the initialize and the three held requests, in order.
  std::vector<std::string> got;
  for (int i = 0; i < 4; ++i) {
    auto m = delivered.pop(10s);
    REQUIRE(m);
    got.push_back(*m);
  }
  CHECK(got[0].find("initialize") != std::string::npos);
  for (int i = 1; i < 4; ++i)
    CHECK(got[i].find(R"("id":)" + std::to_string(i + 1)) != std::string::npos);
  CHECK_FALSE(delivered.pop(200ms));
  std::promise<void> stopped;
  io.run(strand, [&] { endpoint->stop(1s, [&] { stopped.set_value(); }); });
  stopped.get_future().wait_for(5s);
}

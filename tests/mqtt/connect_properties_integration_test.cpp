// What the bridge puts in CONNECT and how it honours CONNACK user properties (004 §User
// Property), seen by a scripted broker that decodes the packets itself.
#include <future>
#include <map>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

#include "bridge/protocol/topics.hpp"
#include "mqtt/client_session.hpp"
#include "mqtt/directory_observer.hpp"
#include "mqtt/server_endpoint.hpp"
#include "tests/support/engine.hpp"
#include "tests/support/fake_broker.hpp"
#include "tests/support/io.hpp"
#include "tests/support/test_connection.hpp"
#include "tests/support/wait.hpp"

namespace bridge = mcpmqtt::bridge;
namespace config = mcpmqtt::config;
namespace jsonrpc = mcpmqtt::jsonrpc;
namespace mq = mcpmqtt::mqtt;
namespace topics = mcpmqtt::topics;
using namespace mcpmqtt::test;
using namespace std::chrono_literals;

namespace {

std::optional<std::string> prop(const UserProperties& props, const std::string& key) {
  for (const auto& [k, v] : props) {
    if (k == key) return v;
  }
  return std::nullopt;
}

// A server endpoint started on its own I/O threads; stopped when the test is over.
struct StartedEndpoint {
  IoThreads io;
  boost::asio::any_io_executor strand = io.strand();
  std::shared_ptr<mq::ServerEndpoint> ep;

  explicit StartedEndpoint(const mq::ServerEndpoint::Options& o)
      : ep(mq::ServerEndpoint::create(strand, [this] { return io.strand(); }, o, {})) {
    io.run(strand, [this] { ep->start(); });
  }
  ~StartedEndpoint() {
    std::promise<void> stopped;
    io.run(strand, [&] { ep->stop(1s, [&] { stopped.set_value(); }); });
    stopped.get_future().wait_for(5s);
  }
};

}  // namespace

TEST_CASE(
    "CONNECT of a server endpoint: MQTT 5, clean start, session expiry 0, MCP user "
    "properties, empty retained will with its properties",
    "[mqtt][connect]") {
  FakeBroker broker;
  mq::ServerEndpoint::Options o;
  o.broker = broker_options(broker.url());
  o.server_id = "sid-connect";
  o.server_name = "demo/connect";
  o.connect_meta_json = R"({"implementation":"mcp-mqtt-bridge"})";
  StartedEndpoint e(o);
  auto c = broker.connect(0);
  REQUIRE(c);
  CHECK(c->protocol_level == 5);
  CHECK(c->clean_start);
  CHECK(c->session_expiry == 0u);
  CHECK(c->client_id == "sid-connect");
  CHECK(prop(c->user_properties, "MCP-COMPONENT-TYPE") == "mcp-server");
  CHECK(prop(c->user_properties, "MCP-META") == R"({"implementation":"mcp-mqtt-bridge"})");
  CHECK(c->will);
  CHECK(c->will_retain);
  CHECK(c->will_topic == "$mcp-server/presence/sid-connect/demo/connect");
  CHECK(c->will_payload.empty());
  CHECK(c->will_qos == 1);  // mqtt.qos, 1 by default
  CHECK(prop(c->will_user_properties, "MCP-COMPONENT-TYPE") == "mcp-server");
  CHECK(prop(c->will_user_properties, "MCP-MQTT-CLIENT-ID") == "sid-connect");

  // The control topic subscription, then the retained online presence with user properties.
  auto s = broker.subscribe(0);
  REQUIRE(s);
  CHECK(s->filters.at(0).first == "$mcp-server/sid-connect/demo/connect");
  CHECK((s->filters.at(0).second & 0x03) == 1);
  auto p = broker.publish(0);
  REQUIRE(p);
  CHECK(p->topic == "$mcp-server/presence/sid-connect/demo/connect");
  CHECK(p->retain);
  CHECK(p->qos == 1);
  CHECK(prop(p->user_properties, "MCP-COMPONENT-TYPE") == "mcp-server");
  CHECK(prop(p->user_properties, "MCP-MQTT-CLIENT-ID") == "sid-connect");
}

TEST_CASE("mqtt.qos 0: a server endpoint's will and subscription and its presence go at QoS 0",
          "[mqtt][connect][qos]") {
  FakeBroker broker;
  mq::ServerEndpoint::Options o;
  o.broker = broker_options(broker.url());
  o.broker.qos = 0;
  o.server_id = "sid-qos0";
  o.server_name = "demo/qos0";
  StartedEndpoint e(o);
  auto c = broker.connect(0);
  REQUIRE(c);
  CHECK(c->will);
  CHECK(c->will_qos == 0);
  auto s = broker.subscribe(0);
  REQUIRE(s);
  CHECK((s->filters.at(0).second & 0x03) == 0);
  auto p = broker.publish(0);
  REQUIRE(p);
  CHECK(p->topic == "$mcp-server/presence/sid-qos0/demo/qos0");
  CHECK(p->qos == 0);
}

TEST_CASE(
    "CONNECT of a client session: the will is notifications/disconnected on its presence "
    "topic and the RPC subscription alone uses No Local (MQTT 5.0 §3.8.3.1)",
    "[mqtt][connect]") {
  FakeBroker broker;
  IoThreads io;
  auto strand = io.strand();
  mq::ClientSession::Options o;
  o.broker = broker_options(broker.url());
  o.client_id = "cid-connect";
  o.server_id = "sid-x";
  o.server_name = "demo/x";
  auto session = mq::ClientSession::create(strand, o);
  io.run(strand, [&] {
    session->start({[](jsonrpc::Message) {}, [](const bridge::CloseReason&) {}});
  });
  auto c = broker.connect(0);
  REQUIRE(c);
  CHECK(c->protocol_level == 5);
  CHECK(c->session_expiry == 0u);
  CHECK(prop(c->user_properties, "MCP-COMPONENT-TYPE") == "mcp-client");
  CHECK(prop(c->user_properties, "MCP-META"));
  CHECK(c->will);
  CHECK_FALSE(c->will_retain);
  CHECK(c->will_topic == "$mcp-client/presence/cid-connect");
  CHECK(c->will_payload == R"({"jsonrpc":"2.0","method":"notifications/disconnected"})");
  CHECK(prop(c->will_user_properties, "MCP-MQTT-CLIENT-ID") == "cid-connect");
  // Subscription options byte: QoS 1 with No Local (bit 2) on the RPC topic only. The native
  // engine sends the three filters in one SUBSCRIBE. Paho C++ 1.2 cannot give a many-filter
  // SUBSCRIBE its options (mqtt/paho/paho_engine.cpp), so there the filter with No Local goes in
  // a packet of its own and the other two share one.
  const std::string rpc = "$mcp-rpc/cid-connect/sid-x/demo/x";
  const std::string cap = "$mcp-server/capability/sid-x/demo/x";
  const std::string presence = "$mcp-server/presence/sid-x/demo/x";
  const bool paho = paho_under_test();
  INFO("engine " << engine_name(engine_under_test()));
  const std::size_t packets = paho ? 2 : 1;
  std::map<std::string, int> options;
  std::multiset<std::size_t> per_packet;
  std::vector<std::pair<std::string, int>> first;
  for (std::size_t i = 0; i < packets; ++i) {
    auto s = broker.subscribe(i);
    REQUIRE(s);
    if (i == 0) first = s->filters;
    per_packet.insert(s->filters.size());
    for (const auto& [f, opt] : s->filters)
      options[f] = opt;
  }
  CHECK_FALSE(broker.subscribe(packets, 300ms));
  if (paho) {
    CHECK(per_packet == std::multiset<std::size_t>{1, 2});
    CHECK(options.size() == 3);
    CHECK(options.at(rpc) == (1 | 0x04));
    CHECK(options.at(cap) == 1);
    CHECK(options.at(presence) == 1);
  } else {
    CHECK(first ==
          std::vector<std::pair<std::string, int>>{{rpc, 1 | 0x04}, {cap, 1}, {presence, 1}});
  }
  // Closed before the I/O threads stop: a disconnect cut short keeps the session and its
  // connection alive (each holds the other until the disconnect completes).
  auto finished = std::make_shared<std::promise<void>>();
  auto closed = finished->get_future();
  io.run(strand, [&] {
    session->on_finished([finished] { finished->set_value(); });
    session->close({bridge::CloseReason::Kind::normal, "done"});
  });
  CHECK(closed.wait_for(5s) == std::future_status::ready);
}

TEST_CASE(
    "CONNACK MCP-SERVER-NAME: the endpoint adopts the broker's server-name and reconnects so "
    "that its will and presence use it",
    "[mqtt][connect]") {
  FakeBroker broker([](int connection, const ConnectPacket&) -> UserProperties {
    return {{"MCP-SERVER-NAME", "assigned/by/broker"}, {"other", std::to_string(connection)}};
  });
  mq::ServerEndpoint::Options o;
  o.broker = broker_options(broker.url());
  o.server_id = "sid-assigned";
  o.server_name = "configured/name";
  StartedEndpoint e(o);
  auto first = broker.connect(0);
  auto second = broker.connect(1);
  REQUIRE(first);
  REQUIRE(second);
  CHECK(first->will_topic == "$mcp-server/presence/sid-assigned/configured/name");
  CHECK(second->will_topic == "$mcp-server/presence/sid-assigned/assigned/by/broker");
  // Presence was only ever published under the assigned name.
  auto p = broker.publish(0);
  REQUIRE(p);
  CHECK(p->topic == "$mcp-server/presence/sid-assigned/assigned/by/broker");
  CHECK(p->payload.find(R"("server_name":"assigned/by/broker")") != std::string::npos);
  CHECK(e.io.run(e.strand, [&] { return e.ep->server_name(); }) == "assigned/by/broker");
  bool control_subscribed = false;
  for (std::size_t i = 0; i < 4; ++i) {
    auto s = broker.subscribe(i, 2s);
    if (!s) break;
    for (const auto& [f, opt] : s->filters) {
      if (f == "$mcp-server/sid-assigned/assigned/by/broker") control_subscribed = true;
    }
  }
  CHECK(control_subscribed);
}

TEST_CASE(
    "CONNACK MCP-SERVER-NAME-FILTERS and MCP-RBAC: the directory uses the broker's filters "
    "and lists the roles",
    "[mqtt][connect]") {
  FakeBroker broker([](int, const ConnectPacket&) -> UserProperties {
    return {{"MCP-SERVER-NAME-FILTERS", R"(["fleet/+/status","tools/#"])"},
            {"MCP-RBAC", R"([{"server_name":"fleet/a/status","role_name":"viewer"}])"}};
  });
  IoThreads io;
  auto strand = io.strand();
  auto directory = std::make_shared<bridge::Directory>();
  mq::DirectoryObserver::Options o;
  o.broker = broker_options(broker.url());
  o.client_id = "dir-connect";
  o.filters = {"#"};
  auto observer = mq::DirectoryObserver::create(strand, o, directory);
  io.run(strand, [&] { observer->start(); });
  // The configured filter first, then the broker's: each as one SUBSCRIBE, the capability
  // filters (004 §Message Topics) before the presence ones, so that every instance the directory
  // learns of has its capability topic heard already.
  std::vector<std::vector<std::string>> packets;
  for (std::size_t i = 0; i < 2; ++i) {
    auto s = broker.subscribe(i);
    REQUIRE(s);
    packets.emplace_back();
    for (const auto& [f, opt] : s->filters)
      packets.back().push_back(f);
  }
  CHECK(packets[0] ==
        std::vector<std::string>{"$mcp-server/capability/+/#", "$mcp-server/presence/+/#"});
  CHECK(packets[1] == std::vector<std::string>{"$mcp-server/capability/+/fleet/+/status",
                                               "$mcp-server/capability/+/tools/#",
                                               "$mcp-server/presence/+/fleet/+/status",
                                               "$mcp-server/presence/+/tools/#"});
  // The configured filter was replaced.
  eventually([&] { return broker.unsubscribed().size() >= 2; }, 5s);
  CHECK(broker.unsubscribed() ==
        std::vector<std::string>{"$mcp-server/capability/+/#", "$mcp-server/presence/+/#"});
  CHECK(directory->filters() == std::vector<std::string>{"fleet/+/status", "tools/#"});
  CHECK(directory->to_json().find(
            R"("rbac":[{"server_name":"fleet/a/status","role_name":"viewer"}])") !=
        std::string::npos);
  std::promise<void> stopped;
  io.run(strand, [&] { observer->stop(1s, [&] { stopped.set_value(); }); });
  stopped.get_future().wait_for(5s);
}

TEST_CASE(
    "004 §User Property MCP-RBAC: a client session hands its CONNACK's MCP-RBAC to its owner "
    "before it publishes anything",
    "[mqtt][connect][rbac]") {
  FakeBroker broker([](int, const ConnectPacket&) -> UserProperties {
    return {{"MCP-RBAC", R"([{"server_name":"fleet/truck","role_name":"user"}])"}};
  });
  IoThreads io;
  auto strand = io.strand();
  mq::ClientSession::Options o;
  o.broker = broker_options(broker.url());
  o.client_id = mq::fresh_client_id("rbac-connack");
  o.server_id = "truck-1";
  o.server_name = "fleet/truck";
  auto session = mq::ClientSession::create(strand, o);
  Inbox<std::string> told;
  Inbox<std::size_t> published_then;  // how many PUBLISHes the broker had seen at that moment
  session->on_connected([&](const mq::ConnackInfo& info) {
    told.push(info.rbac_json.value_or("(none)"));
    published_then.push(broker.publish(0, 0ms) ? 1 : 0);
  });
  io.run(strand, [&] {
    session->start({[](jsonrpc::Message) {}, [](const bridge::CloseReason&) {}});
    session->send(
        *jsonrpc::Message::parse(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}})"));
  });
  CHECK(told.pop() == R"([{"server_name":"fleet/truck","role_name":"user"}])");
  CHECK(published_then.pop() == 0u);
  // The initialize went after it.
  auto init = broker.publish(0);
  REQUIRE(init);
  CHECK(init->topic == "$mcp-server/truck-1/fleet/truck");
  std::promise<void> finished;
  io.run(strand, [&] {
    session->on_finished([&] { finished.set_value(); });
    session->close({bridge::CloseReason::Kind::shutdown, "test over"});
  });
  CHECK(finished.get_future().wait_for(5s) == std::future_status::ready);
}

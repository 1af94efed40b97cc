// The client session's protocol duties (004), observed through a real Mosquitto by an
// independent MQTT client that plays the MCP server.
#include <set>

#include <catch2/catch.hpp>
#include <rapidjson/document.h>
#include <signal.h>

#include "bridge/protocol/topics.hpp"
#include "mqtt/client_session.hpp"
#include "tests/support/io.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/observer.hpp"
#include "tests/support/test_connection.hpp"

namespace bridge = mcpmqtt::bridge;
namespace config = mcpmqtt::config;
namespace jsonrpc = mcpmqtt::jsonrpc;
namespace mq = mcpmqtt::mqtt;
namespace topics = mcpmqtt::topics;
using namespace mcpmqtt::test;
using namespace std::chrono_literals;

namespace {

const std::string kName = "test/remote/server";
const std::string kInit =
    R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})";

struct Events {
  Inbox<std::string> messages;
  Inbox<std::string> closes;
  Inbox<std::string> interruptions;
  bridge::Channel::Receiver receiver() {
    return {[this](jsonrpc::Message m) { messages.push(std::string(m.text())); },
            [this](const bridge::CloseReason& why) {
              closes.push(std::string(bridge::to_string(why.kind)) + ": " + why.detail);
            },
            [this](const std::string& detail) { interruptions.push(detail); }};
  }
};

// An MCP server played by a plain MQTT client: online presence and the control topic.
struct FakeServer {
  Observer mqtt;
  std::string server_id;
  FakeServer(const std::string& url, std::string sid)
      : mqtt(url, Observer::Options::with_id(sid)), server_id(std::move(sid)) {
    announce();
    mqtt.subscribe(topics::standard().server_control(server_id, kName));
  }
  // 004 §Server Online: the retained presence (again, after a reconnect).
  void announce(const std::string& description = "fake") {
    mqtt.publish(
        topics::standard().server_presence(server_id, kName),
        R"({"jsonrpc":"2.0","method":"notifications/server/online","params":{"server_name":")" +
            kName + R"(","description":")" + description + R"("}})",
        true);
  }
  std::string rpc(const std::string& cid) const {
    return topics::standard().rpc(cid, server_id, kName);
  }
};

struct Fixture {
  Mosquitto broker;
  IoThreads io;
  FakeServer server{broker.url(), random_id("fake-srv")};
  Events events;
  boost::asio::any_io_executor strand = io.strand();
  std::shared_ptr<mq::ClientSession> session;

  std::shared_ptr<mq::ClientSession> make(const std::string& url) {
    mq::ClientSession::Options o;
    o.broker = broker_options(url);
    o.client_id = mq::fresh_client_id("test-client");
    o.server_id = server.server_id;
    o.server_name = kName;
    return mq::ClientSession::create(strand, o);
  }
  Fixture() {
    session = make(broker.url());
    io.run(strand, [&] { session->start(events.receiver()); });
  }
  ~Fixture() {
    io.run(strand, [&] { session->close({bridge::CloseReason::Kind::shutdown, "test over"}); });
  }
  std::string cid() const { return session->client_id(); }
  void send(const std::string& text) {
    auto m = jsonrpc::Message::parse(text);
    REQUIRE(m);
    io.run(strand, [&] { session->send(*m); });
  }
};

}  // namespace

TEST_CASE("004 §MQTT Client ID: each session gets a fresh client id", "[mqtt][client]") {
  std::set<std::string> ids;
  for (int i = 0; i < 100; ++i)
    ids.insert(mq::fresh_client_id("mcp-bridge"));
  CHECK(ids.size() == 100);
  for (const auto& id : ids) {
    CHECK(topics::is_valid_id(id));
    CHECK(id.size() == std::string("mcp-bridge-").size() + 32);
  }
}

TEST_CASE(
    "004 §Initialization: subscriptions are in place before initialize, which goes to the "
    "control topic with the user properties",
    "[mqtt][client]") {
  Fixture f;
  f.send(kInit);
  auto init = f.server.mqtt.wait_on(topics::standard().server_control(f.server.server_id, kName));
  REQUIRE(init);
  CHECK(init->payload == kInit);
  CHECK(init->property("MCP-COMPONENT-TYPE") == "mcp-client");
  CHECK(init->property("MCP-MQTT-CLIENT-ID") == f.cid());
  // At the moment initialize arrived, the client was already subscribed to its RPC topic and
  // the server's capability topic: messages published now reach it.
  f.server.mqtt.publish(topics::standard().server_capability(f.server.server_id, kName),
                        R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})");
  f.server.mqtt.publish(
      f.server.rpc(f.cid()),
      R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-03-26","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}})");
  auto first = f.events.messages.pop();
  REQUIRE(first);
  CHECK(*first == R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})");
  auto second = f.events.messages.pop();
  REQUIRE(second);
  CHECK(second->find(R"("serverInfo":{"name":"fake")") != std::string::npos);

  // Everything after initialize goes on the RPC topic.
  f.server.mqtt.subscribe(f.server.rpc(f.cid()), /*no_local=*/true);
  f.send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  f.send(R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})");
  auto a = f.server.mqtt.wait_on(f.server.rpc(f.cid()));
  auto b = f.server.mqtt.wait_on(f.server.rpc(f.cid()));
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->payload == R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  CHECK(b->payload == R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})");
  CHECK(b->property("MCP-MQTT-CLIENT-ID") == f.cid());
  // No Local: its own publications on the RPC topic never came back to it.
  CHECK_FALSE(f.events.messages.pop(300ms));
}

TEST_CASE("004 §Server Disconnect: an empty presence for the instance ends the session",
          "[mqtt][client]") {
  Fixture f;
  f.send(kInit);
  REQUIRE(f.server.mqtt.wait_on(topics::standard().server_control(f.server.server_id, kName)));
  f.server.mqtt.publish(topics::standard().server_presence(f.server.server_id, kName), "", true);
  auto closed = f.events.closes.pop();
  REQUIRE(closed);
  CHECK(*closed ==
        "peer gone: server " + kName + " (instance " + f.server.server_id + ") went offline");
}

TEST_CASE(
    "issue 33, federation: the instance announcing itself again resends an unanswered "
    "initialize, then tells the receiver that requests in flight may be lost",
    "[mqtt][client]") {
  Fixture f;
  const auto control = topics::standard().server_control(f.server.server_id, kName);
  f.send(kInit);
  REQUIRE(f.server.mqtt.wait_on(control));  // and lost: no answer
  // The server's broker connection came back: the same presence, live.
  f.server.announce();
  auto again = f.server.mqtt.wait_on(control);
  REQUIRE(again);
  CHECK(again->payload == kInit);
  const std::string init_result =
      R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-03-26","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}})";
  f.server.mqtt.publish(f.server.rpc(f.cid()), init_result);
  CHECK(f.events.messages.pop() == init_result);
  // Once initialized, a repeat is the receiver's to handle: requests in flight may be lost.
  f.server.mqtt.subscribe(f.server.rpc(f.cid()), /*no_local=*/true);
  f.send(R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})");
  REQUIRE(f.server.mqtt.wait_on(f.server.rpc(f.cid())));
  f.server.announce();
  auto why = f.events.interruptions.pop();
  REQUIRE(why);
  CHECK(*why == "server " + kName + " (instance " + f.server.server_id +
                    ") announced itself again after its broker connection came back");
  CHECK_FALSE(f.server.mqtt.wait_on(control, 300ms));  // no initialize this time
  // A presence that changed is an update, not a return: nothing is lost.
  f.server.announce("fake, described anew");
  const std::string marker = R"({"jsonrpc":"2.0","method":"notifications/message","params":{}})";
  f.server.mqtt.publish(f.server.rpc(f.cid()), marker);
  CHECK(f.events.messages.pop() == marker);
  CHECK_FALSE(f.events.interruptions.pop(300ms));
  CHECK_FALSE(f.events.closes.pop(100ms));
}

TEST_CASE("004 §Server Disconnect: disconnected on the RPC topic ends the session",
          "[mqtt][client]") {
  Fixture f;
  f.send(kInit);
  REQUIRE(f.server.mqtt.wait_on(topics::standard().server_control(f.server.server_id, kName)));
  Observer watcher(f.broker.url());
  watcher.subscribe(topics::standard().client_presence(f.cid()));
  f.server.mqtt.publish(f.server.rpc(f.cid()),
                        R"({"jsonrpc":"2.0","method":"notifications/disconnected"})");
  auto closed = f.events.closes.pop();
  REQUIRE(closed);
  CHECK(*closed == "peer gone: server " + kName + " ended the session");
  // It leaves the broker, saying so first.
  auto bye = watcher.next();
  REQUIRE(bye);
  CHECK(bye->payload == R"({"jsonrpc":"2.0","method":"notifications/disconnected"})");
}

TEST_CASE("004 §Client Disconnect: close sends disconnected on the presence topic",
          "[mqtt][client]") {
  Fixture f;
  f.send(kInit);
  REQUIRE(f.server.mqtt.wait_on(topics::standard().server_control(f.server.server_id, kName)));
  Observer watcher(f.broker.url());
  watcher.subscribe(topics::standard().client_presence(f.cid()));
  f.io.run(f.strand, [&] {
    f.session->close({bridge::CloseReason::Kind::normal, "client sent DELETE"});
  });
  auto bye = watcher.next();
  REQUIRE(bye);
  CHECK(bye->payload == R"({"jsonrpc":"2.0","method":"notifications/disconnected"})");
  CHECK(bye->property("MCP-COMPONENT-TYPE") == "mcp-client");
  CHECK_FALSE(f.events.closes.pop(300ms));  // the owner closed it: no on_close
}

TEST_CASE("004 §Client Disconnect: the will announces a client session whose process was killed",
          "[mqtt][client]") {
  Mosquitto broker;
  const std::string cid = random_id("victim");
  Observer watcher(broker.url());
  watcher.subscribe(topics::standard().client_presence(cid));
  auto runner = Process::start(
      Process::piped({MCPMQTT_ROLE_RUNNER, "client", broker.url(), cid, "sid-1", kName}));
  REQUIRE(runner->read_line(10s) == "ready");
  runner->signal(SIGKILL);
  auto will = watcher.next(15s);
  REQUIRE(will);
  CHECK(will->payload == R"({"jsonrpc":"2.0","method":"notifications/disconnected"})");
  CHECK_FALSE(will->retained);
  CHECK(will->property("MCP-COMPONENT-TYPE") == "mcp-client");
  CHECK(will->property("MCP-MQTT-CLIENT-ID") == cid);
}

TEST_CASE(
    "messages sent before the subscriptions are ready are queued, and nothing follows "
    "initialize on the RPC topic before its response",
    "[mqtt][client]") {
  Mosquitto broker;
  IoThreads io;
  FakeServer server(broker.url(), random_id("fake-srv"));
  Events events;
  auto strand = io.strand();
  mq::ClientSession::Options o;
  o.broker = broker_options(broker.url());
  o.client_id = mq::fresh_client_id("test-client");
  o.server_id = server.server_id;
  o.server_name = kName;
  auto session = mq::ClientSession::create(strand, o);
  server.mqtt.subscribe(server.rpc(o.client_id), true);
  io.run(strand, [&] {
    session->start(events.receiver());
    // Sent at once, while the connection is still being made.
    session->send(*jsonrpc::Message::parse(kInit));
    session->send(
        *jsonrpc::Message::parse(R"({"jsonrpc":"2.0","method":"notifications/initialized"})"));
    session->send(*jsonrpc::Message::parse(R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})"));
  });
  auto a = server.mqtt.next();
  REQUIRE(a);
  CHECK(a->topic == topics::standard().server_control(server.server_id, kName));
  // 004 §Initialization: the server subscribes the RPC topic when initialize reaches it, so the
  // rest waits for the initialize response.
  CHECK_FALSE(server.mqtt.next(500ms));
  server.mqtt.publish(
      server.rpc(o.client_id),
      R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-03-26","capabilities":{},"serverInfo":{"name":"f","version":"1"}}})");
  auto b = server.mqtt.next();
  auto c = server.mqtt.next();
  REQUIRE(b);
  REQUIRE(c);
  CHECK(b->topic == server.rpc(o.client_id));
  CHECK(b->payload == R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  CHECK(c->payload == R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})");
  io.run(strand, [&] { session->close({bridge::CloseReason::Kind::normal, "done"}); });
}

TEST_CASE("an unreachable broker and a lost broker end the session with a clear reason",
          "[mqtt][client]") {
  IoThreads io;
  auto strand = io.strand();
  {
    Events events;
    mq::ClientSession::Options o;
    o.broker = broker_options("mqtt://127.0.0.1:" + std::to_string(free_loopback_port()));
    o.client_id = mq::fresh_client_id("test-client");
    o.server_id = "sid";
    o.server_name = kName;
    auto session = mq::ClientSession::create(strand, o);
    io.run(strand, [&] { session->start(events.receiver()); });
    auto closed = events.closes.pop(15s);
    REQUIRE(closed);
    INFO(*closed);
    CHECK(closed->rfind("peer gone: cannot connect to mqtt://127.0.0.1:", 0) == 0);
  }
  {
    Mosquitto broker;
    FakeServer server(broker.url(), random_id("fake-srv"));
    Events events;
    mq::ClientSession::Options o;
    o.broker = broker_options(broker.url());
    o.client_id = mq::fresh_client_id("test-client");
    o.server_id = server.server_id;
    o.server_name = kName;
    auto session = mq::ClientSession::create(strand, o);
    io.run(strand, [&] {
      session->start(events.receiver());
      session->send(*jsonrpc::Message::parse(kInit));
    });
    REQUIRE(server.mqtt.next());
    broker.kill();
    auto closed = events.closes.pop(15s);
    REQUIRE(closed);
    CHECK(closed->rfind("peer gone: lost the connection to the MQTT broker", 0) == 0);
  }
}

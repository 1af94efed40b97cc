// The client session's protocol duties (004), observed through a real Mosquitto by an
// independent MQTT client that plays the MCP server.
#include <set>

#include <catch2/catch.hpp>
#include <rapidjson/document.h>
#include <signal.h>

#include "bridge/protocol/topics.hpp"
#include "mqtt/client_session.hpp"
#include "mqtt/directory_observer.hpp"
#include "tests/support/io.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/observer.hpp"
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

  std::shared_ptr<mq::ClientSession> make(const std::string& url,
                                          std::shared_ptr<bridge::Directory> directory = {}) {
    mq::ClientSession::Options o;
    o.broker = broker_options(url);
    o.client_id = mq::fresh_client_id("test-client");
    o.server_id = server.server_id;
    o.server_name = kName;
    o.directory = std::move(directory);
    return mq::ClientSession::create(strand, o);
  }
  // `directory`: the session hears its instance from it (as an ingress's sessions do).
  explicit Fixture(std::shared_ptr<bridge::Directory> directory = {}) {
    session = make(broker.url(), std::move(directory));
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

namespace {

// The retained presence FakeServer publishes, as the directory would have read it.
std::string fake_presence() {
  return R"({"jsonrpc":"2.0","method":"notifications/server/online","params":{"server_name":")" +
         kName + R"(","description":"fake"}})";
}

// Answers the session's initialize on its RPC topic (the server's subscription to it in place
// first), and waits for the answer to reach the session.
void initialize(Fixture& f) {
  f.send(kInit);
  REQUIRE(f.server.mqtt.wait_on(topics::standard().server_control(f.server.server_id, kName)));
  f.server.mqtt.subscribe(f.server.rpc(f.cid()), /*no_local=*/true);
  f.server.mqtt.publish(
      f.server.rpc(f.cid()),
      R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-03-26","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}})");
  auto answer = f.events.messages.pop();
  REQUIRE(answer);
  REQUIRE(answer->find(R"("id":1,"result")") != std::string::npos);
}

}  // namespace

TEST_CASE(
    "issue 34: a session that hears its instance from the directory subscribes only its RPC "
    "topic, and what the server sent before going offline is delivered before the end",
    "[mqtt][client]") {
  auto directory = std::make_shared<bridge::Directory>();
  Fixture f(directory);  // the instance is not in the directory: the session ends at once
  auto closed = f.events.closes.pop();
  REQUIRE(closed);
  CHECK(*closed ==
        "peer gone: server " + kName + " (instance " + f.server.server_id + ") went offline");

  REQUIRE(directory->apply_presence(f.server.server_id, kName, fake_presence()) ==
          bridge::Directory::Change::added);
  auto session = f.make(f.broker.url(), directory);
  f.io.run(f.strand, [&] { session->start(f.events.receiver()); });
  f.session = session;  // the fixture closes it
  initialize(f);
  CHECK(directory->listener_count() == 1);

  // 004 §Capability List Changed, from the directory (the bridge's observer heard it once); the
  // session's own connection does not subscribe the capability topic.
  const std::string changed = R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})";
  f.server.mqtt.publish(topics::standard().server_capability(f.server.server_id, kName), changed);
  CHECK_FALSE(f.events.messages.pop(300ms));
  CHECK(directory->apply_capability(f.server.server_id, kName,
                                    std::make_shared<const std::string>(changed)) == 1);
  CHECK(f.events.messages.pop() == changed);
  // Only notifications pass from the capability topic.
  directory->apply_capability(
      f.server.server_id, kName,
      std::make_shared<const std::string>(R"({"jsonrpc":"2.0","id":7,"method":"ping"})"));
  CHECK_FALSE(f.events.messages.pop(300ms));

  // Announced again, live and unchanged: requests in flight may be lost.
  directory->apply_presence(f.server.server_id, kName, fake_presence(), nullptr, /*live=*/true);
  auto why = f.events.interruptions.pop();
  REQUIRE(why);
  CHECK(why->find("announced itself again") != std::string::npos);

  // 004 §Server Disconnect: the server answers, then leaves. Its answer, on the session's
  // connection, comes before the end the directory heard of on another. The broker has taken
  // them all when the last one's PUBACK is back (one connection, in order); they are on their
  // way to the session when the directory hears the end.
  constexpr int kLast = 20;
  auto answer = [](int id) {
    return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"result":{"tools":[]}})";
  };
  for (int id = 2; id < 2 + kLast; ++id)
    f.server.mqtt.publish(f.server.rpc(f.cid()), answer(id), false, id + 1 < 2 + kLast ? 0 : 1);
  directory->apply_presence(f.server.server_id, kName, "");
  for (int id = 2; id < 2 + kLast; ++id)
    CHECK(f.events.messages.pop(2s) == answer(id));
  closed = f.events.closes.pop();
  REQUIRE(closed);
  CHECK(*closed ==
        "peer gone: server " + kName + " (instance " + f.server.server_id + ") went offline");
  CHECK(directory->listener_count() == 0);
}

TEST_CASE(
    "issue 34: through a DirectoryObserver, the instance's capability notifications reach "
    "every session with it, and its cleared presence ends them",
    "[mqtt][client][directory]") {
  Mosquitto broker;
  IoThreads io;
  FakeServer server{broker.url(), random_id("fake-srv")};
  auto directory = std::make_shared<bridge::Directory>();
  mq::DirectoryObserver::Options oo;
  oo.broker = broker_options(broker.url());
  oo.client_id = random_id("dir");
  oo.filters = {"test/#"};
  auto observer = mq::DirectoryObserver::create(io.strand(), oo, directory);
  io.run(io.strand(), [&] { observer->start(); });
  REQUIRE(eventually([&] { return directory->has_instance(kName, server.server_id); }));

  constexpr int kSessions = 3;
  std::vector<Events> events(kSessions);
  std::vector<std::shared_ptr<mq::ClientSession>> sessions;
  auto strand = io.strand();
  for (int i = 0; i < kSessions; ++i) {
    mq::ClientSession::Options o;
    o.broker = broker_options(broker.url());
    o.client_id = mq::fresh_client_id("test-client");
    o.server_id = server.server_id;
    o.server_name = kName;
    o.directory = directory;
    sessions.push_back(mq::ClientSession::create(strand, o));
    io.run(strand, [&] {
      sessions.back()->start(events[i].receiver());
      sessions.back()->send(*jsonrpc::Message::parse(kInit));
    });
    auto init = server.mqtt.wait_on(topics::standard().server_control(server.server_id, kName));
    REQUIRE(init);
    server.mqtt.publish(
        server.rpc(sessions.back()->client_id()),
        R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-03-26","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}})");
    REQUIRE(events[i].messages.pop());
  }
  const std::string updated =
      R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///a"}})";
  server.mqtt.publish(topics::standard().server_capability(server.server_id, kName), updated);
  for (auto& e : events)
    CHECK(e.messages.pop() == updated);

  server.mqtt.publish(topics::standard().server_presence(server.server_id, kName), "", true);
  for (auto& e : events) {
    auto closed = e.closes.pop();
    REQUIRE(closed);
    CHECK(closed->find("went offline") != std::string::npos);
  }
  CHECK(directory->listener_count() == 0);
  auto stopped = std::make_shared<std::promise<void>>();
  io.run(io.strand(), [&] { observer->stop(2s, [stopped] { stopped->set_value(); }); });
  stopped->get_future().wait_for(5s);
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

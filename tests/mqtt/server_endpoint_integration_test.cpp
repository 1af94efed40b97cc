// The server endpoint's protocol duties (004), observed through a real Mosquitto by an
// independent MQTT client that plays the MCP client.
#include <thread>

#include <catch2/catch.hpp>
#include <rapidjson/document.h>
#include <signal.h>

#include "bridge/protocol/topics.hpp"
#include "common/metrics.hpp"
#include "mqtt/server_endpoint.hpp"
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

const std::string kName = "test/server/one";

mcpmqtt::mqtt::BrokerOptions broker_config(const Mosquitto& broker) {
  auto b = broker_options(broker.url());
  b.reconnect_min_ms = 100;
  b.reconnect_max_ms = 500;
  return b;
}

std::string initialize_request(int id = 1) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
         R"(,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})";
}

// The owner side of the endpoint for a test: accepts every initialize, answers it, and records
// what each link delivers.
struct Owner {
  struct Event {
    std::string client_id;
    std::string kind;  // "initialize", "message", "closed"
    std::string text;
  };
  // Shared with the links' handlers: a link's close may run on its own strand after the
  // fixture (and this owner) are gone, when the endpoint stopped.
  std::shared_ptr<Inbox<Event>> inbox = std::make_shared<Inbox<Event>>();
  Inbox<Event>& events = *inbox;
  std::mutex mu;
  std::map<std::string, std::shared_ptr<mq::ClientLink>> links;
  bool answer = true;

  mq::ServerEndpoint::Handlers handlers() {
    mq::ServerEndpoint::Handlers h;
    h.on_initialize = [this](std::shared_ptr<mq::ClientLink> link, jsonrpc::Message init) {
      const auto cid = link->client_id();
      {
        std::lock_guard lock(mu);
        links[cid] = link;
      }
      events.push({cid, "initialize", std::string(init.text())});
      // The link delivers the initialize again as its first message; the test already has it.
      link->start({[inbox = inbox, cid](jsonrpc::Message m) {
                     if (m.method() == "initialize") return;
                     inbox->push({cid, "message", std::string(m.text())});
                   },
                   [inbox = inbox, cid](const bridge::CloseReason& why) {
                     inbox->push({cid, "closed",
                                  std::string(bridge::to_string(why.kind)) + ": " + why.detail});
                   }});
      if (answer) {
        link->send(jsonrpc::Message::result(
            init.id(),
            R"({"protocolVersion":"2025-03-26","capabilities":{"tools":{}},"serverInfo":{"name":"owner","version":"1"}})"));
      }
    };
    return h;
  }
  std::shared_ptr<mq::ClientLink> link(const std::string& cid) {
    std::lock_guard lock(mu);
    return links.at(cid);
  }
};

struct Fixture {
  Mosquitto broker{[] {
    Mosquitto::Options o;
    o.extra_config = "log_type all\n";  // the ordering test reads SUBSCRIBE/PUBLISH lines
    return o;
  }()};
  IoThreads io;
  Owner owner;
  std::string server_id = random_id("srv");
  std::shared_ptr<mq::ServerEndpoint> endpoint;
  boost::asio::any_io_executor strand = io.strand();

  // The idle floor is far away unless a test is about it: no session makes room by accident.
  explicit Fixture(std::size_t max_sessions = 32, std::chrono::milliseconds idle_floor = 1h,
                   std::chrono::milliseconds handshake_timeout = 30s) {
    mq::ServerEndpoint::Options o;
    o.broker = broker_config(broker);
    o.server_id = server_id;
    o.server_name = kName;
    o.description = "A server for tests";
    o.meta_json = R"({"rbac":{"roles":[{"name":"user"}]}})";
    o.max_sessions = max_sessions;
    o.idle_floor = idle_floor;
    o.handshake_timeout = handshake_timeout;
    endpoint = mq::ServerEndpoint::create(
        strand, [this] { return io.strand(); }, o, owner.handlers());
    io.run(strand, [&] { endpoint->start(); });
    // Online once the retained presence is there.
    Observer probe(broker.url());
    probe.subscribe(topics::standard().server_presence(server_id, kName));
    REQUIRE(probe.next(10s));
  }
  ~Fixture() {
    std::promise<void> stopped;
    io.run(strand, [&] { endpoint->stop(2s, [&] { stopped.set_value(); }); });
    stopped.get_future().wait_for(5s);
  }

  std::string rpc_topic(const std::string& cid) const {
    return topics::standard().rpc(cid, server_id, kName);
  }

  // An MCP client on MQTT (an independent Paho client): subscribes its RPC topic, sends
  // initialize to the control topic with the user properties, returns the response.
  std::optional<Received> initialize(Observer& client, int id = 1) {
    client.subscribe(rpc_topic(client.client_id()), /*no_local=*/true);
    client.publish(
        topics::standard().server_control(server_id, kName), initialize_request(id), false, 1,
        {{"MCP-COMPONENT-TYPE", "mcp-client"}, {"MCP-MQTT-CLIENT-ID", client.client_id()}});
    return client.wait_on(rpc_topic(client.client_id()));
  }
};

std::vector<std::string> log_lines(const std::string& log) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < log.size()) {
    auto nl = log.find('\n', start);
    if (nl == std::string::npos) nl = log.size();
    out.push_back(log.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

template <typename Pred>
std::size_t first_line(const std::vector<std::string>& lines, Pred pred) {
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (pred(lines[i])) return i;
  }
  return lines.size();
}

rapidjson::Document json(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str());
  REQUIRE_FALSE(d.HasParseError());
  return d;
}

}  // namespace

TEST_CASE("004 §Service Registration: retained online presence with its fields and user properties",
          "[mqtt][server]") {
  Fixture f;
  Observer o(f.broker.url());
  o.subscribe("$mcp-server/presence/+/#");
  auto p = o.wait_on(topics::standard().server_presence(f.server_id, kName));
  REQUIRE(p);
  CHECK(p->retained);
  CHECK(p->property("MCP-COMPONENT-TYPE") == "mcp-server");
  CHECK(p->property("MCP-MQTT-CLIENT-ID") == f.server_id);
  auto d = json(p->payload);
  CHECK(std::string(d["jsonrpc"].GetString()) == "2.0");
  CHECK(std::string(d["method"].GetString()) == "notifications/server/online");
  CHECK(std::string(d["params"]["server_name"].GetString()) == kName);
  CHECK(std::string(d["params"]["description"].GetString()) == "A server for tests");
  CHECK(std::string(d["params"]["meta"]["rbac"]["roles"][0]["name"].GetString()) == "user");
}

TEST_CASE(
    "004 §Initialization: the three subscriptions are in place before the response, which "
    "comes on the RPC topic",
    "[mqtt][server]") {
  Fixture f;
  Observer client(f.broker.url());
  auto rsp = f.initialize(client, 7);
  REQUIRE(rsp);
  auto d = json(rsp->payload);
  CHECK(d["id"].GetInt() == 7);
  CHECK(std::string(d["result"]["serverInfo"]["name"].GetString()) == "owner");
  CHECK(rsp->property("MCP-COMPONENT-TYPE") == "mcp-server");
  CHECK(rsp->property("MCP-MQTT-CLIENT-ID") == f.server_id);

  auto init = f.owner.events.pop();
  REQUIRE(init);
  CHECK(init->kind == "initialize");
  CHECK(init->client_id == client.client_id());

  // The broker's own log: each subscription was made before the response was published.
  const auto lines = log_lines(f.broker.log());
  const auto rpc = f.rpc_topic(client.client_id());
  const auto response = first_line(lines, [&](const std::string& l) {
    return l.find("Received PUBLISH from " + f.server_id + " (d0, q1, r0,") != std::string::npos &&
           l.find("'" + rpc + "'") != std::string::npos;
  });
  REQUIRE(response < lines.size());
  for (const auto& topic : {rpc, topics::standard().client_capability(client.client_id()),
                            topics::standard().client_presence(client.client_id())}) {
    INFO(topic);
    // Mosquitto logs "<client-id> <qos> <topic>" for each subscription it adds.
    const auto subscribed = first_line(lines, [&](const std::string& l) {
      return l.find(": " + f.server_id + " 1 " + topic) != std::string::npos &&
             l.ends_with(" " + topic);
    });
    CHECK(subscribed < response);
  }
}

TEST_CASE(
    "004 §Initialization: a client that sends nothing after its initialize response (one that "
    "vanished before its presence was watched, whose will went unseen) is ended after the "
    "handshake timeout, and one that sends notifications/initialized keeps its session",
    "[mqtt][server]") {
  Fixture f(32, 1h, 800ms);
  Observer quiet(f.broker.url());
  REQUIRE(f.initialize(quiet));
  Observer talker(f.broker.url());
  REQUIRE(f.initialize(talker));
  talker.publish(f.rpc_topic(talker.client_id()),
                 R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  std::optional<Owner::Event> closed;
  while (auto e = f.owner.events.pop(5s)) {
    if (e->kind == "closed") {
      closed = e;
      break;
    }
  }
  REQUIRE(closed);
  CHECK(closed->client_id == quiet.client_id());
  CHECK(closed->text ==
        "peer gone: client " + quiet.client_id() + " sent nothing after its initialize response");
  // 004 §Server Disconnect: told, should it still be there.
  auto note = quiet.wait_on(f.rpc_topic(quiet.client_id()));
  REQUIRE(note);
  CHECK(json(note->payload)["method"] == "notifications/disconnected");
  // The talker's session stays past its deadline (what else arrives is its initialized).
  while (auto e = f.owner.events.pop(1500ms)) {
    INFO(e->client_id << " " << e->kind << " " << e->text);
    CHECK(e->kind != "closed");
  }
  CHECK(f.io.run(f.strand, [&] { return f.endpoint->session_count(); }) == 1);
}

TEST_CASE("No Local: the endpoint never receives its own publications on the RPC topic",
          "[mqtt][server]") {
  Fixture f;
  Observer client(f.broker.url());
  REQUIRE(f.initialize(client));
  REQUIRE(f.owner.events.pop()->kind == "initialize");
  auto link = f.owner.link(client.client_id());
  // The owner sends a request to the client on the RPC topic...
  f.io.run(link->executor(), [&] {
    link->send(jsonrpc::Message::request(jsonrpc::Id::integer(100), "roots/list", "{}"));
  });
  auto at_client = client.wait_on(f.rpc_topic(client.client_id()));
  REQUIRE(at_client);
  CHECK(at_client->payload.find("roots/list") != std::string::npos);
  // ...and the client's answer is the only message the link delivers: not its own request echoed.
  client.publish(f.rpc_topic(client.client_id()),
                 R"({"jsonrpc":"2.0","id":100,"result":{"roots":[]}})");
  auto got = f.owner.events.pop();
  REQUIRE(got);
  CHECK(got->kind == "message");
  CHECK(got->text == R"({"jsonrpc":"2.0","id":100,"result":{"roots":[]}})");
  CHECK_FALSE(f.owner.events.pop(500ms));
}

TEST_CASE(
    "004 §Capability List Changed: list_changed and resources/updated go to the capability "
    "topic, everything else to the RPC topic",
    "[mqtt][server]") {
  Fixture f;
  Observer client(f.broker.url());
  client.subscribe(topics::standard().server_capability(f.server_id, kName));
  REQUIRE(f.initialize(client));
  f.owner.events.pop();
  auto link = f.owner.link(client.client_id());
  f.io.run(link->executor(), [&] {
    link->send(jsonrpc::Message::notification("notifications/tools/list_changed"));
    link->send(
        jsonrpc::Message::notification("notifications/resources/updated", R"({"uri":"test://x"})"));
    link->send(
        jsonrpc::Message::notification("notifications/message", R"({"level":"info","data":"hi"})"));
  });
  auto got = client.drain(1s);
  REQUIRE(got.size() == 3);
  const auto cap = topics::standard().server_capability(f.server_id, kName);
  CHECK(got[0].topic == cap);
  CHECK(got[0].payload.find("tools/list_changed") != std::string::npos);
  CHECK(got[1].topic == cap);
  CHECK(got[1].payload.find("resources/updated") != std::string::npos);
  CHECK(got[2].topic == f.rpc_topic(client.client_id()));
  CHECK(got[2].payload.find("notifications/message") != std::string::npos);
}

TEST_CASE("a client's disconnected notification on its presence topic ends its session",
          "[mqtt][server]") {
  Fixture f;
  Observer client(f.broker.url());
  REQUIRE(f.initialize(client));
  f.owner.events.pop();
  client.publish(topics::standard().client_presence(client.client_id()),
                 R"({"jsonrpc":"2.0","method":"notifications/disconnected"})");
  auto closed = f.owner.events.pop();
  REQUIRE(closed);
  CHECK(closed->kind == "closed");
  CHECK(closed->text ==
        "peer gone: client " + client.client_id() + " is gone (its presence says disconnected)");
  // Unsubscribed: later RPC traffic from that client id reaches nobody.
  client.publish(f.rpc_topic(client.client_id()), R"({"jsonrpc":"2.0","id":5,"method":"ping"})");
  CHECK_FALSE(f.owner.events.pop(500ms));
  CHECK(f.io.run(f.strand, [&] { return f.endpoint->session_count(); }) == 0);
}

TEST_CASE(
    "004 §Client Disconnect: the client's will reaches the endpoint when its process is killed",
    "[mqtt][server]") {
  Fixture f;
  // A separate process holding a real ClientSession, killed without warning.
  const std::string cid = random_id("victim");
  auto runner = Process::start(
      Process::piped({MCPMQTT_ROLE_RUNNER, "client", f.broker.url(), cid, f.server_id, kName}));
  REQUIRE(runner->read_line(10s) == "ready");
  // The runner's session never initialized with our endpoint, so pair it by hand: an
  // initialize sent on its behalf makes the endpoint watch its presence topic.
  Observer proxy(f.broker.url());
  proxy.publish(topics::standard().server_control(f.server_id, kName), initialize_request(), false,
                1, {{"MCP-MQTT-CLIENT-ID", cid}});
  auto init = f.owner.events.pop();
  REQUIRE(init);
  REQUIRE(init->client_id == cid);
  runner->signal(SIGKILL);
  auto closed = f.owner.events.pop(15s);
  REQUIRE(closed);
  CHECK(closed->client_id == cid);
  CHECK(closed->text == "peer gone: client " + cid + " is gone (its presence says disconnected)");
}

TEST_CASE("004 §Client Disconnect: disconnected on the RPC topic de-initializes the session",
          "[mqtt][server]") {
  Fixture f;
  Observer client(f.broker.url());
  REQUIRE(f.initialize(client));
  f.owner.events.pop();
  client.publish(f.rpc_topic(client.client_id()),
                 R"({"jsonrpc":"2.0","method":"notifications/disconnected"})");
  auto closed = f.owner.events.pop();
  REQUIRE(closed);
  CHECK(closed->text == "closed: the client sent notifications/disconnected");
}

TEST_CASE("004 §Server Disconnect: the owner ending a session sends disconnected on the RPC topic",
          "[mqtt][server]") {
  Fixture f;
  Observer client(f.broker.url());
  REQUIRE(f.initialize(client));
  f.owner.events.pop();
  auto link = f.owner.link(client.client_id());
  f.io.run(link->executor(), [&] {
    link->close({bridge::CloseReason::Kind::exited, "child exited"});
  });
  auto note = client.wait_on(f.rpc_topic(client.client_id()));
  REQUIRE(note);
  CHECK(note->payload == R"({"jsonrpc":"2.0","method":"notifications/disconnected"})");
  client.publish(f.rpc_topic(client.client_id()), R"({"jsonrpc":"2.0","id":9,"method":"ping"})");
  CHECK_FALSE(f.owner.events.pop(500ms));  // no on_close either: the owner closed it
}

TEST_CASE("bad initializes get clear errors on the client RPC topic and the endpoint keeps serving",
          "[mqtt][server]") {
  Fixture f(/*max_sessions=*/1);
  const auto control = topics::standard().server_control(f.server_id, kName);

  Observer bad(f.broker.url());
  bad.subscribe(f.rpc_topic(bad.client_id()), true);
  bad.publish(control, "{not json", false, 1, {{"MCP-MQTT-CLIENT-ID", bad.client_id()}});
  auto e = bad.wait_on(f.rpc_topic(bad.client_id()));
  REQUIRE(e);
  auto d = json(e->payload);
  CHECK(d["error"]["code"].GetInt() == -32700);
  CHECK(d["id"].IsNull());

  bad.publish(control, R"({"jsonrpc":"2.0","id":3,"method":"tools/list"})", false, 1,
              {{"MCP-MQTT-CLIENT-ID", bad.client_id()}});
  e = bad.wait_on(f.rpc_topic(bad.client_id()));
  REQUIRE(e);
  d = json(e->payload);
  CHECK(d["id"].GetInt() == 3);
  CHECK(d["error"]["code"].GetInt() == -32600);
  CHECK(std::string(d["error"]["message"].GetString()) ==
        "only initialize is accepted on the control topic; send \"tools/list\" on the RPC topic "
        "after initializing (004 §Initialization)");

  // Without MCP-MQTT-CLIENT-ID there is nobody to answer: nothing is published.
  Observer anonymous(f.broker.url());
  anonymous.subscribe("$mcp-rpc/#");
  anonymous.publish(control, initialize_request());
  CHECK_FALSE(anonymous.next(500ms));

  Observer first(f.broker.url());
  REQUIRE(f.initialize(first));
  f.owner.events.pop();
  // The same client id again: refused, the first session untouched.
  first.publish(control, initialize_request(2), false, 1,
                {{"MCP-MQTT-CLIENT-ID", first.client_id()}});
  e = first.wait_on(f.rpc_topic(first.client_id()));
  REQUIRE(e);
  d = json(e->payload);
  CHECK(d["id"].GetInt() == 2);
  CHECK(std::string(d["error"]["message"].GetString())
            .find("use a fresh MQTT client id for every initialize") != std::string::npos);

  // Over the session limit.
  Observer second(f.broker.url());
  auto r = f.initialize(second, 4);
  REQUIRE(r);
  d = json(r->payload);
  CHECK(d["error"]["code"].GetInt() == -32000);
  CHECK(std::string(d["error"]["message"].GetString()) ==
        kName + " is serving its maximum of 1 sessions; try again later");

  // The first session still works.
  first.publish(f.rpc_topic(first.client_id()), R"({"jsonrpc":"2.0","id":11,"method":"ping"})");
  auto msg = f.owner.events.pop();
  REQUIRE(msg);
  CHECK(msg->text == R"({"jsonrpc":"2.0","id":11,"method":"ping"})");
}

TEST_CASE(
    "issue 33, federation: the same initialize again gets the same answer and the session goes "
    "on",
    "[mqtt][server]") {
  Fixture f;
  Observer client(f.broker.url());
  auto first = f.initialize(client, 5);
  REQUIRE(first);
  REQUIRE(f.owner.events.pop());
  // The client lost the response (a federated link coming back) and sends the same request.
  auto again = f.initialize(client, 5);
  REQUIRE(again);
  CHECK(again->payload == first->payload);
  // The owner saw one initialize, and the session works.
  client.publish(f.rpc_topic(client.client_id()), R"({"jsonrpc":"2.0","id":6,"method":"ping"})");
  auto msg = f.owner.events.pop();
  REQUIRE(msg);
  CHECK(msg->kind == "message");
  CHECK(msg->text == R"({"jsonrpc":"2.0","id":6,"method":"ping"})");
}

TEST_CASE("004 §Service Unregistration: stop tells clients, clears the retained presence",
          "[mqtt][server]") {
  Fixture f;
  Observer client(f.broker.url());
  REQUIRE(f.initialize(client));
  f.owner.events.pop();
  Observer watcher(f.broker.url());
  watcher.subscribe(topics::standard().server_presence(f.server_id, kName));
  REQUIRE(watcher.next());  // retained online
  std::promise<void> stopped;
  f.io.run(f.strand, [&] { f.endpoint->stop(2s, [&] { stopped.set_value(); }); });
  REQUIRE(stopped.get_future().wait_for(5s) == std::future_status::ready);
  auto note = client.wait_on(f.rpc_topic(client.client_id()));
  REQUIRE(note);
  CHECK(note->payload == R"({"jsonrpc":"2.0","method":"notifications/disconnected"})");
  auto cleared = watcher.next();
  REQUIRE(cleared);
  CHECK(cleared->payload.empty());
  auto closed = f.owner.events.pop();
  REQUIRE(closed);
  CHECK(closed->text == "shutting down: the bridge is stopping " + kName);
  Observer late(f.broker.url());
  late.subscribe(topics::standard().server_presence(f.server_id, kName));
  CHECK_FALSE(late.next(500ms));
}

TEST_CASE(
    "004 §Server Disconnect: SIGKILL of the process holding an endpoint clears its presence "
    "through the will",
    "[mqtt][server]") {
  Mosquitto broker;
  const std::string sid = random_id("doomed");
  auto runner = Process::start(
      Process::piped({MCPMQTT_ROLE_RUNNER, "server", broker.url(), sid, "test/doomed"}));
  REQUIRE(runner->read_line(10s) == "ready");
  Observer watcher(broker.url());
  watcher.subscribe(topics::standard().server_presence(sid, "test/doomed"));
  auto online = watcher.next();
  REQUIRE(online);
  CHECK(online->retained);
  CHECK_FALSE(online->payload.empty());
  runner->signal(SIGKILL);
  auto cleared = watcher.next(15s);
  REQUIRE(cleared);
  CHECK(cleared->payload.empty());
  Observer late(broker.url());
  late.subscribe(topics::standard().server_presence(sid, "test/doomed"));
  CHECK_FALSE(late.next(500ms));  // no retained presence left behind
}

TEST_CASE(
    "after the broker restarts the endpoint restores its presence and the sessions' RPC "
    "subscriptions",
    "[mqtt][server]") {
  Fixture f;
  Observer client(f.broker.url(), Observer::Options::with_id(random_id("keeper")));
  const std::string cid = client.client_id();
  REQUIRE(f.initialize(client));
  f.owner.events.pop();
  client.disconnect();

  f.broker.restart();  // no persistence: every retained message and subscription is gone

  Observer watcher(f.broker.url());
  watcher.subscribe(topics::standard().server_presence(f.server_id, kName));
  auto again = watcher.next(15s);
  REQUIRE(again);
  CHECK(again->payload.find("notifications/server/online") != std::string::npos);
  Observer late(f.broker.url());  // and it is retained again
  late.subscribe(topics::standard().server_presence(f.server_id, kName));
  auto retained = late.next();
  REQUIRE(retained);
  CHECK(retained->retained);

  // The same client comes back and keeps using its session: the endpoint is subscribed again.
  Observer back(f.broker.url(), Observer::Options::with_id(cid));
  back.publish(f.rpc_topic(cid), R"({"jsonrpc":"2.0","id":21,"method":"tools/list"})");
  auto msg = f.owner.events.pop(10s);
  REQUIRE(msg);
  CHECK(msg->client_id == cid);
  CHECK(msg->text == R"({"jsonrpc":"2.0","id":21,"method":"tools/list"})");
  CHECK(f.io.run(f.strand, [&] { return f.endpoint->reconnects(); }) == 1);
}

TEST_CASE(
    "egress at max_sessions: the least recently active session with nothing in flight and no "
    "subscription makes room however recently it was used (the client told disconnected) - one "
    "with a request unanswered or a resource subscription never does, and with none to close "
    "the client is refused",
    "[mqtt][server][limits]") {
  Fixture f(/*max_sessions=*/2, /*idle_floor=*/0ms);
  auto pop = [&](const std::string& cid, const std::string& kind) {
    for (;;) {
      auto e = f.owner.events.pop(10s);
      if (!e) return std::optional<Owner::Event>();
      if (e->client_id == cid && e->kind == kind) return e;
    }
  };
  // A request from `o` to its session, answered by the owner with `result`.
  auto exchange = [&](Observer& o, int id, const std::string& method, const std::string& params) {
    o.publish(f.rpc_topic(o.client_id()), R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
                                              R"(,"method":")" + method + R"(","params":)" +
                                              params + "}");
    REQUIRE(pop(o.client_id(), "message"));
    f.owner.link(o.client_id())->send(jsonrpc::Message::result(jsonrpc::Id::integer(id), "{}"));
    REQUIRE(o.wait_on(f.rpc_topic(o.client_id())));
  };
  Observer a(f.broker.url()), b(f.broker.url()), c(f.broker.url()), d(f.broker.url()),
      e(f.broker.url());
  REQUIRE(f.initialize(a));
  REQUIRE(pop(a.client_id(), "initialize"));
  REQUIRE(f.initialize(b));
  REQUIRE(pop(b.client_id(), "initialize"));
  // b waits for the answer to a request: busy.
  b.publish(f.rpc_topic(b.client_id()), R"({"jsonrpc":"2.0","id":5,"method":"tools/call"})");
  REQUIRE(pop(b.client_id(), "message"));

  // c takes a's place at once: a is told `disconnected` and its owner learns why.
  auto rc = f.initialize(c, 3);
  REQUIRE(rc);
  CHECK(json(rc->payload).HasMember("result"));
  auto note = a.wait_on(f.rpc_topic(a.client_id()));
  REQUIRE(note);
  CHECK(note->payload == R"({"jsonrpc":"2.0","method":"notifications/disconnected"})");
  auto closed = pop(a.client_id(), "closed");
  REQUIRE(closed);
  CHECK(closed->text.find("closed to make room for a new session (" + kName +
                          " is serving its maximum of 2 sessions): the least recently active") !=
        std::string::npos);
  CHECK(f.io.run(f.strand, [&] { return f.endpoint->sessions_evicted(); }) == 1u);
  // Each test runs in a process of its own: the registry holds this test's counts only.
  const auto limit_count = [](const std::string& outcome) {
    const std::string series = R"(mcpmqtt_egress_session_limit_total{server_name=")" + kName +
                               R"(",outcome=")" + outcome + R"("} )";
    const auto text = mcpmqtt::metrics::registry().text();
    const auto at = text.find(series);
    return at == std::string::npos ? -1 : std::stoi(text.substr(at + series.size()));
  };
  CHECK(limit_count("evicted") == 1);

  // c subscribes to a resource (MCP server/resources §Subscriptions): it waits for updates.
  exchange(c, 8, "resources/subscribe", R"({"uri":"test://r"})");
  // b has a request unanswered and c a subscription: d is refused.
  auto rd = f.initialize(d, 4);
  REQUIRE(rd);
  auto err = json(rd->payload);
  CHECK(err["error"]["code"].GetInt() == -32000);
  CHECK(std::string(err["error"]["message"].GetString()) ==
        kName + " is serving its maximum of 2 sessions; try again later");
  CHECK(limit_count("refused") == 1);

  // b's request answered, then c unsubscribes: both could go, b is the less recently active.
  f.owner.link(b.client_id())
      ->send(jsonrpc::Message::result(jsonrpc::Id::integer(5), R"({"content":[]})"));
  REQUIRE(b.wait_on(f.rpc_topic(b.client_id())));
  exchange(c, 9, "resources/unsubscribe", R"({"uri":"test://r"})");
  auto re = f.initialize(e, 6);
  REQUIRE(re);
  CHECK(json(re->payload).HasMember("result"));
  REQUIRE(pop(b.client_id(), "closed"));
  // c is still served.
  c.publish(f.rpc_topic(c.client_id()), R"({"jsonrpc":"2.0","id":7,"method":"ping"})");
  auto msg = pop(c.client_id(), "message");
  REQUIRE(msg);
  CHECK(msg->text == R"({"jsonrpc":"2.0","id":7,"method":"ping"})");
}

TEST_CASE(
    "egress at max_sessions with an idle floor (egress.idle_floor_ms): a session active within "
    "it is spared, one quiet for longer makes room",
    "[mqtt][server][limits]") {
  Fixture f(/*max_sessions=*/1, /*idle_floor=*/300ms);
  Observer a(f.broker.url()), b(f.broker.url()), c(f.broker.url());
  REQUIRE(f.initialize(a));
  auto rb = f.initialize(b, 2);
  REQUIRE(rb);
  CHECK(json(rb->payload).HasMember("error"));
  std::this_thread::sleep_for(350ms);  // the floor is what is being tested
  auto rc = f.initialize(c, 3);
  REQUIRE(rc);
  CHECK(json(rc->payload).HasMember("result"));
  REQUIRE(a.wait_on(f.rpc_topic(a.client_id())));
}

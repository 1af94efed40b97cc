// The presence directory follows the broker: instances appear and disappear with retained and
// live presence, filtered by the configured server-name filters.
#include <catch2/catch.hpp>

#include "bridge/protocol/topics.hpp"
#include "mqtt/directory_observer.hpp"
#include "tests/support/io.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/observer.hpp"
#include "tests/support/test_connection.hpp"
#include "tests/support/wait.hpp"

namespace bridge = mcpmqtt::bridge;
namespace config = mcpmqtt::config;
namespace mq = mcpmqtt::mqtt;
namespace topics = mcpmqtt::topics;
using namespace mcpmqtt::test;
using namespace std::chrono_literals;

namespace {

std::string online(const std::string& name, const std::string& description) {
  return R"({"jsonrpc":"2.0","method":"notifications/server/online","params":{"server_name":")" +
         name + R"(","description":")" + description + R"(","meta":{"k":1}}})";
}

mcpmqtt::mqtt::BrokerOptions broker_config(const std::string& url) {
  auto b = broker_options(url);
  b.reconnect_min_ms = 100;
  b.reconnect_max_ms = 300;
  return b;
}

}  // namespace

TEST_CASE(
    "004 §Service Discovery: the directory adds and removes instances as presence appears "
    "and clears",
    "[mqtt][directory]") {
  Mosquitto broker;
  IoThreads io;
  auto directory = std::make_shared<bridge::Directory>();
  Observer servers(broker.url());
  // One instance is online before the bridge starts (retained), another comes later (live).
  servers.publish(topics::standard().server_presence("sid-a", "demo/echo"),
                  online("demo/echo", "first"), true);

  mq::DirectoryObserver::Options o;
  o.broker = broker_config(broker.url());
  o.client_id = random_id("dir");
  o.filters = {"demo/#"};
  auto strand = io.strand();
  auto observer = mq::DirectoryObserver::create(strand, o, directory);
  io.run(strand, [&] { observer->start(); });

  REQUIRE(eventually([&] { return directory->has_instance("demo/echo", "sid-a"); }));
  auto inst = directory->instances("demo/echo");
  REQUIRE(inst.size() == 1);
  CHECK(inst[0].description == "first");
  CHECK(inst[0].meta_json == R"({"k":1})");

  servers.publish(topics::standard().server_presence("sid-b", "demo/echo"),
                  online("demo/echo", "second"), true);
  // Outside the filter: never listed.
  servers.publish(topics::standard().server_presence("sid-c", "other/thing"),
                  online("other/thing", "x"), true);
  REQUIRE(eventually([&] { return directory->instances("demo/echo").size() == 2; }));
  CHECK_FALSE(directory->online("other/thing"));

  // Round robin alternates between the two instances.
  auto p1 = directory->pick("demo/echo", bridge::Directory::Pick::round_robin);
  auto p2 = directory->pick("demo/echo", bridge::Directory::Pick::round_robin);
  REQUIRE(p1);
  REQUIRE(p2);
  CHECK(p1->server_id != p2->server_id);

  // Empty presence removes an instance; the name stays online while the other one is.
  servers.publish(topics::standard().server_presence("sid-a", "demo/echo"), "", true);
  REQUIRE(eventually([&] { return !directory->has_instance("demo/echo", "sid-a"); }));
  CHECK(directory->online("demo/echo"));
  servers.publish(topics::standard().server_presence("sid-b", "demo/echo"), "", true);
  REQUIRE(eventually([&] { return !directory->online("demo/echo"); }));
  CHECK_FALSE(directory->pick("demo/echo", bridge::Directory::Pick::random));

  // A watcher learns when a server-name comes online.
  Inbox<int> came;
  directory->watch("demo/echo", [&] { came.push(1); });
  servers.publish(topics::standard().server_presence("sid-d", "demo/echo"),
                  online("demo/echo", "back"), true);
  CHECK(came.pop());

  // The listing, for GET /servers.
  const auto json = directory->to_json();
  CHECK(json.find(R"("filters":["demo/#"])") != std::string::npos);
  CHECK(
      json.find(
          R"("name":"demo/echo","instances":[{"server_id":"sid-d","description":"back","meta":{"k":1})") !=
      std::string::npos);

  std::promise<void> stopped;
  io.run(strand, [&] { observer->stop(2s, [&] { stopped.set_value(); }); });
  stopped.get_future().wait_for(5s);
}

TEST_CASE("the directory empties while the broker is away and is rebuilt from retained presence",
          "[mqtt][directory]") {
  Mosquitto broker;
  IoThreads io;
  auto directory = std::make_shared<bridge::Directory>();
  mq::DirectoryObserver::Options o;
  o.broker = broker_config(broker.url());
  o.client_id = random_id("dir");
  auto strand = io.strand();
  auto observer = mq::DirectoryObserver::create(strand, o, directory);
  io.run(strand, [&] { observer->start(); });
  {
    Observer servers(broker.url());
    servers.publish(topics::standard().server_presence("sid-a", "x/y"), online("x/y", "a"), true);
  }
  REQUIRE(eventually([&] { return directory->online("x/y"); }));
  broker.restart();  // forgets retained messages (no persistence)
  REQUIRE(eventually([&] { return !directory->online("x/y"); }));
  {
    Observer servers(broker.url());
    servers.publish(topics::standard().server_presence("sid-b", "x/y"), online("x/y", "b"), true);
  }
  REQUIRE(eventually([&] { return directory->has_instance("x/y", "sid-b"); }));
  CHECK_FALSE(directory->has_instance("x/y", "sid-a"));
  CHECK(io.run(strand, [&] { return observer->reconnects(); }) == 1);
  std::promise<void> stopped;
  io.run(strand, [&] { observer->stop(2s, [&] { stopped.set_value(); }); });
  stopped.get_future().wait_for(5s);
}

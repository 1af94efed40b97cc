// The Mosquitto test helper works: a real broker on a free loopback port carries MQTT v5
// retained messages with user properties, and honours No Local.
#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/mosquitto.hpp"
#include "tests/support/observer.hpp"

using namespace mcpmqtt::test;
using namespace std::chrono_literals;

TEST_CASE(
    "Mosquitto helper: retained message with MQTT v5 user properties read back under No Local",
    "[integration][mosquitto]") {
  Mosquitto broker;
  REQUIRE(broker.port() != 1883);
  REQUIRE(broker.url() == "mqtt://127.0.0.1:" + std::to_string(broker.port()));

  const std::string topic = "$mcp-server/presence/" + random_id("sid") + "/test/helper";
  {
    Observer publisher(broker.url());
    publisher.publish(
        topic, R"({"jsonrpc":"2.0","method":"notifications/server/online"})", true, 1,
        {{"MCP-COMPONENT-TYPE", "mcp-server"}, {"MCP-MQTT-CLIENT-ID", publisher.client_id()}});
  }

  // Another client, subscribing afterwards with No Local, gets the retained copy and its
  // properties.
  Observer reader(broker.url());
  reader.subscribe(topic, /*no_local=*/true);
  auto got = reader.next(5s);
  REQUIRE(got);
  CHECK(got->topic == topic);
  CHECK(got->retained);
  CHECK(got->payload == R"({"jsonrpc":"2.0","method":"notifications/server/online"})");
  CHECK(got->property("MCP-COMPONENT-TYPE") == "mcp-server");
  CHECK(got->property("MCP-MQTT-CLIENT-ID").value_or("").rfind("observer-", 0) == 0);

  // No Local: the reader's own publication is not sent back to it, while a subscriber without
  // No Local receives it.
  Observer other(broker.url());
  other.subscribe(topic, /*no_local=*/false);
  other.drain(300ms);  // its retained copy
  reader.publish(topic, "from-reader", false, 1);
  auto at_other = other.next(5s);
  REQUIRE(at_other);
  CHECK(at_other->payload == "from-reader");
  CHECK_FALSE(at_other->retained);
  CHECK_FALSE(reader.next(500ms));

  // Clearing the retained message: an empty retained payload.
  reader.publish(topic, "", true, 1);
  Observer late(broker.url());
  late.subscribe(topic);
  CHECK_FALSE(late.next(500ms));
}

TEST_CASE("Mosquitto helper: two brokers get two ports and a restart keeps the port",
          "[integration][mosquitto]") {
  Mosquitto a, b;
  CHECK(a.port() != b.port());
  const auto port = a.port();
  a.restart();
  CHECK(a.port() == port);
  CHECK(a.running());
  Observer o(a.url());
  CHECK(o.connected());
  a.kill();
  CHECK_FALSE(a.running());
}

TEST_CASE(
    "Mosquitto helper: a stopped broker's port refuses clients and stays reserved until "
    "restart",
    "[integration][mosquitto]") {
  // A bind without SO_REUSEADDR, as the kernel's port-0 choice and a client's ephemeral port
  // would need the port: it fails while anything is bound there.
  auto can_bind = [](std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
  };
  Mosquitto broker;
  const auto port = broker.port();
  broker.stop();
  CHECK_FALSE(wait_for_port(port, 300ms));  // refused, as by a dead broker
  CHECK_FALSE(can_bind(port));
  broker.restart();
  CHECK(broker.port() == port);
  Observer o(broker.url());
  CHECK(o.connected());
}

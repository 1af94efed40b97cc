// The MQTT connections have TCP_NODELAY, although Paho C never sets it (see mqtt/tcp_nodelay.hpp):
// without it a QoS 1 round trip waits ~88 ms for Nagle and delayed ACKs.
#include <filesystem>
#include <thread>

#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "mqtt/connection.hpp"
#include "mqtt/tcp_nodelay.hpp"
#include "tests/support/io.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/observer.hpp"

namespace config = mcpmqtt::config;
namespace mq = mcpmqtt::mqtt;
using namespace mcpmqtt::test;
using namespace std::chrono_literals;

namespace {
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

TEST_CASE("MQTT connections have TCP_NODELAY set", "[mqtt][nodelay]") {
  Mosquitto broker;
  IoThreads io;
  auto strand = io.strand();
  auto loaded = config::defaults();
  config::Overrides o;
  o.broker_url = broker.url();
  config::apply_overrides(loaded, o);
  mq::ConnectionOptions opts;
  opts.broker = loaded.config->mqtt;
  opts.client_id = random_id("nodelay");
  Inbox<bool> up;
  mq::Connection::Handlers h;
  h.on_connected = [&](const mq::ConnackInfo&, bool) { up.push(true); };
  auto conn = mq::Connection::create(strand, opts, h);
  io.run(strand, [&] { conn->connect(); });
  REQUIRE(up.pop());
  CHECK(mq::tcp_nodelay_active());
  const auto sockets = nodelay_of_sockets_to(broker.port());
  REQUIRE_FALSE(sockets.empty());
  for (int v : sockets)
    CHECK(v == 1);
  std::promise<void> done;
  io.run(strand, [&] { conn->disconnect(1s, [&] { done.set_value(); }); });
  done.get_future().wait_for(5s);
}

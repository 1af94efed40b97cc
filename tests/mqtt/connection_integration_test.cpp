// Connection behaviour under load, against a real Mosquitto.
#include <atomic>
#include <future>
#include <string>

#include <catch2/catch.hpp>

#include "mqtt/connection.hpp"
#include "tests/support/io.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/observer.hpp"

namespace config = mcpmqtt::config;
namespace mq = mcpmqtt::mqtt;
using namespace mcpmqtt::test;
using namespace std::chrono_literals;

// A server endpoint answers many sessions on one connection; at shutdown it tells every client
// at once. Paho C refuses a publish once 100 (its default) are queued and not yet written —
// even while connected — so a burst must not be capped by that default.
TEST_CASE("a burst of 2,000 publishes on one connection all reach the broker", "[mqtt][burst]") {
  Mosquitto broker;
  Observer watcher(broker.url());
  watcher.subscribe("burst/#");
  IoThreads io;
  auto strand = io.strand();
  auto loaded = config::defaults();
  config::Overrides o;
  o.broker_url = broker.url();
  config::apply_overrides(loaded, o);
  mq::ConnectionOptions opts;
  opts.broker = loaded.config->mqtt;
  opts.client_id = random_id("burst");
  Inbox<bool> up;
  mq::Connection::Handlers h;
  h.on_connected = [&](const mq::ConnackInfo&, bool) { up.push(true); };
  auto conn = mq::Connection::create(strand, opts, h);
  io.run(strand, [&] { conn->connect(); });
  REQUIRE(up.pop());
  constexpr int kCount = 2000;
  std::atomic<int> failed{0};
  io.run(strand, [&] {
    for (int i = 0; i < kCount; ++i)
      conn->publish("burst/" + std::to_string(i), std::string(200, 'x'), false,
                    [&](bool ok, const std::string&) {
                      if (!ok) failed++;
                    });
  });
  int received = 0;
  while (received < kCount && watcher.next(5s))
    ++received;
  CHECK(received == kCount);
  CHECK(failed == 0);
  std::promise<void> done;
  io.run(strand, [&] { conn->disconnect(1s, [&] { done.set_value(); }); });
  done.get_future().wait_for(5s);
}

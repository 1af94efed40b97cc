// mqtt::BrokerConnection against Mosquitto as it ships, on whichever engine the registration chose
// (MCPMQTT_MQTT_CLIENT): TLS that verifies or refuses, MQTT over WebSocket, a broker killed and
// restarted under traffic, a session taken over, its Receive Maximum and its Maximum Packet Size
// — the last also end to end, through a bridge process's HTTP ingress and stdio egress. (One
// scripted broker: the DISCONNECT with a reason, which Mosquitto 2.0.11 does not send.)
#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/steady_timer.hpp>
#include <catch2/catch.hpp>

#include "tests/http/server_test_support.hpp"
#include "tests/support/engine.hpp"
#include "tests/support/fake_broker.hpp"
#include "tests/support/ingress_bridge.hpp"
#include "tests/support/io.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/mqtt_mcp_client.hpp"
#include "tests/support/observer.hpp"
#include "tests/support/pki.hpp"
#include "tests/support/test_connection.hpp"

namespace config = mcpmqtt::config;
namespace mq = mcpmqtt::mqtt;
using namespace mcpmqtt::test;
using namespace std::chrono_literals;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Options for a TLS connection to `url` trusting `ca_file`.
mq::ConnectionOptions tls_options(const std::string& url, const std::string& ca_file,
                                  bool verify = true) {
  auto o = connection_options(url, "tls");
  o.broker.tls.ca_file = ca_file;
  o.broker.tls.verify = verify;
  return o;
}

// A connect attempt that must fail: no reconnect, the failure's text.
std::string refused(IoThreads& io, mq::ConnectionOptions o) {
  o.reconnect = false;
  TestConnection c(io, std::move(o));
  auto failed = c.events().failed.pop(20s);
  REQUIRE(failed);
  CHECK_FALSE(failed->retrying);
  CHECK_FALSE(c.events().connected.pop(0ms));
  return failed->why;
}

// Subscribes `c` to `topic`, publishes `payload` through it, and waits for it to come back.
void round_trip(TestConnection& c, const std::string& topic, const std::string& payload) {
  auto sub = c.subscribe(topic);
  REQUIRE(sub);
  REQUIRE(sub->ok);
  auto pub = c.publish(topic, payload, 20s);
  REQUIRE(pub);
  INFO(pub->why);
  REQUIRE(pub->ok);
  auto got = c.events().messages.pop(20s);
  REQUIRE(got);
  CHECK(got->topic == topic);
  CHECK(got->payload.size() == payload.size());
  CHECK(got->payload == payload);
}

std::string pattern(std::size_t size) {
  std::string s(size, '\0');
  for (std::size_t i = 0; i < size; ++i)
    s[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  return s;
}

}  // namespace

// ---- TLS ----------------------------------------------------------------------------------------

TEST_CASE(
    "MQTT over TLS: a broker whose certificate verifies carries messages, one from another CA "
    "or for another host name is refused naming TLS, and tls.verify false connects to both",
    "[mqtt][tls]") {
  INFO("engine " << engine_name(engine_under_test()));
  const bool paho = paho_under_test();
  Pki pki;
  // Made by the sections that need them: each key pair costs openssl a moment.
  auto other_ca = [] { return std::make_unique<Pki>("another CA"); };
  auto other_host = [] { return std::make_unique<Pki>("mcpmqtt test CA", "DNS:broker.example"); };
  IoThreads io;

  auto tls_broker = [](const Pki& p) {
    Mosquitto::Options o;
    o.tls_cert_file = p.cert;
    o.tls_key_file = p.key;
    return Mosquitto(o);
  };
  // The check a user reads: the failure names TLS and, on the native engine, the certificate.
  auto check_refusal = [&](const std::string& why) {
    INFO(why);
    CHECK(contains(why, "TLS"));
    if (!paho) CHECK(contains(why, "certificate verify failed"));
  };

  SECTION("the CA that signed the broker's certificate") {
    Mosquitto broker = tls_broker(pki);
    REQUIRE(broker.url().rfind("mqtts://", 0) == 0);
    TestConnection c(io, tls_options(broker.url(), pki.ca));
    c.wait_connected();
    round_trip(c, "tls/echo", "over TLS");
  }
  SECTION("a certificate signed by another CA") {
    Mosquitto broker = tls_broker(pki);
    check_refusal(refused(io, tls_options(broker.url(), other_ca()->ca)));
  }
  SECTION("a certificate for another host name") {
    const auto host = other_host();
    Mosquitto broker = tls_broker(*host);
    check_refusal(refused(io, tls_options(broker.url(), host->ca)));
  }
  SECTION("tls.verify false: the other CA's and the other host's certificates are accepted") {
    const auto ca = other_ca();
    const auto host = other_host();
    for (const Pki* p : {&pki, host.get()}) {
      Mosquitto broker = tls_broker(*p);
      TestConnection c(io, tls_options(broker.url(), ca->ca, /*verify=*/false));
      c.wait_connected();
      round_trip(c, "tls/unverified", "no verification");
    }
  }
}

// ---- WebSocket ----------------------------------------------------------------------------------

// Mosquitto 2.0.11 (libwebsockets) sends to a WebSocket client one 4 KiB frame per turn of its
// loop, about 40 KB/s: a 1 MiB message to a WebSocket subscriber takes ~25 s on either engine.
// The bound below leaves room for that; messages from a WebSocket client go at full speed.
TEST_CASE(
    "MQTT over WebSocket (MQTT 5.0 §6): ws:// and wss:// to Mosquitto's websockets listener "
    "subscribe, publish and receive, 1 MiB payloads both ways with a TCP client",
    "[mqtt][websocket]") {
  INFO("engine " << engine_name(engine_under_test()));
  Pki pki;
  IoThreads io;
  const bool tls = GENERATE(false, true);
  Mosquitto::Options bo;
  bo.websockets = true;
  if (tls) {
    bo.tls_cert_file = pki.cert;
    bo.tls_key_file = pki.key;
  }
  Mosquitto broker(bo);
  const std::string url = broker.ws_url();
  INFO(url);
  REQUIRE(url.rfind(tls ? "wss://127.0.0.1:" : "ws://127.0.0.1:", 0) == 0);

  auto o = connection_options(url, "ws");
  if (tls) o.broker.tls.ca_file = pki.ca;
  REQUIRE(o.broker.websocket);
  CHECK(o.broker.ws_path == "/mqtt");
  TestConnection c(io, o);
  c.wait_connected();
  round_trip(c, "ws/small", "hello over WebSocket");

  // Across transports: a TCP client (Paho directly) gets what the WebSocket client publishes,
  // and the reverse, 1 MiB each way.
  const std::string mib = pattern(1 << 20);
  Observer::Options oo;
  if (tls) oo.ca_file = pki.ca;
  Observer tcp(broker.url(), oo);
  tcp.subscribe("ws/to-tcp");
  auto pub = c.publish("ws/to-tcp", mib, 20s);
  REQUIRE(pub);
  INFO(pub->why);
  REQUIRE(pub->ok);
  auto at_tcp = tcp.next(20s);
  REQUIRE(at_tcp);
  CHECK(at_tcp->topic == "ws/to-tcp");
  CHECK(at_tcp->payload == mib);

  auto sub = c.subscribe("tcp/to-ws");
  REQUIRE(sub);
  REQUIRE(sub->ok);
  tcp.publish("tcp/to-ws", mib);
  auto at_ws = c.events().messages.pop(90s);
  REQUIRE(at_ws);
  CHECK(at_ws->topic == "tcp/to-ws");
  CHECK(at_ws->payload.size() == mib.size());
  CHECK(at_ws->payload == mib);
  CHECK_FALSE(c.events().lost.pop(0ms));
}

// ---- the broker goes away -----------------------------------------------------------------------

// What a user sees when the broker restarts under load: both clients come back by themselves,
// the subscriber's subscription is there again, every publication ends (sent after the
// reconnect, or failed with a reason), and nothing waits forever.
TEST_CASE(
    "broker killed and restarted under QoS 1 traffic: publisher and subscriber reconnect, the "
    "subscription is restored, and every publish completes or fails with a reason",
    "[mqtt][reconnect]") {
  INFO("engine " << engine_name(engine_under_test()));
  Mosquitto broker;
  IoThreads io;
  TestConnection subscriber(io, connection_options(broker.url(), "restart-sub"));
  TestConnection publisher(io, connection_options(broker.url(), "restart-pub"));
  CHECK_FALSE(subscriber.wait_connected().reconnected);
  CHECK_FALSE(publisher.wait_connected().reconnected);
  auto sub = subscriber.subscribe("restart/#");
  REQUIRE(sub);
  REQUIRE(sub->ok);

  // A publication every 5 ms on the publisher's strand, numbered; every outcome recorded.
  struct Outcomes {
    std::mutex mu;
    std::map<int, TestConnection::Result> done;
    int sent = 0;
  };
  auto outcomes = std::make_shared<Outcomes>();
  auto timer = std::make_shared<boost::asio::steady_timer>(publisher.strand());
  auto running = std::make_shared<std::atomic<bool>>(true);
  auto* conn = &publisher.connection();
  auto tick = std::make_shared<std::function<void()>>();
  std::weak_ptr<std::function<void()>> weak_tick = tick;  // no cycle through the timer
  *tick = [=] {
    if (!*running) return;
    int n;
    {
      std::lock_guard lock(outcomes->mu);
      n = outcomes->sent++;
    }
    conn->publish("restart/" + std::to_string(n), std::to_string(n), false,
                  [outcomes, n](bool ok, const std::string& why) {
                    std::lock_guard lock(outcomes->mu);
                    outcomes->done[n] = {ok, why};
                  });
    timer->expires_after(5ms);
    timer->async_wait([weak_tick](const boost::system::error_code& ec) {
      if (auto t = weak_tick.lock(); t && !ec) (*t)();
    });
  };
  io.run(publisher.strand(), [&] { (*tick)(); });
  auto sent = [&] {
    std::lock_guard lock(outcomes->mu);
    return outcomes->sent;
  };
  std::set<int> received;
  // The next message at the subscriber, recorded.
  auto next = [&](std::chrono::milliseconds timeout) -> std::optional<int> {
    auto m = subscriber.events().messages.pop(timeout);
    if (!m) return std::nullopt;
    const int n = std::stoi(m->payload);
    received.insert(n);
    return n;
  };

  // Traffic flows; then the broker dies.
  for (int i = 0; i < 20; ++i)
    REQUIRE(next(10s));
  broker.kill();
  REQUIRE(subscriber.events().lost.pop(10s));
  REQUIRE(publisher.events().lost.pop(10s));
  // Publications go on while it is down; it comes back on the same port.
  const int sent_in_outage = sent();
  broker.restart();
  auto up_sub = subscriber.events().connected.pop(30s);
  auto up_pub = publisher.events().connected.pop(30s);
  REQUIRE(up_sub);
  REQUIRE(up_pub);
  CHECK(up_sub->reconnected);
  CHECK(up_pub->reconnected);

  // The restored subscription delivers: once a publication made after both reconnected has
  // arrived, every later one that the broker acknowledged must arrive too.
  const int after_reconnect = sent();
  for (;;) {
    auto n = next(10s);
    REQUIRE(n);
    if (*n >= after_reconnect) break;
  }
  const int checked_from = sent();
  for (;;) {
    auto n = next(10s);
    REQUIRE(n);
    if (*n >= checked_from + 50) break;
  }
  *running = false;
  io.run(publisher.strand(), [&] { timer->cancel(); });
  const int total = sent();

  // Every publication ends, within a bound.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (;;) {
    {
      std::lock_guard lock(outcomes->mu);
      if (static_cast<int>(outcomes->done.size()) == total) break;
    }
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    next(50ms);  // waits on the inbox, recording what arrives
  }
  while (next(500ms)) {
  }
  std::lock_guard lock(outcomes->mu);
  int failed = 0, lost_acked = 0;
  for (const auto& [n, r] : outcomes->done) {
    if (!r.ok) {
      ++failed;
      INFO("publication " << n);
      CHECK_FALSE(r.why.empty());
    } else if (n >= checked_from && !received.count(n)) {
      ++lost_acked;
      UNSCOPED_INFO("publication " << n << " was acknowledged but never arrived");
    }
  }
  INFO(total << " publications, " << failed << " failed");
  CHECK(lost_acked == 0);
  // The backlog: publications made while the broker was down went out after the reconnect.
  REQUIRE(after_reconnect > sent_in_outage);
  int backlog_ok = 0;
  for (int n = sent_in_outage; n < after_reconnect; ++n) {
    if (outcomes->done[n].ok) ++backlog_ok;
  }
  CHECK(backlog_ok > 0);
}

// MQTT 5.0 §3.14.2.1: a broker may say why it ends a connection, with a reason code and a Reason
// String; the owner hears both. (Mosquitto 2.0.11 sends no DISCONNECT on a session takeover, so a
// scripted broker sends it.)
TEST_CASE(
    "broker DISCONNECT with a reason (MQTT 5.0 §3.14.2.1): Session taken over (0x8E) and the "
    "Reason String reach on_connection_lost",
    "[mqtt][disconnect]") {
  using namespace wire;
  INFO("engine " << engine_name(engine_under_test()));
  const bool paho = paho_under_test();
  FakeBroker broker;
  IoThreads io;
  auto o = connection_options(broker.url(), "disconnected");
  o.reconnect = false;
  TestConnection c(io, o);
  c.wait_connected();
  const std::string reason_string = "another client connected with this id";
  const std::string props = std::string(1, '\x1F') + utf8(reason_string);
  REQUIRE(broker.inject(0, packet(0xE0, std::string(1, '\x8E') + varint(props.size()) + props)));
  auto lost = c.events().lost.pop(10s);
  REQUIRE(lost);
  INFO(*lost);
  CHECK(contains(*lost, "the broker sent DISCONNECT: Session taken over"));
  // Paho C does not hand the Reason String to its disconnected callback.
  if (!paho) CHECK(contains(*lost, reason_string));
  CHECK(broker.wait_closed(0));
  CHECK_FALSE(c.connected());
  CHECK_FALSE(c.events().connected.pop(300ms));
}

// MQTT 5.0 §3.1.4 [MQTT-3.1.4-3]: a CONNECT with a client id that is connected already makes the
// broker close the older connection. The older client hears of it at once and says so.
TEST_CASE(
    "session takeover (MQTT 5.0 §3.1.4): a second client with the same client id ends the first "
    "connection at once, with a cause, and keeps the id",
    "[mqtt][disconnect]") {
  INFO("engine " << engine_name(engine_under_test()));
  Mosquitto broker;
  IoThreads io;
  auto o = connection_options(broker.url(), "takeover");
  o.reconnect = false;  // or the two would take the id from each other in turn
  const std::string id = o.client_id;
  TestConnection c(io, o);
  c.wait_connected();
  Observer usurper(broker.url(), Observer::Options::with_id(id));
  auto lost = c.events().lost.pop(5s);
  REQUIRE(lost);
  INFO("cause: \"" << *lost << "\"");
  CHECK_FALSE(lost->empty());
  if (!paho_under_test()) CHECK(*lost == "the broker closed the connection");
  CHECK_FALSE(c.connected());
  CHECK(usurper.connected());
}

// ---- the broker's limits ------------------------------------------------------------------------

// MQTT 5.0 §3.2.2.3.3 and §4.9: the broker's Receive Maximum bounds our unacknowledged QoS 1
// publications; Mosquitto's max_inflight_messages is its Receive Maximum, and a client that sends
// more is disconnected (0x93).
TEST_CASE(
    "Receive Maximum 1 (MQTT 5.0 §3.2.2.3.3): a burst of 500 QoS 1 publishes all arrive in "
    "order and all complete",
    "[mqtt][flow]") {
  INFO("engine " << engine_name(engine_under_test()));
  Mosquitto::Options bo;
  bo.extra_config = "max_inflight_messages 1\n";
  Mosquitto broker(bo);
  Observer watcher(broker.url());
  watcher.subscribe("burst/#");
  IoThreads io;
  TestConnection c(io, connection_options(broker.url(), "rm1"));
  CHECK(c.wait_connected().info.receive_maximum == 1);

  constexpr int kCount = 500;
  auto results = std::make_shared<Inbox<TestConnection::Result>>();
  io.run(c.strand(), [&] {
    for (int i = 0; i < kCount; ++i) {
      c.connection().publish("burst/" + std::to_string(i), std::to_string(i), false,
                             [results](bool ok, const std::string& why) {
                               results->push({ok, why});
                             });
    }
  });
  int ok = 0;
  for (int i = 0; i < kCount; ++i) {
    auto r = results->pop(20s);
    REQUIRE(r);
    if (!r->ok) UNSCOPED_INFO(r->why);
    ok += r->ok;
  }
  CHECK(ok == kCount);
  for (int i = 0; i < kCount; ++i) {
    auto m = watcher.next(10s);
    REQUIRE(m);
    REQUIRE(m->payload == std::to_string(i));
  }
  CHECK_FALSE(c.events().lost.pop(0ms));
}

// MQTT 5.0 §3.2.2.3.6: no packet larger than the broker's Maximum Packet Size may be sent to it.
TEST_CASE(
    "Maximum Packet Size (MQTT 5.0 §3.2.2.3.6): a publish larger than the broker's fails at "
    "once naming both sizes, and the connection stays up for smaller ones",
    "[mqtt][size]") {
  INFO("engine " << engine_name(engine_under_test()));
  Mosquitto::Options bo;
  bo.extra_config = "max_packet_size 20000\n";
  Mosquitto broker(bo);
  Observer watcher(broker.url());
  watcher.subscribe("size/#");
  IoThreads io;
  TestConnection c(io, connection_options(broker.url(), "size"));
  CHECK(c.wait_connected().info.maximum_packet_size == 20000);

  const auto started = std::chrono::steady_clock::now();
  auto big = c.publish("size/big", std::string(30000, 'x'), 10s);
  REQUIRE(big);
  CHECK(std::chrono::steady_clock::now() - started < 2s);
  INFO(big->why);
  CHECK_FALSE(big->ok);
  CHECK(contains(big->why, "Maximum Packet Size"));
  CHECK(contains(big->why, "20000"));
  // The size of the message as a packet: 30,000 bytes of payload and its header.
  CHECK(std::regex_search(big->why, std::regex("\\b30[0-9]{3}\\b")));

  auto small = c.publish("size/small", "fits");
  REQUIRE(small);
  CHECK(small->ok);
  auto got = watcher.next(5s);
  REQUIRE(got);
  CHECK(got->topic == "size/small");
  CHECK_FALSE(c.events().lost.pop(0ms));
  CHECK(c.connected());
}

// The same limit as a user of the bridge meets it: an MCP client calls the C++ test server's
// tools through the bridge's HTTP ingress, Mosquitto and the stdio egress. A request the ingress
// cannot publish, and a result the egress cannot publish, each come back as a JSON-RPC error
// naming the limit (mqtt/client_session.cpp, mqtt/server_endpoint.cpp), and nothing hangs.
TEST_CASE(
    "Maximum Packet Size end to end: a tools/call request or result larger than the broker "
    "takes gets a JSON-RPC error naming the limit, and smaller calls go on working",
    "[mqtt][size][ingress]") {
  INFO("engine " << engine_name(engine_under_test()));
  Mosquitto::Options bo;
  bo.extra_config = "max_packet_size 20000\n";
  Mosquitto broker(bo);
  Bridge bridge(broker, R"({"test/size": {"command": ")" MCPMQTT_TEST_SERVER R"("}})", "test/size",
                "", R"(, "json_response": true)");
  REQUIRE(bridge.proc->wait_for_log("[directory] test/size online"));
  const std::string host = "127.0.0.1:" + std::to_string(bridge.port);
  RawClient c(bridge.endpoint());
  auto init = c.request(bhttp::verb::post, "/mcp", post_headers(host),
                        initialize_body(1, "2025-06-18"), 20s);
  REQUIRE(init.ok);
  REQUIRE(init.status == 200);
  const auto sid = init.header("mcp-session-id");
  REQUIRE_FALSE(sid.empty());
  REQUIRE(c.request(bhttp::verb::post, "/mcp", post_headers(host, sid, "2025-06-18"), kInitialized)
              .status == 202);
  auto call = [&](int id, const std::string& tool, const std::string& args) {
    auto r = c.request(
        bhttp::verb::post, "/mcp", post_headers(host, sid, "2025-06-18"),
        request_body(id, "tools/call", R"({"name":")" + tool + R"(","arguments":)" + args + "}"),
        20s);
    INFO(bridge.proc->log());
    REQUIRE(r.ok);
    CHECK(r.status == 200);
    return r;
  };

  SECTION("a request larger than the broker takes") {
    auto r = call(2, "echo", R"({"text":")" + std::string(30000, 'q') + R"("})");
    INFO(r.body);
    CHECK(r.error_code() == -32603);
    CHECK(contains(r.error_message(), "Maximum Packet Size"));
    CHECK(contains(r.error_message(), "20000"));
  }
  SECTION("a result larger than the broker takes") {
    auto r = call(3, "blob", R"({"bytes":30000})");
    INFO(r.body);
    CHECK(r.error_code() == -32603);
    CHECK(contains(r.error_message(), "Maximum Packet Size"));
  }
  auto fine = call(4, "echo", R"({"text":"still here"})");
  INFO(fine.body);
  CHECK(json_at(fine.body, "result.content.0.text") == "still here");
}

// Webhook benchmark: events from one MQTT-hosted server fanned out by the bridge to
// R webhook registrations, each event written to the SQLite outbox on disk before it is POSTed.
//
// Setup: a real Mosquitto on a free loopback port; the real mcp-mqtt-bridge with HTTP ingress,
// events.webhooks enabled (the database in a temp dir on disk) and the events test server
// (tests/servers/mcp_events_server) behind its stdio egress; R registrations (one HTTP session)
// of the same event URI, each to its own path on one receiver of this process (Boost.Beast,
// keep-alive, 204 for every POST, on `--receiver-threads` threads). The server's trigger tool
// emits E events, `--interval-us` apart, each carrying its wall-clock time of writing; the
// receiver takes every delivery's latency as its arrival time minus that (one machine, one
// clock). Reported: deliveries/s over the run (first event written → last delivery received),
// p50/p99/max latency, and the bridge's CPU time and RSS.
//
//   bench_webhooks [--registrations 1000] [--events 20] [--interval-us 0]
//                  [--max-in-flight 256] [--receiver-threads 1] [--threads 1]
// (--threads: events.webhooks.threads, the bridge's delivery threads)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include "bench/bench_support.hpp"
#include "tests/support/bridge_process.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/temp_dir.hpp"

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;
using namespace mcpmqtt;
using namespace mcpmqtt::bench;

namespace {

const std::string kServer = "bench/events";
const std::string kUri = "event://bench/tick";

std::int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Stats {
  std::mutex mu;
  std::vector<double> latency_ms;
  std::atomic<std::size_t> received{0};
  std::atomic<std::int64_t> last_us{0};
};

// One kept-alive connection of the receiver: read a request, answer 204, again.
class Conn : public std::enable_shared_from_this<Conn> {
 public:
  Conn(tcp::socket s, Stats& stats) : stream_(std::move(s)), stats_(stats) {}
  void start() { read(); }

 private:
  void read() {
    req_ = {};
    bhttp::async_read(stream_, buf_, req_,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) {
                        if (ec) return;
                        self->on_request();
                      });
  }
  void on_request() {
    const auto now = wall_us();
    const auto& body = req_.body();
    constexpr std::string_view key = "\"t\":";
    if (auto p = body.find(key); p != std::string::npos) {
      const auto t = std::strtoll(body.c_str() + p + key.size(), nullptr, 10);
      std::lock_guard lock(stats_.mu);
      stats_.latency_ms.push_back(static_cast<double>(now - t) / 1000.0);
    }
    stats_.last_us.store(now);
    stats_.received.fetch_add(1);
    res_ = {bhttp::status::no_content, 11};
    res_.keep_alive(req_.keep_alive());
    res_.prepare_payload();
    bhttp::async_write(stream_, res_,
                       [self = shared_from_this()](beast::error_code ec, std::size_t) {
                         if (!ec) self->read();
                       });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buf_;
  bhttp::request<bhttp::string_body> req_;
  bhttp::response<bhttp::empty_body> res_;
  Stats& stats_;
};

void accept(tcp::acceptor& a, Stats& stats) {
  a.async_accept([&a, &stats](beast::error_code ec, tcp::socket s) {
    if (ec) return;
    std::make_shared<Conn>(std::move(s), stats)->start();
    accept(a, stats);
  });
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t registrations = 1000, events = 20, max_in_flight = 256, receiver_threads = 1,
              threads = 1;
  std::uint64_t interval_us = 0;
  const int rc =
      parse_options(argc, argv,
                    "bench_webhooks [--registrations 1000] [--events 20] [--interval-us 0] "
                    "[--max-in-flight 256] [--receiver-threads 1] [--threads 1]",
                    [&](const std::string& name, const std::string& value) {
                      if (name == "--registrations")
                        registrations = std::stoul(value);
                      else if (name == "--events")
                        events = std::stoul(value);
                      else if (name == "--interval-us")
                        interval_us = std::stoull(value);
                      else if (name == "--max-in-flight")
                        max_in_flight = std::stoul(value);
                      else if (name == "--receiver-threads")
                        receiver_threads = std::stoul(value);
                      else if (name == "--threads")
                        threads = std::stoul(value);
                      else
                        return false;
                      return true;
                    });
  if (rc >= 0) return rc;
  raise_fd_limit();

  // The receiver.
  Stats stats;
  net::io_context rx_ioc;
  tcp::acceptor acceptor(rx_ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  const auto rx_port = acceptor.local_endpoint().port();
  accept(acceptor, stats);
  auto work = net::make_work_guard(rx_ioc);
  std::vector<std::thread> rx_threads;
  for (std::size_t i = 0; i < std::max<std::size_t>(1, receiver_threads); ++i)
    rx_threads.emplace_back([&] { rx_ioc.run(); });

  test::Mosquitto broker;
  test::TempDir dir;
  const auto port = test::free_loopback_port();
  std::ostringstream cfg;
  cfg << R"({"mqtt": {"url": ")" << broker.url() << R"("}, "http": {"listen": "127.0.0.1:)" << port
      << R"(", "limits": {"max_body_bytes": 1048576}}, "ingress": {"default_server": ")" << kServer
      << R"(", "presence_wait_ms": 5000}, "log": {"level": "info"}, "events": {"webhooks": {"enabled": true, "database": ")"
      << dir.path()
      << R"(/webhooks.sqlite3", "allow_http": true, "allow_targets": ["127.0.0.1"], "max_in_flight": )"
      << max_in_flight << R"(, "threads": )" << threads << R"(, "max_registrations": )"
      << registrations + 10 << R"(, "retry_min_ms": 100, "retry_max_ms": 1000}}, "mcpServers": {")"
      << kServer << R"(": {"command": ")" MCPMQTT_EVENTS_SERVER R"("}}})";
  test::BridgeProcess bridge({}, cfg.str());
  if (!bridge.wait_for_log("HTTP ingress on", 30s)) {
    std::cerr << "the bridge did not start:\n" << bridge.log();
    return 1;
  }
  find_server_id(broker.url(), kServer);
  const tcp::endpoint ep(net::ip::make_address("127.0.0.1"), port);
  const std::string host = "127.0.0.1:" + std::to_string(port);
  McpHttpClient client(ep, host);
  client.open_session("2025-11-25");
  const auto reg_start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < registrations; ++i) {
    const auto reply =
        client.call(R"({"jsonrpc":"2.0","id":)" + std::to_string(10 + i) +
                    R"(,"method":"resources/subscriptions/register","params":{"uris":[")" + kUri +
                    R"("],"targetUri":"http://127.0.0.1:)" + std::to_string(rx_port) + "/h/" +
                    std::to_string(i) + R"("}})");
    if (reply.find("whsec_") == std::string::npos) {
      std::cerr << "registration " << i << " failed: " << reply << "\n";
      return 1;
    }
  }
  const double reg_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - reg_start).count();
  // The bridge's own session must hold the subscription before events are sent.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (bridge.log().find("subscribed " + kUri) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline) {
      // At log level warn the line is not written: give it a moment instead.
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  std::this_thread::sleep_for(500ms);

  auto run = [&](std::size_t n_events, bool report) {
    {
      std::lock_guard lock(stats.mu);
      stats.latency_ms.clear();
    }
    stats.received = 0;
    const std::size_t expected = n_events * registrations;
    const double cpu0 = cpu_seconds(bridge.pid());
    StealMeter steal;
    const auto t0 = wall_us();
    client.call(
        R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"trigger","arguments":{"uri":")" +
        kUri + R"(","count":)" + std::to_string(n_events) + R"(,"interval_us":)" +
        std::to_string(interval_us) + R"(,"payload":"{\"t\":{now_us},\"seq\":{seq}}"}}})");
    const auto limit = std::chrono::steady_clock::now() + 300s;
    while (stats.received < expected && std::chrono::steady_clock::now() < limit)
      std::this_thread::sleep_for(5ms);
    const double secs = static_cast<double>(stats.last_us.load() - t0) / 1e6;
    const double cpu = cpu_seconds(bridge.pid()) - cpu0;
    const bool all_delivered = stats.received.load() >= expected;
    if (!report) return all_delivered;
    std::vector<double> lat;
    {
      std::lock_guard lock(stats.mu);
      lat = stats.latency_ms;
    }
    std::printf("| %zu | %zu | %zu | %zu | %.0f | %.1f | %.1f | %.1f | %.2f | %.1f %% |\n",
                registrations, n_events, expected, stats.received.load(),
                static_cast<double>(stats.received.load()) / secs, percentile(lat, 0.5),
                percentile(lat, 0.99), percentile(lat, 1.0), cpu, steal.percent());
    return all_delivered;
  };
  std::printf(
      "registrations: %zu in %.1f s; outbox on disk (%s); max_in_flight %zu; %zu delivery "
      "thread(s); events %s\n",
      registrations, reg_s, dir.path().c_str(), max_in_flight, threads,
      interval_us ? ("every " + std::to_string(interval_us) + " µs").c_str() : "in one burst");
  std::printf(
      "| registrations | events | expected | received | deliveries/s | p50 ms | p99 ms | max ms | "
      "bridge CPU s | steal |\n|---|---|---|---|---|---|---|---|---|---|\n");
  bool delivered = run(2, false);  // warm-up: connections, caches
  delivered = run(events, true) && delivered;
  std::printf("bridge RSS: %zu KiB\n", rss_kib(bridge.pid()));
  bridge.terminate();
  work.reset();
  rx_ioc.stop();
  for (auto& t : rx_threads)
    t.join();
  // Rates measured while deliveries went missing are no result.
  if (!delivered) {
    std::cerr << "bench_webhooks: not every event reached every registration\n";
    return 1;
  }
  return 0;
}

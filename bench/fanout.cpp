// Fan-out benchmark: one resource update published on an MQTT server's
// capability topic, delivered through the bridge to many downstream receivers over HTTP.
//
// --mode listen: a real Mosquitto on a free loopback port; the real mcp-mqtt-bridge
// with HTTP ingress and the C++ test server behind its stdio egress; S HTTP sessions (each with
// its own MQTT session in the bridge), each holding N/S subscriptions/listen streams for the
// same resource URI.
//
// --mode sessions (SEP-1803 in-band events): N HTTP sessions, each its own MQTT
// session to an MQTT-native server (bench_mqtt_echo_server: one process for every session, as a
// device would be), each with resources/subscribe of an event:// URI and its GET stream open.
// Every update is an event of a sub-resource of that URI (event://bench/tick/K) with a payload;
// a tenth of the sessions subscribe to a sibling URI instead (event://bench/ticks) and must
// receive nothing (reported as "misrouted").
//
// Either way the benchmark publishes the updates itself on the server's capability topic, as
// the server would, each carrying its publish time (CLOCK_MONOTONIC), and measures, for every
// receiver, publish → the event parsed by this client. It reports p50/p99/max and the bridge's
// RSS and CPU.
//
//   bench_fanout [--mode listen|sessions] [--streams 1000,10000] [--per-session 100]
//                [--updates 30] [--interval-ms 200] [--client-threads 2] [--bridge-threads 2]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <mqtt/async_client.h>
#include <sys/resource.h>

#include "bench/bench_support.hpp"
#include "bridge/protocol/topics.hpp"
#include "tests/support/bridge_process.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/process.hpp"

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;
using namespace mcpmqtt;
using namespace mcpmqtt::bench;

namespace {

const std::string kServer = "bench/fanout";
const std::string kUri = "bench://resource";
const std::string kEventUri = "event://bench/tick";
const std::string kSiblingUri = "event://bench/ticks";  // covers none of kEventUri's updates
constexpr std::string_view kStamp = "\"bench/t\":";

struct Results {
  std::atomic<std::size_t> acked{0};
  std::atomic<std::size_t> received{0};
  std::atomic<std::size_t> failed{0};
};

// One SSE stream: connect, send the request (a subscriptions/listen POST, or a session's GET),
// then read events for ever. A listen counts as open at its acknowledgement, a GET at its 200.
class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(net::io_context& ioc, tcp::endpoint ep, std::string request, Results& results,
           bool ack_on_header = false)
      : sock_(ioc),
        ep_(ep),
        request_(std::move(request)),
        results_(results),
        ack_on_header_(ack_on_header) {}

  void start() {
    sock_.async_connect(ep_, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->fail();
      self->sock_.set_option(tcp::no_delay(true));
      net::async_write(self->sock_, net::buffer(self->request_),
                       [self](beast::error_code e, std::size_t) {
                         if (e) return self->fail();
                         self->read_header();
                       });
    });
  }

  // Publish → receipt of each update, in ms; read once the client threads have stopped.
  const std::vector<double>& latencies_ms() const { return latencies_ms_; }

 private:
  void fail() { results_.failed++; }

  void read_header() {
    parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
    parser_.on_chunk_body(on_chunk_);
    bhttp::async_read_header(sock_, buf_, parser_,
                             [self = shared_from_this()](beast::error_code ec, std::size_t) {
                               if (ec || self->parser_.get().result_int() != 200)
                                 return self->fail();
                               if (self->ack_on_header_) self->results_.acked++;
                               self->read_more();
                             });
  }

  void read_more() {
    bhttp::async_read_some(sock_, buf_, parser_,
                           [self = shared_from_this()](beast::error_code ec, std::size_t) {
                             if (ec) return self->fail();
                             self->scan();
                             self->read_more();
                           });
  }

  void scan() {
    std::size_t start = 0;
    while (true) {
      const auto end = sse_.find("\n\n", start);
      if (end == std::string::npos) break;
      const std::string_view event(sse_.data() + start, end - start);
      start = end + 2;
      if (event.find("notifications/subscriptions/acknowledged") != std::string_view::npos) {
        results_.acked++;
        continue;
      }
      const auto at = event.find(kStamp);
      if (at == std::string_view::npos) continue;
      const auto now = std::chrono::steady_clock::now().time_since_epoch();
      const long long sent = std::strtoll(event.data() + at + kStamp.size(), nullptr, 10);
      const double ms =
          static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count() -
                              sent) /
          1e6;
      latencies_ms_.push_back(ms);  // no lock shared by the client threads
      results_.received++;
    }
    sse_.erase(0, start);
  }

  tcp::socket sock_;
  tcp::endpoint ep_;
  std::string request_;
  Results& results_;
  bool ack_on_header_ = false;
  std::vector<double> latencies_ms_;  // this listener's own: read after the client stops
  beast::flat_buffer buf_;
  bhttp::response_parser<bhttp::string_body> parser_;
  std::string sse_;
  std::function<std::size_t(std::uint64_t, beast::string_view, beast::error_code&)> on_chunk_ =
      [this](std::uint64_t, beast::string_view body, beast::error_code&) {
        sse_.append(body.data(), body.size());
        return body.size();
      };
};

enum class Mode { listen, sessions };

struct Row {
  std::size_t streams = 0, sessions = 0, updates = 0, lost = 0, failed = 0, misrouted = 0;
  double p50 = 0, p99 = 0, max = 0;
  double rss_before_mib = 0, rss_open_mib = 0, rss_peak_mib = 0;
  double open_s = 0;
  double cpu_us_per_event = 0;
};

std::string stream_request(const std::string& method, const std::string& host,
                           const std::string& session, const std::string& body) {
  std::string req = method + " /mcp HTTP/1.1\r\nHost: " + host +
                    "\r\nAccept: application/json, text/event-stream\r\n"
                    "MCP-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: " +
                    session + "\r\n";
  if (body.empty()) return req + "\r\n";
  return req + "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

// listen: `streams` listens over `streams / per_session` sessions. sessions: `streams` sessions,
// each subscribed with resources/subscribe and reading its GET stream.
Row run(Mode mode, std::size_t streams, std::size_t per_session, std::size_t updates,
        int interval_ms, int client_threads, int bridge_threads) {
  Row row;
  row.streams = streams;
  row.sessions = mode == Mode::listen ? (streams + per_session - 1) / per_session : streams;
  row.updates = updates;

  test::Mosquitto broker;
  const auto port = test::free_loopback_port();
  // listen: the C++ test server behind the bridge's own stdio egress. sessions: one MQTT-native
  // server process for all sessions (a child per session would measure the machine).
  std::unique_ptr<test::Process> native_server;
  if (mode == Mode::sessions) {
    test::Process::Options o;
    o.argv = {MCPMQTT_BENCH_MQTT_ECHO, broker.url(), kServer};
    native_server = test::Process::start(o);
  }
  std::ostringstream cfg;
  cfg << R"({"mqtt": {"url": ")" << broker.url() << R"("},)"
      << R"("http": {"listen": "127.0.0.1:)" << port << R"(", "limits": {"max_sessions": )"
      << row.sessions + 16 << R"(, "max_connections": )" << streams + row.sessions + 256 << "}},"
      << R"("ingress": {"default_server": ")" << kServer << R"("},)"
      << R"("egress": {"max_sessions_per_server": )" << row.sessions + 16 << "},"
      << R"("log": {"level": "warn"}, "daemon": {"threads": )" << bridge_threads << "}";
  if (mode == Mode::listen)
    cfg << R"(, "mcpServers": {")" << kServer << R"(": {"command": ")" MCPMQTT_TEST_SERVER
        << R"("}})";
  cfg << "}";
  test::BridgeProcess bridge({}, cfg.str());
  const tcp::endpoint ep{net::ip::make_address("127.0.0.1"), port};
  if (!test::wait_for_port(port, 20s)) throw std::runtime_error("the bridge did not listen");

  // The server's id, from its retained presence, to publish on its capability topic.
  const std::string server_id = find_server_id(broker.url(), kServer);
  row.rss_before_mib = rss_kib(bridge.pid()) / 1024.0;

  const std::string host = "127.0.0.1:" + std::to_string(port);
  const auto t_open = std::chrono::steady_clock::now();
  net::io_context ioc;
  Results results;
  Results siblings;  // sessions mode: subscribed to kSiblingUri, must receive nothing
  std::vector<std::shared_ptr<Listener>> listeners;
  if (mode == Mode::listen) {
    std::vector<std::string> sessions;
    for (std::size_t i = 0; i < row.sessions; ++i)
      sessions.push_back(open_session(ep, host));
    for (std::size_t i = 0; i < streams; ++i) {
      const std::string body =
          R"({"jsonrpc":"2.0","id":)" + std::to_string(i) +
          R"(,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":[")" +
          kUri + R"("]}}})";
      listeners.push_back(std::make_shared<Listener>(
          ioc, ep, stream_request("POST", host, sessions[i / per_session], body), results));
    }
  } else {
    McpHttpClient client(ep, host);
    for (std::size_t i = 0; i < streams; ++i) {
      const std::string session = client.open_session("2025-11-25");
      const bool sibling = i % 10 == 9;
      const std::string reply = client.call(
          R"({"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":")" +
          (sibling ? kSiblingUri : kEventUri) + R"("}})");
      if (reply.find("\"result\"") == std::string::npos)
        throw std::runtime_error("resources/subscribe failed: " + reply);
      listeners.push_back(std::make_shared<Listener>(
          ioc, ep, stream_request("GET", host, session, {}), sibling ? siblings : results,
          /*ack_on_header=*/true));
    }
  }
  for (auto& l : listeners)
    l->start();
  auto work = net::make_work_guard(ioc);
  std::vector<std::thread> io;
  for (int t = 0; t < client_threads; ++t)
    io.emplace_back([&] { ioc.run(); });
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  const auto open = [&] {
    return results.acked + results.failed + siblings.acked + siblings.failed;
  };
  while (open() < streams && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  row.open_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_open).count();
  if (open() - results.failed - siblings.failed < streams) {
    std::cerr << "only " << results.acked + siblings.acked << " of " << streams << " streams open ("
              << results.failed + siblings.failed << " failed)\n";
  }
  row.rss_open_mib = rss_kib(bridge.pid()) / 1024.0;

  // Publish as the server would: on its capability topic (004 §Capability change).
  ::mqtt::async_client pub(broker.url(), "bench-fanout-publisher", ::mqtt::create_options(5));
  pub.connect(::mqtt::connect_options_builder().mqtt_version(5).clean_start(true).finalize())
      ->wait();
  const std::string topic = topics::standard().server_capability(server_id, kServer);
  const double cpu_before = cpu_seconds(bridge.pid());
  const double self_before = cpu_seconds(::getpid());
  for (std::size_t k = 0; k < updates; ++k) {
    const auto before = results.received.load();
    const auto t = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
    // sessions: an event of a sub-resource (SEP-1803 §In-Band), its payload with an integer
    // beyond 2^64 that must arrive as written.
    const std::string params =
        mode == Mode::listen
            ? R"({"uri":")" + kUri + R"(","_meta":{"bench/t":)" + std::to_string(t) + "}}"
            : R"({"uri":")" + kEventUri + "/" + std::to_string(k) + R"(","payload":{"seq":)" +
                  std::to_string(k) + R"(,"big":184467440737095516150},"_meta":{"bench/t":)" +
                  std::to_string(t) + "}}";
    const std::string payload =
        R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":)" + params + "}";
    pub.publish(topic, payload.data(), payload.size(), 0, false);
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (results.received - before < results.acked && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  }
  // The bridge is idle between updates: its CPU time is what the deliveries cost.
  row.cpu_us_per_event = (cpu_seconds(bridge.pid()) - cpu_before) * 1e6 /
                         static_cast<double>(std::max<std::size_t>(1, results.acked * updates));
  std::fprintf(stderr, "(the benchmark's own client: %.1f µs of CPU per event)\n",
               (cpu_seconds(::getpid()) - self_before) * 1e6 /
                   static_cast<double>(std::max<std::size_t>(1, results.acked * updates)));
  pub.disconnect()->wait();
  row.rss_peak_mib = peak_rss_kib(bridge.pid()) / 1024.0;
  row.lost = results.acked * updates - results.received;
  row.failed = results.failed + siblings.failed;
  row.misrouted = siblings.received;
  ioc.stop();
  for (auto& t : io)
    t.join();
  std::vector<double> all;
  all.reserve(results.acked * updates);
  for (const auto& l : listeners)
    all.insert(all.end(), l->latencies_ms().begin(), l->latencies_ms().end());
  row.p50 = percentile(all, 0.50);
  row.p99 = percentile(all, 0.99);
  row.max = percentile(all, 1.0);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> counts = {1000, 10000};
  bool counts_given = false;
  Mode mode = Mode::listen;
  std::size_t per_session = 100, updates = 30;
  int interval_ms = 200, client_threads = 2, bridge_threads = 2;
  const char* usage =
      "usage: bench_fanout [--mode listen|sessions] [--streams 1000,10000] [--per-session 100]\n"
      "                    [--updates 30] [--interval-ms 200] [--client-threads 2]\n"
      "                    [--bridge-threads 2]\n"
      "  listen:   subscriptions/listen streams, --per-session of them per HTTP session\n"
      "  sessions: one HTTP session per stream, resources/subscribe of an event:// URI and a GET\n"
      "            stream each (default --streams 1000)\n";
  const int rc = parse_options(argc, argv, usage, [&](const std::string& a, const std::string& v) {
    if (a == "--mode") {
      if (v != "listen" && v != "sessions") return false;
      mode = v == "listen" ? Mode::listen : Mode::sessions;
    } else if (a == "--streams") {
      counts.clear();
      counts_given = true;
      std::stringstream ss(v);
      for (std::string item; std::getline(ss, item, ',');)
        counts.push_back(std::stoul(item));
    } else if (a == "--per-session") {
      per_session = std::stoul(v);
    } else if (a == "--updates") {
      updates = std::stoul(v);
    } else if (a == "--client-threads") {
      client_threads = std::stoi(v);
    } else if (a == "--bridge-threads") {
      bridge_threads = std::stoi(v);
    } else if (a == "--interval-ms") {
      interval_ms = std::stoi(v);
    } else {
      return false;
    }
    return true;
  });
  if (rc >= 0) return rc;
  if (mode == Mode::sessions && !counts_given) counts = {1000};
  raise_fd_limit();
  if (mode == Mode::sessions)
    std::printf(
        "in-band events: each session subscribed to %s (a tenth to %s), updates of %s/K\n\n",
        kEventUri.c_str(), kSiblingUri.c_str(), kEventUri.c_str());
  std::printf(
      "| streams | sessions | updates | p50 ms | p99 ms | max ms | lost | misrouted | open s | "
      "bridge RSS idle MiB | RSS with streams MiB | peak MiB | KiB per stream | bridge CPU µs per "
      "event |\n"
      "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  const StealMeter steal;
  std::size_t lost = 0, misrouted = 0;
  for (auto n : counts) {
    const Row r = run(mode, n, per_session, updates, interval_ms, client_threads, bridge_threads);
    lost += r.lost;
    misrouted += r.misrouted;
    std::printf(
        "| %zu | %zu | %zu | %.2f | %.2f | %.2f | %zu | %zu | %.1f | %.1f | %.1f | %.1f | %.1f | "
        "%.1f |\n",
        r.streams, r.sessions, r.updates, r.p50, r.p99, r.max, r.lost, r.misrouted, r.open_s,
        r.rss_before_mib, r.rss_open_mib, r.rss_peak_mib,
        (r.rss_open_mib - r.rss_before_mib) * 1024.0 / static_cast<double>(r.streams),
        r.cpu_us_per_event);
    std::fflush(stdout);
  }
  std::printf("\n(CPU time stolen by the hypervisor: %.1f %%)\n", steal.percent());
  // Latencies measured while updates went missing or astray are no result.
  if (lost > 0 || misrouted > 0) {
    std::fprintf(stderr, "bench_fanout: %zu updates lost, %zu misrouted\n", lost, misrouted);
    return 1;
  }
  return 0;
}

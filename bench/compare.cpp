// The bridge against the floor and against what users would pick instead (issue 9). One run
// measures four scenarios and prints one table:
//
//  1. latency at concurrency 1: tools/call of the echo tool through HTTP ingress → Mosquitto →
//     stdio egress → the C++ test server; beside it (a) the floor: a raw MQTT request and
//     response through the same Mosquitto with the same payload, (b) supergateway (stateful
//     Streamable HTTP) in front of the same server, (c) the server over stdio directly;
//  2. throughput: C concurrent HTTP sessions calling the echo tool for a fixed time, bridge
//     and supergateway;
//  3. sessions: N concurrent initialized HTTP sessions on the ingress, each with its own MQTT
//     connection, served by one MQTT-native echo server (bench_mqtt_echo_server); the
//     ingress's RSS per session and the time to open them;
//  4. payload: 1 MiB tool results through the bridge with K requests in flight: throughput
//     and each bridge process's peak RSS above idle.
//
// Ingress and egress run as two bridge processes, as they would be deployed (the ingress next
// to the clients, the egress next to the server), so each one's memory is its own.
//
//   bench_compare [--only 1,2,3,4] [--requests 2000] [--seconds 10] [--concurrency 64]
//                 [--sessions 10000] [--idle-seconds 10] [--keepalive 0] [--payload-kib 1024]
//                 [--in-flight 4] [--qos 1]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <mqtt/async_client.h>

#include "bench/bench_support.hpp"
#include "mqtt/tcp_nodelay.hpp"
#include "tests/support/bridge_process.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/process.hpp"

namespace net = boost::asio;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;
using namespace mcpmqtt;
using namespace mcpmqtt::bench;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kServer = "bench/echo";
const std::string kText(64, 'a');  // the echo tool's argument in scenarios 1 and 2

struct Settings {
  std::set<int> only = {1, 2, 3, 4};
  std::size_t requests = 2000, warmup = 200;
  int seconds = 10;
  std::size_t concurrency = 64;
  std::size_t sessions = 10000;
  std::size_t payload_bytes = 1024 * 1024;
  std::size_t in_flight = 4;
  int qos = 1;            // mqtt.qos of both bridge processes, and the floor's QoS
  int keepalive_s = 0;    // scenario 3's ingress: mqtt.keepalive_s (0: the daemon's default)
  int idle_seconds = 10;  // scenario 3: how long the open sessions idle while CPU is measured
};

std::string echo_request(std::uint64_t id, const std::string& text) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
         R"(,"method":"tools/call","params":{"name":"echo","arguments":{"text":")" + text +
         R"("}}})";
}

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

struct Latency {
  double p50 = 0, p99 = 0;
  std::size_t n = 0;
};

Latency summarize(std::vector<double> us) {
  Latency l;
  l.n = us.size();
  l.p50 = percentile(us, 0.50);
  l.p99 = percentile(us, 0.99);
  return l;
}

// One row of the table.
struct Row {
  std::string scenario, measure, bridge, supergateway, floor, stdio, target, met;
};
std::vector<Row> g_rows;

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// ---- the parts ---------------------------------------------------------------------------

tcp::endpoint loopback(std::uint16_t port) {
  return {net::ip::make_address("127.0.0.1"), port};
}

// A bridge serving only the HTTP ingress (toward `server`), on a free loopback port.
struct Ingress {
  std::uint16_t port = test::free_loopback_port();
  std::unique_ptr<test::BridgeProcess> proc;
  Ingress(const std::string& broker_url, std::size_t max_sessions, int qos, int keepalive_s = 0) {
    std::ostringstream cfg;
    cfg << R"({"mqtt": {"url": ")" << broker_url << R"(", "qos": )" << qos;
    if (keepalive_s > 0) cfg << R"(, "keepalive_s": )" << keepalive_s;
    cfg << "},"
        << R"("http": {"listen": "127.0.0.1:)" << port << R"(", "limits": {"max_sessions": )"
        << max_sessions + 16 << R"(, "max_connections": )" << max_sessions + 256 << "}},"
        << R"("ingress": {"default_server": ")" << kServer << R"("},)"
        << R"("log": {"level": "warn"}})";
    proc = std::make_unique<test::BridgeProcess>(std::vector<std::string>{}, cfg.str());
    if (!test::wait_for_port(port, 20s)) throw std::runtime_error("the ingress did not listen");
  }
  tcp::endpoint ep() const { return loopback(port); }
  std::string host() const { return "127.0.0.1:" + std::to_string(port); }
};

// A bridge publishing the C++ test server on MQTT through its stdio egress.
struct Egress {
  std::unique_ptr<test::BridgeProcess> proc;
  Egress(const std::string& broker_url, std::size_t max_sessions, int qos) {
    std::ostringstream cfg;
    cfg << R"({"mqtt": {"url": ")" << broker_url << R"(", "qos": )" << qos
        << R"(}, "http": {"enabled": false},)"
        << R"("egress": {"max_sessions_per_server": )" << max_sessions + 16 << "},"
        << R"("log": {"level": "warn"},)"
        << R"("mcpServers": {")" << kServer << R"(": {"command": ")" MCPMQTT_TEST_SERVER
        << R"("}}})";
    proc = std::make_unique<test::BridgeProcess>(std::vector<std::string>{}, cfg.str());
    find_server_id(broker_url, kServer);  // online
  }
};

// supergateway (npm, pinned in tests/node) serving the same test server as stateful
// Streamable HTTP: one child per session, as the bridge's egress.
struct Supergateway {
  std::uint16_t port = test::free_loopback_port();
  std::unique_ptr<test::Process> proc;
  Supergateway() {
    test::Process::Options o;
    o.argv = {
        test::node_binary(),
        std::string(MCPMQTT_SOURCE_DIR) + "/tests/node/node_modules/supergateway/dist/index.js",
        "--stdio",
        MCPMQTT_TEST_SERVER,
        "--outputTransport",
        "streamableHttp",
        "--stateful",
        "--port",
        std::to_string(port),
        "--logLevel",
        "none"};
    o.stdout_file = "/dev/null";
    proc = test::Process::start(o);
    if (!test::wait_for_port(port, 30s)) throw std::runtime_error("supergateway did not listen");
  }
  tcp::endpoint ep() const { return loopback(port); }
  std::string host() const { return "127.0.0.1:" + std::to_string(port); }
};

// Times `requests` echo calls one after the other in a new session.
Latency http_latency(const tcp::endpoint& ep, const std::string& host, const Settings& s) {
  McpHttpClient c(ep, host);
  c.open_session();
  std::vector<double> us;
  us.reserve(s.requests);
  for (std::size_t i = 0; i < s.warmup + s.requests; ++i) {
    const auto body = echo_request(i + 2, kText);
    const auto t0 = Clock::now();
    const auto reply = c.call(body);
    const double t = us_since(t0);
    if (reply.find(kText) == std::string::npos)
      throw std::runtime_error("unexpected answer: " + reply.substr(0, 200));
    if (i >= s.warmup) us.push_back(t);
  }
  return summarize(std::move(us));
}

// (a) The floor: a raw MQTT request and response through the same broker, with the same
// payload, both ways at the QoS the bridge publishes with, MQTT 5 clients of the same library.
Latency mqtt_floor(const std::string& broker_url, const Settings& s) {
  const std::string payload = echo_request(7, kText);
  auto opts = ::mqtt::connect_options_builder().mqtt_version(5).clean_start(true).finalize();
  ::mqtt::async_client responder(broker_url, "bench-floor-responder", ::mqtt::create_options(5));
  ::mqtt::async_client requester(broker_url, "bench-floor-requester", ::mqtt::create_options(5));
  // The responder answers from a thread of its own, as the bridge does (Paho's callbacks only
  // hand the message over): publishing from inside Paho's callback stalls now and then.
  std::mutex rmu;
  std::condition_variable rcv;
  std::vector<std::string> inbox;
  bool stop = false;
  responder.set_message_callback([&](::mqtt::const_message_ptr m) {
    std::lock_guard lock(rmu);
    inbox.push_back(m->get_payload_str());
    rcv.notify_one();
  });
  std::thread answering([&] {
    std::unique_lock lock(rmu);
    while (true) {
      rcv.wait(lock, [&] { return stop || !inbox.empty(); });
      if (stop) return;
      auto batch = std::move(inbox);
      inbox.clear();
      lock.unlock();
      for (const auto& p : batch)
        responder.publish("bench/floor/response", p.data(), p.size(), s.qos, false);
      lock.lock();
    }
  });
  std::mutex mu;
  std::condition_variable cv;
  std::size_t answered = 0;
  requester.set_message_callback([&](::mqtt::const_message_ptr) {
    std::lock_guard lock(mu);
    ++answered;
    cv.notify_one();
  });
  responder.connect(opts)->wait();
  requester.connect(opts)->wait();
  responder.subscribe("bench/floor/request", s.qos)->wait();
  requester.subscribe("bench/floor/response", s.qos)->wait();
  std::vector<double> us;
  us.reserve(s.requests);
  for (std::size_t i = 0; i < s.warmup + s.requests; ++i) {
    const auto t0 = Clock::now();
    requester.publish("bench/floor/request", payload.data(), payload.size(), s.qos, false);
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, 5s, [&] { return answered == i + 1; }))
      throw std::runtime_error("the floor's response did not come");
    const double t = us_since(t0);
    if (i >= s.warmup) us.push_back(t);
  }
  {
    std::lock_guard lock(rmu);
    stop = true;
    rcv.notify_one();
  }
  answering.join();
  requester.disconnect()->wait();
  responder.disconnect()->wait();
  // Paho C leaves Nagle on; the bridge's connect(2) sets TCP_NODELAY, and so must the floor's.
  if (!mcpmqtt::mqtt::tcp_nodelay_active()) throw std::runtime_error("TCP_NODELAY was not set");
  return summarize(std::move(us));
}

// (c) The test server over stdio, no bridge.
Latency stdio_direct(const Settings& s) {
  test::Process::Options o;
  o.argv = {MCPMQTT_TEST_SERVER};
  o.pipe_stdin = true;
  o.pipe_stdout = true;
  auto p = test::Process::start(o);
  p->write_stdin(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",)"
      R"("capabilities":{},"clientInfo":{"name":"bench","version":"1"}}})"
      "\n");
  if (!p->read_line(5s)) throw std::runtime_error("the test server did not initialize");
  p->write_stdin(R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
                 "\n");
  std::vector<double> us;
  us.reserve(s.requests);
  for (std::size_t i = 0; i < s.warmup + s.requests; ++i) {
    const auto line = echo_request(i + 2, kText) + "\n";
    const auto t0 = Clock::now();
    p->write_stdin(line);
    const auto reply = p->read_line(5s);
    const double t = us_since(t0);
    if (!reply || reply->find(kText) == std::string::npos)
      throw std::runtime_error("the test server did not echo");
    if (i >= s.warmup) us.push_back(t);
  }
  p->close_stdin();
  p->wait_for(5s);
  return summarize(std::move(us));
}

struct Throughput {
  double rps = 0, p50_ms = 0, p99_ms = 0;
  double cpu_us_per_request = 0;  // of the processes `load` was told to measure, together
  std::size_t errors = 0;
};

// `concurrency` sessions, each on its own connection and thread, calling `body_for` for
// `seconds` once all are open; the CPU time the processes `measured` use meanwhile is divided
// by the requests answered (a measure the machine's other load disturbs less than rps).
Throughput load(const tcp::endpoint& ep, const std::string& host, std::size_t concurrency,
                int seconds, const std::vector<pid_t>& measured,
                const std::function<std::string(std::uint64_t)>& body_for,
                const std::string& expect) {
  std::atomic<std::size_t> ready{0}, errors{0};
  std::atomic<bool> go{false};
  Clock::time_point t_end;
  std::vector<std::vector<double>> per(concurrency);
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < concurrency; ++k) {
    threads.emplace_back([&, k] {
      McpHttpClient c(ep, host);
      try {
        c.open_session();
      } catch (const std::exception& e) {
        std::cerr << "session " << k << ": " << e.what() << "\n";
        errors++;
        ready++;
        return;
      }
      ready++;
      while (!go)
        std::this_thread::sleep_for(1ms);
      for (std::uint64_t i = 2; Clock::now() < t_end; ++i) {
        const auto t0 = Clock::now();
        try {
          const auto reply = c.call(body_for(i));
          if (reply.find(expect) == std::string::npos) errors++;
        } catch (const std::exception&) {
          errors++;
          continue;
        }
        per[k].push_back(us_since(t0) / 1000.0);
      }
    });
  }
  while (ready < concurrency)
    std::this_thread::sleep_for(10ms);
  auto cpu_of_measured = [&] {
    double sum = 0;
    for (pid_t pid : measured)
      sum += cpu_seconds(pid);
    return sum;
  };
  const double cpu0 = cpu_of_measured();
  const auto t0 = Clock::now();
  t_end = t0 + std::chrono::seconds(seconds);
  go = true;
  for (auto& t : threads)
    t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = cpu_of_measured() - cpu0;
  std::vector<double> all;
  for (auto& v : per)
    all.insert(all.end(), v.begin(), v.end());
  Throughput r;
  r.rps = static_cast<double>(all.size()) / elapsed;
  r.p50_ms = percentile(all, 0.50);
  r.p99_ms = percentile(all, 0.99);
  r.errors = errors;
  if (!all.empty()) r.cpu_us_per_request = cpu * 1e6 / static_cast<double>(all.size());
  return r;
}

// ---- the scenarios -----------------------------------------------------------------------

void scenario_latency(const Settings& s) {
  test::Mosquitto broker;
  Egress egress(broker.url(), 8, s.qos);
  Ingress ingress(broker.url(), 8, s.qos);
  Supergateway sg;
  const Latency bridge = http_latency(ingress.ep(), ingress.host(), s);
  const Latency gateway = http_latency(sg.ep(), sg.host(), s);
  const Latency floor = mqtt_floor(broker.url(), s);
  const Latency direct = stdio_direct(s);
  const double added = bridge.p50 - floor.p50 - direct.p50;
  const std::string n = " (" + std::to_string(s.requests) + " calls)";
  g_rows.push_back({"1 latency, concurrency 1", "p50 µs" + n, fmt("%.0f", bridge.p50),
                    fmt("%.0f", gateway.p50), fmt("%.0f", floor.p50), fmt("%.0f", direct.p50),
                    "bridge ≤ supergateway", bridge.p50 <= gateway.p50 ? "yes" : "no"});
  g_rows.push_back({"", "p99 µs", fmt("%.0f", bridge.p99), fmt("%.0f", gateway.p99),
                    fmt("%.0f", floor.p99), fmt("%.0f", direct.p99), "", ""});
  g_rows.push_back({"", "bridge's own time at p50: bridge − floor − stdio, µs", fmt("%.0f", added),
                    "", "", "", "≤ 150", added <= 150 ? "yes" : "no"});
}

void scenario_throughput(const Settings& s) {
  auto body = [](std::uint64_t id) { return echo_request(id, kText); };
  Throughput bridge, gateway;
  {
    test::Mosquitto broker;
    Egress egress(broker.url(), s.concurrency, s.qos);
    Ingress ingress(broker.url(), s.concurrency, s.qos);
    bridge = load(ingress.ep(), ingress.host(), s.concurrency, s.seconds,
                  {ingress.proc->pid(), egress.proc->pid(), broker.pid()}, body, kText);
  }
  {
    Supergateway sg;
    gateway = load(sg.ep(), sg.host(), s.concurrency, s.seconds, {sg.proc->pid()}, body, kText);
  }
  const std::string what = "2 throughput, " + std::to_string(s.concurrency) + " sessions, " +
                           std::to_string(s.seconds) + " s";
  g_rows.push_back({what, "requests/s", fmt("%.0f", bridge.rps), fmt("%.0f", gateway.rps), "", "",
                    "bridge ≥ 2× supergateway", bridge.rps >= 2 * gateway.rps ? "yes" : "no"});
  g_rows.push_back(
      {"", "p50 / p99 ms", fmt("%.2f", bridge.p50_ms) + " / " + fmt("%.2f", bridge.p99_ms),
       fmt("%.2f", gateway.p50_ms) + " / " + fmt("%.2f", gateway.p99_ms), "", "", "", ""});
  g_rows.push_back({"",
                    "CPU µs per request (bridge: both processes and Mosquitto; supergateway: "
                    "its Node process)",
                    fmt("%.0f", bridge.cpu_us_per_request), fmt("%.0f", gateway.cpu_us_per_request),
                    "", "", "", ""});
  if (bridge.errors + gateway.errors > 0)
    g_rows.push_back({"", "errors", std::to_string(bridge.errors), std::to_string(gateway.errors),
                      "", "", "0", "no"});
}

void scenario_sessions(const Settings& s) {
  test::Mosquitto broker;
  test::Process::Options o;
  o.argv = {MCPMQTT_BENCH_MQTT_ECHO, broker.url(), kServer};
  auto server = test::Process::start(o);
  find_server_id(broker.url(), kServer);
  Ingress ingress(broker.url(), s.sessions, s.qos, s.keepalive_s);
  // One session opened and used first, so the idle figure includes what every process has
  // once it served anything (thread stacks, pools), not what sessions cost.
  {
    McpHttpClient c(ingress.ep(), ingress.host());
    c.open_session();
    c.call(echo_request(2, kText));
  }
  std::this_thread::sleep_for(500ms);
  const double idle_kib = static_cast<double>(rss_kib(ingress.proc->pid()));

  constexpr std::size_t kOpeners = 16;
  std::vector<std::vector<std::string>> ids(kOpeners);
  std::atomic<std::size_t> failed{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < kOpeners; ++k) {
    threads.emplace_back([&, k] {
      McpHttpClient c(ingress.ep(), ingress.host());
      for (std::size_t i = k; i < s.sessions; i += kOpeners) {
        try {
          ids[k].push_back(c.open_session());
        } catch (const std::exception& e) {
          if (failed++ < 3) std::cerr << "open: " << e.what() << "\n";
        }
      }
    });
  }
  for (auto& t : threads)
    t.join();
  const double open_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::this_thread::sleep_for(2s);  // settle: every MQTT connection is up and subscribed
  const double open_kib = static_cast<double>(rss_kib(ingress.proc->pid()));
  std::size_t opened = 0;
  for (auto& v : ids)
    opened += v.size();
  std::cerr << "scenario 3: " << opened << " sessions open after " << fmt("%.1f", open_s)
            << " s; measuring the ingress (pid " << ingress.proc->pid() << ") idle for "
            << s.idle_seconds << " s\n";
  // What holding them costs when nothing happens: keep-alives, timers.
  const double cpu0 = cpu_seconds(ingress.proc->pid());
  std::this_thread::sleep_for(std::chrono::seconds(s.idle_seconds));
  const double idle_cpu = (cpu_seconds(ingress.proc->pid()) - cpu0) / s.idle_seconds;
  // Every session still answers: a call in each of a sample of them.
  std::size_t sampled = 0, answered = 0;
  {
    McpHttpClient c(ingress.ep(), ingress.host());
    for (auto& v : ids) {
      for (std::size_t i = 0; i < v.size(); i += 50) {
        ++sampled;
        c.use_session(v[i], "2025-06-18");
        try {
          if (c.call(echo_request(3, kText)).find(kText) != std::string::npos) ++answered;
        } catch (const std::exception&) {
        }
      }
    }
  }
  const double per_session =
      (open_kib - idle_kib) / static_cast<double>(std::max<std::size_t>(1, opened));
  const std::string what = "3 sessions: " + std::to_string(s.sessions) +
                           " initialized HTTP sessions, each with its own MQTT connection";
  g_rows.push_back({what, "sessions held (of " + std::to_string(s.sessions) + ")",
                    std::to_string(opened), "", "", "", std::to_string(s.sessions),
                    opened == s.sessions && failed == 0 ? "yes" : "no"});
  g_rows.push_back({"", "sessions answering a call (sample)",
                    std::to_string(answered) + " of " + std::to_string(sampled), "", "", "", "all",
                    answered == sampled ? "yes" : "no"});
  g_rows.push_back(
      {"", "time to open them, s (16 clients)", fmt("%.1f", open_s), "", "", "", "", ""});
  g_rows.push_back({"", "ingress RSS idle → with sessions, MiB",
                    fmt("%.1f", idle_kib / 1024) + " → " + fmt("%.1f", open_kib / 1024), "", "", "",
                    "", ""});
  g_rows.push_back({"", "ingress CPU while they idle, % of one core", fmt("%.1f", idle_cpu * 100),
                    "", "", "", "", ""});
  g_rows.push_back({"", "ingress memory per idle session, KiB", fmt("%.1f", per_session), "", "",
                    "", "≤ 64", per_session <= 64 ? "yes" : "no"});
  server->signal(SIGTERM);
  server->wait_for(10s);
}

void scenario_payload(const Settings& s) {
  test::Mosquitto broker;
  Egress egress(broker.url(), s.in_flight, s.qos);
  Ingress ingress(broker.url(), s.in_flight, s.qos);
  // Open a session once (children started, pools warm) before taking the idle figures.
  {
    McpHttpClient c(ingress.ep(), ingress.host());
    c.open_session();
    c.call(echo_request(2, kText));
  }
  std::this_thread::sleep_for(500ms);
  const double in_idle = static_cast<double>(rss_kib(ingress.proc->pid()));
  const double eg_idle = static_cast<double>(rss_kib(egress.proc->pid()));
  const std::string body_tail =
      R"(,"method":"tools/call","params":{"name":"blob","arguments":{"bytes":)" +
      std::to_string(s.payload_bytes) + "}}}";
  auto body = [&](std::uint64_t id) {
    return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + body_tail;
  };
  const Throughput r = load(ingress.ep(), ingress.host(), s.in_flight, s.seconds,
                            {ingress.proc->pid(), egress.proc->pid()}, body, "xxxxxxxx");
  const double in_peak = static_cast<double>(peak_rss_kib(ingress.proc->pid()));
  const double eg_peak = static_cast<double>(peak_rss_kib(egress.proc->pid()));
  const double payload_kib = static_cast<double>(s.payload_bytes) / 1024.0;
  const double k = static_cast<double>(s.in_flight);
  const double in_ratio = (in_peak - in_idle) / (k * payload_kib);
  const double eg_ratio = (eg_peak - eg_idle) / (k * payload_kib);
  const std::string what = "4 payload: " + fmt("%.0f", payload_kib) + " KiB results, " +
                           std::to_string(s.in_flight) + " in flight, " +
                           std::to_string(s.seconds) + " s";
  g_rows.push_back({what, "results/s, MiB/s",
                    fmt("%.1f", r.rps) + ", " + fmt("%.0f", r.rps * payload_kib / 1024), "", "", "",
                    "", r.errors == 0 ? "" : "errors: " + std::to_string(r.errors)});
  g_rows.push_back({"", "p50 / p99 ms", fmt("%.1f", r.p50_ms) + " / " + fmt("%.1f", r.p99_ms), "",
                    "", "", "", ""});
  g_rows.push_back({"", "CPU µs per result: both bridge processes",
                    fmt("%.0f", r.cpu_us_per_request), "", "", "", "", ""});
  g_rows.push_back(
      {"", "ingress peak RSS above idle, × payload per request in flight",
       fmt("%.2f", in_ratio) + " (" + fmt("%.1f", (in_peak - in_idle) / 1024) + " MiB)", "", "", "",
       "< 4", in_ratio < 4 ? "yes" : "no"});
  g_rows.push_back(
      {"", "egress peak RSS above idle, × payload per request in flight",
       fmt("%.2f", eg_ratio) + " (" + fmt("%.1f", (eg_peak - eg_idle) / 1024) + " MiB)", "", "", "",
       "< 4", eg_ratio < 4 ? "yes" : "no"});
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  const char* usage =
      "usage: bench_compare [--only 1,2,3,4] [--requests 2000] [--seconds 10]\n"
      "                     [--concurrency 64] [--sessions 10000] [--idle-seconds 10]\n"
      "                     [--keepalive 0] [--payload-kib 1024] [--in-flight 4] [--qos 1]\n"
      "(--keepalive: scenario 3's mqtt.keepalive_s, 0 for the daemon's default)\n";
  const int rc = parse_options(argc, argv, usage, [&](const std::string& a, const std::string& v) {
    if (a == "--only") {
      s.only.clear();
      std::stringstream ss(v);
      for (std::string item; std::getline(ss, item, ',');)
        s.only.insert(std::stoi(item));
    } else if (a == "--requests") {
      s.requests = std::stoul(v);
      s.warmup = std::max<std::size_t>(10, s.requests / 10);
    } else if (a == "--seconds") {
      s.seconds = std::stoi(v);
    } else if (a == "--concurrency") {
      s.concurrency = std::stoul(v);
    } else if (a == "--sessions") {
      s.sessions = std::stoul(v);
    } else if (a == "--payload-kib") {
      s.payload_bytes = std::stoul(v) * 1024;
    } else if (a == "--idle-seconds") {
      s.idle_seconds = std::max(1, std::stoi(v));
    } else if (a == "--qos") {
      s.qos = std::stoi(v);
      if (s.qos != 0 && s.qos != 1) throw std::invalid_argument("qos");
    } else if (a == "--keepalive") {
      s.keepalive_s = std::stoi(v);
    } else if (a == "--in-flight") {
      s.in_flight = std::stoul(v);
    } else {
      return false;
    }
    return true;
  });
  if (rc >= 0) return rc;
  raise_fd_limit();
  const StealMeter steal;
  const auto t0 = Clock::now();
  try {
    if (s.only.count(1)) scenario_latency(s);
    if (s.only.count(2)) scenario_throughput(s);
    if (s.only.count(3)) scenario_sessions(s);
    if (s.only.count(4)) scenario_payload(s);
  } catch (const std::exception& e) {
    std::cerr << "benchmark failed: " << e.what() << "\n";
    return 1;
  }
  std::printf(
      "| scenario | measure | bridge | supergateway | (a) raw MQTT floor | (c) stdio direct | "
      "target | met |\n|---|---|---:|---:|---:|---:|---|---|\n");
  for (const auto& r : g_rows)
    std::printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.scenario.c_str(),
                r.measure.c_str(), r.bridge.c_str(), r.supergateway.c_str(), r.floor.c_str(),
                r.stdio.c_str(), r.target.c_str(), r.met.c_str());
  std::printf("\n(%.0f s in all; CPU time stolen by the hypervisor: %.1f %%)\n",
              std::chrono::duration<double>(Clock::now() - t0).count(), steal.percent());
  return 0;
}

// MCP 2026-07-28 ("modern") requests against 2025 ("legacy") ones through the same bridge (issue
// 19: modern ≥ 0.9 × legacy). One set-up for both: Mosquitto as shipped (Nagle on, no tuning),
// an ingress bridge process (HTTP) and an egress bridge process publishing the C++ test server
// over its stdio egress. The same tools/call of the echo tool, 64 bytes, either
//   legacy: in an initialized session (Mcp-Session-Id), answered on the POST's SSE stream, or
//   modern: with the _meta envelope and the MCP-Protocol-Version, Mcp-Method and Mcp-Name
//           headers, no session, answered in JSON; the bridge runs it on a pooled MQTT session.
// Measured: latency at concurrency 1 (p50, p99), and throughput with C clients, each on its own
// connection and thread, for S seconds after a warm-up (which fills the modern pool), in R rounds
// alternating legacy and modern so that a change in the machine's load hits both; CPU time per
// request of the ingress process and of the three processes together.
//
//   bench_modern [--seconds 10] [--concurrency 16] [--rounds 3] [--requests 2000] [--qos 1]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "bench/bench_support.hpp"
#include "tests/support/bridge_process.hpp"
#include "tests/support/mosquitto.hpp"

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;
using namespace mcpmqtt;
using namespace mcpmqtt::bench;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kServer = "bench/echo";
const std::string kText(64, 'a');

struct Settings {
  int seconds = 10;
  std::size_t concurrency = 16;
  int rounds = 3;
  std::size_t requests = 2000;
  int qos = 1;
};

enum class Era { legacy, modern };
const char* name(Era e) {
  return e == Era::legacy ? "legacy (2025 session)" : "modern (2026-07-28)";
}

std::string echo_params() {
  return R"("name":"echo","arguments":{"text":")" + kText + R"("})";
}

// A blocking client on one keep-alive connection, for either era.
class Client {
 public:
  Client(tcp::endpoint ep, std::string host, Era era)
      : ep_(ep), host_(std::move(host)), era_(era) {}
  ~Client() {
    // A 2025 session ends with DELETE, so that the rounds do not pile sessions up.
    if (session_.empty()) return;
    try {
      bhttp::request<bhttp::string_body> req{bhttp::verb::delete_, "/mcp", 11};
      req.set(bhttp::field::host, host_);
      req.set("Mcp-Session-Id", session_);
      req.set("MCP-Protocol-Version", "2025-11-25");
      req.keep_alive(false);
      if (!sock_.is_open()) sock_.connect(ep_);
      bhttp::write(sock_, req);
      bhttp::response_parser<bhttp::string_body> parser;
      bhttp::read(sock_, buf_, parser);
    } catch (const std::exception&) {
    }
  }

  void open() {
    if (era_ == Era::modern) return;  // no session: nothing to open
    auto r = post(
        R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}})",
        {});
    session_ = r.session;
    if (r.status != 200 || session_.empty())
      throw std::runtime_error("initialize: HTTP " + std::to_string(r.status));
    if (post(R"({"jsonrpc":"2.0","method":"notifications/initialized"})", {}).status != 202)
      throw std::runtime_error("notifications/initialized refused");
  }

  // One echo call; throws unless its answer came.
  void call(std::uint64_t id) {
    Reply r;
    if (era_ == Era::legacy) {
      r = post(R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
                   R"(,"method":"tools/call","params":{)" + echo_params() + "}}",
               {});
    } else {
      r = post(
          R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
              R"(,"method":"tools/call","params":{)" + echo_params() +
              R"(,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}})",
          {{"MCP-Protocol-Version", "2026-07-28"},
           {"Mcp-Method", "tools/call"},
           {"Mcp-Name", "echo"}});
    }
    const auto message = response_message(r.body);
    if (r.status != 200 || message.find(kText) == std::string::npos)
      throw std::runtime_error("HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 300));
  }

 private:
  struct Reply {
    unsigned status = 0;
    std::string session;
    std::string body;
  };
  Reply post(const std::string& body, const std::vector<std::pair<std::string, std::string>>& h) {
    bhttp::request<bhttp::string_body> req{bhttp::verb::post, "/mcp", 11};
    req.set(bhttp::field::host, host_);
    req.set(bhttp::field::content_type, "application/json");
    req.set(bhttp::field::accept, "application/json, text/event-stream");
    if (!session_.empty()) {
      req.set("Mcp-Session-Id", session_);
      req.set("MCP-Protocol-Version", "2025-11-25");
    }
    for (const auto& [k, v] : h)
      req.set(k, v);
    req.keep_alive(true);
    req.body() = body;
    req.prepare_payload();
    if (!sock_.is_open()) {
      buf_.clear();
      sock_.connect(ep_);
      sock_.set_option(tcp::no_delay(true));
    }
    bhttp::write(sock_, req);
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(16 << 20);
    bhttp::read(sock_, buf_, parser);
    auto res = parser.release();
    return Reply{res.result_int(), std::string(res["Mcp-Session-Id"]), std::move(res.body())};
  }

  net::io_context ioc_;
  tcp::socket sock_{ioc_};
  boost::beast::flat_buffer buf_;
  tcp::endpoint ep_;
  std::string host_;
  Era era_;
  std::string session_;
};

struct Bridges {
  std::unique_ptr<test::Mosquitto> broker;
  std::unique_ptr<test::BridgeProcess> egress, ingress;
  std::uint16_t port = test::free_loopback_port();

  explicit Bridges(const Settings& s) {
    broker = std::make_unique<test::Mosquitto>();  // as shipped: Nagle on, no tuning
    std::ostringstream e;
    e << R"({"mqtt": {"url": ")" << broker->url() << R"(", "qos": )" << s.qos
      << R"(}, "http": {"enabled": false}, "egress": {"max_sessions_per_server": )"
      << 4 * s.concurrency + 16 << R"(}, "log": {"level": "warn"}, "mcpServers": {")" << kServer
      << R"(": {"command": ")" MCPMQTT_TEST_SERVER << R"("}}})";
    egress = std::make_unique<test::BridgeProcess>(std::vector<std::string>{}, e.str());
    find_server_id(broker->url(), kServer);
    std::ostringstream i;
    i << R"({"mqtt": {"url": ")" << broker->url() << R"(", "qos": )" << s.qos
      << R"(}, "http": {"listen": "127.0.0.1:)" << port << R"("}, "ingress": {"default_server": ")"
      << kServer << R"(", "modern": {"max_sessions_per_key": )" << s.concurrency + 4
      << R"(}}, "log": {"level": "warn"}})";
    ingress = std::make_unique<test::BridgeProcess>(std::vector<std::string>{}, i.str());
    if (!test::wait_for_port(port, 20s)) throw std::runtime_error("the ingress did not listen");
  }
  tcp::endpoint ep() const { return {net::ip::make_address("127.0.0.1"), port}; }
  std::string host() const { return "127.0.0.1:" + std::to_string(port); }
  std::vector<pid_t> all() const { return {ingress->pid(), egress->pid(), broker->pid()}; }
};

struct Latency {
  double p50 = 0, p99 = 0;
};

Latency latency(const Bridges& b, Era era, std::size_t n) {
  Client c(b.ep(), b.host(), era);
  c.open();
  std::uint64_t id = 1;
  for (std::size_t k = 0; k < std::max<std::size_t>(50, n / 10); ++k)
    c.call(++id);
  std::vector<double> us;
  us.reserve(n);
  for (std::size_t k = 0; k < n; ++k) {
    const auto t0 = Clock::now();
    c.call(++id);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return {percentile(us, 0.5), percentile(us, 0.99)};
}

struct Throughput {
  double rps = 0, p50_ms = 0, p99_ms = 0;
  double cpu_us_ingress = 0, cpu_us_all = 0;
  std::size_t errors = 0;
};

Throughput throughput(const Bridges& b, Era era, const Settings& s) {
  std::atomic<std::size_t> ready{0}, errors{0};
  std::atomic<bool> go{false};
  Clock::time_point t_end{};
  std::vector<std::vector<double>> per(s.concurrency);
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < s.concurrency; ++k) {
    threads.emplace_back([&, k] {
      Client c(b.ep(), b.host(), era);
      std::uint64_t id = 1;
      try {
        c.open();
        // Warm-up, all clients at once: the modern pool grows to one session per client.
        const auto warm_end = Clock::now() + 1s;
        while (Clock::now() < warm_end)
          c.call(++id);
      } catch (const std::exception& e) {
        std::cerr << "client " << k << ": " << e.what() << "\n";
        errors++;
        ready++;
        return;
      }
      ready++;
      while (!go)
        std::this_thread::sleep_for(1ms);
      while (Clock::now() < t_end) {
        const auto t0 = Clock::now();
        try {
          c.call(++id);
        } catch (const std::exception&) {
          errors++;
          continue;
        }
        per[k].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
    });
  }
  while (ready < s.concurrency)
    std::this_thread::sleep_for(10ms);
  auto cpu = [](const std::vector<pid_t>& pids) {
    double sum = 0;
    for (pid_t p : pids)
      sum += cpu_seconds(p);
    return sum;
  };
  const double ingress0 = cpu({b.ingress->pid()}), all0 = cpu(b.all());
  const auto t0 = Clock::now();
  t_end = t0 + std::chrono::seconds(s.seconds);
  go = true;
  for (auto& t : threads)
    t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> all;
  for (auto& v : per)
    all.insert(all.end(), v.begin(), v.end());
  Throughput r;
  r.rps = static_cast<double>(all.size()) / elapsed;
  r.p50_ms = percentile(all, 0.5);
  r.p99_ms = percentile(all, 0.99);
  r.errors = errors;
  if (!all.empty()) {
    const auto n = static_cast<double>(all.size());
    r.cpu_us_ingress = (cpu({b.ingress->pid()}) - ingress0) * 1e6 / n;
    r.cpu_us_all = (cpu(b.all()) - all0) * 1e6 / n;
  }
  return r;
}

double median(std::vector<double> v) {
  return percentile(v, 0.5);
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  const char* usage =
      "usage: bench_modern [--seconds 10] [--concurrency 16] [--rounds 3] [--requests 2000]\n"
      "                    [--qos 1]\n"
      "MCP 2026-07-28 requests against 2025 session requests through the same bridge, Mosquitto\n"
      "as shipped; --rounds alternates the two eras that many times.\n";
  const int rc = parse_options(argc, argv, usage, [&](const std::string& a, const std::string& v) {
    if (a == "--seconds")
      s.seconds = std::stoi(v);
    else if (a == "--concurrency")
      s.concurrency = std::stoul(v);
    else if (a == "--rounds")
      s.rounds = std::stoi(v);
    else if (a == "--requests")
      s.requests = std::stoul(v);
    else if (a == "--qos")
      s.qos = std::stoi(v);
    else
      return false;
    return true;
  });
  if (rc >= 0) return rc;
  const StealMeter steal;
  try {
    Bridges b(s);
    std::printf("| measure | %s | %s | modern ÷ legacy |\n|---|---:|---:|---:|\n",
                name(Era::legacy), name(Era::modern));
    const auto ll = latency(b, Era::legacy, s.requests);
    const auto lm = latency(b, Era::modern, s.requests);
    std::printf("| latency at concurrency 1, p50 µs | %.0f | %.0f | %.2f |\n", ll.p50, lm.p50,
                lm.p50 / ll.p50);
    std::printf("| latency at concurrency 1, p99 µs | %.0f | %.0f | %.2f |\n", ll.p99, lm.p99,
                lm.p99 / ll.p99);
    std::vector<double> rps[2], cpu_in[2], cpu_all[2], p50[2], p99[2];
    std::size_t errors = 0;
    for (int round = 0; round < s.rounds; ++round) {
      for (Era era : {Era::legacy, Era::modern}) {
        std::cerr << "round " << round + 1 << ": " << name(era) << "\n";
        const auto t = throughput(b, era, s);
        const auto i = static_cast<std::size_t>(era);
        rps[i].push_back(t.rps);
        cpu_in[i].push_back(t.cpu_us_ingress);
        cpu_all[i].push_back(t.cpu_us_all);
        p50[i].push_back(t.p50_ms);
        p99[i].push_back(t.p99_ms);
        errors += t.errors;
        std::cerr << "  " << t.rps << " requests/s, p50 " << t.p50_ms << " ms\n";
      }
    }
    auto row = [](const char* what, const std::vector<double>* v, const char* f, bool ratio) {
      const double a = median(v[0]), m = median(v[1]);
      std::string fmt_line = std::string("| %s | ") + f + " | " + f + " | %s |\n";
      char r[32] = "";
      if (ratio) std::snprintf(r, sizeof r, "%.2f", m / a);
      std::printf(fmt_line.c_str(), what, a, m, r);
    };
    std::printf("| throughput, %zu clients, requests/s (median of %d rounds) ", s.concurrency,
                s.rounds);
    std::printf("| %.0f | %.0f | %.2f |\n", median(rps[0]), median(rps[1]),
                median(rps[1]) / median(rps[0]));
    row("throughput p50 ms", p50, "%.2f", true);
    row("throughput p99 ms", p99, "%.2f", true);
    row("CPU µs per request, ingress process", cpu_in, "%.0f", true);
    row("CPU µs per request, ingress + egress + Mosquitto", cpu_all, "%.0f", true);
    std::printf("\nrequests/s per round: legacy");
    for (double v : rps[0])
      std::printf(" %.0f", v);
    std::printf("; modern");
    for (double v : rps[1])
      std::printf(" %.0f", v);
    std::printf("\nerrors: %zu; CPU time stolen by the hypervisor: %.1f %%\n", errors,
                steal.percent());
    // Throughput measured while requests failed is no result.
    if (errors > 0) {
      std::cerr << "bench_modern: " << errors << " requests failed\n";
      return 1;
    }
  } catch (const std::exception& e) {
    std::cerr << "benchmark failed: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

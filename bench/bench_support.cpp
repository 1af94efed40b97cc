#include "bench/bench_support.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <mqtt/async_client.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bridge/protocol/topics.hpp"

namespace mcpmqtt::bench {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;

namespace {
std::size_t status_kib(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoul(line.substr(field.size() + 1));
  }
  return 0;
}
}  // namespace

std::size_t rss_kib(pid_t pid) {
  return status_kib(pid, "VmRSS");
}
std::size_t peak_rss_kib(pid_t pid) {
  return status_kib(pid, "VmHWM");
}

double cpu_seconds(pid_t pid) {
  // /proc/PID/stat: fields 14 and 15 (utime, stime) after the parenthesised command name.
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 2));
  std::string skip;
  for (int i = 3; i < 14; ++i)
    fields >> skip;
  unsigned long long utime = 0, stime = 0;
  fields >> utime >> stime;
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

namespace {
// The aggregate "cpu" line of /proc/stat: (steal, all ticks).
std::pair<unsigned long long, unsigned long long> cpu_ticks() {
  std::ifstream in("/proc/stat");
  std::string label;
  in >> label;
  unsigned long long total = 0, steal = 0, v = 0;
  for (int field = 0; field < 8 && in >> v; ++field) {  // user nice system idle iowait irq
    total += v;                                         // softirq steal (guest time is in user)
    if (field == 7) steal = v;
  }
  return {steal, total};
}
}  // namespace

StealMeter::StealMeter() {
  std::tie(steal0_, total0_) = cpu_ticks();
}

double StealMeter::percent() const {
  const auto [steal, total] = cpu_ticks();
  if (total <= total0_) return 0;
  return 100.0 * static_cast<double>(steal - steal0_) / static_cast<double>(total - total0_);
}

double percentile(std::vector<double>& values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

std::size_t raise_fd_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
    ::getrlimit(RLIMIT_NOFILE, &lim);
  }
  return lim.rlim_cur == RLIM_INFINITY ? SIZE_MAX : static_cast<std::size_t>(lim.rlim_cur);
}

std::size_t open_file_limit(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/limits");
  std::string line;
  constexpr std::string_view key = "Max open files";
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    std::istringstream fields(line.substr(key.size()));
    std::string soft;
    fields >> soft;
    if (soft == "unlimited") return SIZE_MAX;
    try {
      return std::stoul(soft);
    } catch (const std::logic_error&) {
      return 0;
    }
  }
  return 0;
}

int parse_options(int argc, char** argv, const char* usage,
                  const std::function<bool(const std::string&, const std::string&)>& set) {
  for (int i = 1; i < argc; i += 2) {
    const std::string name = argv[i];
    if (name == "--help" || name == "-h") {
      std::fputs(usage, stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "option %s needs a value\n%s", name.c_str(), usage);
      return 2;
    }
    try {
      if (!set(name, argv[i + 1])) {
        std::fprintf(stderr, "unknown option %s\n%s", name.c_str(), usage);
        return 2;
      }
    } catch (const std::logic_error&) {  // std::stoul and friends on a value that is no number
      std::fprintf(stderr, "bad value for %s: %s\n", name.c_str(), argv[i + 1]);
      return 2;
    }
  }
  return -1;
}

std::string open_session(const net::ip::tcp::endpoint& ep, const std::string& host,
                         const std::string& path) {
  McpHttpClient client(ep, host, path);
  return client.open_session("2025-11-25");
}

std::string find_server_id(const std::string& broker_url, const std::string& server_name) {
  ::mqtt::async_client c(broker_url, "bench-presence-reader", ::mqtt::create_options(5));
  c.start_consuming();
  c.connect(::mqtt::connect_options_builder().mqtt_version(5).clean_start(true).finalize())->wait();
  c.subscribe(topics::standard().server_presence_filter(server_name), 0)->wait();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string id;
  while (id.empty() && std::chrono::steady_clock::now() < deadline) {
    ::mqtt::const_message_ptr m;
    if (!c.try_consume_message_for(&m, std::chrono::milliseconds(200)) || !m) continue;
    if (m->get_payload().empty()) continue;
    if (auto t = topics::standard().parse(m->get_topic());
        t && t->kind == topics::Kind::server_presence)
      id = t->server_id;
  }
  c.disconnect()->wait();
  if (id.empty()) throw std::runtime_error("no presence of " + server_name + " within 20 s");
  return id;
}

}  // namespace mcpmqtt::bench

namespace mcpmqtt::bench {

struct McpHttpClient::Io {
  net::io_context ioc;
  net::ip::tcp::endpoint ep;
  net::ip::tcp::socket sock{ioc};
  boost::beast::flat_buffer buf;
};

McpHttpClient::McpHttpClient(const net::ip::tcp::endpoint& ep, std::string host, std::string path)
    : io_(std::make_unique<Io>()), host_(std::move(host)), path_(std::move(path)) {
  io_->ep = ep;
}

McpHttpClient::~McpHttpClient() = default;

McpHttpClient::Reply McpHttpClient::post(const std::string& body) {
  bhttp::request<bhttp::string_body> req{bhttp::verb::post, path_, 11};
  req.set(bhttp::field::host, host_);
  req.set(bhttp::field::content_type, "application/json");
  req.set(bhttp::field::accept, "application/json, text/event-stream");
  if (!session_id_.empty()) {
    req.set("Mcp-Session-Id", session_id_);
    req.set("MCP-Protocol-Version", protocol_version_);
  }
  if (!authorization_.empty()) req.set(bhttp::field::authorization, authorization_);
  req.keep_alive(true);
  req.body() = body;
  req.prepare_payload();
  // One retry on a fresh connection: a kept-alive connection may have been closed by the
  // server between two requests.
  for (int attempt = 0;; ++attempt) {
    try {
      if (!io_->sock.is_open()) {
        io_->buf.clear();
        io_->sock.connect(io_->ep);
        io_->sock.set_option(net::ip::tcp::no_delay(true));
      }
      bhttp::write(io_->sock, req);
      bhttp::response_parser<bhttp::string_body> parser;
      parser.body_limit(std::numeric_limits<std::uint64_t>::max());
      bhttp::read(io_->sock, io_->buf, parser);
      auto res = parser.release();
      if (!res.keep_alive()) {
        boost::system::error_code ignored;
        io_->sock.close(ignored);
      }
      return Reply{res.result_int(), std::string(res["Mcp-Session-Id"]), std::move(res.body())};
    } catch (const boost::system::system_error&) {
      boost::system::error_code ignored;
      io_->sock.close(ignored);
      if (attempt > 0) throw;
    }
  }
}

std::string McpHttpClient::open_session(const std::string& protocol_version) {
  session_id_.clear();
  auto init = post(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":")" +
      protocol_version + R"(","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}})");
  const std::string message = response_message(init.body);
  if (init.status != 200 || init.session_id.empty() ||
      message.find("\"result\"") == std::string::npos)
    throw std::runtime_error("initialize failed: HTTP " + std::to_string(init.status) + " " +
                             init.body);
  // The version the server chose.
  std::string version = protocol_version;
  constexpr std::string_view key = "\"protocolVersion\":\"";
  if (const auto at = message.find(key); at != std::string::npos) {
    const auto end = message.find('"', at + key.size());
    if (end != std::string::npos) version = message.substr(at + key.size(), end - at - key.size());
  }
  use_session(init.session_id, version);
  auto done = post(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  if (done.status != 202)
    throw std::runtime_error("notifications/initialized: HTTP " + std::to_string(done.status));
  return session_id_;
}

void McpHttpClient::use_session(std::string session_id, std::string protocol_version) {
  session_id_ = std::move(session_id);
  protocol_version_ = std::move(protocol_version);
}

std::string McpHttpClient::call(const std::string& body) {
  auto reply = post(body);
  std::string message = response_message(reply.body);
  if (reply.status != 200 || message.empty())
    throw std::runtime_error("HTTP " + std::to_string(reply.status) + ": " +
                             reply.body.substr(0, 300));
  return message;
}

std::string response_message(const std::string& body) {
  const auto first = body.find_first_not_of(" \r\n\t");
  if (first == std::string::npos) return {};
  if (body[first] == '{' || body[first] == '[') return body;
  // SSE: events end with a blank line; a message's data lines hold one JSON object.
  std::string last;
  std::size_t pos = 0;
  while (pos < body.size()) {
    auto eol = body.find('\n', pos);
    if (eol == std::string::npos) eol = body.size();
    std::string_view line(body.data() + pos, eol - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.rfind("data:", 0) == 0) {
      line.remove_prefix(5);
      if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      if (!line.empty() && line.front() == '{') last.assign(line);
    }
    pos = eol + 1;
  }
  return last;
}

}  // namespace mcpmqtt::bench

#include "common/metrics.hpp"

#include <regex>
#include <sstream>

#include <catch2/catch.hpp>

#include "bridge/relay/splice.hpp"
#include "tests/support/memory_channel.hpp"

using namespace mcpmqtt;
using namespace mcpmqtt::test;
using namespace std::chrono_literals;
using metrics::Registry;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

// The value of one sample line, by its exact name and label set; -1 when absent.
double sample(const std::string& text, const std::string& series) {
  for (const auto& line : lines_of(text)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

}  // namespace

TEST_CASE("metrics: the text format has HELP and TYPE once per family, then its samples",
          "[metrics]") {
  Registry r;
  r.counter("t_requests_total", "Requests.", {"method", "outcome"}, {"tools/call", "result"})
      .inc(3);
  r.counter("t_requests_total", "Requests.", {"method", "outcome"}, {"ping", "error"}).inc();
  r.gauge("t_open", "Open things.").set(7);
  const auto text = r.text();
  CHECK(text ==
        "# HELP t_open Open things.\n"
        "# TYPE t_open gauge\n"
        "t_open 7\n"
        "# HELP t_requests_total Requests.\n"
        "# TYPE t_requests_total counter\n"
        "t_requests_total{method=\"ping\",outcome=\"error\"} 1\n"
        "t_requests_total{method=\"tools/call\",outcome=\"result\"} 3\n");
  // Every line is a comment or a sample as the exposition format defines them.
  const std::regex sample_line(
      R"([a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*",?)*\})? [-+0-9.eEInfNa]+)");
  for (const auto& line : lines_of(text)) {
    if (line.rfind("# ", 0) == 0) continue;
    CHECK(std::regex_match(line, sample_line));
  }
}

TEST_CASE("metrics: the same series is the same object, and shapes cannot change", "[metrics]") {
  Registry r;
  auto& a = r.counter("t_x_total", "X.", {"k"}, {"v"});
  auto& b = r.counter("t_x_total", "X.", {"k"}, {"v"});
  CHECK(&a == &b);
  CHECK_THROWS_AS(r.gauge("t_x_total", "X.", {"k"}, {"v"}), std::logic_error);
  CHECK_THROWS_AS(r.counter("t_x_total", "X.", {"other"}, {"v"}), std::logic_error);
  CHECK_THROWS_AS(r.counter("t_x_total", "X.", {"k"}, {}), std::logic_error);
}

TEST_CASE("metrics: label values are escaped", "[metrics]") {
  Registry r;
  r.counter("t_esc_total", "E.", {"v"}, {"a\"b\\c\nd"}).inc();
  CHECK(r.text().find("t_esc_total{v=\"a\\\"b\\\\c\\nd\"} 1\n") != std::string::npos);
}

TEST_CASE("metrics: histogram buckets are cumulative and end with +Inf equal to the count",
          "[metrics]") {
  Registry r;
  auto& h = r.histogram("t_latency_seconds", "L.", {"method"}, {"ping"}, {0.01, 0.1, 1});
  h.observe(0.005);
  h.observe(0.01);  // on a bound: counted in that bucket (le = less or equal)
  h.observe(0.05);
  h.observe(5);
  const auto text = r.text();
  CHECK(sample(text, "t_latency_seconds_bucket{method=\"ping\",le=\"0.01\"}") == 2);
  CHECK(sample(text, "t_latency_seconds_bucket{method=\"ping\",le=\"0.1\"}") == 3);
  CHECK(sample(text, "t_latency_seconds_bucket{method=\"ping\",le=\"1\"}") == 3);
  CHECK(sample(text, "t_latency_seconds_bucket{method=\"ping\",le=\"+Inf\"}") == 4);
  CHECK(sample(text, "t_latency_seconds_count{method=\"ping\"}") == 4);
  CHECK(sample(text, "t_latency_seconds_sum{method=\"ping\"}") == Approx(5.065));
  CHECK(text.find("# TYPE t_latency_seconds histogram\n") != std::string::npos);
}

TEST_CASE("metrics: a gauge callback is read at scrape time and leaves with its handle",
          "[metrics]") {
  Registry r;
  double v = 1;
  auto h = r.gauge_callback("t_alive", "A.", [&v] { return v; });
  CHECK(sample(r.text(), "t_alive") == 1);
  v = 4;
  CHECK(sample(r.text(), "t_alive") == 4);
  // Registered again (a reloaded part): the newer one answers, and dropping the older handle
  // does not remove it.
  auto h2 = r.gauge_callback("t_alive", "A.", [] { return 9.0; });
  h.reset();
  CHECK(sample(r.text(), "t_alive") == 9);
  h2.reset();
  CHECK(r.text().find("t_alive") == std::string::npos);
}

TEST_CASE("metrics: method labels are bounded to the MCP methods", "[metrics]") {
  CHECK(metrics::method_label("tools/call") == "tools/call");
  CHECK(metrics::method_label("subscriptions/listen") == "subscriptions/listen");
  CHECK(metrics::method_label("x/" + std::string(1000, 'a')) == "other");
  CHECK(metrics::method_label("") == "other");
}

TEST_CASE("metrics: a splice counts its session and its requests by method and outcome",
          "[metrics][splice]") {
  // The process-wide registry: read differences, other tests may have counted too.
  const std::string dir = "unit_test_direction";
  auto requests = [&](const std::string& method, const std::string& outcome) {
    return metrics::registry()
        .counter("mcpmqtt_requests_total", "", {"direction", "origin", "method", "outcome"},
                 {dir, "client", method, outcome})
        .value();
  };
  auto& sessions = metrics::registry().gauge("mcpmqtt_sessions", "", {"direction"}, {dir});
  const auto base_sessions = sessions.value();

  auto client = std::make_shared<MemoryChannel>("client");
  auto server = std::make_shared<MemoryChannel>("server");
  ManualScheduler clock;
  bridge::Splice::Options o;
  o.metrics_direction = dir;
  o.timeout_for = [](const std::string&) { return std::chrono::milliseconds(1000); };
  auto splice = bridge::Splice::create(client, server, clock, o);
  splice->start();
  CHECK(sessions.value() == base_sessions + 1);

  const auto result0 = requests("tools/call", "result");
  const auto error0 = requests("tools/call", "error");
  const auto timeout0 = requests("ping", "timeout");
  const auto cancelled0 = requests("tools/list", "cancelled");
  const auto closed0 = requests("resources/read", "closed");
  const auto other0 = requests("other", "result");

  client->inject(R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}})");
  clock.advance(20ms);
  server->inject(R"({"jsonrpc":"2.0","id":1,"result":{}})");
  client->inject(R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}})");
  server->inject(R"({"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"no"}})");
  client->inject(R"({"jsonrpc":"2.0","id":3,"method":"ping"})");
  clock.advance(1000ms);
  client->inject(R"({"jsonrpc":"2.0","id":4,"method":"tools/list"})");
  client->inject(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}})");
  client->inject(R"({"jsonrpc":"2.0","id":5,"method":"vendor/thing"})");
  server->inject(R"({"jsonrpc":"2.0","id":5,"result":{}})");
  client->inject(R"({"jsonrpc":"2.0","id":6,"method":"resources/read","params":{}})");
  splice->close({bridge::CloseReason::Kind::shutdown, "test over"});

  CHECK(requests("tools/call", "result") == result0 + 1);
  CHECK(requests("tools/call", "error") == error0 + 1);
  CHECK(requests("ping", "timeout") == timeout0 + 1);
  CHECK(requests("tools/list", "cancelled") == cancelled0 + 1);
  CHECK(requests("other", "result") == other0 + 1);
  CHECK(requests("resources/read", "closed") == closed0 + 1);
  CHECK(sessions.value() == base_sessions);
  // The answered tools/call took 20 ms on the splice's clock.
  auto& h = metrics::registry().histogram("mcpmqtt_request_duration_seconds", "",
                                          {"direction", "method"}, {dir, "tools/call"});
  CHECK(h.count() == 2);
  CHECK(h.sum_seconds() == Approx(0.020));
}

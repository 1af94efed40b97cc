// The relay core's own cost per request: one Splice between two in-memory channels, on the
// daemon's scheduler (Asio timers on one io_context), relaying request/response pairs with a
// per-method timeout as the daemon does. No sockets and no other process: what it prints is the
// splice's bookkeeping (pending map, timeouts, metrics) plus the parsing of the messages, which
// is the same before and after a change to the splice. Deterministic under valgrind's callgrind
// (instructions per request), so it can be compared on a busy machine.
//
//   bench_relay [--requests N]    (default 200000)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>

#include "bridge/relay/splice.hpp"
#include "directions/asio_scheduler.hpp"

namespace {

std::atomic<std::uint64_t> g_allocations{0};

}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace {

using namespace mcpmqtt;

// One end whose peer is the benchmark: what the splice sends is kept as the last message.
class EndChannel : public bridge::Channel {
 public:
  void start(Receiver r) override { receiver = std::move(r); }
  void send(jsonrpc::Message m) override { last = std::move(m); }
  void close(const bridge::CloseReason&) override {}
  std::string describe() const override { return "[bench]"; }
  Receiver receiver;
  jsonrpc::Message last = jsonrpc::Message::notification("none");
};

}  // namespace

int main(int argc, char** argv) {
  std::size_t requests = 200000;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--requests") == 0) requests = std::strtoull(argv[i + 1], nullptr, 10);

  boost::asio::io_context io;
  auto strand = boost::asio::make_strand(io);
  directions::AsioScheduler scheduler(strand);
  auto client = std::make_shared<EndChannel>();
  auto server = std::make_shared<EndChannel>();
  bridge::Splice::Options options;
  options.timeout_for = [](const std::string&) { return std::chrono::milliseconds(60000); };
  options.metrics_direction = "http_ingress";
  auto splice = bridge::Splice::create(client, server, scheduler, options);
  splice->start();

  const std::string request_head = R"({"jsonrpc":"2.0","id":)";
  const std::string request_tail =
      R"(,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}})";
  const std::string result_tail = R"(,"result":{"content":[{"type":"text","text":"hello"}]}})";

  auto run = [&](std::size_t n, std::size_t first) {
    for (std::size_t i = first; i < first + n; ++i) {
      const auto id = std::to_string(i);
      client->receiver.on_message(*jsonrpc::Message::parse(request_head + id + request_tail));
      server->receiver.on_message(*jsonrpc::Message::parse(request_head + id + result_tail));
      io.poll();  // what the request left for the loop (a cancelled timer's handler, say)
    }
  };
  run(1000, 0);  // warm-up: the metrics series exist, the allocator has its pools

  const auto allocations_before = g_allocations.load();
  const auto t0 = std::chrono::steady_clock::now();
  run(requests, 1000);
  const auto t1 = std::chrono::steady_clock::now();
  const auto allocations = g_allocations.load() - allocations_before;
  const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / requests;
  std::printf("relay: %zu requests, %.0f ns and %.1f allocations per request/response pair\n",
              requests, ns, static_cast<double>(allocations) / requests);
  if (splice->pending(bridge::Splice::Side::client) != 0) {
    std::fprintf(stderr, "relay: requests left pending\n");
    return 1;
  }
  return 0;
}

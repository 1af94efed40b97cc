// An MCP server native to MQTT, for the sessions benchmark: one process, one MQTT connection,
// any number of client sessions (a stdio server behind the egress would need a child process
// per session, and 10,000 of them would measure the machine, not the bridge). It is built on
// the bridge's own server endpoint (004 §Service Registration, §Initialization), answers
// initialize, ping, tools/list and the echo tool, and accepts resources/subscribe and
// unsubscribe of any URI (SEP-1803 `resources.events`: the fan-out benchmark publishes the
// events itself on the server's capability topic, as the server would), and runs until
// SIGTERM or SIGINT.
//
//   bench_mqtt_echo_server BROKER_URL SERVER_NAME [MAX_SESSIONS]
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <unistd.h>

#include "common/log.hpp"
#include "config/config.hpp"
#include "directions/options.hpp"
#include "mqtt/server_endpoint.hpp"

namespace net = boost::asio;
using namespace mcpmqtt;

namespace {

std::string answer(const jsonrpc::Message& m) {
  const std::string& method = m.method();
  if (method == "initialize")
    return R"({"protocolVersion":"2025-06-18","capabilities":{"tools":{},)"
           R"("resources":{"subscribe":true,"events":true,"subscription":["notification"]}},)"
           R"("serverInfo":{"name":"bench-mqtt-echo","version":"1"}})";
  if (method == "ping" || method == "resources/subscribe" || method == "resources/unsubscribe")
    return "{}";
  if (method == "tools/list")
    return R"({"tools":[{"name":"echo","inputSchema":{"type":"object","properties":)"
           R"({"text":{"type":"string"}}}}]})";
  if (method == "tools/call") {
    const auto* params = m.params();
    std::string text;
    if (params && params->IsObject() && params->HasMember("arguments")) {
      const auto& args = (*params)["arguments"];
      if (args.IsObject() && args.HasMember("text") && args["text"].IsString())
        text.assign(args["text"].GetString(), args["text"].GetStringLength());
    }
    return R"({"content":[{"type":"text","text":)" + jsonrpc::quote(text) + "}]}";
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s BROKER_URL SERVER_NAME [MAX_SESSIONS]\n", argv[0]);
    return 2;
  }
  log::set_level("warn");  // a line per session would cost more than the sessions
  auto loaded = config::defaults();
  config::Overrides overrides;
  overrides.broker_url = argv[1];
  config::apply_overrides(loaded, overrides);
  if (!loaded.ok()) {
    std::fprintf(stderr, "bad broker URL %s\n", argv[1]);
    return 2;
  }
  net::io_context ioc;
  auto strand = net::make_strand(ioc);
  mqtt::ServerEndpoint::Options o;
  o.broker = directions::broker_options(loaded.config->mqtt);
  o.server_id = "bench-echo-" + std::to_string(::getpid());
  o.server_name = argv[2];
  o.description = "echo server for the benchmarks";
  o.max_sessions = argc > 3 ? std::stoul(argv[3]) : 100000;
  mqtt::ServerEndpoint::Handlers h;
  h.on_initialize = [](std::shared_ptr<mqtt::ClientLink> link, jsonrpc::Message) {
    // The link keeps itself (through its receiver) until its client goes away.
    auto self = std::make_shared<std::shared_ptr<mqtt::ClientLink>>(link);
    link->start({[self](jsonrpc::Message m) {
                   const auto& l = *self;
                   if (!l || !m.is_request()) return;
                   const std::string result = answer(m);
                   l->send(result.empty() ? jsonrpc::Message::error(
                                                m.id(), -32601, "method not found: " + m.method())
                                          : jsonrpc::Message::result(m.id(), result));
                 },
                 [self](const bridge::CloseReason&) { self->reset(); }});
  };
  auto endpoint = mqtt::ServerEndpoint::create(
      strand, [&ioc] { return net::make_strand(ioc); }, o, std::move(h));
  net::post(strand, [endpoint] { endpoint->start(); });
  net::signal_set signals(ioc, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code&, int) {
    net::post(strand, [&] { endpoint->stop(std::chrono::seconds(5), [&] { ioc.stop(); }); });
  });
  ioc.run();
  return 0;
}

// A process that holds one MQTT role of the bridge, so integration tests can kill it with
// SIGKILL and watch what the broker does (the will). Prints "ready" on stdout once the role is
// in place, then runs until killed.
//
//   role_runner server BROKER_URL SERVER_ID SERVER_NAME
//   role_runner client BROKER_URL CLIENT_ID SERVER_ID SERVER_NAME
//   role_runner mcp-client BROKER_URL CLIENT_ID SERVER_ID SERVER_NAME   (also initializes)
#include <cstdio>
#include <iostream>
#include <string>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>

#include "config/config.hpp"
#include "directions/options.hpp"
#include "mqtt/client_session.hpp"
#include "mqtt/server_endpoint.hpp"

using namespace mcpmqtt;

int main(int argc, char** argv) {
  const std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() < 4) {
    std::cerr
        << "usage: role_runner server URL SERVER_ID NAME | client URL CLIENT_ID SERVER_ID NAME\n";
    return 2;
  }
  auto loaded = config::defaults();
  config::Overrides o;
  o.broker_url = a[1];
  config::apply_overrides(loaded, o);
  if (!loaded.ok()) {
    std::cerr << config::format_problems(loaded.problems, "role_runner");
    return 2;
  }
  boost::asio::io_context ioc;
  // Paho works on its own threads; keep the loop alive between its callbacks.
  auto work = boost::asio::make_work_guard(ioc);
  auto strand = boost::asio::make_strand(ioc);
  std::shared_ptr<mqtt::ServerEndpoint> server;
  std::shared_ptr<mqtt::ClientSession> client;
  if (a[0] == "server") {
    mqtt::ServerEndpoint::Options opts;
    opts.broker = directions::broker_options(loaded.config->mqtt);
    opts.server_id = a[2];
    opts.server_name = a[3];
    opts.description = "role_runner";
    mqtt::ServerEndpoint::Handlers h;
    h.on_broker = [](bool up, const std::string&) {
      if (up) std::cout << "ready" << std::endl;
    };
    server = mqtt::ServerEndpoint::create(
        strand, [&] { return boost::asio::make_strand(ioc); }, opts, h);
    boost::asio::post(strand, [&] { server->start(); });
  } else if (a[0] == "mcp-client" && a.size() >= 5) {
    mqtt::ClientSession::Options opts;
    opts.broker = directions::broker_options(loaded.config->mqtt);
    opts.client_id = a[2];
    opts.server_id = a[3];
    opts.server_name = a[4];
    client = mqtt::ClientSession::create(strand, opts);
    boost::asio::post(strand, [&] {
      client->start({[&](jsonrpc::Message m) {
                       if (m.is_response() && m.id() == jsonrpc::Id::integer(1)) {
                         client->send(*jsonrpc::Message::parse(
                             R"({"jsonrpc":"2.0","method":"notifications/initialized"})"));
                         std::cout << "ready" << std::endl;
                       }
                     },
                     [](const bridge::CloseReason& why) {
                       std::cerr << "closed: " << why.detail << std::endl;
                     }});
      client->send(*jsonrpc::Message::parse(
          R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"role_runner","version":"1"}}})"));
    });
  } else if (a[0] == "client" && a.size() >= 5) {
    mqtt::ClientSession::Options opts;
    opts.broker = directions::broker_options(loaded.config->mqtt);
    opts.client_id = a[2];
    opts.server_id = a[3];
    opts.server_name = a[4];
    client = mqtt::ClientSession::create(strand, opts);
    boost::asio::post(strand, [&] {
      client->start({[](jsonrpc::Message) {},
                     [](const bridge::CloseReason& why) {
                       std::cerr << "closed: " << why.detail << std::endl;
                     }});
      // Report readiness once the subscriptions are acknowledged.
      auto poll = std::make_shared<boost::asio::steady_timer>(strand);
      auto check = std::make_shared<std::function<void()>>();
      *check = [&, poll, check] {
        if (client->ready()) {
          std::cout << "ready" << std::endl;
          return;
        }
        poll->expires_after(std::chrono::milliseconds(10));
        poll->async_wait([check](const boost::system::error_code&) { (*check)(); });
      };
      (*check)();
    });
  } else {
    std::cerr << "unknown role " << a[0] << "\n";
    return 2;
  }
  ioc.run();
  return 0;
}

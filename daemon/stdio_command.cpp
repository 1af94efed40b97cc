#include "daemon/stdio_command.hpp"

#include <iostream>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <signal.h>
#include <unistd.h>

#include "bridge/log.hpp"
#include "directions/egress.hpp"
#include "directions/ingress.hpp"
#include "directions/options.hpp"
#include "mqtt/client_session.hpp"
#include "mqtt/directory_observer.hpp"
#include "stdio/stdio_channel.hpp"

namespace mcpmqtt::daemon {

using directions::connect_meta;
using directions::Ingress;

int run_stdio_command(config::Config cfg, const std::string& server_name) {
  auto logger = log::get("daemon");
  ::signal(SIGPIPE, SIG_IGN);
  boost::asio::io_context ioc;
  auto work = boost::asio::make_work_guard(ioc);
  auto strand = boost::asio::make_strand(ioc);

  auto channel = stdio::StdioChannel::create(strand, stdio::StdioChannel::Options{});
  if (!channel) {
    std::cerr << "mcp-mqtt-bridge stdio: " << channel.error() << "\n";
    return 1;
  }
  // The channel writes through its own copy of fd 1; from now on anything else that writes to
  // stdout (a library, a stray print) lands in the log instead of corrupting the host's stream.
  ::dup2(2, 1);

  auto directory = std::make_shared<bridge::Directory>();
  mqtt::DirectoryObserver::Options oo;
  oo.broker = directions::broker_options(cfg.mqtt);
  oo.client_id = mqtt::fresh_client_id(cfg.mqtt.client_id_prefix + "-directory");
  oo.filters = {server_name};  // only what this session can use
  oo.connect_meta_json = connect_meta("presence directory of mcp-mqtt-bridge stdio");
  auto observer = mqtt::DirectoryObserver::create(boost::asio::make_strand(ioc), oo, directory);

  Ingress::Options io;
  io.metrics_direction = "stdio_ingress";
  io.mqtt = cfg.mqtt;
  io.ingress = cfg.ingress;
  io.timeouts = cfg.timeouts;
  io.connect_meta_json = connect_meta("mcp-mqtt-bridge stdio ingress");
  auto ingress = Ingress::create(io, directory);

  int exit_code = 0;
  bool stopping = false;
  auto shutdown = [&] { observer->stop(std::chrono::seconds(1), [&ioc] { ioc.stop(); }); };
  boost::asio::signal_set signals(ioc, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    boost::asio::post(strand, [&, signo] {
      logger->info("{}: ending the session", signo == SIGINT ? "SIGINT" : "SIGTERM");
      stopping = true;
      ingress->close_all({bridge::CloseReason::Kind::shutdown, "the bridge is stopping"}, strand,
                         std::chrono::seconds(5), {});
    });
  });

  boost::asio::post(strand, [&] {
    observer->start();
    ingress->attach(
        server_name, *channel, strand,
        [&](const bridge::CloseReason& why) {
          // stdin closed or a signal: a normal end. Anything else: the session failed.
          const bool normal = why.kind == bridge::CloseReason::Kind::normal ||
                              why.kind == bridge::CloseReason::Kind::shutdown || stopping;
          exit_code = normal ? 0 : 1;
          if (normal)
            logger->info("session ended: {}", why.detail);
          else
            logger->error("session ended: {}", why.detail);
        },
        [&] {
          signals.cancel();
          shutdown();
        });
  });
  ioc.run();
  return exit_code;
}

}  // namespace mcpmqtt::daemon

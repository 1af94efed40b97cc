#include "directions/stdio_ingress.hpp"

#include <iostream>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <signal.h>
#include <unistd.h>

#include "bridge/modern/era_router.hpp"
#include "common/log.hpp"
#include "directions/egress.hpp"
#include "directions/ingress.hpp"
#include "directions/modern_ingress.hpp"
#include "directions/options.hpp"
#include "directions/presence.hpp"
#include "stdio/stdio_channel.hpp"

namespace mcpmqtt::directions {

namespace {
// The one connection of this process, as the modern gateway's origin (for cancellation).
constexpr std::uint64_t kOrigin = 1;
}  // namespace

int run_stdio_ingress(config::Config cfg, const std::string& server_name) {
  auto logger = log::daemon();
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

  // Only what this session can use.
  auto presence = Presence::create(boost::asio::make_strand(ioc), cfg.mqtt, {server_name},
                                   "presence directory of mcp-mqtt-bridge stdio");

  Ingress::Options io;
  io.metrics_direction = "stdio_ingress";
  io.mqtt = cfg.mqtt;
  io.ingress = cfg.ingress;
  io.timeouts = cfg.timeouts;
  io.connect_meta_json = connect_meta("mcp-mqtt-bridge stdio ingress");
  auto ingress = Ingress::create(io, presence->directory());

  // MCP 2026-07-28 clients: served by the modern gateway on the same strand (README "MCP
  // 2026-07-28 at the ingress"); the connection's first message picks the era.
  std::shared_ptr<directions::ModernIngress> modern;
  if (cfg.ingress.modern.enabled) {
    directions::ModernIngress::Options mo;
    mo.modern = cfg.ingress.modern;
    mo.metrics_direction = "stdio_ingress";
    auto made = directions::ModernIngress::create(strand, mo, ingress);
    if (!made) {
      std::cerr << "mcp-mqtt-bridge stdio: " << made.error() << "\n";
      return 1;
    }
    modern = std::move(*made);
  }

  int exit_code = 0;
  bool stopping = false;
  bool finishing = false;
  std::shared_ptr<bridge::EraRouter> router;
  boost::asio::signal_set signals(ioc, SIGTERM, SIGINT);
  auto shutdown = [&] { presence->stop(std::chrono::seconds(1), [&ioc] { ioc.stop(); }); };
  // Every MQTT session ends (its `disconnected` on the wire), then the process.
  auto finish = [&](const bridge::CloseReason& why) {
    if (finishing) return;
    finishing = true;
    signals.cancel();
    if (modern) modern->close_all(why);
    ingress->close_all(why, strand, std::chrono::seconds(5), shutdown);
  };
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    boost::asio::post(strand, [&, signo] {
      logger->info("{}: ending the session", signo == SIGINT ? "SIGINT" : "SIGTERM");
      stopping = true;
      finish({bridge::CloseReason::Kind::shutdown, "the bridge is stopping"});
    });
  });

  bridge::EraRouter::Hooks hooks;
  hooks.on_legacy = [&](std::shared_ptr<bridge::Channel> legacy) {
    // The connection speaks MCP 2025: a session of its own, as before; a probe's pooled
    // session (if the client probed first) is not needed any more.
    if (modern) modern->close_all({bridge::CloseReason::Kind::normal, "the client chose MCP 2025"});
    ingress->attach(
        server_name, std::move(legacy), strand,
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
          finish({bridge::CloseReason::Kind::normal, "the session ended"});
        });
  };
  hooks.on_modern_request = [&](const jsonrpc::Message& m) {
    if (!modern) {
      router->send_modern(jsonrpc::Message::error(
          m.id(), jsonrpc::code::invalid_request,
          "MCP 2026-07-28 requests are not served (ingress.modern.enabled is false); send "
          "initialize"));
      return;
    }
    std::weak_ptr<bridge::EraRouter> weak = router;
    bridge::ModernGateway::Responder r;
    r.notify = [weak](const jsonrpc::Message& n) {
      if (auto rt = weak.lock()) rt->send_modern(n);
    };
    r.finish = [weak](const jsonrpc::Message& n, unsigned) {
      if (auto rt = weak.lock()) rt->send_modern(n);
    };
    modern->handle(server_name, kOrigin, m, std::move(r));
  };
  hooks.on_modern_cancel = [&](const jsonrpc::Id& id) {
    if (modern) modern->cancel_request(kOrigin, id);
  };
  hooks.on_closed = [&](const bridge::CloseReason& why) {
    // A 2025 session ends through its own path (on_finished above); a modern connection, or
    // one that never opened (the v2 client's probe copy: server/discover, then EOF), ends here.
    if (router->era() == bridge::EraRouter::Era::legacy) return;
    logger->info("{}; ending", why.detail);
    finish(why);
  };
  router = bridge::EraRouter::create(*channel, std::move(hooks));

  boost::asio::post(strand, [&] {
    presence->start();
    router->start();
  });
  ioc.run();
  return exit_code;
}

}  // namespace mcpmqtt::directions

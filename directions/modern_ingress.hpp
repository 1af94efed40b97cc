// The modern gateway (bridge::ModernGateway) of one ingress: MCP 2026-07-28 clients reach
// MQTT-hosted servers through MQTT sessions the gateway holds, each opened through an Ingress
// (presence wait, instance pick, the splice's timeouts and subscriptions, as for 2025 sessions).
// It owns the gateway's strand and timers, maps ingress.modern onto the gateway's options, and
// keeps the pool gauges (mcpmqtt_modern_sessions{state}) current.
//
// Thread-safe: every entry point posts onto the gateway's strand.
#pragma once

#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "bridge/modern/gateway.hpp"
#include "common/metrics.hpp"
#include "config/config.hpp"
#include "directions/asio_scheduler.hpp"
#include "directions/ingress.hpp"
#include "http/server_backend.hpp"

namespace mcpmqtt::directions {

class ModernIngress : public std::enable_shared_from_this<ModernIngress> {
 public:
  struct Options {
    config::ModernIngressConfig modern;
    std::string metrics_direction = "http_ingress";  // or "stdio_ingress"
    std::string replica;  // ingress.replicas.id: named in requestState (HTTP ingress)
  };

  // `strand` runs the gateway and the MQTT sessions it opens through `ingress`. Fails (with a
  // sentence) only when no requestState secret can be had.
  static Expected<std::shared_ptr<ModernIngress>, std::string> create(
      boost::asio::any_io_executor strand, Options options, std::shared_ptr<Ingress> ingress);
  ~ModernIngress();

  // HTTP: one modern request; its answer goes to `reply`, and a client that goes away cancels it.
  void handle(http::ModernRequest request, std::shared_ptr<http::ModernReply> reply);
  // stdio: one modern request of connection `origin`; answers go to `responder` (on the strand).
  void handle(const std::string& server_name, std::uint64_t origin, jsonrpc::Message message,
              bridge::ModernGateway::Responder responder);
  void cancel_request(std::uint64_t origin, const jsonrpc::Id& id);
  // Ends every modern request and session (on the strand); later requests get 503. `done` runs
  // on the strand once the answers are handed to their transports.
  void close_all(const bridge::CloseReason& why, std::function<void()> done = {});

 private:
  ModernIngress(boost::asio::any_io_executor strand, Options options,
                std::shared_ptr<Ingress> ingress);
  void update_gauges();

  boost::asio::any_io_executor strand_;
  Options options_;
  std::shared_ptr<Ingress> ingress_;
  std::unique_ptr<AsioScheduler> scheduler_;
  std::shared_ptr<bridge::ModernGateway> gateway_;
  boost::asio::steady_timer gauge_timer_;
  bool closed_ = false;
};

}  // namespace mcpmqtt::directions

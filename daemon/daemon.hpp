// The daemon: builds every part from the configuration, runs the event loop on a small thread
// pool, and stops gracefully on SIGTERM/SIGINT — exposed servers clear their presence and tell
// their clients, children are terminated, all within daemon.shutdown_grace_ms; a second signal
// stops at once.
//
// SIGHUP reloads the configuration from its source: servers added to mcpServers come online,
// removed ones go offline (presence cleared, their sessions ended), changed ones are replaced,
// a new log level applies at once; an invalid configuration is rejected with its problems
// logged and the running one stays. Settings of the broker connection, the HTTP listener, the
// ingress and the daemon itself need a restart (the reload says so and keeps the old values).
//
// Under systemd ($NOTIFY_SOCKET) it reports READY=1 once the HTTP listener is bound and the
// broker is connected, RELOADING=1/READY=1 around a reload, STOPPING=1 on shutdown, STATUS=
// when readiness changes, and WATCHDOG=1 at half of WatchdogSec= from the daemon's strand (so
// a stuck event loop is noticed).
//
// run() is called once, from main; everything else happens on the daemon's strand.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/metrics.hpp"
#include "config/config.hpp"
#include "daemon/memory_trim.hpp"
#include "directions/egress.hpp"
#include "directions/ingress.hpp"
#include "directions/modern_ingress.hpp"
#include "directions/presence.hpp"
#include "directions/webhook_service.hpp"

namespace mcpmqtt::directions {
class HttpIngress;
}

namespace mcpmqtt::daemon {

class SystemdNotifier;

class Daemon {
 public:
  // Where SIGHUP reads the configuration again (the same file, environment and flags as at
  // start). Without one, SIGHUP only logs that there is nothing to reload from.
  using ConfigSource = std::function<config::LoadResult()>;

  explicit Daemon(config::Config cfg, ConfigSource reload_source = {});
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Runs until stopped; returns the process exit status.
  int run();

 private:
  // Starts every part the configuration asks for: kExitOk, or the exit status to stop with.
  int start();
  bool ready() const;  // any thread: the last readiness seen on the strand
  // On the strand: what keeps the daemon from being ready, one clause per connection the
  // configuration asks for that is not up (the HTTP listener, the ingress's broker connection,
  // each published server's); empty when ready.
  std::string compute_not_ready() const;
  std::string not_ready_reason() const;  // any thread: for /readyz
  void on_signal(int signo);
  void reload();
  void start_server(const config::ServerEntry& entry);
  void retire_server(std::shared_ptr<directions::ExposedServer> server, const std::string& why);
  void watch_readiness();
  void feed_watchdog();
  // Every few seconds: the heap's free memory back to the system once sessions fell well below
  // their peak (MemoryTrimPolicy).
  void watch_memory();
  void begin_stop(const std::string& why);
  void after_servers_stopped();
  void finish_stop();

  config::Config cfg_;
  boost::asio::io_context ioc_;
  boost::asio::any_io_executor strand_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer grace_timer_;
  std::shared_ptr<stdio::ChildRegistry> children_;
  std::shared_ptr<directions::Presence> presence_;  // the HTTP ingress's directory
  std::vector<std::shared_ptr<directions::ExposedServer>> servers_;
  std::size_t retiring_ = 0;  // servers removed by a reload, still stopping
  std::size_t next_server_index_ = 0;
  ConfigSource reload_source_;
  std::unique_ptr<SystemdNotifier> notifier_;
  boost::asio::steady_timer readiness_timer_;
  boost::asio::steady_timer watchdog_timer_;
  boost::asio::steady_timer memory_timer_;
  MemoryTrimPolicy trim_policy_;
  std::atomic<bool> ready_flag_{false};
  bool announced_ready_ = false;
  bool last_ready_ = false;
  mutable std::mutex ready_mu_;
  std::string not_ready_;  // compute_not_ready() as last seen; under ready_mu_
  // Entries of mcpServers that could not be published at all, with why; on the strand.
  std::map<std::string, std::string> unpublished_;
  std::map<std::string, std::shared_ptr<metrics::Registry::CallbackHandle>> server_gauges_;
  std::vector<std::shared_ptr<metrics::Registry::CallbackHandle>> gauges_;
  std::shared_ptr<directions::Ingress> ingress_;
  std::shared_ptr<directions::ModernIngress> modern_;     // ingress.modern: 2026-07-28 clients
  std::shared_ptr<directions::WebhookService> webhooks_;  // events.webhooks
  std::unique_ptr<directions::HttpIngress> http_;
  std::atomic<bool> http_bound_{false};
  std::atomic<bool> directory_up_{false};
  mutable std::mutex broker_problem_mu_;
  std::string broker_problem_;  // why the directory's broker connection is down (its strand)
  bool stopping_ = false;
  bool finished_ = false;
  bool forced_ = false;  // a second signal: leave at once, like a crash
  int exit_code_ = 0;
};

}  // namespace mcpmqtt::daemon

// The daemon: builds every part from the configuration, runs the event loop on a small thread
// pool, and stops gracefully on SIGTERM/SIGINT — exposed servers clear their presence and tell
// their clients, children are terminated, all within daemon.shutdown_grace_ms; a second signal
// stops at once.
//
// run() is called once, from main; everything else happens on the daemon's strand.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "bridge/directory.hpp"
#include "config/config.hpp"
#include "daemon/egress.hpp"
#include "daemon/ingress.hpp"
#include "mqtt/directory_observer.hpp"

namespace mcpmqtt::stdio {
class ChildRegistry;
}
namespace mcpmqtt::http {
class Server;
}

namespace mcpmqtt::daemon {

class Daemon {
 public:
  explicit Daemon(config::Config cfg);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Runs until stopped; returns the process exit status.
  int run();

 private:
  class HttpBackend;
  bool start();
  bool ready() const;
  void on_signal(int signo);
  void begin_stop(const std::string& why);
  void after_servers_stopped();
  void finish_stop();

  config::Config cfg_;
  boost::asio::io_context ioc_;
  boost::asio::any_io_executor strand_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer grace_timer_;
  std::shared_ptr<stdio::ChildRegistry> children_;
  std::shared_ptr<bridge::Directory> directory_;
  std::shared_ptr<mqtt::DirectoryObserver> observer_;
  std::vector<std::shared_ptr<ExposedServer>> servers_;
  std::shared_ptr<Ingress> ingress_;
  std::unique_ptr<HttpBackend> backend_;
  std::unique_ptr<http::Server> http_;
  std::atomic<bool> http_bound_{false};
  std::atomic<bool> directory_up_{false};
  bool stopping_ = false;
  bool finished_ = false;
  bool forced_ = false;  // a second signal: leave at once, like a crash
  int exit_code_ = 0;
};

}  // namespace mcpmqtt::daemon

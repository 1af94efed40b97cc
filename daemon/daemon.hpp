// The daemon: builds every part from the configuration, runs the event loop on a small thread
// pool, and stops gracefully on SIGTERM/SIGINT — exposed servers clear their presence and tell
// their clients, children are terminated, all within daemon.shutdown_grace_ms; a second signal
// stops at once.
//
// run() is called once, from main; everything else happens on the daemon's strand.
#pragma once

#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "bridge/directory.hpp"
#include "config/config.hpp"
#include "daemon/egress.hpp"
#include "mqtt/directory_observer.hpp"

namespace mcpmqtt::stdio {
class ChildRegistry;
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
  void start();
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
  bool stopping_ = false;
  bool finished_ = false;
  int exit_code_ = 0;
};

}  // namespace mcpmqtt::daemon

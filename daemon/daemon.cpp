#include "daemon/daemon.hpp"

#include <cstdlib>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <signal.h>

#include "bridge/log.hpp"
#include "mqtt/client_session.hpp"
#include "stdio/child_channel.hpp"

namespace mcpmqtt::daemon {

namespace {
auto logger() {
  static auto l = log::get("daemon");
  return l;
}
}  // namespace

Daemon::Daemon(config::Config cfg)
    : cfg_(std::move(cfg)),
      strand_(boost::asio::make_strand(ioc_)),
      signals_(ioc_, SIGTERM, SIGINT, SIGHUP),
      grace_timer_(strand_),
      children_(std::make_shared<stdio::ChildRegistry>()) {}

Daemon::~Daemon() = default;

int Daemon::run() {
  // A peer that went away mid-write is an error on that write, not a reason to die.
  ::signal(SIGPIPE, SIG_IGN);
  signals_.async_wait([this](const boost::system::error_code& ec, int signo) {
    if (!ec) boost::asio::post(strand_, [this, signo] { on_signal(signo); });
  });
  auto work = boost::asio::make_work_guard(ioc_);
  boost::asio::post(strand_, [this] { start(); });
  std::vector<std::thread> threads;
  for (int i = 1; i < cfg_.daemon.threads; ++i)
    threads.emplace_back([this] { ioc_.run(); });
  ioc_.run();
  for (auto& t : threads)
    t.join();
  return exit_code_;
}

void Daemon::start() {
  logger()->info("mcp-mqtt-bridge " MCPMQTT_VERSION " starting: {}", cfg_.summary());
  if (cfg_.http.enabled) {
    directory_ = std::make_shared<bridge::Directory>();
    mqtt::DirectoryObserver::Options o;
    o.broker = cfg_.mqtt;
    o.client_id = mqtt::fresh_client_id(cfg_.mqtt.client_id_prefix + "-directory");
    o.filters = cfg_.ingress.server_name_filters;
    o.connect_meta_json = connect_meta("presence directory of mcp-mqtt-bridge");
    observer_ = mqtt::DirectoryObserver::create(boost::asio::make_strand(ioc_), o, directory_);
    boost::asio::post(strand_, [obs = observer_] { obs->start(); });
  }
  std::size_t index = 0;
  for (const auto& entry : cfg_.servers) {
    ExposedServer::Options o;
    o.mqtt = cfg_.mqtt;
    o.entry = entry;
    o.egress = cfg_.egress;
    o.timeouts = cfg_.timeouts;
    o.server_id = make_server_id(cfg_.mqtt.client_id_prefix, index++);
    o.connect_meta_json = connect_meta(entry.description);
    UpstreamFactory upstream;
    if (entry.is_stdio()) {
      upstream = child_upstream(entry, cfg_.egress, children_);
    } else {
      auto made = http_upstream(entry, cfg_.timeouts);
      if (!made) {
        logger()->error("[server {}] cannot be published: {}", entry.name, made.error());
        continue;
      }
      upstream = std::move(*made);
    }
    auto server = ExposedServer::create(ioc_, o, std::move(upstream));
    server->start();
    servers_.push_back(std::move(server));
  }
}

void Daemon::on_signal(int signo) {
  signals_.async_wait([this](const boost::system::error_code& ec, int s) {
    if (!ec) boost::asio::post(strand_, [this, s] { on_signal(s); });
  });
  if (signo == SIGHUP) {
    logger()->warn(
        "SIGHUP: reloading the configuration is not supported by this build; the "
        "current configuration stays in effect");
    return;
  }
  if (stopping_) {
    logger()->warn("{} again: stopping now", signo == SIGINT ? "SIGINT" : "SIGTERM");
    children_->shutdown_all("the bridge is stopping");
    finish_stop();
    return;
  }
  begin_stop(signo == SIGINT ? "SIGINT" : "SIGTERM");
}

void Daemon::begin_stop(const std::string& why) {
  stopping_ = true;
  const auto grace = std::chrono::milliseconds(cfg_.daemon.shutdown_grace_ms);
  logger()->info("stopping ({}); grace period {} ms", why, grace.count());
  grace_timer_.expires_after(grace);
  grace_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || finished_) return;
    logger()->warn("the grace period is over: {} child process(es) still running are killed",
                   children_->alive());
    children_->shutdown_all("the bridge is stopping");
    finish_stop();
  });
  if (observer_) observer_->stop(grace, {});
  auto remaining = std::make_shared<std::size_t>(servers_.size());
  if (servers_.empty()) {
    after_servers_stopped();
    return;
  }
  for (auto& s : servers_) {
    s->stop(grace, [this, remaining] {
      boost::asio::post(strand_, [this, remaining] {
        if (--*remaining == 0) after_servers_stopped();
      });
    });
  }
}

void Daemon::after_servers_stopped() {
  // Every session was told to end; children are on their way out (stdin closed, then signals).
  children_->on_none([this] { boost::asio::post(strand_, [this] { finish_stop(); }); });
}

void Daemon::finish_stop() {
  if (finished_) return;
  finished_ = true;
  grace_timer_.cancel();
  signals_.cancel();
  logger()->info("stopped");
  ioc_.stop();
}

}  // namespace mcpmqtt::daemon

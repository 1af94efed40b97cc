#include "daemon/daemon.hpp"

#include <cstdlib>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <signal.h>

#include "bridge/log.hpp"
#include "http/server_backend.hpp"
#include "http/server_listener.hpp"
#include "mqtt/client_session.hpp"
#include "stdio/child_channel.hpp"

namespace mcpmqtt::daemon {

namespace {
auto logger() {
  static auto l = log::get("daemon");
  return l;
}
}  // namespace

// What the HTTP server needs from the daemon: sessions go to the ingress, the listing comes
// from the presence directory.
class Daemon::HttpBackend : public http::Backend {
 public:
  explicit HttpBackend(Daemon& d) : d_(d) {}
  void attach(const std::string& server_name, std::shared_ptr<bridge::Channel> session,
              boost::asio::any_io_executor strand) override {
    d_.ingress_->attach(server_name, std::move(session), std::move(strand));
  }
  std::string servers_json() override { return d_.directory_->to_json(); }
  bool ready() override { return d_.ready(); }
  std::string metrics_text() override { return {}; }

 private:
  Daemon& d_;
};

Daemon::Daemon(config::Config cfg)
    : cfg_(std::move(cfg)),
      strand_(boost::asio::make_strand(ioc_)),
      signals_(ioc_, SIGTERM, SIGINT, SIGHUP),
      grace_timer_(strand_),
      children_(std::make_shared<stdio::ChildRegistry>()) {}

Daemon::~Daemon() {
  // HTTP sessions hold timers of this io_context: release them first.
  http_.reset();
  ingress_.reset();
}

bool Daemon::ready() const {
  // Listener bound (when there is one) and the broker connected.
  bool broker = directory_up_;
  if (!observer_) {
    broker = !servers_.empty();
    for (const auto& s : servers_)
      broker = broker && s->online();
  }
  return (!cfg_.http.enabled || http_bound_) && broker;
}

int Daemon::run() {
  // A peer that went away mid-write is an error on that write, not a reason to die.
  ::signal(SIGPIPE, SIG_IGN);
  signals_.async_wait([this](const boost::system::error_code& ec, int signo) {
    if (!ec) boost::asio::post(strand_, [this, signo] { on_signal(signo); });
  });
  auto work = boost::asio::make_work_guard(ioc_);
  boost::asio::post(strand_, [this] {
    if (!start()) {
      exit_code_ = 1;
      finish_stop();
    }
  });
  std::vector<std::thread> threads;
  for (int i = 1; i < cfg_.daemon.threads; ++i)
    threads.emplace_back([this] { ioc_.run(); });
  ioc_.run();
  for (auto& t : threads)
    t.join();
  if (forced_) {
    // Leave like a crash: destroying the MQTT clients now would send clean DISCONNECTs, and the
    // broker would then keep our retained presence and never send the wills that tell servers
    // and clients we are gone. Dropping the sockets makes it send them.
    children_->wait_until_none(std::chrono::seconds(2));
    std::fflush(nullptr);
    std::_Exit(exit_code_);
  }
  return exit_code_;
}

bool Daemon::start() {
  logger()->info("mcp-mqtt-bridge " MCPMQTT_VERSION " starting: {}", cfg_.summary());
  if (cfg_.http.enabled) {
    directory_ = std::make_shared<bridge::Directory>();
    mqtt::DirectoryObserver::Options o;
    o.broker = cfg_.mqtt;
    o.client_id = mqtt::fresh_client_id(cfg_.mqtt.client_id_prefix + "-directory");
    o.filters = cfg_.ingress.server_name_filters;
    o.connect_meta_json = connect_meta("presence directory of mcp-mqtt-bridge");
    observer_ = mqtt::DirectoryObserver::create(boost::asio::make_strand(ioc_), o, directory_);
    observer_->on_broker = [this](bool up) { directory_up_ = up; };
    boost::asio::post(strand_, [obs = observer_] { obs->start(); });

    Ingress::Options io;
    io.mqtt = cfg_.mqtt;
    io.ingress = cfg_.ingress;
    io.timeouts = cfg_.timeouts;
    io.connect_meta_json = connect_meta("mcp-mqtt-bridge HTTP ingress session");
    ingress_ = Ingress::create(io, directory_);
    backend_ = std::make_unique<HttpBackend>(*this);
    http_ = std::make_unique<http::Server>(ioc_, cfg_.http, cfg_.ingress.default_server, *backend_);
    auto bound = http_->start();
    if (!bound) {
      logger()->error("HTTP ingress: {}", bound.error());
      return false;
    }
    http_bound_ = true;
    const auto ep = *bound;
    const std::string host =
        ep.address().is_v6() ? "[" + ep.address().to_string() + "]" : ep.address().to_string();
    const std::string base = "http://" + host + ":" + std::to_string(ep.port());
    logger()->info("HTTP ingress on {}: {}/servers/{{server-name}}/mcp{}", base, base,
                   cfg_.ingress.default_server.empty()
                       ? std::string()
                       : ", and " + base + "/mcp for " + cfg_.ingress.default_server);
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
  return true;
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
    forced_ = true;
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
  // Ingress first (HTTP clients and their MQTT sessions are told), then the exposed servers.
  if (http_) http_->stop("the bridge is stopping");
  auto stop_servers = [this, grace] {
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
  };
  if (ingress_) {
    ingress_->close_all({bridge::CloseReason::Kind::shutdown, "the bridge is stopping"}, strand_,
                        grace / 2, stop_servers);
  } else {
    stop_servers();
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

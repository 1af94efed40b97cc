#include "daemon/daemon.hpp"

#include <cstdlib>
#include <thread>
#include <utility>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <signal.h>

#include "common/log.hpp"
#include "common/metrics.hpp"
#include "daemon/cli.hpp"
#include "daemon/systemd_notify.hpp"
#include "directions/http_ingress.hpp"

namespace mcpmqtt::daemon {

using directions::child_upstream;
using directions::connect_meta;
using directions::ExposedServer;
using directions::http_upstream;
using directions::Ingress;
using directions::make_server_id;
using directions::UpstreamFactory;

Daemon::Daemon(config::Config cfg, ConfigSource reload_source)
    : cfg_(std::move(cfg)),
      strand_(boost::asio::make_strand(ioc_)),
      signals_(ioc_, SIGTERM, SIGINT, SIGHUP),
      grace_timer_(strand_),
      children_(std::make_shared<stdio::ChildRegistry>()),
      reload_source_(std::move(reload_source)),
      notifier_(std::make_unique<SystemdNotifier>()),
      readiness_timer_(strand_),
      watchdog_timer_(strand_),
      memory_timer_(strand_) {
  auto& r = metrics::registry();
  gauges_.push_back(
      r.gauge_callback("mcpmqtt_children", "Child processes (stdio MCP servers) alive.",
                       [children = children_] { return static_cast<double>(children->alive()); }));
  gauges_.push_back(r.gauge_callback("mcpmqtt_ready",
                                     "1 when /readyz answers 200: the HTTP listener is bound and "
                                     "the broker connected.",
                                     [this] { return ready() ? 1.0 : 0.0; }));
  r.gauge("mcpmqtt_build_info", "The bridge's version, as a label.", {"version"}, {MCPMQTT_VERSION})
      .set(1);
}

Daemon::~Daemon() {
  // Scrapes after this point must not call into a destroyed daemon.
  gauges_.clear();
  server_gauges_.clear();
  // HTTP sessions hold timers of this io_context: release them first.
  http_.reset();
  modern_.reset();
  webhooks_.reset();
  ingress_.reset();
}

bool Daemon::ready() const {
  return ready_flag_.load();
}

std::string Daemon::not_ready_reason() const {
  std::lock_guard lock(ready_mu_);
  return not_ready_;
}

std::string Daemon::compute_not_ready() const {
  std::vector<std::string> parts;
  if (cfg_.http.enabled && !http_bound_) parts.push_back("the HTTP listener is not bound yet");
  if (http_ && http_bound_) {
    // http.oauth: tokens cannot be checked without the issuer's keys (protected routes: 503).
    if (auto why = http_->auth_problem(); !why.empty())
      parts.push_back("OAuth issuer " + cfg_.http.oauth.issuer + ": " + why);
    if (auto why = http_->relay_problem(); !why.empty())
      parts.push_back("relay to other replicas: " + why);
  }
  if (presence_ && !directory_up_) {
    std::lock_guard lock(broker_problem_mu_);
    parts.push_back("ingress: " + (broker_problem_.empty()
                                       ? "connecting to the MQTT broker " + cfg_.mqtt.url
                                       : broker_problem_));
  }
  for (const auto& s : servers_) {
    if (!s->online()) parts.push_back("server " + s->server_name() + ": " + s->offline_reason());
    if (auto why = s->upstream_problem(); !why.empty())
      parts.push_back("server " + s->server_name() + ": cannot serve sessions: " + why);
  }
  for (const auto& [name, why] : unpublished_)
    parts.push_back("server " + name + ": cannot be published: " + why);
  if (!presence_ && servers_.empty() && unpublished_.empty())
    parts.push_back("nothing to serve: no HTTP ingress and no server in mcpServers");
  std::string out;
  for (const auto& p : parts)
    out += (out.empty() ? "" : "; ") + p;
  return out;
}

int Daemon::run() {
  // A peer that went away mid-write is an error on that write, not a reason to die.
  ::signal(SIGPIPE, SIG_IGN);
  signals_.async_wait([this](const boost::system::error_code& ec, int signo) {
    if (!ec) boost::asio::post(strand_, [this, signo] { on_signal(signo); });
  });
  auto work = boost::asio::make_work_guard(ioc_);
  boost::asio::post(strand_, [this] {
    if (const int status = start(); status != kExitOk) {
      exit_code_ = status;
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

int Daemon::start() {
  log::daemon()->info("mcp-mqtt-bridge " MCPMQTT_VERSION " starting: {}", cfg_.summary());
  if (cfg_.http.enabled) {
    presence_ = directions::Presence::create(boost::asio::make_strand(ioc_), cfg_.mqtt,
                                             cfg_.ingress.server_name_filters,
                                             "presence directory of mcp-mqtt-bridge");
    presence_->on_broker([this](bool up, const std::string& why) {
      std::lock_guard lock(broker_problem_mu_);
      broker_problem_ = why;
      directory_up_ = up;
    });
    boost::asio::post(strand_, [p = presence_] { p->start(); });

    if (auto advice = huge_page_advice()) log::daemon()->info("HTTP ingress: {}", *advice);

    Ingress::Options io;
    io.mqtt = cfg_.mqtt;
    io.ingress = cfg_.ingress;
    io.timeouts = cfg_.timeouts;
    io.connect_meta_json = connect_meta("mcp-mqtt-bridge HTTP ingress session");
    ingress_ = Ingress::create(io, presence_->directory());
    auto replica = directions::resolve_replica(cfg_.ingress.replicas);
    if (!replica) {
      log::daemon()->error("HTTP ingress: {}", replica.error());
      return kExitFailure;
    }
    if (replica->shared) {
      log::daemon()->info(
          "replica {}: sessions and requestState sealed with the replicas' shared "
          "secret (ingress.replicas.secret_file)",
          replica->id);
    } else {
      log::daemon()->warn(
          "replica {}: ingress.replicas.secret_file is not set, so this replica's session ids "
          "and requestState cannot be served by another replica; behind a load balancer, give "
          "every replica the same secret file (docs/replicas.md)",
          replica->id);
    }
    if (cfg_.ingress.modern.enabled) {
      directions::ModernIngress::Options mo;
      mo.modern = cfg_.ingress.modern;
      mo.modern.state_secret = replica->secret;
      mo.replica = replica->id;
      mo.metrics_direction = "http_ingress";
      auto made = directions::ModernIngress::create(boost::asio::make_strand(ioc_), mo, ingress_);
      if (!made) {
        log::daemon()->error("HTTP ingress: {}", made.error());
        return kExitFailure;
      }
      modern_ = std::move(*made);
    }
    if (cfg_.events.webhooks.enabled) {
      auto made = directions::WebhookService::create(boost::asio::make_strand(ioc_),
                                                     cfg_.events.webhooks, ingress_);
      if (!made) {
        log::daemon()->error("webhooks: {}", made.error());
        return kExitFailure;
      }
      webhooks_ = std::move(*made);
      std::weak_ptr<directions::WebhookService> weak = webhooks_;
      ingress_->serve_webhooks([weak](const std::string& server_name, const std::string& principal,
                                      jsonrpc::Message request,
                                      std::function<void(jsonrpc::Message)> reply) {
        if (auto w = weak.lock()) {
          w->handle(server_name, principal, std::move(request), std::move(reply));
        } else {
          reply(jsonrpc::Message::error(request.id(), jsonrpc::code::connection_closed,
                                        "the bridge is stopping"));
        }
      });
      webhooks_->start();
    }
    directions::HttpIngress::Hooks hooks;
    hooks.servers_json = [directory = presence_->directory()](const bridge::Principal& p) {
      // Only what the caller may reach (http.oauth.scopes).
      return directory->to_json([&p](std::string_view name) { return p.may_reach(name); });
    };
    hooks.ready = [this] { return ready(); };
    hooks.not_ready_reason = [this] { return not_ready_reason(); };
    hooks.metrics_text = [] { return metrics::registry().text(); };
    http_ = std::make_unique<directions::HttpIngress>(ioc_, cfg_, ingress_, modern_,
                                                      std::move(hooks), *replica);
    auto base = http_->start();
    if (!base) {
      log::daemon()->error("HTTP ingress: {}", base.error().message);
      // A port in use may be free at the next start; a port the daemon may not bind will not
      // be (systemd's unit does not restart after status 2).
      return base.error().permanent() ? kExitUsage : kExitFailure;
    }
    http_bound_ = true;
    log::daemon()->info("HTTP ingress on {}: {}/servers/{{server-name}}/mcp{}", *base, *base,
                        cfg_.ingress.default_server.empty()
                            ? std::string()
                            : ", and " + *base + "/mcp for " + cfg_.ingress.default_server);
  }
  for (const auto& entry : cfg_.servers)
    start_server(entry);
  watch_readiness();
  if (notifier_->watchdog_interval()) feed_watchdog();
  watch_memory();
  return kExitOk;
}

void Daemon::start_server(const config::ServerEntry& entry) {
  unpublished_.erase(entry.name);
  ExposedServer::Options o;
  o.mqtt = cfg_.mqtt;
  o.entry = entry;
  o.egress = cfg_.egress;
  o.timeouts = cfg_.timeouts;
  o.server_id = make_server_id(cfg_.mqtt.client_id_prefix, next_server_index_++);
  o.connect_meta_json = connect_meta(entry.description);
  UpstreamFactory upstream;
  if (entry.is_stdio()) {
    upstream = child_upstream(entry, cfg_.egress, children_);
    o.over_budget = directions::memory_budget(entry, children_);
  } else {
    std::string problem;
    auto bearer = directions::upstream_bearer(entry, ioc_.get_executor());
    if (!bearer) {
      problem = bearer.error();
    } else if (auto made = http_upstream(entry, cfg_.timeouts, o.tool_headers, *bearer)) {
      upstream = std::move(*made);
      o.bearer = std::move(*bearer);
    } else {
      problem = made.error();
    }
    if (!problem.empty()) {
      log::daemon()->error("[server {}] cannot be published: {}", entry.name, problem);
      unpublished_[entry.name] = problem;
      return;
    }
  }
  auto server = ExposedServer::create(ioc_, o, std::move(upstream));
  server->start();
  std::weak_ptr<ExposedServer> weak = server;
  server_gauges_[entry.name] = metrics::registry().gauge_callback(
      "mcpmqtt_exposed_server_sessions",
      "MQTT client sessions of each server the bridge publishes (its children or upstream HTTP "
      "sessions).",
      [weak] {
        auto s = weak.lock();
        return s ? static_cast<double>(s->session_count()) : 0.0;
      },
      {"server_name"}, {entry.name});
  servers_.push_back(std::move(server));
}

void Daemon::retire_server(std::shared_ptr<ExposedServer> server, const std::string& why) {
  log::daemon()->info("[server {}] going offline: {}", server->server_name(), why);
  ++retiring_;
  const auto grace = std::chrono::milliseconds(cfg_.daemon.shutdown_grace_ms);
  // Its sessions get `disconnected`, its children are terminated, its presence is cleared.
  server->stop(grace, [this, server] {
    boost::asio::post(strand_, [this, server] {
      --retiring_;
      log::daemon()->info("[server {}] offline", server->server_name());
    });
  });
}

void Daemon::reload() {
  if (!reload_source_) {
    log::daemon()->warn(
        "SIGHUP: the configuration came from the command line only; there is nothing to reload "
        "from");
    return;
  }
  notifier_->reloading("reloading the configuration");
  auto loaded = reload_source_();
  if (!loaded.ok()) {
    log::daemon()->error(
        "SIGHUP: the new configuration is rejected and the running one stays in effect:\n{}",
        config::format_problems(loaded.problems, "the configuration"));
    notifier_->ready("reload rejected: the configuration has problems (see the log)");
    return;
  }
  config::Config next = std::move(*loaded.config);
  std::vector<std::string> changes;

  if (next.log.level != cfg_.log.level) {
    log::set_level(next.log.level);
    changes.push_back("log level " + cfg_.log.level + " -> " + next.log.level);
    cfg_.log = next.log;
  }
  // Parts that own live connections are not rebuilt by a reload.
  std::vector<std::string> need_restart;
  if (!(next.mqtt == cfg_.mqtt)) need_restart.push_back("mqtt");
  if (!(next.http == cfg_.http)) need_restart.push_back("http");
  if (!(next.ingress == cfg_.ingress)) need_restart.push_back("ingress");
  if (!(next.daemon == cfg_.daemon)) need_restart.push_back("daemon");
  if (!need_restart.empty()) {
    std::string keys;
    for (const auto& k : need_restart)
      keys += (keys.empty() ? "" : ", ") + k;
    log::daemon()->warn("SIGHUP: changes to {} take effect only after a restart; kept as they were",
                        keys);
  }
  // Egress limits and timeouts apply to servers started from now on.
  const bool egress_changed = !(next.egress == cfg_.egress) || !(next.timeouts == cfg_.timeouts);
  cfg_.egress = next.egress;
  cfg_.timeouts = next.timeouts;

  // Servers: by name. Removed ones go offline, changed ones are replaced, new ones start.
  std::vector<std::shared_ptr<ExposedServer>> kept;
  for (auto& server : servers_) {
    const auto* entry = next.find_server(server->server_name());
    const auto* old = cfg_.find_server(server->server_name());
    if (!entry) {
      server_gauges_.erase(server->server_name());
      unpublished_.erase(server->server_name());
      changes.push_back("removed " + server->server_name());
      retire_server(server, "removed from mcpServers");
    } else if (!old || !(*entry == *old)) {
      changes.push_back("changed " + server->server_name());
      retire_server(server, "its mcpServers entry changed; a new instance replaces it");
    } else {
      // A reload is how an operator says the server may have changed: its MCP era is probed
      // again by its next session.
      server->forget_era();
      kept.push_back(server);
    }
  }
  servers_ = std::move(kept);
  for (const auto& entry : next.servers) {
    const bool running = std::any_of(servers_.begin(), servers_.end(),
                                     [&](const auto& s) { return s->server_name() == entry.name; });
    if (running) continue;
    if (!cfg_.find_server(entry.name)) changes.push_back("added " + entry.name);
    start_server(entry);
  }
  cfg_.servers = next.servers;
  if (egress_changed) changes.push_back("egress limits and timeouts (for new servers)");

  std::string summary;
  for (const auto& c : changes)
    summary += (summary.empty() ? "" : "; ") + c;
  log::daemon()->info("SIGHUP: configuration reloaded: {}",
                      summary.empty() ? "no change" : summary);
  notifier_->ready("configuration reloaded");
}

// Polls readiness on the daemon's strand every 100 ms (/readyz answers from what it saw):
// READY=1 the first time, STATUS= when it changes.
void Daemon::watch_readiness() {
  if (stopping_) return;
  const std::string why = compute_not_ready();
  const bool now = why.empty();
  std::string before;
  {
    std::lock_guard lock(ready_mu_);
    before = std::exchange(not_ready_, why);
  }
  ready_flag_ = now;
  if (now && !announced_ready_) {
    announced_ready_ = true;
    log::daemon()->info("ready: {}", cfg_.http.enabled ? "HTTP listener bound, broker connected"
                                                       : "broker connected");
    notifier_->ready("ready");
  } else if (now != last_ready_ || (!now && why != before)) {
    // systemd's status line says what /readyz says. The log says it when readiness is lost;
    // while not ready, each connection logs its own attempts (once per backoff step).
    if (now) {
      log::daemon()->info("readiness: ready again");
      notifier_->status("ready");
    } else {
      if (last_ready_) log::daemon()->warn("readiness: not ready: {}", why);
      notifier_->status("not ready: " + why);
    }
  }
  last_ready_ = now;
  readiness_timer_.expires_after(std::chrono::milliseconds(100));
  readiness_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) watch_readiness();
  });
}

void Daemon::feed_watchdog() {
  const auto interval = notifier_->watchdog_interval();
  if (!interval || finished_) return;
  notifier_->watchdog();
  watchdog_timer_.expires_after(*interval);
  watchdog_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) feed_watchdog();
  });
}

void Daemon::watch_memory() {
  if (stopping_) return;
  std::size_t sessions = ingress_ ? ingress_->session_count() : 0;
  for (const auto& s : servers_)
    sessions += s->session_count();
  if (trim_policy_.observe(sessions)) {
    const auto r = trim_heap();
    log::daemon()->info(
        "sessions fell to {} from their peak: the heap's free memory went back to the system "
        "(RSS {} KiB -> {} KiB)",
        sessions, r.rss_before_kib, r.rss_after_kib);
  }
  memory_timer_.expires_after(std::chrono::seconds(2));
  memory_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) watch_memory();
  });
}

void Daemon::on_signal(int signo) {
  signals_.async_wait([this](const boost::system::error_code& ec, int s) {
    if (!ec) boost::asio::post(strand_, [this, s] { on_signal(s); });
  });
  if (signo == SIGHUP) {
    if (stopping_) {
      log::daemon()->info("SIGHUP while stopping: ignored");
      return;
    }
    reload();
    return;
  }
  if (stopping_) {
    log::daemon()->warn("{} again: stopping now", signo == SIGINT ? "SIGINT" : "SIGTERM");
    children_->shutdown_all("the bridge is stopping");
    forced_ = true;
    finish_stop();
    return;
  }
  begin_stop(signo == SIGINT ? "SIGINT" : "SIGTERM");
}

void Daemon::begin_stop(const std::string& why) {
  stopping_ = true;
  ready_flag_ = false;
  readiness_timer_.cancel();
  memory_timer_.cancel();
  notifier_->stopping("stopping (" + why + ")");
  const auto grace = std::chrono::milliseconds(cfg_.daemon.shutdown_grace_ms);
  log::daemon()->info("stopping ({}); grace period {} ms", why, grace.count());
  grace_timer_.expires_after(grace);
  grace_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || finished_) return;
    log::daemon()->warn("the grace period is over: {} child process(es) still running are killed",
                        children_->alive());
    children_->shutdown_all("the bridge is stopping");
    finish_stop();
  });
  // Ingress first (HTTP clients and their MQTT sessions are told), then the exposed servers.
  auto stop_servers = [this, grace] {
    if (presence_) presence_->stop(grace, {});
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
  auto stop_ingress = [this, grace, stop_servers] {
    if (http_) http_->stop("the bridge is stopping");
    if (webhooks_) webhooks_->close();
    if (ingress_) {
      ingress_->close_all({bridge::CloseReason::Kind::shutdown, "the bridge is stopping"}, strand_,
                          grace / 2, stop_servers);
    } else {
      stop_servers();
    }
  };
  if (modern_) {
    // Modern requests first, while their HTTP streams are still open: each open
    // subscriptions/listen gets its graceful result (schema SubscriptionsListenResult).
    modern_->close_all({bridge::CloseReason::Kind::shutdown, "the bridge is stopping"},
                       [this, stop_ingress] { boost::asio::post(strand_, stop_ingress); });
  } else {
    stop_ingress();
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
  readiness_timer_.cancel();
  watchdog_timer_.cancel();
  memory_timer_.cancel();
  signals_.cancel();
  log::daemon()->info("stopped");
  ioc_.stop();
}

}  // namespace mcpmqtt::daemon

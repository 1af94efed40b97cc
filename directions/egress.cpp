#include "directions/egress.hpp"

#include <random>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <rapidjson/document.h>

#include "bridge/modern/protocol.hpp"
#include "common/log.hpp"
#include "directions/options.hpp"
#include "http/client_channel.hpp"
#include "http/oauth_client_credentials.hpp"
#include "mqtt/client_session.hpp"
#include "stdio/child_channel.hpp"

namespace mcpmqtt::directions {

namespace {

// A channel that only answers: used when a session's upstream cannot be started, so that the
// client's initialize still gets an error through the usual path.
class RefusedUpstream : public bridge::Channel {
 public:
  RefusedUpstream(int code, std::string why) : code_(code), why_(std::move(why)) {}
  void start(Receiver r) override { receiver_ = std::move(r); }
  void send(jsonrpc::Message m) override {
    if (closed_ || !m.is_request()) return;
    // The error first, then the close that ends the session.
    receiver_.on_message(jsonrpc::Message::error(m.id(), code_, why_));
    closed_ = true;
    receiver_.on_close({bridge::CloseReason::Kind::error, why_});
  }
  void close(const bridge::CloseReason&) override { closed_ = true; }
  std::string describe() const override { return "[refused]"; }

 private:
  int code_;
  std::string why_;
  Receiver receiver_;
  bool closed_ = false;
};

}  // namespace

std::string presence_meta(const config::ServerEntry& entry, bridge::ModernUpstream::Era era,
                          const std::string& why) {
  rapidjson::Document meta;
  meta.Parse(entry.meta_json.empty() ? "{}" : entry.meta_json.c_str());
  if (meta.HasParseError() || !meta.IsObject()) meta.SetObject();
  auto& a = meta.GetAllocator();
  const char* protocol = entry.protocol == config::ServerProtocol::legacy   ? "legacy"
                         : entry.protocol == config::ServerProtocol::modern ? "modern"
                                                                            : "auto";
  std::string era_text = "unknown", reason = why;
  if (entry.protocol == config::ServerProtocol::legacy) {
    era_text = "2025";
    reason = "\"protocol\": \"legacy\" in its mcpServers entry";
  } else if (era == bridge::ModernUpstream::Era::legacy) {
    era_text = "2025";
  } else if (era == bridge::ModernUpstream::Era::modern) {
    era_text = modern::kVersion;
  } else if (era == bridge::ModernUpstream::Era::both) {
    era_text = "both";
  } else {
    reason = "learnt from the first session";
  }
  auto str = [&a](const std::string& v) { return rapidjson::Value(v.c_str(), v.size(), a); };
  rapidjson::Value upstream(rapidjson::kObjectType);
  upstream.AddMember("transport", str(entry.is_stdio() ? "stdio" : "streamable-http"), a);
  upstream.AddMember("protocol", str(protocol), a);
  upstream.AddMember("era", str(era_text), a);
  upstream.AddMember("why", str(reason), a);
  meta.RemoveMember(kUpstreamMetaKey);
  meta.AddMember(rapidjson::StringRef(kUpstreamMetaKey), upstream, a);
  return jsonrpc::to_json(meta);
}

std::string connect_meta(const std::string& description) {
  return R"({"implementation":"mcp-mqtt-bridge","version":")" MCPMQTT_VERSION
         R"(","description":)" +
         jsonrpc::quote(description) + "}";
}

std::string make_server_id(const std::string& prefix, std::size_t index) {
  // Random per process, so two bridges with the same configuration never share a server-id;
  // stable for the process's life.
  static const std::string run = [] {
    std::random_device rd;
    static const char* hex = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < 8; ++i)
      s.push_back(hex[rd() % 16]);
    return s;
  }();
  return prefix + "-" + run + "-s" + std::to_string(index);
}

UpstreamFactory child_upstream(const config::ServerEntry& entry, const config::EgressConfig& egress,
                               std::shared_ptr<stdio::ChildRegistry> children) {
  return [entry, egress, children](
             boost::asio::any_io_executor strand,
             const std::string& prefix) -> Expected<std::shared_ptr<bridge::Channel>, Error> {
    auto spec = child_spec(entry, egress, prefix);
    auto child = stdio::ChildChannel::create(std::move(strand), std::move(spec), children);
    if (!child) return unexpected(child.error());
    return std::shared_ptr<bridge::Channel>(std::move(*child));
  };
}

std::function<std::string()> memory_budget(const config::ServerEntry& entry,
                                           std::shared_ptr<stdio::ChildRegistry> children) {
  if (!entry.is_stdio() || entry.max_memory_mb == 0 || !children) return nullptr;
  const std::uint64_t limit = static_cast<std::uint64_t>(entry.max_memory_mb) << 20;
  return [name = entry.name, mb = entry.max_memory_mb, limit, children]() -> std::string {
    const auto u = children->usage(name);
    if (u.children == 0) return {};
    // A new child is expected to grow to the size of those already running.
    const std::uint64_t projected = u.resident_bytes + u.resident_bytes / u.children;
    if (projected <= limit) return {};
    return "holds " + std::to_string(u.resident_bytes >> 20) + " MiB in its " +
           std::to_string(u.children) + " children, and one more would pass its max_memory_mb (" +
           std::to_string(mb) + " MiB)";
  };
}

Expected<UpstreamFactory, std::string> http_upstream(
    const config::ServerEntry& entry, const config::Timeouts& timeouts,
    std::shared_ptr<const modern::ToolHeaders> tool_headers,
    std::shared_ptr<http::BearerSource> bearer) {
  auto spec = upstream_spec(entry);
  if (!spec) return unexpected(spec.error());
  spec->tool_headers = std::move(tool_headers);
  spec->bearer = std::move(bearer);
  // The splice's per-method timeouts answer first; the HTTP client's own bounds only stop a
  // response that outlives every one of them.
  int longest = timeouts.default_ms;
  for (const auto& [method, ms] : timeouts.method_ms)
    longest = std::max(longest, ms);
  spec->response_timeout = std::max(spec->response_timeout,
                                    std::chrono::milliseconds(longest) + std::chrono::seconds(5));
  return UpstreamFactory(
      [spec = std::move(*spec)](
          boost::asio::any_io_executor strand,
          const std::string& prefix) -> Expected<std::shared_ptr<bridge::Channel>, Error> {
        auto s = spec;
        s.name = s.name + " " + prefix;
        return std::shared_ptr<bridge::Channel>(
            http::ClientChannel::create(std::move(strand), std::move(s)));
      });
}

Expected<std::shared_ptr<http::BearerSource>, std::string> upstream_bearer(
    const config::ServerEntry& entry, boost::asio::any_io_executor executor) {
  if (!entry.is_http() || !entry.oauth.enabled()) return std::shared_ptr<http::BearerSource>();
  const auto& c = entry.oauth;
  http::ClientCredentials::Options o;
  o.server.issuer = c.issuer;
  o.server.tls_verify = c.tls_verify;
  o.server.ca_file = c.ca_file;
  o.client_id = c.client_id;
  o.client_secret = c.client_secret;
  o.scope = c.scope;
  o.resource = c.resource.empty() ? entry.url : c.resource;
  o.auth_method = c.client_secret_post ? http::ClientCredentials::AuthMethod::client_secret_post
                                       : http::ClientCredentials::AuthMethod::client_secret_basic;
  auto made = http::ClientCredentials::create(std::move(executor), std::move(o));
  if (!made) return unexpected("mcpServers.\"" + entry.name + "\".oauth: " + made.error());
  return std::shared_ptr<http::BearerSource>(std::move(*made));
}

std::shared_ptr<ExposedServer> ExposedServer::create(boost::asio::io_context& ioc, Options options,
                                                     UpstreamFactory upstream) {
  return std::shared_ptr<ExposedServer>(
      new ExposedServer(ioc, std::move(options), std::move(upstream)));
}

ExposedServer::ExposedServer(boost::asio::io_context& ioc, Options options,
                             UpstreamFactory upstream)
    : ioc_(ioc),
      strand_(boost::asio::make_strand(ioc)),
      options_(std::move(options)),
      upstream_(std::move(upstream)) {}

void ExposedServer::start() {
  mqtt::ServerEndpoint::Options o;
  o.broker = broker_options(options_.mqtt);
  o.server_id = options_.server_id;
  o.server_name = options_.entry.name;
  o.description = options_.entry.description;
  o.meta_json = presence_meta(options_.entry, era_memory_->get(), era_memory_->why());
  o.connect_meta_json = options_.connect_meta_json;
  o.max_sessions = options_.entry.max_sessions;
  o.idle_floor = std::chrono::milliseconds(options_.egress.idle_floor_ms);
  o.over_budget = options_.over_budget;
  int longest_ms = options_.timeouts.default_ms;
  for (const auto& [method, ms] : options_.timeouts.method_ms)
    longest_ms = std::max(longest_ms, ms);
  o.busy_horizon = std::chrono::milliseconds(longest_ms) + std::chrono::seconds(5);
  // The initialization (initialize, its response, the client's notifications/initialized) is
  // bounded as the initialize request is.
  o.handshake_timeout = std::chrono::milliseconds(options_.timeouts.for_method("initialize"));
  std::weak_ptr<ExposedServer> weak = weak_from_this();
  mqtt::ServerEndpoint::Handlers h;
  h.on_initialize = [weak](std::shared_ptr<mqtt::ClientLink> link, jsonrpc::Message init) {
    if (auto self = weak.lock()) self->on_initialize(link, init);
  };
  h.on_broker = [weak](bool up, const std::string& why) {
    if (auto self = weak.lock()) {
      std::lock_guard lock(self->problem_mu_);
      self->problem_ = why;
      self->online_ = up;
    }
  };
  h.on_reconnected = [weak] {
    if (auto self = weak.lock()) {
      ++self->reconnects_;
      self->check_liveness();
    }
  };
  auto& ioc = ioc_;
  endpoint_ = mqtt::ServerEndpoint::create(
      strand_, [&ioc] { return boost::asio::make_strand(ioc); }, o, std::move(h));
  // What a session learns of the server's era goes into its presence, so that /servers and
  // every MQTT client can see which era the bridge speaks to it and why.
  era_memory_->on_change([weak](bridge::ModernUpstream::Era era, const std::string& why) {
    auto self = weak.lock();
    if (!self) return;
    boost::asio::post(self->strand_, [self, era, why] {
      self->endpoint_->set_meta(presence_meta(self->options_.entry, era, why));
    });
  });
  boost::asio::post(strand_, [self = shared_from_this()] { self->endpoint_->start(); });
}

std::string ExposedServer::offline_reason() const {
  std::lock_guard lock(problem_mu_);
  if (online_) return {};
  return problem_.empty() ? "connecting to the broker" : problem_;
}

std::string ExposedServer::upstream_problem() const {
  std::lock_guard lock(problem_mu_);
  return upstream_problem_;
}

void ExposedServer::on_initialize(const std::shared_ptr<mqtt::ClientLink>& link,
                                  const jsonrpc::Message& init) {
  // On the link's strand: the whole session lives here.
  const auto prefix = link->describe();
  std::shared_ptr<bridge::Channel> upstream;
  auto made = upstream_(link->executor(), prefix);
  if (made) {
    upstream = std::move(*made);
    std::lock_guard lock(problem_mu_);
    upstream_problem_.clear();
  } else if (made.error().transient()) {
    // Out of processes or descriptors for now: the client may try again, as at the session
    // limit, and the server stays ready.
    log::bridge()->warn("{} cannot serve the session now: {}", prefix, made.error().message);
    upstream = std::make_shared<RefusedUpstream>(jsonrpc::code::connection_closed,
                                                 made.error().message + "; try again later");
  } else {
    log::bridge()->warn("{} cannot serve the session: {}", prefix, made.error().message);
    upstream =
        std::make_shared<RefusedUpstream>(jsonrpc::code::internal_error, made.error().message);
    // A command that is not installed or not executable fails every session the same way
    // until someone fixes it: the server is not ready (/readyz, systemd's status line) until
    // a session starts.
    if (made.error().permanent()) {
      std::lock_guard lock(problem_mu_);
      upstream_problem_ = made.error().message;
    }
  }
  (void)init;  // the link delivers it again as its first message, to the splice
  EgressSession s;
  s.strand = link->executor();
  s.scheduler = std::make_unique<AsioScheduler>(link->executor());
  if (made && options_.entry.protocol != config::ServerProtocol::legacy) {
    auto mo = modern_upstream_options(options_.entry, options_.egress);
    mo.memory = era_memory_;
    mo.tool_headers = options_.tool_headers;
    mo.log_prefix = prefix;
    if (options_.entry.is_stdio()) {
      // stdio §Backward Compatibility: probe a copy of the command, as the v2 SDK client does,
      // so that a 2025 server which cannot take a request before initialize only loses the copy.
      mo.probe_channel = [factory = upstream_, strand = link->executor(),
                          prefix]() -> std::shared_ptr<bridge::Channel> {
        auto probe = factory(strand, prefix + " [discover probe]");
        if (!probe) return nullptr;
        return std::move(*probe);
      };
    }
    upstream = bridge::ModernUpstream::create(std::move(upstream), *s.scheduler, std::move(mo));
  }
  bridge::Splice::Options so;
  const auto timeouts = options_.timeouts;
  so.timeout_for = [timeouts](const std::string& method) {
    return std::chrono::milliseconds(timeouts.for_method(method));
  };
  so.log_prefix = prefix;
  so.metrics_direction = options_.entry.is_stdio() ? "stdio_egress" : "http_egress";
  bridge::Splice::Hooks hooks;
  std::weak_ptr<ExposedServer> weak = weak_from_this();
  const auto cid = link->client_id();
  hooks.on_closed = [weak, cid](const bridge::CloseReason&) {
    if (auto self = weak.lock()) {
      boost::asio::post(self->strand_, [self, cid] { self->remove_session(cid); });
    }
  };
  s.splice = bridge::Splice::create(link, upstream, *s.scheduler, so, std::move(hooks));
  auto splice = s.splice;
  log::bridge()->info("{} session started ({})", prefix, upstream->describe());
  boost::asio::post(strand_, [self = shared_from_this(), cid, s = std::move(s)]() mutable {
    self->add_session(cid, std::move(s));
  });
  // Delivers the held initialize to the upstream, tracked like every request.
  splice->start();
}

void ExposedServer::add_session(const std::string& client_id, EgressSession s) {
  // Posted before the splice starts, so a session that ends at once is removed after this.
  sessions_[client_id] = std::move(s);
  session_count_ = sessions_.size();
}

void ExposedServer::remove_session(const std::string& client_id) {
  auto it = sessions_.find(client_id);
  if (it == sessions_.end()) return;
  // Timers and the splice belong to the session's strand: release them there. (The strand is
  // copied first: the capture below moves the session out.)
  auto strand = it->second.strand;
  boost::asio::post(strand, [s = std::make_shared<EgressSession>(std::move(it->second))] {});
  sessions_.erase(it);
  session_count_ = sessions_.size();
}

namespace {

// After the broker connection came back: is the client of one session still there? (004
// §Health Checks: a client whose will fired while we were away is gone.) A ping can be lost
// without the client being gone — the client is on another broker joined to ours by a bridge
// whose link is still coming back — so kPings pings go out, spread over the ping timeout, and
// all fall due when the first does: the session ends when none is answered, no later than with
// one ping (docs/brokers.md, Federated brokers).
class LivenessProbe : public std::enable_shared_from_this<LivenessProbe> {
 public:
  static constexpr int kPings = 3;

  LivenessProbe(const boost::asio::any_io_executor& strand, std::weak_ptr<bridge::Splice> splice,
                std::string client_id, std::chrono::milliseconds window)
      : timer_(strand),
        splice_(std::move(splice)),
        client_id_(std::move(client_id)),
        window_(window),
        due_(std::chrono::steady_clock::now() + window) {}

  // On the session's strand.
  void start() { ping(); }

 private:
  void ping() {
    auto splice = splice_.lock();
    if (!splice || answered_ || splice->closed()) return;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        due_ - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      // Too late for another (a busy strand): the ones sent decide.
      last_sent_ = true;
      return judge();
    }
    last_sent_ = ++sent_ == kPings;
    splice->request_to(
        bridge::Splice::Side::client, "ping", "",
        [self = shared_from_this()](const jsonrpc::Message& r) { self->on_reply(r); }, left);
    if (last_sent_) return;
    timer_.expires_after(window_ / kPings);
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) self->ping();
    });
  }

  void on_reply(const jsonrpc::Message& r) {
    if (answered_) return;
    if (r.kind() != jsonrpc::Kind::error || r.error().code != jsonrpc::code::request_timeout) {
      // An answer (an error answer is one too), or the session ended: nothing more to learn.
      answered_ = true;
      timer_.cancel();
      return;
    }
    ++timed_out_;
    judge();
  }

  // Every ping sent went unanswered and no more will go: the client is gone.
  void judge() {
    if (answered_ || !last_sent_ || timed_out_ < sent_) return;
    answered_ = true;
    if (auto splice = splice_.lock()) {
      splice->close({bridge::CloseReason::Kind::peer_gone,
                     "client " + client_id_ + " answered none of " + std::to_string(sent_) +
                         " pings within " + log::duration_text(window_) +
                         " after the broker connection came back"});
    }
  }

  boost::asio::steady_timer timer_;
  std::weak_ptr<bridge::Splice> splice_;
  std::string client_id_;
  std::chrono::milliseconds window_;
  std::chrono::steady_clock::time_point due_;
  int sent_ = 0;
  int timed_out_ = 0;
  bool last_sent_ = false;
  bool answered_ = false;
};

}  // namespace

void ExposedServer::check_liveness() {
  const std::chrono::milliseconds window(options_.timeouts.for_method("ping"));
  for (auto& [cid, s] : sessions_) {
    auto probe = std::make_shared<LivenessProbe>(s.strand, s.splice, cid, window);
    boost::asio::post(s.strand, [probe] { probe->start(); });
  }
}

void ExposedServer::stop(std::chrono::milliseconds timeout, std::function<void()> done) {
  auto self = shared_from_this();
  if (options_.bearer) options_.bearer->stop();
  boost::asio::post(strand_, [self, timeout, done] {
    if (!self->endpoint_) {
      if (done) done();
      return;
    }
    self->endpoint_->stop(timeout, [self, done] {
      if (done) done();
    });
  });
}

}  // namespace mcpmqtt::directions

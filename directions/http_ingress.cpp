#include "directions/http_ingress.hpp"

#include "directions/options.hpp"
#include "http/oauth_introspection.hpp"
#include "http/oauth_issuer.hpp"
#include "http/server_auth.hpp"
#include "http/server_backend.hpp"
#include "http/server_listener.hpp"
#include "mqtt/client_session.hpp"

namespace mcpmqtt::directions {

// What the HTTP server needs: sessions go to the ingress, modern requests to the gateway, the
// rest to the owner's hooks.
class HttpIngress::Backend : public http::Backend {
 public:
  Backend(std::shared_ptr<Ingress> ingress, std::shared_ptr<ModernIngress> modern, Hooks hooks)
      : ingress_(std::move(ingress)), modern_(std::move(modern)), hooks_(std::move(hooks)) {}
  void attach(const std::string& server_name, std::shared_ptr<bridge::Channel> session,
              boost::asio::any_io_executor strand) override {
    ingress_->attach(server_name, std::move(session), std::move(strand));
  }
  void attach_session(const std::string& server_name, std::shared_ptr<bridge::Channel> session,
                      boost::asio::any_io_executor strand,
                      const bridge::Principal& principal) override {
    ingress_->attach(server_name, std::move(session), std::move(strand), {}, {}, principal);
  }
  bool serves_modern() override { return modern_ != nullptr; }
  void handle_modern(http::ModernRequest request,
                     std::shared_ptr<http::ModernReply> reply) override {
    modern_->handle(std::move(request), std::move(reply));
  }
  std::string servers_json(const bridge::Principal& principal) override {
    return hooks_.servers_json(principal);
  }
  bool ready() override { return hooks_.ready(); }
  std::string not_ready_reason() override { return hooks_.not_ready_reason(); }
  std::string metrics_text() override { return hooks_.metrics_text(); }

 private:
  std::shared_ptr<Ingress> ingress_;
  std::shared_ptr<ModernIngress> modern_;
  Hooks hooks_;
};

HttpIngress::HttpIngress(boost::asio::io_context& ioc, const config::Config& cfg,
                         std::shared_ptr<Ingress> ingress, std::shared_ptr<ModernIngress> modern,
                         Hooks hooks, const ReplicaIdentity& replica)
    : ioc_(ioc),
      oauth_(cfg.http.oauth),
      backend_(std::make_unique<Backend>(std::move(ingress), std::move(modern), std::move(hooks))),
      server_(std::make_unique<http::Server>(ioc, http_server_options(cfg.http, cfg.mqtt),
                                             cfg.ingress.default_server, *backend_)) {
  if (replica.shared) {
    ReplicaRelay::Options o;
    o.replica = replica.id;
    o.secret = replica.secret;
    o.connection.broker = broker_options(cfg.mqtt);
    // QoS 0 whatever mqtt.qos says: the relay's connection starts clean and every relay in
    // flight is answered when it drops, so an acknowledgement would buy no delivery that QoS 0
    // on a live connection lacks, and it costs a PUBACK each way through the broker (two more
    // packets, and wake-ups, per message; bench/README.md, replicas). Order holds: all frames
    // of one answer go on one topic at one QoS (MQTT 5.0 §4.6).
    o.connection.broker.qos = 0;
    // 004 §MQTT Client ID: a fresh id for every connection of the bridge's.
    o.connection.client_id = mqtt::fresh_client_id(cfg.mqtt.client_id_prefix + "-replica");
    o.connection.meta_json = connect_meta("mcp-mqtt-bridge replica " + replica.id);
    const auto& rc = cfg.ingress.replicas;
    int longest = cfg.timeouts.default_ms;
    for (const auto& [method, ms] : cfg.timeouts.method_ms)
      longest = std::max(longest, ms);
    o.timeout =
        std::chrono::milliseconds(rc.relay_timeout_ms > 0 ? rc.relay_timeout_ms : longest + 5000);
    o.max_relays = rc.max_relays;
    relay_ = ReplicaRelay::create(ioc, std::move(o));
  }
  server_->set_replica(std::make_shared<const http::SessionIds>(replica.id, replica.secret),
                       relay_);
}

HttpIngress::~HttpIngress() = default;

namespace {

// The issuer's keys as the HTTP server asks for them.
class IssuerKeySource : public http::KeySource {
 public:
  explicit IssuerKeySource(std::shared_ptr<http::IssuerKeys> keys) : keys_(std::move(keys)) {}
  std::shared_ptr<const auth::KeySet> keys() const override { return keys_->keys(); }
  std::string problem() const override { return keys_->problem(); }
  void refresh_for_unknown_kid(std::function<void()> done) override {
    keys_->refresh_for_unknown_kid(
        [done = std::move(done)](http::IssuerKeys::Refreshed) { done(); });
  }

 private:
  std::shared_ptr<http::IssuerKeys> keys_;
};

}  // namespace

Expected<std::string, Error> HttpIngress::start() {
  if (oauth_.enabled() && !issuer_keys_) {
    http::IssuerKeys::Options o;
    o.server.issuer = oauth_.issuer;
    o.server.tls_verify = oauth_.tls_verify;
    o.server.ca_file = oauth_.ca_file;
    o.max_stale = std::chrono::seconds(oauth_.jwks_max_stale_s);
    auto keys = http::IssuerKeys::create(ioc_.get_executor(), std::move(o));
    if (!keys) return unexpected(Error(Errc::invalid_argument, "http.oauth: " + keys.error()));
    issuer_keys_ = std::move(*keys);
    server_->set_key_source(std::make_shared<IssuerKeySource>(issuer_keys_));
    if (oauth_.introspection.enabled()) {
      http::TokenIntrospection::Options io;
      io.server = issuer_keys_->options().server;
      io.client_id = oauth_.introspection.client_id;
      io.client_secret = oauth_.introspection.client_secret;
      // The endpoint is the one in the metadata the keys were found with.
      auto introspection =
          http::TokenIntrospection::create(ioc_.get_executor(), std::move(io),
                                           [keys = std::weak_ptr<http::IssuerKeys>(issuer_keys_)] {
                                             auto k = keys.lock();
                                             return k ? k->metadata() : nullptr;
                                           });
      if (!introspection) {
        return unexpected(
            Error(Errc::invalid_argument, "http.oauth.introspection: " + introspection.error()));
      }
      introspection_ = std::move(*introspection);
      server_->set_introspector(introspection_);
    }
    // The daemon starts whether or not the issuer answers: protected routes answer 503 with
    // the reason until its keys are in (and /readyz says why).
    issuer_keys_->start();
  }
  auto bound = server_->start();
  if (!bound) return unexpected(bound.error());
  if (relay_) relay_->start(*server_);
  const auto ep = *bound;
  const std::string host =
      ep.address().is_v6() ? "[" + ep.address().to_string() + "]" : ep.address().to_string();
  return "http://" + host + ":" + std::to_string(ep.port());
}

void HttpIngress::stop(const std::string& why) {
  // Relays first: what other replicas relayed here, and what this one relayed, is answered
  // before the sessions end; the presence is cleared so the others stop relaying here.
  if (relay_) relay_->stop(std::chrono::seconds(1), {});
  server_->stop(why);
  if (issuer_keys_) issuer_keys_->stop();
  if (introspection_) introspection_->stop();
}

std::string HttpIngress::relay_problem() const {
  return relay_ ? relay_->problem() : std::string();
}

std::string HttpIngress::auth_problem() const {
  return server_->auth_problem();
}

}  // namespace mcpmqtt::directions

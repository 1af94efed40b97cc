#include "directions/modern_ingress.hpp"

#include <boost/asio/post.hpp>

#include "bridge/modern/request_state.hpp"
#include "common/log.hpp"

namespace mcpmqtt::directions {

namespace {

constexpr auto kGaugeInterval = std::chrono::seconds(1);

metrics::Gauge& pool_gauge(const std::string& direction, const char* state) {
  return metrics::registry().gauge(
      "mcpmqtt_modern_sessions",
      "MQTT sessions the modern gateway holds for MCP 2026-07-28 requests, by direction and "
      "state (opening, idle, busy, parked: waiting for an input_required retry, listening), and "
      "requests waiting for one (state waiting).",
      {"direction", "state"}, {direction, state});
}

}  // namespace

Expected<std::shared_ptr<ModernIngress>, std::string> ModernIngress::create(
    boost::asio::any_io_executor strand, Options options, std::shared_ptr<Ingress> ingress) {
  if (options.modern.state_secret.empty()) {
    // Without ingress.modern.state_secret_file: a key of this process only.
    auto key = bridge::random_bytes(32);
    if (!key)
      return unexpected(std::string(
          "no random source for the requestState key; set ingress.modern.state_secret_file"));
    options.modern.state_secret = std::move(*key);
  }
  return std::shared_ptr<ModernIngress>(
      new ModernIngress(std::move(strand), std::move(options), std::move(ingress)));
}

ModernIngress::ModernIngress(boost::asio::any_io_executor strand, Options options,
                             std::shared_ptr<Ingress> ingress)
    : strand_(std::move(strand)),
      options_(std::move(options)),
      ingress_(std::move(ingress)),
      scheduler_(std::make_unique<AsioScheduler>(strand_)),
      gauge_timer_(strand_) {
  const auto& m = options_.modern;
  bridge::ModernGateway::Options o;
  o.max_sessions = m.max_sessions;
  o.max_sessions_per_key = m.max_sessions_per_key;
  o.max_listens = m.max_listens;
  o.max_waiting = m.max_waiting;
  o.max_waiting_bytes = m.max_waiting_bytes;
  o.queue_timeout = std::chrono::milliseconds(m.queue_timeout_ms);
  o.idle_timeout = std::chrono::milliseconds(m.idle_timeout_ms);
  o.input_timeout = std::chrono::milliseconds(m.input_timeout_ms);
  o.round_quiet = std::chrono::milliseconds(m.input_round_quiet_ms);
  o.state_secret = m.state_secret;
  o.replica = options_.replica;
  o.client_info_json = R"({"name":"mcp-mqtt-bridge","version":")" MCPMQTT_VERSION R"("})";
  o.metrics_direction = options_.metrics_direction;
  std::weak_ptr<Ingress> weak_ingress = ingress_;
  auto strand_copy = strand_;
  gateway_ = bridge::ModernGateway::create(
      std::move(o), *scheduler_,
      [weak_ingress, strand_copy](const std::string& server_name,
                                  const bridge::Principal& principal,
                                  std::shared_ptr<bridge::Channel> downstream) {
        if (auto in = weak_ingress.lock()) {
          in->attach(server_name, std::move(downstream), strand_copy, {}, {}, principal);
        } else {
          downstream->close({bridge::CloseReason::Kind::shutdown, "the bridge is stopping"});
        }
      });
  boost::asio::post(strand_, [this] { update_gauges(); });
}

ModernIngress::~ModernIngress() {
  gauge_timer_.cancel();
  gateway_.reset();  // before the scheduler its timers live in
}

void ModernIngress::update_gauges() {
  if (closed_) return;
  if (!options_.metrics_direction.empty()) {
    const auto st = gateway_->stats();
    const auto& d = options_.metrics_direction;
    pool_gauge(d, "opening").set(static_cast<std::int64_t>(st.opening));
    pool_gauge(d, "idle").set(static_cast<std::int64_t>(st.idle));
    pool_gauge(d, "busy").set(static_cast<std::int64_t>(st.busy));
    pool_gauge(d, "parked").set(static_cast<std::int64_t>(st.parked));
    pool_gauge(d, "listening").set(static_cast<std::int64_t>(st.listening));
    pool_gauge(d, "waiting").set(static_cast<std::int64_t>(st.waiting));
  }
  gauge_timer_.expires_after(kGaugeInterval);
  std::weak_ptr<ModernIngress> weak = weak_from_this();
  gauge_timer_.async_wait([weak](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->update_gauges();
  });
}

void ModernIngress::handle(http::ModernRequest request, std::shared_ptr<http::ModernReply> reply) {
  boost::asio::post(strand_, [self = shared_from_this(), request = std::move(request),
                              reply = std::move(reply)]() mutable {
    bridge::ModernGateway::Responder r;
    r.notify = [reply](const jsonrpc::Message& m) { reply->notify(m); };
    r.finish = [reply](const jsonrpc::Message& m, unsigned status) { reply->finish(m, status); };
    const auto id = self->gateway_->handle(
        {std::move(request.server_name), std::move(request.principal), 0,
         std::move(request.message), std::move(request.headers), std::move(request.param_headers)},
        std::move(r));
    std::weak_ptr<ModernIngress> weak = self;
    reply->watch([weak, id, strand = self->strand_] {
      boost::asio::post(strand, [weak, id] {
        if (auto s = weak.lock()) s->gateway_->cancel(id);
      });
    });
  });
}

void ModernIngress::handle(const std::string& server_name, std::uint64_t origin,
                           jsonrpc::Message message, bridge::ModernGateway::Responder responder) {
  boost::asio::post(strand_,
                    [self = shared_from_this(), server_name, origin, message = std::move(message),
                     responder = std::move(responder)]() mutable {
                      self->gateway_->handle({server_name,
                                              bridge::Principal::keyed("stdio"),
                                              origin,
                                              std::move(message),
                                              std::nullopt,
                                              {}},
                                             std::move(responder));
                    });
}

void ModernIngress::cancel_request(std::uint64_t origin, const jsonrpc::Id& id) {
  boost::asio::post(strand_, [self = shared_from_this(), origin, id] {
    self->gateway_->cancel_request(origin, id);
  });
}

void ModernIngress::close_all(const bridge::CloseReason& why, std::function<void()> done) {
  boost::asio::post(strand_, [self = shared_from_this(), why, done = std::move(done)] {
    self->closed_ = true;
    self->gauge_timer_.cancel();
    self->gateway_->close_all(why);
    if (done) done();
  });
}

}  // namespace mcpmqtt::directions

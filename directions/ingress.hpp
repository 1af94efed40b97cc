// Ingress: joins a downstream MCP session (an HTTP session, the bridge's own stdio) to one
// instance of an MQTT-hosted server.
//
// The downstream's first messages are held. When its initialize arrives, an instance of the
// server-name is picked from the presence directory — waiting up to ingress.presence_wait_ms for
// one to appear — and a fresh MQTT client session to it is spliced to the downstream, which
// then receives the held initialize first. A server-name outside the bridge's server-name
// filters, or with no instance in time, gets a JSON-RPC error on initialize naming the
// server-name and the filters, and the downstream is closed with Kind::peer_gone.
//
// The directory is fed by a DirectoryObserver: presence, and the capability messages it fans out
// to each session with an instance (Directory::listen), so a session's MQTT connection
// subscribes only its RPC topic.
//
// The MQTT connection presents the credentials mqtt.session_credentials gives for the session's
// principal, and its MCP-META names an OAuth principal. The broker's CONNACK may assign the
// session an MCP-RBAC role (004 §User Property), which the session then enforces
// (bridge/relay/rbac_gate.hpp).
//
// Thread-safe: attach() runs on the downstream's strand; the session table has a mutex.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>

#include "bridge/protocol/principal.hpp"
#include "bridge/protocol/topics.hpp"
#include "bridge/relay/channel.hpp"
#include "bridge/relay/directory.hpp"
#include "config/config.hpp"
#include "mqtt/broker_options.hpp"

namespace mcpmqtt::directions {

class Ingress : public std::enable_shared_from_this<Ingress> {
 public:
  struct Options {
    config::MqttConfig mqtt;
    config::IngressConfig ingress;
    std::string metrics_direction = "http_ingress";  // or "stdio_ingress"
    config::Timeouts timeouts;
    std::string connect_meta_json = "{}";
    std::size_t max_held = 256;  // downstream messages held while the upstream is being opened
  };
  // What a session tells its owner when it ends (on the session's strand).
  using OnClosed = std::function<void(const bridge::CloseReason&)>;
  // Runs (on the session's strand) once an ended session's MQTT connection is closed.
  using OnFinished = std::function<void()>;

  static std::shared_ptr<Ingress> create(Options options,
                                         std::shared_ptr<bridge::Directory> directory);

  // Starts serving `downstream` (not yet started) with `server_name`, on `strand`. `principal`
  // names who opened it, for what the bridge keeps on the session's behalf (webhook
  // registrations, by its key); none: unknown, and such sessions are not offered webhooks.
  void attach(const std::string& server_name, std::shared_ptr<bridge::Channel> downstream,
              boost::asio::any_io_executor strand, OnClosed on_closed = {},
              OnFinished on_finished = {},
              std::optional<bridge::Principal> principal = std::nullopt);

  // SEP-1803 webhooks served by the bridge (events.webhooks): for sessions with a principal to
  // servers with in-band events (resources.subscribe) that do not advertise "webhook"
  // themselves, the initialize result gains "webhook" in resources.subscription, and
  // resources/subscriptions/register, .../deregister and resources/read of subscription://
  // URIs go to `handler` instead of the server; `reply` (any strand) answers the client. The
  // last page of the server's resources/list gains the session principal's subscription://
  // resources, which `handler` gives for a resources/list request (SEP-1803).
  using WebhookHandler =
      std::function<void(const std::string& server_name, const std::string& principal,
                         jsonrpc::Message request, std::function<void(jsonrpc::Message)> reply)>;
  void serve_webhooks(WebhookHandler handler);
  // Ends every session (pending requests answered with `why`); `done` runs when the table is
  // empty or after `timeout`, on `ex`.
  void close_all(const bridge::CloseReason& why, boost::asio::any_io_executor ex,
                 std::chrono::milliseconds timeout, std::function<void()> done);
  std::size_t session_count() const;

 private:
  struct IngressSession;
  Ingress(Options options, std::shared_ptr<bridge::Directory> directory);
  void forget(std::uint64_t id);

  Options options_;
  mqtt::BrokerOptions broker_;  // options_.mqtt for session connections, mapped once
  topics::Scheme topics_;       // under options_.mqtt.topic_prefix
  // options_.timeouts, shared by every session's splice rather than copied into each
  std::shared_ptr<const config::Timeouts> timeouts_;
  std::shared_ptr<bridge::Directory> directory_;
  mutable std::mutex mu_;
  std::map<std::uint64_t, std::shared_ptr<IngressSession>> sessions_;
  std::uint64_t next_id_ = 1;
  WebhookHandler webhooks_;  // under mu_
};

}  // namespace mcpmqtt::directions

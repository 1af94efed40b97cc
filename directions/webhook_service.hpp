// SEP-1803 webhooks served by the bridge (events.webhooks): the core's registrations and outbox
// (bridge::Webhooks) on their own strand, POSTed by http::WebhookClient, with the in-band
// subscriptions they need held at each MQTT-hosted server through an Ingress session of the
// bridge's own (a LocalChannel playing the MCP client: initialize, then resources/subscribe of
// every registered URI; reopened 2 s after it ends, and at start for what the database holds).
//
// Target check at registration (and again before every connection, by the client): the URL
// must be https (http too with allow_http), its host must resolve, and every address it
// resolves to must be public — loopback, link-local, private, shared, unspecified and multicast
// addresses are refused unless allow_targets covers them. A refusal is JSON-RPC -32602 naming
// the reason.
//
// The POSTs run on threads of the service's own (events.webhooks.threads), each with a
// WebhookClient and the kept-alive connections of the targets whose host hashes to it: a burst
// of a thousand deliveries keeps those threads busy, not the daemon's loop. The core and the
// upstream sessions stay on the service's strand; outcomes are posted back to it.
//
// Thread-safe: every entry point posts onto the service's strand.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/steady_timer.hpp>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/relay/local_channel.hpp"
#include "common/expected.hpp"
#include "config/config.hpp"
#include "directions/asio_scheduler.hpp"
#include "directions/ingress.hpp"
#include "events/webhook_client.hpp"
#include "events/webhooks.hpp"

namespace mcpmqtt::directions {

// Why a webhook may not be sent to `a` (loopback, private, …), or empty when it may. `allowed`
// are the configured exceptions (events.webhooks.allow_targets), already checked.
std::string webhook_address_refusal(const boost::asio::ip::address& a,
                                    const std::vector<std::string>& allowed);
// Why an allow_targets entry is not an address or network, or empty.
std::string check_allow_target(const std::string& entry);

class WebhookService : public std::enable_shared_from_this<WebhookService> {
 public:
  static Expected<std::shared_ptr<WebhookService>, std::string> create(
      boost::asio::any_io_executor strand, config::WebhooksConfig config,
      std::shared_ptr<Ingress> ingress);
  ~WebhookService();

  // Opens the upstream sessions the stored registrations need.
  void start();
  // A request an ingress session handed over (Ingress::serve_webhooks); `reply` runs on the
  // service's strand.
  void handle(std::string server_name, std::string principal, jsonrpc::Message request,
              std::function<void(jsonrpc::Message)> reply);
  // Ends the upstream sessions and writes what is batched; `done` runs on the strand.
  void close(std::function<void()> done = {});

 private:
  struct Upstream {
    std::string server;
    std::shared_ptr<bridge::LocalChannel> channel;
    std::uint64_t serial = 0;  // of the channel
    bool ready = false;
    std::optional<jsonrpc::Id> init_id;
    std::set<std::string> want;
    std::set<std::string> have;
    std::map<std::int64_t, std::string> subscribing;  // request id → URI
    std::int64_t next_id = 1;
    std::unique_ptr<boost::asio::steady_timer> retry;
    // resources/templates/list in progress (SEP-1803 webhookType), and what its pages gave.
    std::optional<std::int64_t> templates_id;
    std::vector<bridge::Webhooks::EventType> templates;
  };

  WebhookService(boost::asio::any_io_executor strand, config::WebhooksConfig config,
                 std::shared_ptr<Ingress> ingress);
  void on_interest(const std::string& server, const std::set<std::string>& uris);
  void open(Upstream& u);
  void on_upstream_message(const std::string& server, jsonrpc::Message m);
  // `serial` identifies the session that ended (a later one may be open already).
  void on_upstream_closed(const std::string& server, std::uint64_t serial,
                          const bridge::CloseReason& why);
  void hang_up(Upstream& u, const bridge::CloseReason& why);
  void sync(Upstream& u);
  // Lists the server's resource templates (from `cursor`), for the webhook type of each event.
  void list_templates(Upstream& u, const std::string& cursor = {});
  void on_templates(Upstream& u, const jsonrpc::Message& m);
  void do_register(std::string server_name, std::string principal, jsonrpc::Message request,
                   std::function<void(jsonrpc::Message)> reply);
  void update_gauges();

  boost::asio::any_io_executor strand_;
  config::WebhooksConfig config_;
  std::shared_ptr<Ingress> ingress_;
  std::unique_ptr<AsioScheduler> scheduler_;
  // The delivery threads: their loop, the clients (one strand each) and the threads.
  boost::asio::io_context post_ioc_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>
      post_work_;
  std::vector<std::shared_ptr<http::WebhookClient>> clients_;
  std::vector<std::thread> post_threads_;
  std::unique_ptr<bridge::WebhookSender> sender_;
  std::unique_ptr<bridge::Webhooks> webhooks_;
  std::map<std::string, Upstream> upstreams_;
  std::uint64_t next_serial_ = 1;
  boost::asio::steady_timer gauge_timer_;
  bool closed_ = false;
};

}  // namespace mcpmqtt::directions

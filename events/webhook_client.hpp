// The HTTP end of SEP-1803 webhooks served by the bridge: POSTs each delivery of the core's
// Webhooks (events/webhooks.hpp) to its target with the Standard Webhooks headers, on kept-alive
// connections (at most `max_idle_per_target` idle ones per scheme, host and port). Every address
// a target resolves to is checked before connecting (ClientConnection::check_addresses), so a
// name cannot move to a private address after it was registered. The response body is read and
// dropped (at most 64 KiB; past that the connection is closed).
//
// One strand (the executor given at construction): post() and every `done` run there.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ssl/context.hpp>

#include "events/webhooks.hpp"
#include "http/client_connection.hpp"

namespace mcpmqtt::http {

class WebhookClient : public bridge::WebhookSender,
                      public std::enable_shared_from_this<WebhookClient> {
 public:
  struct Options {
    std::chrono::milliseconds timeout{10000};  // connect, write and read, each
    std::size_t max_idle_per_target = 32;
    ClientConnection::AddressCheck address_check;
  };
  static std::shared_ptr<WebhookClient> create(boost::asio::any_io_executor strand,
                                               Options options);

  void post(bridge::WebhookDelivery delivery,
            std::function<void(bridge::WebhookOutcome)> done) override;
  // Closes every idle connection; POSTs in flight finish with an error.
  void close();
  // The strand every call must be made on.
  const boost::asio::any_io_executor& executor() const { return strand_; }

 private:
  struct Exchange;
  WebhookClient(boost::asio::any_io_executor strand, Options options);
  void start(std::shared_ptr<Exchange> x, bool fresh);
  void on_connected(std::shared_ptr<Exchange> x);
  void on_response(std::shared_ptr<Exchange> x);
  void read_body(std::shared_ptr<Exchange> x, std::size_t read);
  void fail(std::shared_ptr<Exchange> x, const ClientConnection::Failure& f);
  void finish(std::shared_ptr<Exchange> x, bridge::WebhookOutcome outcome);

  boost::asio::any_io_executor strand_;
  Options options_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::map<std::string, std::vector<std::shared_ptr<ClientConnection>>> idle_;
  bool closed_ = false;
};

// Standard Webhooks / RFC 9110 §10.2.3: Retry-After in seconds or as an HTTP date.
std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value);

}  // namespace mcpmqtt::http

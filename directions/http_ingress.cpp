#include "directions/http_ingress.hpp"

#include "directions/options.hpp"
#include "http/server_backend.hpp"
#include "http/server_listener.hpp"

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
  bool wants_access_token() override { return ingress_->wants_access_token(); }
  void handle_modern(http::ModernRequest request,
                     std::shared_ptr<http::ModernReply> reply) override {
    modern_->handle(std::move(request), std::move(reply));
  }
  std::string servers_json() override { return hooks_.servers_json(); }
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
                         Hooks hooks)
    : backend_(std::make_unique<Backend>(std::move(ingress), std::move(modern), std::move(hooks))),
      server_(std::make_unique<http::Server>(ioc, http_server_options(cfg.http),
                                             cfg.ingress.default_server, *backend_)) {}

HttpIngress::~HttpIngress() = default;

Expected<std::string, Error> HttpIngress::start() {
  auto bound = server_->start();
  if (!bound) return unexpected(bound.error());
  const auto ep = *bound;
  const std::string host =
      ep.address().is_v6() ? "[" + ep.address().to_string() + "]" : ep.address().to_string();
  return "http://" + host + ":" + std::to_string(ep.port());
}

void HttpIngress::stop(const std::string& why) {
  server_->stop(why);
}

}  // namespace mcpmqtt::directions

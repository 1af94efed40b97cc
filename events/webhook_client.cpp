#include "events/webhook_client.hpp"

#include <algorithm>
#include <ctime>

#include <boost/asio/post.hpp>
#include <boost/beast/http/field.hpp>

namespace mcpmqtt::http {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;

namespace {

constexpr std::size_t kMaxBody = 64 * 1024;

std::string key_of(const Url& u) {
  return std::string(u.tls ? "https://" : "http://") + u.host + ":" + std::to_string(u.port);
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view v) {
  while (!v.empty() && v.front() == ' ')
    v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ')
    v.remove_suffix(1);
  if (v.empty()) return std::nullopt;
  if (std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (v.size() > 9) return std::chrono::hours(24 * 365);
    return std::chrono::seconds(std::stoll(std::string(v)));
  }
  std::tm tm{};
  const std::string text(v);
  if (!strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm)) return std::nullopt;
  const auto when = timegm(&tm);
  const auto now = std::time(nullptr);
  return std::chrono::seconds(when > now ? when - now : 0);
}

struct WebhookClient::Exchange {
  bridge::WebhookDelivery delivery;
  std::function<void(bridge::WebhookOutcome)> done;
  Url url;
  std::string key;
  std::shared_ptr<ClientConnection> conn;
  bool reused = false;
  bool retried = false;
};

std::shared_ptr<WebhookClient> WebhookClient::create(net::any_io_executor strand, Options options) {
  return std::shared_ptr<WebhookClient>(new WebhookClient(std::move(strand), std::move(options)));
}

WebhookClient::WebhookClient(net::any_io_executor strand, Options options)
    : strand_(std::move(strand)),
      options_(std::move(options)),
      tls_(std::make_shared<net::ssl::context>(net::ssl::context::tls_client)) {
  tls_->set_default_verify_paths();
  tls_->set_verify_mode(net::ssl::verify_peer);
}

void WebhookClient::post(bridge::WebhookDelivery delivery,
                         std::function<void(bridge::WebhookOutcome)> done) {
  auto x = std::make_shared<Exchange>();
  x->done = std::move(done);
  auto url = parse_url(delivery.target);
  x->delivery = std::move(delivery);
  if (!url || closed_) {
    bridge::WebhookOutcome o;
    o.error = closed_ ? "the bridge is stopping" : "target is not a valid URL";
    net::post(strand_, [self = shared_from_this(), x, o] { self->finish(x, o); });
    return;
  }
  x->url = *url;
  x->key = key_of(x->url);
  start(std::move(x), false);
}

void WebhookClient::start(std::shared_ptr<Exchange> x, bool fresh) {
  auto& idle = idle_[x->key];
  while (!fresh && !idle.empty()) {
    auto c = std::move(idle.back());
    idle.pop_back();
    if (!c->is_open()) continue;
    x->conn = std::move(c);
    x->reused = true;
    return on_connected(std::move(x));
  }
  x->reused = false;
  x->conn = std::make_shared<ClientConnection>(strand_, x->url, tls_, true);
  if (options_.address_check) x->conn->check_addresses(options_.address_check);
  x->conn->async_connect(options_.timeout, [self = shared_from_this(), x](const auto& f) {
    if (f) return self->fail(x, *f);
    self->on_connected(x);
  });
}

void WebhookClient::on_connected(std::shared_ptr<Exchange> x) {
  ClientRequest req{bhttp::verb::post, x->url.target, 11};
  req.set(bhttp::field::host, x->url.host_header());
  req.set(bhttp::field::user_agent, "mcp-mqtt-bridge webhooks");
  req.set(bhttp::field::content_type, "application/json");
  req.set("webhook-id", x->delivery.id);
  req.set("webhook-timestamp", x->delivery.timestamp);
  req.set("webhook-signature", x->delivery.signature);
  req.keep_alive(true);
  req.body() = x->delivery.body;
  req.prepare_payload();
  x->conn->async_write(
      std::move(req), options_.timeout, [self = shared_from_this(), x](const auto& f) {
        if (f) return self->fail(x, *f);
        x->conn->async_read_header(self->options_.timeout, [self, x](const auto& f2) {
          if (f2) return self->fail(x, *f2);
          self->on_response(x);
        });
      });
}

void WebhookClient::on_response(std::shared_ptr<Exchange> x) {
  read_body(std::move(x), 0);
}

void WebhookClient::read_body(std::shared_ptr<Exchange> x, std::size_t read) {
  x->conn->async_read_body(
      options_.timeout,
      [self = shared_from_this(), x, read](const auto& f, std::string_view data, bool complete) {
        const auto& head = x->conn->header();
        bridge::WebhookOutcome o;
        o.status = head.result_int();
        if (auto it = head.find(bhttp::field::retry_after); it != head.end())
          o.retry_after =
              parse_retry_after(std::string_view(it->value().data(), it->value().size()));
        if (f || read + data.size() > kMaxBody) {
          // The status is known: the body does not matter, but the connection is not reusable.
          x->conn->close();
          return self->finish(x, o);
        }
        if (!complete) return self->read_body(x, read + data.size());
        if (x->conn->reusable() && !self->closed_) {
          auto& idle = self->idle_[x->key];
          if (idle.size() < self->options_.max_idle_per_target) idle.push_back(x->conn);
        }
        self->finish(x, o);
      });
}

void WebhookClient::fail(std::shared_ptr<Exchange> x, const ClientConnection::Failure& f) {
  // A kept-alive connection the server closed meanwhile fails before any byte of a response:
  // once on a fresh connection.
  if (x->reused && !x->retried && !x->conn->got_response_bytes() &&
      f.stage != ClientConnection::Stage::resolve) {
    x->retried = true;
    x->conn->close();
    return start(std::move(x), true);
  }
  x->conn->close();
  bridge::WebhookOutcome o;
  o.error = f.cause.empty() ? f.ec.message() : f.cause;
  finish(std::move(x), o);
}

void WebhookClient::finish(std::shared_ptr<Exchange> x, bridge::WebhookOutcome outcome) {
  auto done = std::move(x->done);
  x->done = nullptr;
  x->conn.reset();
  if (done) done(std::move(outcome));
}

void WebhookClient::close() {
  closed_ = true;
  for (auto& [key, conns] : idle_)
    for (auto& c : conns)
      c->close();
  idle_.clear();
}

}  // namespace mcpmqtt::http

#include "http/server_modern.hpp"

#include <boost/beast/http/field.hpp>

namespace mcpmqtt::http {

namespace bhttp = boost::beast::http;

void ExchangeModernReply::notify(const jsonrpc::Message& message) {
  std::lock_guard lock(mu_);
  if (done_) return;
  if (!streaming_) {
    streaming_ = true;
    Response head{bhttp::status::ok, 11};
    head.set(bhttp::field::content_type, "text/event-stream");
    head.set(bhttp::field::cache_control, "no-cache, no-transform");
    head.set("X-Accel-Buffering", "no");
    exchange_->open_stream(std::move(head));
  }
  exchange_->push_event({}, message.text());
}

void ExchangeModernReply::finish(const jsonrpc::Message& message, unsigned status) {
  std::lock_guard lock(mu_);
  if (done_) return;
  done_ = true;
  if (streaming_) {
    // A status cannot change once the stream began: an error is in-band, as any error is.
    exchange_->push_event({}, message.text(), /*last=*/true);
    exchange_->end();
    return;
  }
  Response res{static_cast<bhttp::status>(status), 11};
  res.set(bhttp::field::content_type, "application/json");
  res.body() = std::string(message.text());
  exchange_->reply(std::move(res));
}

Response modern_error_response(unsigned status, const jsonrpc::Message& error) {
  Response res{static_cast<bhttp::status>(status), 11};
  res.set(bhttp::field::content_type, "application/json");
  res.body() = std::string(error.text());
  return res;
}

}  // namespace mcpmqtt::http

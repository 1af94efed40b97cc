#include "http/client_fetch.hpp"

#include <algorithm>
#include <charconv>

#include <boost/asio/post.hpp>
#include <boost/beast/http/field.hpp>

#include "common/log.hpp"

namespace mcpmqtt::http {
namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using std::chrono::milliseconds;

std::string size_text(std::size_t bytes) {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) == 0)
    return std::to_string(bytes / (1024 * 1024)) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes / 1024) + " KiB";
  return std::to_string(bytes) + " bytes";
}

std::string Fetch::Response::field(std::string_view name) const {
  auto it = header.find(boost::beast::string_view(name.data(), name.size()));
  if (it == header.end()) return {};
  return std::string(it->value().data(), it->value().size());
}

std::shared_ptr<Fetch> Fetch::start(net::any_io_executor strand, Request request,
                                    const Settings& settings, Done done) {
  std::shared_ptr<Fetch> f(
      new Fetch(std::move(strand), std::move(request), settings, std::move(done)));
  f->run();
  return f;
}

Fetch::Fetch(net::any_io_executor strand, Request request, const Settings& settings, Done done)
    : strand_(std::move(strand)),
      request_(std::move(request)),
      settings_(settings),
      done_(std::move(done)),
      deadline_timer_(strand_) {}

milliseconds Fetch::remaining() const {
  const auto left =
      std::chrono::duration_cast<milliseconds>(deadline_ - std::chrono::steady_clock::now());
  return std::max(left, milliseconds(1));
}

void Fetch::run() {
  deadline_ = std::chrono::steady_clock::now() + settings_.timeout;
  // ClientConnection bounds each step; this bounds their sum.
  deadline_timer_.expires_at(deadline_);
  deadline_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || !self->done_) return;
    self->timed_out_ = true;
    self->conn_->close();
  });
  conn_ = std::make_shared<ClientConnection>(strand_, request_.url, settings_.tls,
                                             settings_.tls_verify);
  if (settings_.address_check) conn_->check_addresses(settings_.address_check);
  conn_->async_connect(std::min(settings_.connect_timeout, settings_.timeout),
                       [self = shared_from_this()](const auto& f) {
                         if (f) return self->fail(*f);
                         self->on_connected();
                       });
}

void Fetch::on_connected() {
  if (!done_) return;
  ClientRequest req{request_.method, request_.url.target, 11};
  req.set(bhttp::field::host, request_.url.host_header());
  req.set(bhttp::field::user_agent, "mcp-mqtt-bridge/" MCPMQTT_VERSION);
  req.set(bhttp::field::accept, "application/json");
  for (const auto& [name, value] : request_.headers)
    req.set(name, value);
  if (!request_.content_type.empty()) {
    req.set(bhttp::field::content_type, request_.content_type);
    req.body() = std::move(request_.body);
  }
  req.keep_alive(false);
  req.prepare_payload();
  conn_->async_write(std::move(req), remaining(), [self = shared_from_this()](const auto& f) {
    if (f) return self->fail(*f);
    self->conn_->async_read_header(self->remaining(), [self](const auto& f2) {
      if (f2) return self->fail(*f2);
      self->on_header();
    });
  });
}

void Fetch::on_header() {
  if (!done_) return;
  response_.header = conn_->header();
  response_.status = response_.header.result_int();
  // A declared length past the limit is refused before a byte of the body is read.
  const auto length = response_.field("Content-Length");
  std::uint64_t declared = 0;
  if (!length.empty() &&
      std::from_chars(length.data(), length.data() + length.size(), declared).ec == std::errc{} &&
      declared > settings_.max_body_bytes) {
    return finish(
        unexpected(Error{Error::Kind::too_large, "the response is larger than " +
                                                     size_text(settings_.max_body_bytes) +
                                                     " (Content-Length " + length + ")"}));
  }
  read_body();
}

void Fetch::read_body() {
  conn_->async_read_body(remaining(), [self = shared_from_this()](
                                          const auto& f, std::string_view data, bool complete) {
    if (!self->done_) return;
    if (f) return self->fail(*f);
    if (self->response_.body.size() + data.size() > self->settings_.max_body_bytes) {
      return self->finish(
          unexpected(Error{Error::Kind::too_large, "the response is larger than " +
                                                       size_text(self->settings_.max_body_bytes)}));
    }
    self->response_.body.append(data);
    if (!complete) return self->read_body();
    self->finish(std::move(self->response_));
  });
}

void Fetch::fail(const ClientConnection::Failure& f) {
  if (!done_) return;
  using Stage = ClientConnection::Stage;
  Error e;
  if (cancelled_) {
    e = {Error::Kind::cancelled, "cancelled"};
  } else if (timed_out_) {
    e = {Error::Kind::timeout,
         "no complete response within " + log::duration_text(settings_.timeout)};
  } else if (f.stage == Stage::resolve || f.stage == Stage::connect || f.stage == Stage::tls) {
    e.kind = f.timed_out ? Error::Kind::timeout : Error::Kind::unreachable;
    e.reason = f.tls_verify ? "TLS certificate verification failed: " + f.cause : f.cause;
  } else if (f.timed_out) {
    e = {Error::Kind::timeout,
         "no complete response within " + log::duration_text(settings_.timeout)};
  } else {
    e.kind = Error::Kind::broken;
    e.reason = (f.stage == Stage::write ? "connection lost while sending the request: "
                                        : "connection lost before the response was complete: ") +
               f.cause;
  }
  finish(unexpected(std::move(e)));
}

void Fetch::finish(Result result) {
  auto done = std::move(done_);
  done_ = nullptr;
  deadline_timer_.cancel();
  conn_->close();
  if (done) done(std::move(result));
}

void Fetch::cancel() {
  if (!done_ || cancelled_) return;
  cancelled_ = true;
  conn_->close();
  net::post(strand_, [self = shared_from_this()] {
    self->finish(unexpected(Error{Error::Kind::cancelled, "cancelled"}));
  });
}

}  // namespace mcpmqtt::http

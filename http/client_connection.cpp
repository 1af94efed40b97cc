#include "http/client_connection.hpp"

#include <limits>

#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include "common/log.hpp"

namespace mcpmqtt::http {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace beast_http = boost::beast::http;
using boost::system::error_code;

namespace {

constexpr std::uint32_t kHeaderLimit = 16 * 1024;
// Unparsed bytes kept between reads: a header (bounded above) or one chunk of body.
constexpr std::size_t kReadBufferLimit = 64 * 1024;

}  // namespace

ClientConnection::ClientConnection(net::any_io_executor executor, const Url& url,
                                   std::shared_ptr<net::ssl::context> tls, bool tls_verify)
    : executor_(executor),
      url_(url),
      tls_context_(std::move(tls)),
      tls_verify_(tls_verify),
      resolver_(executor),
      resolve_timer_(executor),
      buffer_(kReadBufferLimit) {
  if (url_.tls && tls_context_) {
    tls_stream_ = std::make_unique<Tls>(executor, *tls_context_);
    SSL* ssl = tls_stream_->native_handle();
    // RFC 6066 §3: SNI carries host names only, never IP literals.
    if (!url_.ip_literal) {
      // SSL_set_tlsext_host_name, without the macro's C cast.
      SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
               const_cast<char*>(url_.host.c_str()));
    }
    if (tls_verify_) {
      // OpenSSL checks the name (or address) against the certificate during the handshake, so a
      // mismatch is reported with the verification result like any other rejection.
      X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      if (url_.ip_literal) {
        X509_VERIFY_PARAM_set1_ip_asc(param, url_.host.c_str());
      } else {
        X509_VERIFY_PARAM_set1_host(param, url_.host.c_str(), url_.host.size());
      }
      tls_stream_->set_verify_mode(net::ssl::verify_peer);
    } else {
      tls_stream_->set_verify_mode(net::ssl::verify_none);
    }
  } else {
    plain_ = std::make_unique<Plain>(executor);
  }
}

beast::tcp_stream& ClientConnection::tcp() {
  return tls_stream_ ? beast::get_lowest_layer(*tls_stream_) : *plain_;
}

bool ClientConnection::is_open() const {
  return tls_stream_ ? beast::get_lowest_layer(*tls_stream_).socket().is_open()
                     : plain_->socket().is_open();
}

void ClientConnection::close() {
  resolver_.cancel();
  resolve_timer_.cancel();
  tcp().close();
}

const ClientConnection::ResponseHeader& ClientConnection::header() const {
  return parser_->get().base();
}

bool ClientConnection::reusable() const {
  return parser_ && body_complete_ && parser_->keep_alive() && is_open();
}

ClientConnection::Failure ClientConnection::failure(Stage stage, const error_code& ec) {
  Failure f;
  f.stage = stage;
  f.ec = ec;
  f.timed_out = ec == beast::error::timeout;
  f.cause = ec.message();
  return f;
}

void ClientConnection::async_connect(std::chrono::milliseconds timeout, Done done) {
  connect_done_ = std::move(done);
  connect_timeout_ = timeout;
  connect_deadline_ = std::chrono::steady_clock::now() + timeout;
  // The resolver has no timeout of its own; a timer cancels it.
  resolve_timer_.expires_after(timeout);
  resolve_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (ec) return;
    self->resolve_timed_out_ = true;
    self->resolver_.cancel();
  });
  resolver_.async_resolve(
      url_.host, url_.service(),
      [self = shared_from_this()](const error_code& ec,
                                  const net::ip::tcp::resolver::results_type& results) {
        self->on_resolve(ec, results);
      });
}

void ClientConnection::on_resolve(const error_code& ec,
                                  const net::ip::tcp::resolver::results_type& results) {
  resolve_timer_.cancel();
  if (resolve_timed_out_) {
    Failure f = failure(Stage::resolve, beast::error::timeout);
    f.cause =
        "cannot resolve host \"" + url_.host + "\" within " + log::duration_text(connect_timeout_);
    return finish_connect(f);
  }
  if (ec) {
    Failure f = failure(Stage::resolve, ec);
    f.cause = "cannot resolve host \"" + url_.host + "\": " + ec.message();
    return finish_connect(f);
  }
  if (address_check_) {
    for (const auto& entry : results) {
      auto why = address_check_(entry.endpoint().address());
      if (why.empty()) continue;
      Failure f = failure(Stage::resolve, net::error::access_denied);
      f.cause = std::move(why);
      return finish_connect(f);
    }
  }
  tcp().expires_at(connect_deadline_);
  tcp().async_connect(
      results, [self = shared_from_this()](const error_code& e, const net::ip::tcp::endpoint&) {
        self->on_connect(e);
      });
}

void ClientConnection::on_connect(const error_code& ec) {
  if (ec) {
    Failure f = failure(Stage::connect, ec);
    if (f.timed_out) f.cause = "no connection within " + log::duration_text(connect_timeout_);
    return finish_connect(f);
  }
  // Requests and their answers are small messages each waited for: no Nagle delay.
  error_code ignored;
  tcp().socket().set_option(net::ip::tcp::no_delay(true), ignored);
  if (!tls_stream_) return finish_connect(std::nullopt);
  tcp().expires_at(connect_deadline_);
  tls_stream_->async_handshake(
      net::ssl::stream_base::client,
      [self = shared_from_this()](const error_code& e) { self->on_handshake(e); });
}

void ClientConnection::on_handshake(const error_code& ec) {
  if (!ec) return finish_connect(std::nullopt);
  Failure f = failure(Stage::tls, ec);
  const long verify = SSL_get_verify_result(tls_stream_->native_handle());
  if (f.timed_out) {
    f.cause = "TLS handshake not complete within " + log::duration_text(connect_timeout_);
  } else if (tls_verify_ && verify != X509_V_OK) {
    f.tls_verify = true;
    f.cause = X509_verify_cert_error_string(verify);
  } else {
    f.cause = "TLS handshake failed: " + ec.message();
  }
  finish_connect(f);
}

void ClientConnection::finish_connect(const std::optional<Failure>& f) {
  tcp().expires_never();
  if (f) close();
  auto done = std::move(connect_done_);
  connect_done_ = nullptr;
  done(f);
}

void ClientConnection::async_write(ClientRequest request, std::chrono::milliseconds timeout,
                                   Done done) {
  ++exchanges_;
  parser_.reset();
  body_complete_ = false;
  request_ = std::move(request);
  tcp().expires_after(timeout);
  with_stream([&](auto& stream) {
    beast_http::async_write(
        stream, request_,
        [self = shared_from_this(), done = std::move(done)](const error_code& ec, std::size_t) {
          self->tcp().expires_never();
          if (ec) return done(self->failure(Stage::write, ec));
          done(std::nullopt);
        });
  });
}

void ClientConnection::async_read_header(std::chrono::milliseconds timeout, Done done) {
  parser_.emplace();
  parser_->header_limit(kHeaderLimit);
  // The caller bounds what it keeps of the body (an SSE stream has no length). Not boost::none:
  // Beast 1.74 compares a Content-Length with the optional and fails every such body.
  parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
  tcp().expires_after(timeout);
  with_stream([&](auto& stream) {
    beast_http::async_read_header(
        stream, buffer_, *parser_,
        [self = shared_from_this(), done = std::move(done)](const error_code& ec, std::size_t) {
          self->tcp().expires_never();
          if (ec) return done(self->failure(Stage::read_header, ec));
          if (self->parser_->is_done()) self->body_complete_ = true;
          done(std::nullopt);
        });
  });
}

void ClientConnection::async_read_body(std::chrono::milliseconds timeout, BodyDone done) {
  if (body_complete_) {
    net::post(executor_, [done = std::move(done)] { done(std::nullopt, {}, true); });
    return;
  }
  parser_->get().body().data = body_buf_.data();
  parser_->get().body().size = body_buf_.size();
  tcp().expires_after(timeout);
  with_stream([&](auto& stream) {
    beast_http::async_read_some(
        stream, buffer_, *parser_,
        [self = shared_from_this(), done = std::move(done)](error_code ec, std::size_t) {
          self->tcp().expires_never();
          // buffer_body: the piece filled the buffer; the rest comes with the next read.
          if (ec == beast_http::error::need_buffer) ec = {};
          if (ec) return done(self->failure(Stage::read_body, ec), {}, false);
          const std::size_t got = self->body_buf_.size() - self->parser_->get().body().size;
          self->body_complete_ = self->parser_->is_done();
          done(std::nullopt, std::string_view(self->body_buf_.data(), got), self->body_complete_);
        });
  });
}

}  // namespace mcpmqtt::http

// One HTTP/1.1 connection from the Streamable HTTP client to its upstream server, plain TCP or
// TLS, carrying one exchange at a time and kept alive between exchanges. Every read and write
// has a timeout; the response header is bounded; the body is handed over piece by piece, so an
// SSE stream is processed as it arrives and the caller bounds what it keeps.
//
// One strand (the executor given at construction); not thread-safe. Handlers keep the connection
// alive; close() ends every operation in flight (they complete with an error).
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "http/client_request.hpp"
#include "http/client_url.hpp"

namespace mcpmqtt::http {

class ClientConnection : public std::enable_shared_from_this<ClientConnection> {
 public:
  // Where an operation failed; a failure while connecting means the server is unreachable.
  enum class Stage { resolve, connect, tls, write, read_header, read_body };
  struct Failure {
    Stage stage = Stage::connect;
    boost::system::error_code ec;
    bool timed_out = false;
    bool tls_verify = false;  // the server's certificate was rejected
    std::string cause;        // for people: "Connection refused", "self-signed certificate"
  };
  using Done = std::function<void(const std::optional<Failure>&)>;
  // `data` is valid until the next call on the connection; `complete` marks the body's end.
  using BodyDone =
      std::function<void(const std::optional<Failure>&, std::string_view data, bool complete)>;
  using ResponseHeader = boost::beast::http::response_header<>;

  // `tls` is required for https URLs and must outlive the connection.
  ClientConnection(boost::asio::any_io_executor executor, const Url& url,
                   std::shared_ptr<boost::asio::ssl::context> tls, bool tls_verify);
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  // Resolves the host, connects and (https) completes the TLS handshake within `timeout`.
  void async_connect(std::chrono::milliseconds timeout, Done done);
  // Checked before connecting: every address the host resolves to must pass (an empty answer),
  // else the connection fails at Stage::resolve with the answer as its cause. Webhooks use it
  // so that a name cannot resolve to a private address between registration and delivery.
  using AddressCheck = std::function<std::string(const boost::asio::ip::address&)>;
  void check_addresses(AddressCheck check) { address_check_ = std::move(check); }
  // Writes `request` within `timeout`.
  void async_write(ClientRequest request, std::chrono::milliseconds timeout, Done done);
  // Reads the response header within `timeout` (at most 16 KiB).
  void async_read_header(std::chrono::milliseconds timeout, Done done);
  // Reads the next piece of the body; `timeout` bounds the wait for it.
  void async_read_body(std::chrono::milliseconds timeout, BodyDone done);

  const ResponseHeader& header() const;
  // The response was read to its end and the server keeps the connection open.
  bool reusable() const;
  // Some bytes of a response arrived on this exchange (a stale keep-alive connection fails
  // before any; only then is a request retried on a fresh connection).
  bool got_response_bytes() const { return parser_ && parser_->got_some(); }
  bool is_open() const;
  // Exchanges carried so far; a connection taken from the pool has carried at least one.
  unsigned exchanges() const { return exchanges_; }
  void close();

  // When the connection went back to the idle pool.
  std::chrono::steady_clock::time_point idle_since;

 private:
  using Plain = boost::beast::tcp_stream;
  using Tls = boost::beast::ssl_stream<boost::beast::tcp_stream>;

  boost::beast::tcp_stream& tcp();
  template <typename F>
  void with_stream(F&& f) {
    if (tls_stream_) {
      f(*tls_stream_);
    } else {
      f(*plain_);
    }
  }
  Failure failure(Stage stage, const boost::system::error_code& ec);
  void on_resolve(const boost::system::error_code& ec,
                  const boost::asio::ip::tcp::resolver::results_type& results);
  void on_connect(const boost::system::error_code& ec);
  void on_handshake(const boost::system::error_code& ec);
  void finish_connect(const std::optional<Failure>& f);

  boost::asio::any_io_executor executor_;
  Url url_;
  std::shared_ptr<boost::asio::ssl::context> tls_context_;
  bool tls_verify_ = true;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::steady_timer resolve_timer_;
  std::unique_ptr<Plain> plain_;
  std::unique_ptr<Tls> tls_stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::response_parser<boost::beast::http::buffer_body>> parser_;
  ClientRequest request_;
  std::array<char, 16 * 1024> body_buf_{};
  std::chrono::steady_clock::time_point connect_deadline_;
  std::chrono::milliseconds connect_timeout_{0};
  bool resolve_timed_out_ = false;
  Done connect_done_;
  AddressCheck address_check_;
  unsigned exchanges_ = 0;
  bool body_complete_ = false;
};

}  // namespace mcpmqtt::http

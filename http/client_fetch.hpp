// One bounded HTTP exchange on a fresh connection, the whole response read into memory: for the
// small documents the OAuth pieces fetch minutes apart (authorization server metadata, JWK Sets,
// token responses). Bounded in bytes (max_body_bytes: a larger Content-Length is refused before
// the body is read, a body without one is cut at the limit) and in time (one deadline for the
// whole exchange, connect included, so a server that trickles bytes cannot hold it open). The
// connection is closed afterwards: nothing is kept alive.
//
// One strand (the executor given to start()); not thread-safe: cancel() on that strand. `done`
// runs there exactly once, also after cancel().
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/verb.hpp>

#include "common/expected.hpp"
#include "http/client_connection.hpp"
#include "http/client_request.hpp"
#include "http/client_url.hpp"

namespace mcpmqtt::http {

class Fetch : public std::enable_shared_from_this<Fetch> {
 public:
  struct Request {
    boost::beast::http::verb method = boost::beast::http::verb::get;
    Url url;
    std::vector<Header> headers;  // values may be secrets (Authorization): never logged
    std::string content_type;     // of `body`; empty: no body
    std::string body;
  };
  struct Settings {
    std::shared_ptr<boost::asio::ssl::context> tls;  // required for https URLs
    bool tls_verify = true;
    std::chrono::milliseconds connect_timeout{10'000};  // resolve, connect, TLS handshake
    std::chrono::milliseconds timeout{30'000};          // the whole exchange, connect included
    std::size_t max_body_bytes = 256 * 1024;
    ClientConnection::AddressCheck address_check;  // optional, see ClientConnection
  };
  struct Response {
    unsigned status = 0;
    ClientConnection::ResponseHeader header;
    std::string body;
    // A header's value, "" when absent.
    std::string field(std::string_view name) const;
  };
  struct Error {
    enum class Kind {
      unreachable,  // resolve, connect or TLS failed: nothing was sent
      timeout,      // the deadline passed
      too_large,    // the body exceeds max_body_bytes
      broken,       // the connection failed after the request was sent, or a bad response
      cancelled,
    };
    Kind kind = Kind::broken;
    // For people, without the URL (the caller names it): "Connection refused", "no complete
    // response within 2 s", "the response is larger than 256 KiB".
    std::string reason;
  };
  using Result = Expected<Response, Error>;
  using Done = std::function<void(Result)>;

  static std::shared_ptr<Fetch> start(boost::asio::any_io_executor strand, Request request,
                                      const Settings& settings, Done done);
  // Ends the exchange: `done` gets Kind::cancelled (posted, never from inside cancel()).
  void cancel();

  Fetch(const Fetch&) = delete;
  Fetch& operator=(const Fetch&) = delete;

 private:
  Fetch(boost::asio::any_io_executor strand, Request request, const Settings& settings, Done done);
  std::chrono::milliseconds remaining() const;
  void run();
  void on_connected();
  void on_header();
  void read_body();
  void fail(const ClientConnection::Failure& f);
  void finish(Result result);

  boost::asio::any_io_executor strand_;
  Request request_;
  Settings settings_;
  Done done_;
  std::shared_ptr<ClientConnection> conn_;
  boost::asio::steady_timer deadline_timer_;
  std::chrono::steady_clock::time_point deadline_;
  Response response_;
  bool timed_out_ = false;
  bool cancelled_ = false;
};

// "256 KiB", "10 MiB", "512 bytes": a size limit as messages say it.
std::string size_text(std::size_t bytes);

}  // namespace mcpmqtt::http

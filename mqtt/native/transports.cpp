// The native engine's transports: TCP, TLS (Asio SSL), and MQTT over WebSocket (Beast, the
// subprotocol "mqtt", MQTT 5.0 §6) on TCP or TLS. Each is a Link over its stream type.
#include <map>
#include <mutex>
#include <tuple>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <openssl/ssl.h>

#include "mqtt/native/link.hpp"

namespace mcpmqtt::mqtt::native {

namespace {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace websocket = boost::beast::websocket;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

// One TLS context per distinct setting, shared by every connection that uses it: loading the
// CA store is the expensive part, and an ingress opens a connection per session.
std::shared_ptr<ssl::context> tls_context(const EngineConnect& p, std::string& why) {
  using Key = std::tuple<std::string, std::string, std::string, bool>;
  static std::mutex mu;
  static std::map<Key, std::weak_ptr<ssl::context>> cache;
  const Key key{p.ca_file, p.cert_file, p.key_file, p.verify};
  std::lock_guard lock(mu);
  if (auto ctx = cache[key].lock()) return ctx;
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                   ec);
  if (p.verify) {
    ctx->set_verify_mode(ssl::verify_peer, ec);
    if (p.ca_file.empty()) {
      ctx->set_default_verify_paths(ec);
      if (ec) {
        why = "cannot load the system's CA certificates: " + ec.message();
        return nullptr;
      }
    } else {
      ctx->load_verify_file(p.ca_file, ec);
      if (ec) {
        why = "cannot load the CA file " + p.ca_file + " (mqtt.tls.ca_file): " + ec.message();
        return nullptr;
      }
    }
  } else {
    ctx->set_verify_mode(ssl::verify_none, ec);
  }
  if (!p.cert_file.empty()) {
    ctx->use_certificate_chain_file(p.cert_file, ec);
    if (ec) {
      why = "cannot load the client certificate " + p.cert_file +
            " (mqtt.tls.cert_file): " + ec.message();
      return nullptr;
    }
    ctx->use_private_key_file(p.key_file, ssl::context::pem, ec);
    if (ec) {
      why = "cannot load the client key " + p.key_file + " (mqtt.tls.key_file): " + ec.message();
      return nullptr;
    }
  }
  cache[key] = ctx;
  return ctx;
}

template <typename Stream>
constexpr bool kTls = std::is_same_v<Stream, ssl::stream<tcp::socket>> ||
                      std::is_same_v<Stream, websocket::stream<ssl::stream<tcp::socket>>>;
template <typename Stream>
constexpr bool kWebSocket = std::is_same_v<Stream, websocket::stream<tcp::socket>> ||
                            std::is_same_v<Stream, websocket::stream<ssl::stream<tcp::socket>>>;

template <typename Stream>
class LinkOver final : public Link {
 public:
  LinkOver(asio::any_io_executor strand, EngineConnect params, Engine::Events events,
           std::shared_ptr<ssl::context> tls, std::string setup_error)
      : Link(strand, std::move(params), std::move(events)),
        // A TLS stream needs a context even when ours could not be set up (setup_error_ says
        // why, and the attempt fails before the stream is used).
        tls_(tls || !kTls<Stream> ? std::move(tls)
                                  : std::make_shared<ssl::context>(ssl::context::tls_client)),
        setup_error_(std::move(setup_error)),
        resolver_(strand),
        stream_(make_stream(strand, tls_.get())) {}

 private:
  static Stream make_stream(const asio::any_io_executor& ex, ssl::context* ctx) {
    if constexpr (kTls<Stream>)
      return Stream(ex, *ctx);
    else
      return Stream(ex);
  }
  tcp::socket& socket() {
    if constexpr (std::is_same_v<Stream, tcp::socket>)
      return stream_;
    else if constexpr (std::is_same_v<Stream, ssl::stream<tcp::socket>>)
      return stream_.next_layer();
    else if constexpr (std::is_same_v<Stream, websocket::stream<tcp::socket>>)
      return stream_.next_layer();
    else
      return stream_.next_layer().next_layer();
  }
  ssl::stream<tcp::socket>& tls_stream() {
    if constexpr (std::is_same_v<Stream, ssl::stream<tcp::socket>>)
      return stream_;
    else
      return stream_.next_layer();
  }
  std::shared_ptr<LinkOver> self() {
    return std::static_pointer_cast<LinkOver>(shared_from_this());
  }
  std::string where() const {
    const bool v6 = params_.host.find(':') != std::string::npos;
    return (v6 ? "[" + params_.host + "]" : params_.host) + ":" + std::to_string(params_.port);
  }

  void transport_open() override {
    if (!setup_error_.empty()) {
      asio::post(strand_, [s = self()] {
        s->on_transport_ready(asio::error::invalid_argument, s->setup_error_);
      });
      return;
    }
    error_code ec;
    const auto address = asio::ip::make_address(params_.host, ec);
    if (!ec) {
      // A literal address needs no resolver (and no resolver thread).
      endpoints_.emplace_back(address, params_.port);
      return do_connect();
    }
    resolver_.async_resolve(params_.host, std::to_string(params_.port),
                            [s = self()](const error_code& e, tcp::resolver::results_type r) {
                              if (e) {
                                return s->on_transport_ready(
                                    e, "cannot resolve " + s->params_.host + ": " + e.message());
                              }
                              for (const auto& entry : r)
                                s->endpoints_.push_back(entry.endpoint());
                              s->do_connect();
                            });
  }

  void do_connect() {
    asio::async_connect(socket(), endpoints_,
                        [s = self()](const error_code& e, const tcp::endpoint&) {
                          if (e) {
                            return s->on_transport_ready(e, e.message());
                          }
                          error_code ignored;
                          // No Nagle: MCP messages are small and a round trip waits on each one.
                          s->socket().set_option(tcp::no_delay(true), ignored);
                          s->do_tls();
                        });
  }

  void do_tls() {
    if constexpr (kTls<Stream>) {
      auto& tls = tls_stream();
      error_code ec;
      if (asio::ip::make_address(params_.host, ec); ec) {
        // SNI: name the host we want (not for a literal address, RFC 6066 §3).
        // (SSL_set_tlsext_host_name without its C cast.)
        SSL_ctrl(tls.native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                 const_cast<char*>(params_.host.c_str()));
      }
      if (params_.verify) tls.set_verify_callback(ssl::host_name_verification(params_.host));
      tls.async_handshake(ssl::stream_base::client, [s = self()](const error_code& e) {
        if (e) return s->on_transport_ready(e, "TLS handshake failed: " + e.message());
        s->do_websocket();
      });
    } else {
      do_websocket();
    }
  }

  void do_websocket() {
    if constexpr (kWebSocket<Stream>) {
      // MQTT 5.0 §6: binary frames, subprotocol "mqtt".
      stream_.set_option(websocket::stream_base::decorator([](websocket::request_type& req) {
        req.set(boost::beast::http::field::sec_websocket_protocol, "mqtt");
        req.set(boost::beast::http::field::user_agent, "mcp-mqtt-bridge");
      }));
      stream_.binary(true);
      // Our own codec bounds each MQTT packet; a WebSocket message may carry many.
      stream_.read_message_max(0);
      stream_.async_handshake(
          response_, where(), params_.ws_path, [s = self()](const error_code& e) {
            if (e) {
              std::string why = "WebSocket upgrade at " + s->params_.ws_path + " failed: ";
              // Beast fills in the response only when the server answered with HTTP.
              if (e == websocket::error::upgrade_declined) {
                why += "HTTP " + std::to_string(s->response_.result_int()) + " " +
                       std::string(s->response_.reason());
              } else {
                why += e.message();
              }
              return s->on_transport_ready(e, why);
            }
            s->on_transport_ready({}, {});
          });
    } else {
      on_transport_ready({}, {});
    }
  }

  void transport_read(char* data, std::size_t size) override {
    stream_.async_read_some(asio::buffer(data, size),
                            [s = self()](const error_code& e, std::size_t n) { s->on_read(e, n); });
  }

  void transport_write(const std::vector<asio::const_buffer>& buffers) override {
    if constexpr (kWebSocket<Stream>) {
      // MQTT 5.0 §6: packets need not align with frames; one message carries the batch.
      stream_.async_write(buffers,
                          [s = self()](const error_code& e, std::size_t) { s->on_written(e); });
    } else {
      asio::async_write(stream_, buffers,
                        [s = self()](const error_code& e, std::size_t) { s->on_written(e); });
    }
  }

  void transport_finish() override {
    if constexpr (kWebSocket<Stream>) {
      stream_.async_close(websocket::close_code::normal, [s = self()](const error_code&) {});
    } else {
      error_code ignored;
      socket().shutdown(tcp::socket::shutdown_send, ignored);
    }
  }

  void transport_close() override {
    error_code ignored;
    resolver_.cancel();
    socket().close(ignored);
  }

  int native_handle() override { return socket().is_open() ? socket().native_handle() : -1; }

  std::shared_ptr<ssl::context> tls_;
  std::string setup_error_;
  tcp::resolver resolver_;
  std::vector<tcp::endpoint> endpoints_;
  Stream stream_;
  websocket::response_type response_;
};

}  // namespace

std::shared_ptr<Link> Link::make(boost::asio::any_io_executor strand, EngineConnect params,
                                 Engine::Events events) {
  using T = EngineConnect::Transport;
  std::shared_ptr<ssl::context> tls;
  std::string why;
  if (params.transport == T::tls || params.transport == T::websocket_tls) {
    tls = tls_context(params, why);
  }
  switch (params.transport) {
    case T::tls:
      return std::make_shared<LinkOver<ssl::stream<tcp::socket>>>(
          std::move(strand), std::move(params), std::move(events), std::move(tls), why);
    case T::websocket:
      return std::make_shared<LinkOver<websocket::stream<tcp::socket>>>(
          std::move(strand), std::move(params), std::move(events), nullptr, why);
    case T::websocket_tls:
      return std::make_shared<LinkOver<websocket::stream<ssl::stream<tcp::socket>>>>(
          std::move(strand), std::move(params), std::move(events), std::move(tls), why);
    case T::tcp:
      break;
  }
  return std::make_shared<LinkOver<tcp::socket>>(std::move(strand), std::move(params),
                                                 std::move(events), nullptr, why);
}

}  // namespace mcpmqtt::mqtt::native

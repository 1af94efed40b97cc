#include "http/server_listener.hpp"

#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>

#include "http/server_connection.hpp"
#include "http/server_mcp_dispatch.hpp"
#include "http/server_precheck.hpp"
#include "http/server_relay.hpp"
#include "http/server_session.hpp"
#include "http/server_state.hpp"

namespace mcpmqtt::http {

namespace net = boost::asio;
using net::ip::tcp;

// Accepts connections on its own strand and gives each a strand of its own.
class Listener : public std::enable_shared_from_this<Listener> {
 public:
  explicit Listener(std::shared_ptr<ServerState> state)
      : state_(std::move(state)),
        strand_(net::make_strand(state_->ioc)),
        acceptor_(strand_),
        retry_timer_(strand_) {}

  Expected<tcp::endpoint, Error> open(const tcp::endpoint& at) {
    boost::system::error_code ec;
    acceptor_.open(at.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    // "::" means every interface, IPv4 included.
    if (!ec && at.address().is_v6() && at.address().is_unspecified())
      acceptor_.set_option(net::ip::v6_only(false), ec);
    if (!ec) acceptor_.bind(at, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      boost::system::error_code ignored;  // keep `ec`: it says why
      acceptor_.close(ignored);
      // Address in use: someone else's for now. Permission denied (a port below 1024 without
      // CAP_NET_BIND_SERVICE): the configuration's, until someone changes it.
      return unexpected(
          Error(ec.category() == boost::system::system_category() ? errc_from_errno(ec.value())
                                                                  : Errc::failed,
                "cannot listen on " + describe(at) + " (http.listen): " + ec.message()));
    }
    return acceptor_.local_endpoint();
  }

  void run() {
    net::post(strand_, [self = shared_from_this()] { self->do_accept(); });
  }

  void stop() {
    net::post(strand_, [self = shared_from_this()] {
      boost::system::error_code ignored;
      self->acceptor_.close(ignored);
      self->retry_timer_.cancel();
    });
  }

  static std::string describe(const tcp::endpoint& at) {
    const auto a = at.address();
    return (a.is_v6() ? "[" + a.to_string() + "]" : a.to_string()) + ":" +
           std::to_string(at.port());
  }

 private:
  void do_accept() {
    if (!acceptor_.is_open()) return;
    acceptor_.async_accept(
        net::make_strand(state_->ioc),
        [self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
          self->on_accept(ec, std::move(socket));
        });
  }

  void on_accept(boost::system::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
      // Out of descriptors and the like: wait a little instead of spinning.
      state_->log->warn("accepting an HTTP connection failed: {}; retrying", ec.message());
      retry_timer_.expires_after(std::chrono::milliseconds(100));
      retry_timer_.async_wait([self = shared_from_this()](boost::system::error_code e) {
        if (!e) self->do_accept();
      });
      return;
    }
    if (state_->stopping) return;
    const auto number = state_->next_connection++;
    if (state_->connection_count() >= state_->http.limits.max_connections) {
      ++state_->connections_refused;
      state_->log->warn("[C{}] refused: {} connections are open (http.limits.max_connections)",
                        number, state_->http.limits.max_connections);
      refuse(std::move(socket));
    } else {
      ++state_->connections_total;
      auto c = std::make_shared<ServerConnection>(std::move(socket), state_, number);
      state_->add_connection(number, c);
      c->start();
    }
    do_accept();
  }

  // A canned 503 without reading the request, then close.
  static void refuse(tcp::socket socket) {
    static const std::string body =
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32000,\"message\":"
        "\"Service Unavailable: too many open connections\"}}";
    static const std::string response =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        "Connection: close\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    auto s = std::make_shared<tcp::socket>(std::move(socket));
    net::async_write(*s, net::buffer(response), [s](boost::system::error_code, std::size_t) {
      boost::system::error_code ignored;
      s->shutdown(tcp::socket::shutdown_both, ignored);
      s->close(ignored);
    });
  }

  std::shared_ptr<ServerState> state_;
  net::strand<net::io_context::executor_type> strand_;
  tcp::acceptor acceptor_;
  net::steady_timer retry_timer_;
};

Server::Server(net::io_context& ioc, ServerOptions http, std::string default_server,
               Backend& backend)
    : state_(std::make_shared<ServerState>(ioc, std::move(http), std::move(default_server),
                                           backend)) {}

void Server::set_key_source(std::shared_ptr<KeySource> source) {
  state_->auth.set_key_source(std::move(source));
}

void Server::set_introspector(std::shared_ptr<Introspector> introspector) {
  state_->auth.set_introspector(std::move(introspector));
}

void Server::set_replica(std::shared_ptr<const SessionIds> ids, std::shared_ptr<Relay> relay) {
  state_->ids = std::move(ids);
  state_->relay = std::move(relay);
}

namespace {

// What dispatch_mcp answers a relayed request through: the owner's exchange.
class RelayedSink : public RequestSink {
 public:
  explicit RelayedSink(std::shared_ptr<Exchange> exchange) : exchange_(std::move(exchange)) {}
  void respond(Response response) override { exchange_->reply(std::move(response)); }
  std::shared_ptr<Exchange> hand_over() override { return exchange_; }

 private:
  std::shared_ptr<Exchange> exchange_;
};

}  // namespace

void Server::serve_relayed(RelayedRequest request, std::shared_ptr<Exchange> exchange) {
  RelayedSink sink(exchange);
  const auto route = parse_route(request.target);
  if (route.kind != Route::Kind::mcp)
    return sink.respond(error_response(404, jsonrpc::code::connection_closed,
                                       "Not Found: a relayed request names no MCP endpoint"));
  Request req{request.method, request.target, 11};
  for (auto& [name, value] : request.headers)
    req.insert(name, value);
  req.body() = std::move(request.body);
  req.prepare_payload();
  dispatch_mcp(req, route, request.principal, state_, "[relayed]", sink, true);
}

std::string Server::auth_problem() const {
  return state_->auth.problem();
}

Server::~Server() {
  stop();
}

Expected<tcp::endpoint, Error> Server::start() {
  if (listener_) return endpoint_;
  const auto& host = state_->http.listen_host;
  const auto port = state_->http.listen_port;
  boost::system::error_code ec;
  std::string literal = host;
  if (literal.size() > 2 && literal.front() == '[' && literal.back() == ']')
    literal = literal.substr(1, literal.size() - 2);
  auto address = net::ip::make_address(literal, ec);
  if (ec) {
    // A host name: resolved once, at start-up.
    tcp::resolver resolver(state_->ioc);
    auto results = resolver.resolve(host, std::to_string(port), ec);
    // Not a permanent failure: at boot, a name may resolve only once the network is up.
    if (ec || results.empty())
      return unexpected(
          Error(Errc::failed, "cannot listen on " + host + ":" + std::to_string(port) +
                                  " (http.listen): cannot resolve \"" + host +
                                  "\": " + (ec ? ec.message() : std::string("no address"))));
    address = results.begin()->endpoint().address();
  }
  auto listener = std::make_shared<Listener>(state_);
  auto bound = listener->open(tcp::endpoint(address, port));
  if (!bound) return bound;
  endpoint_ = *bound;
  listener_ = std::move(listener);
  listener_->run();
  state_->log->info("Streamable HTTP listening on {}{}", Listener::describe(endpoint_),
                    state_->auth.oauth()
                        ? " (OAuth access tokens of " + state_->http.oauth.issuer + " required)"
                    : state_->auth.required() ? std::string(" (bearer tokens required)")
                                              : std::string());
  return endpoint_;
}

void Server::stop(const std::string& why) {
  if (state_->stopping.exchange(true)) return;
  if (listener_) listener_->stop();
  for (auto& s : state_->sessions.all())
    s->shutdown(why);
  for (auto& c : state_->connections())
    c->stop();
}

tcp::endpoint Server::local_endpoint() const {
  return endpoint_;
}

std::size_t Server::session_count() const {
  return state_->sessions.size();
}

std::size_t Server::connection_count() const {
  return state_->connection_count();
}

std::string Server::metrics_text() const {
  return state_->metrics_text();
}

}  // namespace mcpmqtt::http

#include "http/server_connection.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <span>
#include <sstream>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <sys/socket.h>
#include <sys/uio.h>

#include "common/metrics.hpp"
#include "http/server_modern.hpp"
#include "http/server_session.hpp"
#include "http/server_sse.hpp"

namespace mcpmqtt::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using jsonrpc::Message;

namespace {

// Bodies of refused requests up to this size are read and dropped to keep the connection.
constexpr std::uint64_t kDiscardLimit = 64 * 1024;
// Bytes a client may send ahead (pipelining) while its current response is in progress.
constexpr std::size_t kPipelineLimit = 64 * 1024;
// How long a connection closed by the server keeps reading (and discarding) what the client
// still sends, so the client reads the final response instead of a reset.
constexpr auto kLingerTime = std::chrono::seconds(2);
// How long the head of an SSE response waits for the first event before it goes out alone.
constexpr auto kHeadDelay = std::chrono::milliseconds(100);
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

metrics::Counter& http_bytes_out() {
  static auto& counter = metrics::bytes_counter("http", "out");
  return counter;
}

// Under q.mu, with the socket lent and q.bytes holding exactly one event: sends it as one
// chunk. True when all of it went. Otherwise the socket goes back to the writer (lent_fd = -1)
// with what did not go: the framed tail in q.unsent when part went, else the event in q.bytes
// (the writer's own send then waits for room, or reports the error and closes).
bool send_on_lent_socket(PushQueue& q, bool last) {
  char head[24];
  const std::size_t head_len = chunk_head(head, q.bytes.size());
  static constexpr char kCrlfEnd[] = "\r\n0\r\n\r\n";  // the chunk's CRLF, then the last chunk
  const std::size_t tail_len = last ? 7 : 2;
  std::array<iovec, 3> iov{iovec{head, head_len}, iovec{q.bytes.data(), q.bytes.size()},
                           iovec{const_cast<char*>(kCrlfEnd), tail_len}};
  msghdr msg{};
  msg.msg_iov = iov.data();
  msg.msg_iovlen = iov.size();
  const std::size_t total = head_len + q.bytes.size() + tail_len;
  ssize_t sent;
  do {
    sent = ::sendmsg(q.lent_fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent > 0) {
    http_bytes_out().inc(q.bytes.size());
    q.lent_write_at = std::chrono::steady_clock::now();
  }
  if (sent == static_cast<ssize_t>(total)) {
    q.bytes.clear();
    q.terminated = last;
    return true;
  }
  q.lent_fd = -1;
  if (sent > 0) {
    // q.unsent is empty: the writer takes it before it lends the socket again.
    keep_chunk_tail(q.bytes, head, head_len, static_cast<std::size_t>(sent));
    if (last) q.bytes.append("0\r\n\r\n", 5);
    q.unsent.swap(q.bytes);
    q.terminated = last;
  }
  return false;
}

// An Exchange of this connection: every call is posted onto the connection's strand, except
// pushes while the connection lends its socket (see PushQueue).
class ConnectionExchange : public Exchange {
 public:
  ConnectionExchange(std::shared_ptr<ServerConnection> c, std::uint64_t serial,
                     std::shared_ptr<PushQueue> pushes)
      : c_(std::move(c)), serial_(serial), ex_(c_->executor()), pushes_(std::move(pushes)) {}

  void watch(std::function<void()> on_gone) override {
    net::post(ex_, [c = c_, s = serial_, f = std::move(on_gone)]() mutable {
      c->ex_watch(s, std::move(f));
    });
  }
  void reply(Response response) override {
    net::post(ex_, [c = c_, s = serial_, r = std::move(response)]() mutable {
      c->ex_reply(s, std::move(r));
    });
  }
  void open_stream(Response head) override {
    net::post(
        ex_, [c = c_, s = serial_, r = std::move(head)]() mutable { c->ex_open(s, std::move(r)); });
  }
  void push(std::string bytes) override {
    enqueue([&](std::string& out) { out += bytes; }, bytes.size());
  }
  void push_event(std::string_view id, std::string_view data, bool last) override {
    // Framed straight into the queue's buffer: no allocation per event once it has grown.
    enqueue([&](std::string& out) { append_sse_event(out, id, data); }, id.size() + data.size(),
            last);
  }
  void end() override {
    net::post(ex_, [c = c_, s = serial_] { c->ex_end(s); });
  }
  void abort() override {
    net::post(ex_, [c = c_, s = serial_] { c->ex_abort(s); });
  }

 private:
  template <typename Write>
  void enqueue(Write&& write, std::size_t size, bool last = false) {
    bool kick = false;
    std::size_t overflow = 0, overflow_bytes = 0;
    {
      std::lock_guard lock(pushes_->mu);
      if (pushes_->closed || pushes_->ending) return;
      // Either bound; one event alone may exceed the bytes (it is within max_body_bytes).
      if (pushes_->items >= pushes_->limit ||
          (pushes_->items > 0 && pushes_->bytes.size() + size > pushes_->byte_limit)) {
        pushes_->closed = true;
        overflow = pushes_->items;
        overflow_bytes = pushes_->bytes.size();
      } else {
        write(pushes_->bytes);
        pushes_->ending = last;
        // A lent send of the last event ends the body too; end() then finishes the exchange.
        if (pushes_->lent_fd < 0 || !send_on_lent_socket(*pushes_, last)) {
          ++pushes_->items;
          kick = !pushes_->kick_pending;
          pushes_->kick_pending = true;
        }
      }
    }
    if (overflow) {
      net::post(ex_, [c = c_, s = serial_, overflow, overflow_bytes] {
        c->ex_overflow(s, overflow, overflow_bytes);
      });
    } else if (kick)
      net::post(ex_, [c = c_, s = serial_] { c->ex_write_pushes(s); });
  }

 private:
  std::shared_ptr<ServerConnection> c_;
  std::uint64_t serial_;
  net::any_io_executor ex_;
  std::shared_ptr<PushQueue> pushes_;
};

// Beast 1.74 uses boost::string_view.
std::string_view sv(boost::beast::string_view s) {
  return {s.data(), s.size()};
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

const char* kRoutesHint =
    "the MCP endpoints are /mcp (the default server) and /servers/{server-name}/mcp; also "
    "GET /servers, /healthz, /readyz and /metrics";

}  // namespace

ServerConnection::ServerConnection(net::ip::tcp::socket socket, std::shared_ptr<ServerState> state,
                                   std::uint64_t number)
    : stream_(std::move(socket)),
      state_(std::move(state)),
      number_(number),
      label_("[C" + std::to_string(number) + "]"),
      write_timer_(stream_.get_executor()),
      keepalive_timer_(stream_.get_executor()),
      linger_timer_(stream_.get_executor()) {
  beast::error_code ec;
  local_ = stream_.socket().local_endpoint(ec).address();
  // SSE writes are small and already coalesced; Nagle's algorithm would hold each one back
  // until the client's delayed ACK (~40 ms per response).
  stream_.socket().set_option(net::ip::tcp::no_delay(true), ec);
}

ServerConnection::~ServerConnection() {
  state_->remove_connection(number_);
}

void ServerConnection::start() {
  net::post(stream_.get_executor(), [self = shared_from_this()] { self->do_read(); });
}

void ServerConnection::stop() {
  net::post(stream_.get_executor(), [self = shared_from_this()] { self->close(); });
}

// ---- reading requests --------------------------------------------------------------------------

void ServerConnection::do_read() {
  if (phase_ == Phase::closed) return;
  phase_ = Phase::reading;
  parser_.emplace();
  parser_->header_limit(kRequestHeaderLimit);
  parser_->body_limit(state_->http.limits.max_body_bytes);
  // One deadline for the whole request, header and body.
  stream_.expires_after(std::chrono::milliseconds(state_->http.limits.request_header_timeout_ms));
  bhttp::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_header(ec); });
}

void ServerConnection::on_header(beast::error_code ec) {
  if (ec) return on_read_error(ec);
  auto& req = parser_->get();
  keep_alive_ = req.keep_alive();
  head_request_ = req.method() == bhttp::verb::head;
  cors_origin_.clear();
  if (auto o = req.find(bhttp::field::origin); o != req.end()) {
    if (origin_listed(sv(o->value()), state_->http.allowed_origins))
      cors_origin_ = std::string(o->value());
  }
  request_line_ = std::string(req.method_string()) + " " + std::string(req.target());
  route_ = parse_route(sv(req.target()));
  const auto expect = req.find(bhttp::field::expect);
  const bool expects_continue = expect != req.end() && iequals(sv(expect->value()), "100-continue");
  if (auto rejection = precheck(req)) {
    if (parser_->is_done()) return write_response(std::move(*rejection), false);
    // A small body is read and dropped so the connection can go on; a large one, or one the
    // client waits to be invited to send, is not worth it: close after the answer.
    const auto length = parser_->content_length();
    if (!expects_continue && length && *length <= kDiscardLimit) {
      auto res = std::make_shared<Response>(std::move(*rejection));
      bhttp::async_read(stream_, buffer_, *parser_,
                        [self = shared_from_this(), res](beast::error_code e, std::size_t) {
                          if (e) return self->on_read_error(e);
                          self->write_response(std::move(*res), false);
                        });
      return;
    }
    write_response(std::move(*rejection), true);
    return;
  }
  if (parser_->is_done()) return on_request();
  auto read_body = [self = shared_from_this()] {
    bhttp::async_read(self->stream_, self->buffer_, *self->parser_,
                      [self](beast::error_code e, std::size_t) { self->on_body(e); });
  };
  if (expects_continue) {
    net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                     [self = shared_from_this(), read_body](beast::error_code e2, std::size_t) {
                       if (e2) return self->close();
                       read_body();
                     });
    return;
  }
  read_body();
}

void ServerConnection::on_body(beast::error_code ec) {
  if (ec) return on_read_error(ec);
  on_request();
}

void ServerConnection::on_read_error(beast::error_code ec) {
  if (phase_ == Phase::closed || ec == net::error::operation_aborted) return;
  if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
      ec == net::error::eof || ec == net::error::connection_reset ||
      ec == net::error::broken_pipe) {
    close();
    return;
  }
  if (ec == beast::error::timeout) {
    state_->log->debug(
        "{} no complete request within {} (http.limits.request_header_timeout_ms)", label_,
        log::duration_text(
            std::chrono::milliseconds(state_->http.limits.request_header_timeout_ms)));
    close();
    return;
  }
  keep_alive_ = false;
  if (ec == bhttp::error::body_limit) {
    state_->log->info("{} request body larger than {} bytes refused", label_,
                      state_->http.limits.max_body_bytes);
    write_response(error_response(413, jsonrpc::code::connection_closed,
                                  "Payload Too Large: the request body exceeds " +
                                      std::to_string(state_->http.limits.max_body_bytes) +
                                      " bytes (http.limits.max_body_bytes)"),
                   true);
    return;
  }
  if (ec == bhttp::error::header_limit) {
    write_response(error_response(431, jsonrpc::code::connection_closed,
                                  "Request Header Fields Too Large: at most " +
                                      std::to_string(kRequestHeaderLimit) + " bytes of headers"),
                   true);
    return;
  }
  state_->log->debug("{} malformed HTTP request: {}", label_, ec.message());
  write_response(error_response(400, jsonrpc::code::connection_closed,
                                "Bad Request: malformed HTTP request (" + ec.message() + ")"),
                 true);
}

std::optional<Response> ServerConnection::precheck(const Request& req) {
  using K = Route::Kind;
  const auto method = req.method();
  const bool get_like = method == bhttp::verb::get || method == bhttp::verb::head;

  if (route_.kind == K::healthz) {
    // Liveness only: no secret in it, so probes need neither a token nor a Host name.
    if (!get_like) {
      auto res = error_response(405, jsonrpc::code::connection_closed, "Method not allowed");
      res.set(bhttp::field::allow, "GET, HEAD");
      return res;
    }
    Response res{bhttp::status::ok, 11};
    res.set(bhttp::field::content_type, "text/plain; charset=utf-8");
    res.body() = "ok";
    return res;
  }
  if (route_.kind == K::not_found) {
    return error_response(404, jsonrpc::code::connection_closed,
                          "Not Found: no endpoint at " +
                              std::string(req.target().substr(0, req.target().find('?'))) + "; " +
                              kRoutesHint);
  }

  // 002 §Security Warning: DNS rebinding protection.
  const auto host = sv(req[bhttp::field::host]);
  if (!host_allowed(host, local_, state_->http.allowed_hosts)) {
    state_->log->info("{} refused Host \"{}\"", label_, std::string(host));
    return error_response(403, jsonrpc::code::connection_closed,
                          "Forbidden: Host header \"" + std::string(host) +
                              "\" is not accepted (DNS rebinding protection); list it in "
                              "http.allowed_hosts");
  }
  if (auto o = req.find(bhttp::field::origin);
      o != req.end() && !origin_allowed(sv(o->value()), local_, state_->http.allowed_origins)) {
    state_->log->info("{} refused Origin \"{}\"", label_, std::string(o->value()));
    return error_response(403, jsonrpc::code::connection_closed,
                          "Forbidden: Origin \"" + std::string(o->value()) +
                              "\" is not accepted; list it in http.allowed_origins");
  }

  if (method == bhttp::verb::options) {
    // CORS preflight: browsers send it without credentials.
    Response res{bhttp::status::no_content, 11};
    const bool mcp = route_.kind == K::mcp || route_.kind == K::bad_server_name;
    res.set(bhttp::field::allow, mcp ? "GET, POST, DELETE, OPTIONS" : "GET, HEAD, OPTIONS");
    if (!cors_origin_.empty()) {
      res.set(bhttp::field::access_control_allow_methods,
              mcp ? "GET, POST, DELETE, OPTIONS" : "GET, HEAD, OPTIONS");
      res.set(bhttp::field::access_control_allow_headers,
              "Content-Type, Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, Mcp-Name, "
              "Last-Event-ID, Authorization");
      res.set(bhttp::field::access_control_max_age, "600");
    }
    return res;
  }

  if (state_->tokens.enabled()) {
    const auto result = state_->tokens.check(sv(req[bhttp::field::authorization]));
    if (result != BearerTokens::Result::ok) {
      auto res = error_response(
          401, jsonrpc::code::connection_closed,
          result == BearerTokens::Result::missing
              ? "Unauthorized: send \"Authorization: Bearer <token>\" with a token from "
                "http.bearer_tokens_file"
              : "Unauthorized: the bearer token is not one of http.bearer_tokens_file");
      res.set(bhttp::field::www_authenticate,
              result == BearerTokens::Result::missing
                  ? "Bearer realm=\"mcp-mqtt-bridge\""
                  : "Bearer realm=\"mcp-mqtt-bridge\", error=\"invalid_token\"");
      return res;
    }
  }

  if (route_.kind == K::bad_server_name)
    return error_response(400, jsonrpc::code::connection_closed,
                          "Bad Request: " + route_.problem +
                              " (write it as /servers/{server-name}/mcp, slashes as path "
                              "segments or as %2F)");

  if (route_.kind != K::mcp) {
    if (!get_like) {
      auto res = error_response(405, jsonrpc::code::connection_closed, "Method not allowed");
      res.set(bhttp::field::allow, "GET, HEAD");
      return res;
    }
    return std::nullopt;
  }

  // The MCP endpoint.
  if (method != bhttp::verb::post && method != bhttp::verb::get && method != bhttp::verb::delete_) {
    auto res = error_response(405, jsonrpc::code::connection_closed, "Method not allowed");
    res.set(bhttp::field::allow, "GET, POST, DELETE");
    return res;
  }
  if (route_.server_name.empty() && state_->default_server.empty()) {
    return error_response(
        404, jsonrpc::code::connection_closed,
        "Not Found: no default server is configured (ingress.default_server), so /mcp has "
        "nothing behind it; use /servers/{server-name}/mcp, for example "
        "/servers/demo%2Feverything/mcp or /servers/demo/everything/mcp");
  }
  if (req.version() != 11) {
    return error_response(505, jsonrpc::code::connection_closed,
                          "HTTP Version Not Supported: the MCP endpoint needs HTTP/1.1");
  }
  if (method == bhttp::verb::post) {
    const auto accept = sv(req[bhttp::field::accept]);
    if (!accept_lists(accept, "application/json") || !accept_lists(accept, "text/event-stream"))
      return error_response(406, jsonrpc::code::connection_closed,
                            "Not Acceptable: Client must accept both application/json and "
                            "text/event-stream");
    if (!is_json_content_type(sv(req[bhttp::field::content_type])))
      return error_response(415, jsonrpc::code::connection_closed,
                            "Unsupported Media Type: Content-Type must be application/json");
  } else if (method == bhttp::verb::get) {
    if (!accept_lists(sv(req[bhttp::field::accept]), "text/event-stream"))
      return error_response(406, jsonrpc::code::connection_closed,
                            "Not Acceptable: Client must accept text/event-stream");
  }
  return std::nullopt;
}

void ServerConnection::on_request() {
  stream_.expires_never();
  auto& req = parser_->get();
  static auto& bytes_in = metrics::bytes_counter("http", "in");
  bytes_in.inc(req.body().size());
  switch (route_.kind) {
    case Route::Kind::servers: {
      Response res{bhttp::status::ok, 11};
      res.set(bhttp::field::content_type, "application/json");
      res.body() = state_->backend.servers_json();
      return write_response(std::move(res), false);
    }
    case Route::Kind::readyz: {
      const bool ready = state_->backend.ready();
      Response res{ready ? bhttp::status::ok : bhttp::status::service_unavailable, 11};
      res.set(bhttp::field::content_type, "text/plain; charset=utf-8");
      const auto why = ready ? std::string() : state_->backend.not_ready_reason();
      res.body() = ready ? "ready" : why.empty() ? "not ready" : "not ready: " + why;
      return write_response(std::move(res), false);
    }
    case Route::Kind::metrics: {
      Response res{bhttp::status::ok, 11};
      res.set(bhttp::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      res.body() = state_->backend.metrics_text() + state_->metrics_text();
      return write_response(std::move(res), false);
    }
    case Route::Kind::mcp:
      return handle_mcp(req);
    default:
      return write_response(error_response(404, jsonrpc::code::connection_closed, kRoutesHint),
                            false);
  }
}

void ServerConnection::handle_mcp(Request& req) {
  const std::string server =
      route_.server_name.empty() ? state_->default_server : route_.server_name;
  const std::string session_id(req["Mcp-Session-Id"]);
  const std::string version(req["MCP-Protocol-Version"]);

  std::shared_ptr<ServerSession> session;
  // JSON-RPC 2.0 §5: an error about a POSTed request carries its id (once the body is read).
  jsonrpc::Id answer_id;
  auto check_session = [&]() -> bool {
    if (session_id.empty()) {
      write_response(error_response(400, jsonrpc::code::connection_closed,
                                    "Bad Request: Mcp-Session-Id header is required (send "
                                    "initialize first to get one)",
                                    answer_id),
                     false);
      return false;
    }
    session = state_->sessions.find(session_id);
    if (!session || session->server_name() != server) {
      write_response(error_response(404, jsonrpc::code::request_timeout,
                                    "Session not found: send initialize without "
                                    "Mcp-Session-Id to start a new session",
                                    answer_id),
                     false);
      return false;
    }
    if (!version.empty() && !is_supported_protocol_version(version)) {
      write_response(
          error_response(400, jsonrpc::code::connection_closed,
                         "Bad Request: Unsupported protocol version: " + version +
                             " (supported versions: " + supported_protocol_versions_text() + ")",
                         answer_id),
          false);
      return false;
    }
    return true;
  };

  const bool modern_on = state_->backend.serves_modern();
  std::optional<std::string> version_header;
  if (auto v = req.find("MCP-Protocol-Version"); v != req.end())
    version_header = std::string(v->value());
  // streamable-http §Backward Compatibility: a 2026-07-28 endpoint answers GET and DELETE with
  // 405 — here only those that carry a modern MCP-Protocol-Version and no session, since the
  // same endpoint serves 2025 sessions their GET stream and DELETE.
  if (modern_on && req.method() != bhttp::verb::post && session_id.empty() && version_header &&
      modern::is_modern_version_string(trimmed(*version_header))) {
    auto res = error_response(405, jsonrpc::code::connection_closed, "Method not allowed.");
    res.set(bhttp::field::allow, "POST");
    return write_response(std::move(res), false);
  }

  if (req.method() == bhttp::verb::get) {
    if (!check_session()) return;
    session->handle_get(new_exchange(), std::string(req["Last-Event-ID"]), version);
    return;
  }
  if (req.method() == bhttp::verb::delete_) {
    if (!check_session()) return;
    session->handle_delete(new_exchange());
    return;
  }

  auto body = jsonrpc::parse_body(std::move(req.body()), state_->limits);
  if (!body) {
    const auto& f = body.error();
    return write_response(
        error_response(
            400, f.error.code,
            (f.error.code == jsonrpc::code::parse_error ? "Parse error: " : "Invalid Request: ") +
                f.error.message,
            f.id),
        false);
  }
  answer_id = reply_id(*body);
  if (modern_on) {
    // digest §1: the body's claim decides the era, whatever Mcp-Session-Id says.
    auto era = modern::classify_post(*body, version_header);
    if (era.era == modern::PostEra::refused) {
      const auto id =
          !body->batch && body->messages.size() == 1 ? body->messages.front().id() : jsonrpc::Id{};
      return write_response(
          modern_error_response(era.refusal->status, Message::error(id, era.refusal->error)),
          false);
    }
    if (era.era == modern::PostEra::modern)
      return handle_modern(req, server, std::move(body->messages.front()));
  }
  const Message* initialize = nullptr;
  for (const auto& m : body->messages)
    if (m.is_request() && m.method() == "initialize") initialize = &m;
  if (initialize) {
    if (body->batch || body->messages.size() > 1)
      return write_response(
          error_response(400, jsonrpc::code::invalid_request,
                         "Invalid Request: initialize must be sent alone, not in a batch"),
          false);
    if (!session_id.empty() && state_->sessions.find(session_id))
      return write_response(
          error_response(400, jsonrpc::code::invalid_request,
                         "Invalid Request: Server already initialized: this session is "
                         "established; send initialize without Mcp-Session-Id for a new one",
                         answer_id),
          false);
    if (state_->stopping)
      return write_response(
          error_response(503, jsonrpc::code::connection_closed,
                         "Service Unavailable: the bridge is stopping", answer_id),
          false);
    auto id = new_session_id();
    if (id.empty())
      return write_response(
          error_response(503, jsonrpc::code::connection_closed,
                         "Service Unavailable: no random source for a session id", answer_id),
          false);
    auto fresh = std::make_shared<ServerSession>(state_, id, server);
    fresh->set_principal(
        principal_of(sv(req[bhttp::field::authorization]), state_->tokens.enabled()));
    std::shared_ptr<ServerSession> evicted;
    const auto floor = std::chrono::milliseconds(state_->http.limits.idle_floor_ms);
    if (!state_->sessions.insert(id, fresh, state_->http.limits.max_sessions, floor, &evicted)) {
      state_->log->warn(
          "{} initialize refused: {} MCP sessions are open "
          "(http.limits.max_sessions)",
          label_, state_->http.limits.max_sessions);
      return write_response(
          error_response(503, jsonrpc::code::connection_closed,
                         "Service Unavailable: the bridge holds its maximum of " +
                             std::to_string(state_->http.limits.max_sessions) +
                             " MCP sessions (http.limits.max_sessions); try again later",
                         answer_id),
          false);
    }
    if (evicted) {
      ++state_->sessions_evicted;
      const auto idle = evicted->idle_since();
      const auto quiet = idle ? std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::steady_clock::now() - *idle)
                              : std::chrono::milliseconds(0);
      evicted->evict("closed to make room for a new session (http.limits.max_sessions " +
                     std::to_string(state_->http.limits.max_sessions) +
                     "): the least recently active with nothing in flight and no open stream, "
                     "quiet for " +
                     log::duration_text(quiet));
    }
    ++state_->sessions_created;
    state_->log->debug("{} initialize for {} → session {}", label_, server, short_id(id));
    fresh->begin(new_exchange(), *initialize);
    return;
  }
  if (!check_session()) return;
  session->handle_post(new_exchange(), std::move(*body), version);
}

void ServerConnection::handle_modern(Request& req, const std::string& server, Message message) {
  modern::Headers headers;
  if (auto v = req.find("MCP-Protocol-Version"); v != req.end())
    headers.protocol_version = std::string(v->value());
  if (auto v = req.find("Mcp-Method"); v != req.end()) headers.method = std::string(v->value());
  if (auto v = req.find("Mcp-Name"); v != req.end()) headers.name = std::string(v->value());
  if (!message.is_request()) {
    // A notification (the v2 client cancels a listen with one): accepted or refused here; on
    // HTTP the cancellation itself is the stream's closing (streamable-http §Cancellation).
    if (auto refused = modern::admit_notification(message, &headers))
      return write_response(
          modern_error_response(refused->status, Message::error({}, refused->error)), false);
    Response res{bhttp::status::accepted, 11};
    return write_response(std::move(res), false);
  }
  if (state_->stopping)
    return write_response(
        modern_error_response(503, Message::error(message.id(), jsonrpc::code::connection_closed,
                                                  "Service Unavailable: the bridge is stopping")),
        false);
  ModernRequest request{
      server,
      principal_of(sv(req[bhttp::field::authorization]), state_->tokens.enabled()),
      std::move(message),
      std::move(headers),
      {}};
  constexpr std::string_view kParam = "mcp-param-";
  for (const auto& field : req) {
    std::string name(field.name_string());
    if (name.size() <= kParam.size()) continue;
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (name.compare(0, kParam.size(), kParam) != 0) continue;
    if (request.param_headers.size() >= 64) break;  // bounded, as the headers themselves are
    request.param_headers.emplace_back(name.substr(kParam.size()), std::string(field.value()));
  }
  state_->backend.handle_modern(std::move(request),
                                std::make_shared<ExchangeModernReply>(new_exchange()));
}

std::shared_ptr<Exchange> ServerConnection::new_exchange() {
  ++serial_;
  phase_ = Phase::waiting;
  gone_ = nullptr;
  stop_pushes(false);
  pushes_ = std::make_shared<PushQueue>();
  pushes_->limit = state_->http.limits.stream_queue_messages;
  pushes_->byte_limit = state_->http.limits.stream_queue_bytes;
  start_watch();
  return std::make_shared<ConnectionExchange>(shared_from_this(), serial_, pushes_);
}

// ---- exchange operations -----------------------------------------------------------------------

void ServerConnection::ex_watch(std::uint64_t serial, std::function<void()> on_gone) {
  if (phase_ == Phase::closed) {
    on_gone();
    return;
  }
  if (serial == serial_ && (phase_ == Phase::waiting || phase_ == Phase::streaming))
    gone_ = std::move(on_gone);
}

void ServerConnection::ex_reply(std::uint64_t serial, Response response) {
  if (serial != serial_ || phase_ != Phase::waiting) {
    if (phase_ == Phase::closed && !response.body().empty())
      state_->log->warn(
          "{} a {} response could not be written: the client closed the "
          "connection",
          label_, response.result_int());
    return;
  }
  gone_ = nullptr;
  write_response(std::move(response), false);
}

void ServerConnection::ex_open(std::uint64_t serial, Response head) {
  if (serial != serial_ || phase_ != Phase::waiting) return;
  phase_ = Phase::streaming;
  // Events are first tried with a non-blocking send (see pump); async operations are not
  // affected by this mode, and nothing here uses blocking ones.
  beast::error_code ignored;
  if (!stream_.socket().non_blocking()) stream_.socket().non_blocking(true, ignored);
  finish_response(head, true);
  head.chunked(true);
  std::ostringstream text;
  text << head.base();
  head_bytes_ = text.str();
  // The head waits for the first event, at most kHeadDelay: a response that comes soon then
  // goes out with its head and the end of the body in one write — one send here, one wake-up
  // for the client, instead of three.
  head_pending_ = true;
  head_due_ = false;
  writing_ = false;
  ending_ = false;
  terminating_ = false;
  last_chunk_at_ = std::chrono::steady_clock::now();
  head_deadline_ = last_chunk_at_ + kHeadDelay;
  arm_stream_tick(head_deadline_);
  pump();
}

void ServerConnection::ex_write_pushes(std::uint64_t serial) {
  if (serial != serial_ || phase_ != Phase::streaming) return;
  pump();
}

void ServerConnection::ex_overflow(std::uint64_t serial, std::size_t queued, std::size_t bytes) {
  if (serial != serial_ || phase_ != Phase::streaming) return;
  ++state_->slow_streams_closed;
  // A reader can make this happen at will: one line a second (log::Throttle, per connection).
  if (std::size_t held_back = 0; overflow_log_.allow(held_back)) {
    state_->log->warn(
        "{} the client reads its SSE stream too slowly ({} events, {} bytes waiting for the "
        "socket; http.limits.stream_queue_messages {}, stream_queue_bytes {}); closing it, the "
        "events stay available for Last-Event-ID",
        label_, queued, bytes, state_->http.limits.stream_queue_messages,
        state_->http.limits.stream_queue_bytes);
  }
  close();
}

void ServerConnection::ex_end(std::uint64_t serial) {
  if (serial != serial_ || phase_ != Phase::streaming) return;
  ending_ = true;
  pump();
}

void ServerConnection::ex_abort(std::uint64_t serial) {
  if (serial != serial_ || phase_ == Phase::closed) return;
  gone_ = nullptr;
  close();
}

// ---- writing -----------------------------------------------------------------------------------

Response ServerConnection::error_response(unsigned status, int code, const std::string& message,
                                          const jsonrpc::Id& id) const {
  Response res{static_cast<bhttp::status>(status), 11};
  res.set(bhttp::field::content_type, "application/json");
  res.body() = error_body(code, message, id);
  return res;
}

void ServerConnection::finish_response(Response& res, bool streaming) {
  res.version(11);
  res.keep_alive(keep_alive_);
  if (!cors_origin_.empty()) {
    res.set(bhttp::field::access_control_allow_origin, cors_origin_);
    res.set(bhttp::field::access_control_expose_headers, "Mcp-Session-Id");
    res.set(bhttp::field::vary, "Origin");
  }
  state_->count_status(res.result_int());
  state_->log->debug("{} {} → {}", label_, request_line_, res.result_int());
  if (streaming) return;
  if (head_request_) {
    const auto n = res.body().size();
    res.body().clear();
    res.content_length(n);
  } else {
    res.prepare_payload();
  }
}

void ServerConnection::write_response(Response res, bool close_after) {
  if (phase_ == Phase::closed) return;
  if (close_after) keep_alive_ = false;
  finish_response(res, false);
  response_ = std::make_shared<Response>(std::move(res));
  static auto& bytes_out = metrics::bytes_counter("http", "out");
  bytes_out.inc(response_->body().size());
  phase_ = Phase::writing;
  arm_write_timer(response_->body().size());
  bhttp::async_write(
      stream_, *response_,
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_write(ec); });
}

void ServerConnection::on_write(beast::error_code ec) {
  write_timer_.cancel();
  response_.reset();
  if (ec) return close();
  next_request();
}

void ServerConnection::next_request() {
  if (phase_ == Phase::closed) return;
  if (!keep_alive_ || state_->stopping) return linger_close();
  phase_ = Phase::reading;
  if (watching_) {
    // The read kept open during the response may hold the start of the next request.
    read_after_watch_ = true;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
    return;
  }
  do_read();
}

void ServerConnection::pump() {
  if (phase_ != Phase::streaming || writing_) return;
  while (true) {
    // Everything pushed since the last write, in one buffer: the two buffers trade places, so
    // their capacity is reused and a push allocates nothing once they have grown.
    out_.clear();
    bool framed = false;      // out_ is the tail of a lent send: already chunks
    bool terminated = false;  // ... and it ends the body, or a lent send already did
    {
      std::lock_guard lock(pushes_->mu);
      pushes_->lent_fd = -1;  // the writer's turn
      last_chunk_at_ = std::max(last_chunk_at_, pushes_->lent_write_at);
      if (pushes_->ending) ending_ = true;
      terminated = pushes_->terminated;
      if (!pushes_->unsent.empty()) {
        out_.swap(pushes_->unsent);
        framed = true;
      } else {
        out_.swap(pushes_->bytes);
        pushes_->items = 0;
        pushes_->kick_pending = false;
        if (out_.empty() && !ending_ && !pushes_->closed) {
          // Nothing to send yet: the head waits for an event (or its deadline); once it is out,
          // the pushers write on the socket themselves until the writer's next turn.
          if (head_pending_ && !head_due_) return;
          if (!head_pending_) {
            pushes_->lent_fd = stream_.socket().native_handle();
            return;
          }
        }
      }
    }
    if (terminated && out_.empty()) return finish_stream();  // a lent send ended the body
    if (out_.empty() && !head_pending_ && !ending_) break;
    // One write: the head (if still pending), the chunk (RFC 9112 §7.1: size in hex, CRLF,
    // data, CRLF) framed by hand, and the last chunk when the stream ends with it. Written on the
    // socket itself: a write of plain buffers is a small operation Asio recycles, where Beast's
    // chunk and stream wrappers cost an allocation (and often a heap consolidation) per event at
    // high fan-out (bench_fanout).
    static constexpr char kCrlfEnd[] = "\r\n0\r\n\r\n";
    std::array<net::const_buffer, 5> parts;
    std::size_t n = 0;
    if (head_pending_) parts[n++] = net::buffer(head_bytes_);
    if (framed) {
      parts[n++] = net::buffer(out_);
    } else {
      terminated = ending_;
      if (!out_.empty()) {
        const std::size_t head_len = chunk_head(chunk_head_, out_.size());
        parts[n++] = net::buffer(chunk_head_, head_len);
        parts[n++] = net::buffer(out_);
        parts[n++] = net::buffer(kCrlfEnd, terminated ? 7 : 2);
        http_bytes_out().inc(out_.size());
      } else if (terminated) {
        parts[n++] = net::buffer(kCrlfEnd + 2, 5);
      }
    }
    const auto buffers = std::span<const net::const_buffer>(parts.data(), n);
    last_chunk_at_ = std::chrono::steady_clock::now();
    // A reader keeping up leaves room in the socket buffer: one non-blocking send writes it
    // all, with no operation to start and no completion to schedule.
    beast::error_code ec;
    const std::size_t total = net::buffer_size(buffers);
    const std::size_t sent =
        stream_.socket().non_blocking() ? stream_.socket().write_some(buffers, ec) : 0;
    if (ec && ec != net::error::would_block && ec != net::error::try_again) {
      state_->log->debug("{} SSE write failed: {}", label_, ec.message());
      return close();
    }
    if (sent > 0) head_pending_ = false;
    if (!ec && sent == total) {
      head_pending_ = false;
      if (terminated) return finish_stream();
      after_chunk();
      continue;  // pushes that came meanwhile, else lend the socket, else end the stream
    }
    // The rest (the reader is behind, or it is larger than the socket's buffer), contiguous.
    std::string rest;
    rest.reserve(total - sent);
    std::size_t skip = sent;
    for (const auto& b : buffers) {
      const auto* p = static_cast<const char*>(b.data());
      if (skip >= b.size()) {
        skip -= b.size();
        continue;
      }
      rest.append(p + skip, b.size() - skip);
      skip = 0;
    }
    out_.swap(rest);
    head_pending_ = false;
    terminating_ = terminated;
    writing_ = true;
    // No timer operation per event: the stream tick checks this deadline (see on_stream_tick).
    chunk_deadline_ = last_chunk_at_ + write_limit(out_.size());
    net::async_write(
        stream_.socket(), net::buffer(out_),
        [self = shared_from_this()](beast::error_code e, std::size_t) { self->on_chunk(e); });
    return;
  }
}

void ServerConnection::on_chunk(beast::error_code ec) {
  writing_ = false;
  if (ec) {
    state_->log->debug("{} SSE write failed: {}", label_, ec.message());
    return close();
  }
  if (terminating_) return finish_stream();
  after_chunk();
  // Pushes that came during the write found it busy: take them now.
  pump();
}

void ServerConnection::after_chunk() {
  // A burst (a large result on a stream) does not pin its buffer for the connection's life.
  constexpr std::size_t kKeptCapacity = 64 * 1024;
  if (out_.capacity() > kKeptCapacity) std::string().swap(out_);
}

void ServerConnection::finish_stream() {
  {
    std::lock_guard lock(pushes_->mu);
    pushes_->closed = true;
    pushes_->lent_fd = -1;
  }
  writing_ = false;
  terminating_ = false;
  head_pending_ = false;
  write_timer_.cancel();
  keepalive_timer_.cancel();
  gone_ = nullptr;
  ending_ = false;
  head_bytes_.clear();
  out_.clear();
  after_chunk();
  next_request();
}

std::chrono::steady_clock::duration ServerConnection::keepalive() const {
  return std::chrono::milliseconds(state_->http.limits.keepalive_interval_ms);
}

std::chrono::steady_clock::duration ServerConnection::write_limit(std::size_t bytes) const {
  // A write that cannot finish in this time has a client that does not read.
  return std::chrono::milliseconds(state_->http.limits.request_header_timeout_ms) +
         std::chrono::seconds(bytes / 65536);
}

// A stream has one timer, armed about once per keep-alive interval rather than twice per event
// (with thousands of streams, timer cancellations per event cost more than the writes). Each
// tick sends a keep-alive comment after a quiet interval and closes a connection whose write
// made no progress by its deadline — noticed within one keep-alive interval after it.
void ServerConnection::arm_stream_tick(std::chrono::steady_clock::time_point at) {
  keepalive_timer_.expires_at(at);
  keepalive_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec) self->on_stream_tick();
  });
}

void ServerConnection::on_stream_tick() {
  if (phase_ != Phase::streaming || ending_) return;
  const auto now = std::chrono::steady_clock::now();
  if (head_pending_) {
    if (now < head_deadline_) return arm_stream_tick(head_deadline_);
    // No event within kHeadDelay: the head goes out alone, and keep-alives follow.
    head_due_ = true;
    last_chunk_at_ = now;
    pump();
    if (phase_ != Phase::streaming) return;
    return arm_stream_tick(writing_ ? std::min(chunk_deadline_, now + keepalive())
                                    : now + keepalive());
  }
  if (writing_ && now >= chunk_deadline_) {
    state_->log->info(
        "{} a write made no progress for {} s; closing the connection", label_,
        std::chrono::duration_cast<std::chrono::seconds>(now - last_chunk_at_).count());
    return close();
  }
  {
    std::lock_guard lock(pushes_->mu);
    last_chunk_at_ = std::max(last_chunk_at_, pushes_->lent_write_at);
  }
  auto next = last_chunk_at_ + keepalive();
  if (!writing_ && now >= next) {
    {
      std::lock_guard lock(pushes_->mu);
      if (pushes_->bytes.empty() && pushes_->unsent.empty()) pushes_->bytes += sse_keepalive();
    }
    pump();
    next = now + keepalive();
  }
  if (writing_) next = std::min(next, chunk_deadline_);
  arm_stream_tick(next);
}

void ServerConnection::arm_write_timer(std::size_t bytes) {
  const auto limit = write_limit(bytes);
  write_timer_.expires_after(limit);
  write_timer_.async_wait([self = shared_from_this(), limit](beast::error_code ec) {
    if (ec || self->phase_ == Phase::closed) return;
    self->state_->log->info("{} a write made no progress for {} s; closing the connection",
                            self->label_,
                            std::chrono::duration_cast<std::chrono::seconds>(limit).count());
    self->close();
  });
}

// ---- the read kept open while a session answers ------------------------------------------------

void ServerConnection::start_watch() {
  if (watching_ || phase_ == Phase::closed) return;
  if (!lingering_ && buffer_.size() >= kPipelineLimit) return;
  watching_ = true;
  stream_.async_read_some(
      buffer_.prepare(4096),
      [self = shared_from_this()](beast::error_code ec, std::size_t n) { self->on_watch(ec, n); });
}

void ServerConnection::on_watch(beast::error_code ec, std::size_t n) {
  watching_ = false;
  buffer_.commit(n);
  if (phase_ == Phase::closed) return;
  if (lingering_) {
    buffer_.consume(buffer_.size());
    if (ec) return close();
    return start_watch();
  }
  if (read_after_watch_) {
    read_after_watch_ = false;
    if (ec && ec != net::error::operation_aborted) return close();
    return do_read();
  }
  if (ec == net::error::operation_aborted) return;
  if (ec) {
    // 002: a disconnect is not a cancellation; the session keeps the request.
    state_->log->debug("{} the client closed the connection ({})", label_, ec.message());
    return close();
  }
  start_watch();
}

// ---- closing -----------------------------------------------------------------------------------

void ServerConnection::stop_pushes(bool release_buffers) {
  if (!pushes_) return;
  std::lock_guard lock(pushes_->mu);
  pushes_->closed = true;
  pushes_->lent_fd = -1;  // taken back: the writer's shutdown or close may follow
  if (release_buffers) {
    pushes_->items = 0;
    std::string().swap(pushes_->bytes);
    std::string().swap(pushes_->unsent);
  }
}

void ServerConnection::linger_close() {
  if (phase_ == Phase::closed || lingering_) return;
  lingering_ = true;
  stop_pushes(false);
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  linger_timer_.expires_after(kLingerTime);
  linger_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec) self->close();
  });
  start_watch();
}

void ServerConnection::close() {
  if (phase_ == Phase::closed) return;
  phase_ = Phase::closed;
  write_timer_.cancel();
  keepalive_timer_.cancel();
  linger_timer_.cancel();
  stop_pushes(true);  // before the socket closes: no lent send may use its descriptor after that
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
  state_->remove_connection(number_);
  if (auto gone = std::move(gone_)) {
    gone_ = nullptr;
    gone();
  }
}

}  // namespace mcpmqtt::http

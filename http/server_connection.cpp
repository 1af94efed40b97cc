#include "http/server_connection.hpp"

#include <algorithm>
#include <array>
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

#include "common/metrics.hpp"
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
    const auto r = pushes_->push(std::forward<Write>(write), size, last);
    if (r.what == PushQueue::Pushed::overflow) {
      if (r.items == 0) return;
      net::post(ex_, [c = c_, s = serial_, items = r.items, bytes = r.bytes] {
        c->ex_overflow(s, items, bytes);
      });
    } else if (r.what == PushQueue::Pushed::queued_first) {
      net::post(ex_, [c = c_, s = serial_] { c->ex_write_pushes(s); });
    }
  }

 private:
  std::shared_ptr<ServerConnection> c_;
  std::uint64_t serial_;
  net::any_io_executor ex_;
  std::shared_ptr<PushQueue> pushes_;
};

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
  expects_continue_ = expect != req.end() && iequals(sv(expect->value()), "100-continue");
  principal_ = {};
  readiness_detail_ = true;
  if (auto rejection = precheck(req, route_, local_, !cors_origin_.empty(), *state_, label_))
    return reject(std::move(*rejection));
  authenticate(false);
}

void ServerConnection::reject(Response rejection) {
  if (parser_->is_done()) return write_response(std::move(rejection), false);
  // A small body is read and dropped so the connection can go on; a large one, or one the
  // client waits to be invited to send, is not worth it: close after the answer.
  const auto length = parser_->content_length();
  if (!expects_continue_ && length && *length <= kDiscardLimit) {
    auto res = std::make_shared<Response>(std::move(rejection));
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this(), res](beast::error_code e, std::size_t) {
                        if (e) return self->on_read_error(e);
                        self->write_response(std::move(*res), false);
                      });
    return;
  }
  write_response(std::move(rejection), true);
}

void ServerConnection::authenticate(bool retried, std::string unavailable) {
  if (phase_ == Phase::closed) return;
  auto& req = parser_->get();
  const auto server = route_.kind != Route::Kind::mcp ? std::string()
                      : route_.server_name.empty()    ? state_->default_server
                                                      : route_.server_name;
  auto outcome = unavailable.empty() ? state_->auth.check(req, route_, server, retried)
                                     : state_->auth.unavailable(unavailable);
  if (route_.kind == Route::Kind::readyz && outcome.kind != Authenticator::Outcome::Kind::allowed) {
    // Readiness probes (an orchestrator, a load balancer, the container's healthcheck) carry no
    // token: they get the status code, and the reasons, which name brokers, servers and the
    // issuer, stay for callers the authenticator allows.
    readiness_detail_ = false;
    outcome = {};
  }
  switch (outcome.kind) {
    case Authenticator::Outcome::Kind::introspect:
      // An opaque token: ask its issuer (RFC 7662 §2.1), then decide from the answer kept. The
      // wait holds the connection, as for an unknown kid; the introspector answers every call,
      // also when it stops.
      state_->auth.introspect(req, [self = shared_from_this(), ex = executor()](std::string why) {
        net::post(ex, [self, why = std::move(why)]() mutable {
          self->authenticate(true, std::move(why));
        });
      });
      return;
    case Authenticator::Outcome::Kind::unknown_kid:
      // The issuer may have rotated its keys: fetch them again (rate-limited), then decide.
      // The wait holds the connection (no read or write is pending meanwhile); the key source
      // answers every waiter, also when it stops.
      state_->auth.key_source()->refresh_for_unknown_kid(
          [self = shared_from_this(), ex = executor()] {
            net::post(ex, [self] { self->authenticate(true); });
          });
      return;
    case Authenticator::Outcome::Kind::refused:
      state_->log->info("{} {} refused: {}", label_, request_line_, outcome.log_reason);
      return reject(std::move(*outcome.refusal));
    case Authenticator::Outcome::Kind::allowed:
      principal_ = std::move(outcome.principal);
      break;
  }
  if (auto rejection = precheck_route(req, route_, *state_)) return reject(std::move(*rejection));
  if (parser_->is_done()) return on_request();
  if (!expects_continue_ && buffer_.size() > 0) {
    // The body mostly came with the header: parsed here, the request goes on at once instead of
    // on the next turn, where an async_read that needs no read completes (issue 34).
    parser_->eager(true);
    beast::error_code ec;
    buffer_.consume(parser_->put(buffer_.data(), ec));
    if (ec && ec != bhttp::error::need_more) return on_read_error(ec);
    if (parser_->is_done()) return on_request();
  }
  auto read_body = [self = shared_from_this()] {
    bhttp::async_read(self->stream_, self->buffer_, *self->parser_,
                      [self](beast::error_code e, std::size_t) { self->on_body(e); });
  };
  if (expects_continue_) {
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

void ServerConnection::on_request() {
  stream_.expires_never();
  auto& req = parser_->get();
  static auto& bytes_in = metrics::bytes_counter("http", "in");
  bytes_in.inc(req.body().size());
  switch (route_.kind) {
    case Route::Kind::servers: {
      Response res{bhttp::status::ok, 11};
      res.set(bhttp::field::content_type, "application/json");
      res.body() = state_->backend.servers_json(principal_);
      return write_response(std::move(res), false);
    }
    case Route::Kind::readyz: {
      const bool ready = state_->backend.ready();
      Response res{ready ? bhttp::status::ok : bhttp::status::service_unavailable, 11};
      res.set(bhttp::field::content_type, "text/plain; charset=utf-8");
      // Without the detail, only what every protected route answers anyone already: why
      // tokens cannot be checked now.
      const auto why = ready               ? std::string()
                       : readiness_detail_ ? state_->backend.not_ready_reason()
                                           : state_->auth.problem();
      res.body() = ready ? "ready" : why.empty() ? "not ready" : "not ready: " + why;
      return write_response(std::move(res), false);
    }
    case Route::Kind::metrics: {
      Response res{bhttp::status::ok, 11};
      res.set(bhttp::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      res.body() = state_->backend.metrics_text() + state_->metrics_text();
      return write_response(std::move(res), false);
    }
    case Route::Kind::mcp: {
      dispatching_ = true;
      dispatch_mcp(req, route_, principal_, state_, label_, *this);
      dispatching_ = false;
      if (!watch_due_) return;
      // The read that watches the client while the session answers starts after what the
      // dispatch posted (the request on its way to the broker): its first attempt mostly finds
      // nothing (EAGAIN), and need not come first (issue 34).
      watch_due_ = false;
      net::post(executor(), [self = shared_from_this(), serial = serial_] {
        if (self->serial_ != serial) return;
        const auto p = self->phase_;
        if (p == Phase::waiting || p == Phase::writing || p == Phase::streaming)
          self->start_watch();
      });
      return;
    }
    default:
      return write_response(error_response(404, jsonrpc::code::connection_closed, kRoutesHint),
                            false);
  }
}

std::shared_ptr<Exchange> ServerConnection::new_exchange() {
  ++serial_;
  phase_ = Phase::waiting;
  gone_ = nullptr;
  stop_pushes(false);
  pushes_ = std::make_shared<PushQueue>(state_->http.limits.stream_queue_messages,
                                        state_->http.limits.stream_queue_bytes);
  if (dispatching_)
    watch_due_ = true;
  else
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
  writer_ = Writer::head_waits;
  ending_ = false;
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
  if (phase_ == Phase::closed || phase_ == Phase::lingering) return;
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
  if (phase_ == Phase::closed || phase_ == Phase::lingering) return;
  if (!keep_alive_ || state_->stopping) return linger_close();
  phase_ = Phase::reading;
  if (watch_ != Watch::off) {
    // The read kept open during the response may hold the start of the next request.
    watch_ = Watch::on_then_read;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
    return;
  }
  do_read();
}

void ServerConnection::pump() {
  if (phase_ != Phase::streaming || write_in_flight()) return;
  while (true) {
    // Everything pushed since the last write, in one buffer: the two buffers trade places, so
    // their capacity is reused and a push allocates nothing once they have grown.
    out_.clear();
    const auto taken =
        pushes_->take(out_, head_pending() ? -1 : stream_.socket().native_handle(), ending_);
    last_chunk_at_ = std::max(last_chunk_at_, taken.lent_write_at);
    if (taken.ending) ending_ = true;
    const bool framed = taken.framed;    // out_ is the tail of a lent send: already chunks
    bool terminated = taken.terminated;  // ... and it ends the body, or a lent send already did
    // Nothing to send yet: the head waits for an event (or its deadline); once it is out, the
    // pushers write on the socket themselves (it is lent now) until the writer's next turn.
    if (taken.lent) return;
    if (!framed && out_.empty() && !ending_ && !taken.closed && writer_ == Writer::head_waits)
      return;
    if (terminated && out_.empty()) return finish_stream();  // a lent send ended the body
    if (out_.empty() && !head_pending() && !ending_) break;
    // One write: the head (if still pending), the chunk (RFC 9112 §7.1: size in hex, CRLF,
    // data, CRLF) framed by hand, and the last chunk when the stream ends with it. Written on the
    // socket itself: a write of plain buffers is a small operation Asio recycles, where Beast's
    // chunk and stream wrappers cost an allocation (and often a heap consolidation) per event at
    // high fan-out (bench_fanout).
    static constexpr char kCrlfEnd[] = "\r\n0\r\n\r\n";
    std::array<net::const_buffer, 5> parts;
    std::size_t n = 0;
    if (head_pending()) parts[n++] = net::buffer(head_bytes_);
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
    if (sent > 0) writer_ = Writer::idle;  // the head is out
    if (!ec && sent == total) {
      writer_ = Writer::idle;
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
    writer_ = terminated ? Writer::writing_last : Writer::writing;
    // No timer operation per event: the stream tick checks this deadline (see on_stream_tick).
    chunk_deadline_ = last_chunk_at_ + write_limit(out_.size());
    net::async_write(
        stream_.socket(), net::buffer(out_),
        [self = shared_from_this()](beast::error_code e, std::size_t) { self->on_chunk(e); });
    return;
  }
}

void ServerConnection::on_chunk(beast::error_code ec) {
  const bool last = writer_ == Writer::writing_last;
  writer_ = Writer::idle;
  if (ec) {
    state_->log->debug("{} SSE write failed: {}", label_, ec.message());
    return close();
  }
  if (last) return finish_stream();
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
  pushes_->close(false);
  writer_ = Writer::idle;
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
  if (head_pending()) {
    if (now < head_deadline_) return arm_stream_tick(head_deadline_);
    // No event within kHeadDelay: the head goes out alone, and keep-alives follow.
    writer_ = Writer::head_due;
    last_chunk_at_ = now;
    pump();
    if (phase_ != Phase::streaming) return;
    return arm_stream_tick(write_in_flight() ? std::min(chunk_deadline_, now + keepalive())
                                             : now + keepalive());
  }
  if (write_in_flight() && now >= chunk_deadline_) {
    state_->log->info(
        "{} a write made no progress for {} s; closing the connection", label_,
        std::chrono::duration_cast<std::chrono::seconds>(now - last_chunk_at_).count());
    return close();
  }
  last_chunk_at_ = std::max(last_chunk_at_, pushes_->lent_write_at());
  auto next = last_chunk_at_ + keepalive();
  if (!write_in_flight() && now >= next) {
    pushes_->add_if_idle(sse_keepalive());
    pump();
    next = now + keepalive();
  }
  if (write_in_flight()) next = std::min(next, chunk_deadline_);
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
  if (watch_ != Watch::off || phase_ == Phase::closed) return;
  if (phase_ != Phase::lingering && buffer_.size() >= kPipelineLimit) return;
  watch_ = Watch::on;
  stream_.async_read_some(
      buffer_.prepare(4096),
      [self = shared_from_this()](beast::error_code ec, std::size_t n) { self->on_watch(ec, n); });
}

void ServerConnection::on_watch(beast::error_code ec, std::size_t n) {
  const bool read_next = watch_ == Watch::on_then_read;
  watch_ = Watch::off;
  buffer_.commit(n);
  if (phase_ == Phase::closed) return;
  if (phase_ == Phase::lingering) {
    buffer_.consume(buffer_.size());
    if (ec) return close();
    return start_watch();
  }
  if (read_next) {
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
  if (pushes_) pushes_->close(release_buffers);
}

void ServerConnection::linger_close() {
  if (phase_ == Phase::closed || phase_ == Phase::lingering) return;
  phase_ = Phase::lingering;
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

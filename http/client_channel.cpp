#include "http/client_channel.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/status.hpp>
#include <openssl/ssl.h>

#include "bridge/modern/protocol.hpp"
#include "common/log.hpp"
#include "common/metrics.hpp"
#include "http/client_connection.hpp"
#include "http/client_request.hpp"
#include "http/client_sse_parser.hpp"

namespace mcpmqtt::http {
namespace net = boost::asio;
namespace beast_http = boost::beast::http;
using bridge::CloseReason;
using jsonrpc::Id;
using jsonrpc::Message;
using Clock = std::chrono::steady_clock;

namespace {

// What is kept of an HTTP error body: enough for an excerpt.
constexpr std::size_t kErrorBodyLimit = 4096;

// Messages that do not wait behind requests: answers to the server's requests, and the
// notifications that concern requests already sent.
bool is_urgent(const Message& m) {
  return m.is_response() || (m.is_notification() && (m.method() == "notifications/cancelled" ||
                                                     m.method() == "notifications/progress"));
}

// params.requestId of notifications/cancelled.
std::optional<Id> cancelled_request(const Message& m) {
  const rapidjson::Value* params = m.params();
  if (!params || !params->IsObject()) return std::nullopt;
  const auto it = params->FindMember("requestId");
  if (it == params->MemberEnd()) return std::nullopt;
  if (it->value.IsString()) {
    return Id::string(std::string(it->value.GetString(), it->value.GetStringLength()));
  }
  if (it->value.IsInt64()) return Id::integer(it->value.GetInt64());
  return std::nullopt;
}

// A message of protocol revision 2026-07-28 (its params._meta holds the protocol version claim,
// basic/versioning): sent without the session, with the standard headers of its own. The text is
// searched first, so a 2025 message is never parsed here.
bool is_modern(const Message& m) {
  return m.text().find(modern::key::protocol_version) != std::string_view::npos &&
         modern::claims_modern(m);
}

bool blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// tls_verify: false is worth one warning per upstream URL, not one per session.
void warn_tls_verify_off_once(const std::shared_ptr<spdlog::logger>& log, const UpstreamSpec& s) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!warned.insert(s.url.display()).second) return;
  }
  log->warn(
      "[upstream {}] TLS verification is off for {} (tls_verify: false): its certificate and "
      "host name are not checked; anyone on the path can read and change the traffic",
      s.name, s.url.display());
}

// The TLS client context for a spec. Contexts are shared between sessions with the same trust
// settings (loading the system's CA store for every session would cost more than the session's
// handshake); a context is built once and only read afterwards, which OpenSSL allows from any
// thread.
std::shared_ptr<net::ssl::context> tls_context(const UpstreamSpec& spec, std::string& error) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, bool>, std::weak_ptr<net::ssl::context>> cache;
  const auto key = std::make_pair(spec.tls_verify ? spec.ca_file : std::string(), spec.tls_verify);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto shared = cache[key].lock()) return shared;
  auto ctx = std::make_shared<net::ssl::context>(net::ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  boost::system::error_code ec;
  if (spec.tls_verify) {
    if (!spec.ca_file.empty()) {
      std::FILE* f = std::fopen(spec.ca_file.c_str(), "r");
      if (!f) {
        error = "cannot read the CA file \"" + spec.ca_file + "\": " + std::strerror(errno);
        return nullptr;
      }
      std::fclose(f);
      ctx->load_verify_file(spec.ca_file, ec);
      if (ec) {
        error = "cannot load the CA file \"" + spec.ca_file +
                "\": it holds no PEM certificate OpenSSL accepts";
        return nullptr;
      }
    } else {
      ctx->set_default_verify_paths(ec);
      if (ec) {
        error = "cannot load the system's CA certificates: " + ec.message();
        return nullptr;
      }
    }
  }
  for (auto it = cache.begin(); it != cache.end();) {
    it = it->second.expired() ? cache.erase(it) : std::next(it);
  }
  cache[key] = ctx;
  return ctx;
}

}  // namespace

Expected<UpstreamSpec, std::string> make_upstream_spec(const std::string& name,
                                                       const std::string& url_text,
                                                       const std::vector<Header>& headers,
                                                       bool tls_verify) {
  auto url = parse_url(url_text);
  if (!url) return unexpected("url: " + url.error());
  auto checked = check_extra_headers(headers);
  if (!checked) return unexpected("headers: " + checked.error());
  UpstreamSpec spec;
  spec.name = name;
  spec.url = std::move(url).value();
  spec.headers = headers;
  spec.tls_verify = tls_verify;
  return spec;
}

namespace {

class ClientChannelImpl final : public ClientChannel,
                                public std::enable_shared_from_this<ClientChannelImpl> {
 public:
  ClientChannelImpl(net::any_io_executor executor, UpstreamSpec spec);

  void start(Receiver receiver) override;
  void send(Message message) override;
  void close(const CloseReason& why) override;
  std::string describe() const override { return label_; }
  const std::string& session_id() const override { return session_id_; }
  const std::string& protocol_version() const override { return protocol_version_; }

 private:
  // One HTTP request and its response on one connection.
  struct Exchange {
    enum class Kind { post, listen, resume };
    enum class Slot { none, request, short_message };
    enum class Body { ignore, json, sse, error };

    Kind kind = Kind::post;
    std::optional<Message> message;  // what a post carries
    std::optional<Id> request_id;    // the request a post carries or a resume continues
    std::uint64_t request_seq = 0;
    std::string method;  // of that request, or of the posted message
    Slot slot = Slot::none;
    bool holds_barrier = false;
    bool carried_session = false;  // sent with Mcp-Session-Id
    ClientRequest request;
    std::shared_ptr<ClientConnection> conn;
    bool retried = false;
    bool modern = false;  // a 2026-07-28 message: no session, per-request headers, no resuming

    unsigned status = 0;
    std::string content_type;
    Body body = Body::ignore;
    std::string text;  // a JSON body, or the start of an error body
    std::size_t ignored_bytes = 0;
    std::optional<SseParser> sse;
    std::size_t delivered = 0;

    std::string resume_from;  // Last-Event-ID sent
    unsigned resume_attempts = 0;
    std::shared_ptr<net::steady_timer> delay;
    bool done = false;
  };
  using ExchangePtr = std::shared_ptr<Exchange>;

  struct OpenRequest {
    std::uint64_t seq = 0;
    std::string method;
  };

  RequestContext context() const {
    return RequestContext{&spec_.url, &spec_.headers, session_id_, protocol_version_};
  }
  std::string upstream() const { return "upstream " + spec_.url.display(); }
  std::string quoted_method(const ExchangePtr& ex) const { return "\"" + ex->method + "\""; }
  bool is_initialize(const ExchangePtr& ex) const {
    return ex->request_id && init_seq_ && *init_seq_ == ex->request_seq;
  }
  bool request_pending(const ExchangePtr& ex) const;

  void deliver(Message m);
  void pump();
  void start_post(Message m);
  void start_exchange(const ExchangePtr& ex);
  void do_connect(const ExchangePtr& ex);
  void do_write(const ExchangePtr& ex);
  void do_read_header(const ExchangePtr& ex);
  void do_read_body(const ExchangePtr& ex);
  void on_header(const ExchangePtr& ex);
  void on_body(const ExchangePtr& ex, std::string_view data, bool complete);
  void on_complete(const ExchangePtr& ex);
  void on_failure(const ExchangePtr& ex, const ClientConnection::Failure& f);
  bool retry_on_fresh_connection(const ExchangePtr& ex, const ClientConnection::Failure& f);
  void on_sse_data(const ExchangePtr& ex, std::string_view data);
  void on_event(const ExchangePtr& ex, const SseParser::Event& event);
  void on_upstream_message(const ExchangePtr& ex, Message m);
  void on_initialize_response(Message m);
  void on_http_error(const ExchangePtr& ex);
  bool deliver_error_body(const ExchangePtr& ex);
  void on_initialize_refused(Message m);
  void on_stream_end(const ExchangePtr& ex);
  void fail_request(const ExchangePtr& ex, int code, const std::string& message);
  void finish(ExchangePtr ex);  // by value: `ex` may be the set element it erases
  void release_barrier(const ExchangePtr& ex);
  void abandon_request(const Id& id, std::uint64_t seq);

  std::shared_ptr<ClientConnection> take_idle();
  void give_back(const std::shared_ptr<ClientConnection>& conn);

  void open_listen();
  void on_listen_end(const ExchangePtr& ex, bool failed);
  void session_expired();
  void fail_session(CloseReason::Kind kind, const std::string& detail, int code,
                    const std::string& message, bool send_delete);
  void teardown(bool send_delete);
  void do_delete();

  net::any_io_executor executor_;
  UpstreamSpec spec_;
  std::shared_ptr<spdlog::logger> log_;
  std::string label_;
  std::shared_ptr<net::ssl::context> tls_;
  std::string setup_error_;  // the spec cannot be used; every request fails with this
  bool setup_failure_posted_ = false;
  Receiver receiver_;
  bool started_ = false;
  bool closed_ = false;
  bool failing_ = false;
  std::optional<CloseReason> close_before_start_;

  std::string session_id_;
  std::string protocol_version_;
  std::optional<std::uint64_t> init_seq_;

  std::uint64_t next_seq_ = 1;
  std::unordered_map<Id, OpenRequest, jsonrpc::IdHash> pending_;
  std::deque<Message> ordered_;  // requests and notifications, sent in order
  std::deque<Message> urgent_;   // responses, cancellations, progress
  bool barrier_ = false;
  std::size_t requests_in_flight_ = 0;
  std::size_t short_in_flight_ = 0;
  std::unordered_set<ExchangePtr> exchanges_;
  std::vector<std::shared_ptr<ClientConnection>> idle_;

  ExchangePtr listen_;
  bool listen_unsupported_ = false;
  std::string listen_last_id_;
  std::optional<std::chrono::milliseconds> listen_retry_;
  unsigned listen_failures_ = 0;
  unsigned listen_connect_failures_ = 0;
  std::shared_ptr<net::steady_timer> listen_timer_;
};

ClientChannelImpl::ClientChannelImpl(net::any_io_executor executor, UpstreamSpec spec)
    : executor_(std::move(executor)), spec_(std::move(spec)), log_(log::get("http")) {
  label_ = "[upstream " + spec_.name + " " + spec_.url.display() + "]";
  auto headers = check_extra_headers(spec_.headers);
  if (!headers) setup_error_ = headers.error();
  if (spec_.url.tls && setup_error_.empty()) {
    tls_ = tls_context(spec_, setup_error_);
    if (!spec_.tls_verify) warn_tls_verify_off_once(log_, spec_);
  }
}

void ClientChannelImpl::start(Receiver receiver) {
  if (started_) return;
  started_ = true;
  receiver_ = std::move(receiver);
  if (!spec_.headers.empty()) {
    log_->debug("{} extra headers: {}", label_, header_names(spec_.headers));
  }
  if (close_before_start_) {
    net::post(executor_, [self = shared_from_this()] {
      auto why = *self->close_before_start_;
      self->closed_ = false;
      self->failing_ = false;
      self->fail_session(why.kind, why.detail, jsonrpc::code::connection_closed,
                         self->upstream() + ": " + why.detail, false);
    });
    return;
  }
  if (!setup_error_.empty()) log_->error("{} cannot be used: {}", label_, setup_error_);
  pump();
}

void ClientChannelImpl::send(Message m) {
  if (closed_ || failing_) return;
  if (m.is_request()) {
    const Id id = m.id();
    if (pending_.count(id)) {
      // Ids are the client's; a second request with the same id cannot be told apart upstream.
      net::post(executor_, [self = shared_from_this(), id] {
        self->deliver(Message::error(
            id, jsonrpc::code::invalid_request,
            "request id " + id.to_string() + " is already in flight on this session"));
      });
      return;
    }
    const std::uint64_t seq = next_seq_++;
    pending_.emplace(id, OpenRequest{seq, m.method()});
    if (m.method() == "initialize" && !init_seq_) init_seq_ = seq;
  } else if (m.is_notification() && m.method() == "notifications/cancelled") {
    // streamable-http §Cancellation (2026-07-28): closing the request's stream is the
    // cancellation; nothing is posted.
    const bool modern_cancel = is_modern(m);
    if (auto target = cancelled_request(m)) {
      // A request still waiting for a connection is simply not sent.
      const auto queued = std::find_if(ordered_.begin(), ordered_.end(), [&](const Message& q) {
        return q.is_request() && q.id() == *target;
      });
      if (queued != ordered_.end()) {
        ordered_.erase(queued);
        pending_.erase(*target);
        log_->debug("{} request {} cancelled before it was sent", label_, target->to_string());
        return;
      }
      const auto it = pending_.find(*target);
      if (it != pending_.end() && !(init_seq_ && it->second.seq == *init_seq_)) {
        // MCP cancellation: no response is expected any more; its stream is not needed.
        const std::uint64_t seq = it->second.seq;
        pending_.erase(it);
        abandon_request(*target, seq);
      }
    }
    if (modern_cancel) return;
  }
  if (ordered_.size() + urgent_.size() >= spec_.max_queued_messages) {
    log_->warn("{} {} messages wait for a connection; closing", label_,
               ordered_.size() + urgent_.size());
    const std::string detail = "upstream request queue full (" +
                               std::to_string(spec_.max_queued_messages) + " messages waiting)";
    net::post(executor_, [self = shared_from_this(), detail] {
      self->fail_session(CloseReason::Kind::error, detail, jsonrpc::code::internal_error,
                         self->upstream() + ": " + detail, true);
    });
    failing_ = true;  // nothing more is taken; the posted call answers what is pending
    return;
  }
  (is_urgent(m) ? urgent_ : ordered_).push_back(std::move(m));
  pump();
}

void ClientChannelImpl::close(const CloseReason& why) {
  if (closed_) return;
  log_->info("{} closing ({}{}{})", label_, bridge::to_string(why.kind),
             why.detail.empty() ? "" : ": ", why.detail);
  closed_ = true;
  teardown(true);
}

void ClientChannelImpl::deliver(Message m) {
  if (closed_ || !receiver_.on_message) return;
  receiver_.on_message(std::move(m));
}

bool ClientChannelImpl::request_pending(const ExchangePtr& ex) const {
  if (!ex->request_id) return false;
  const auto it = pending_.find(*ex->request_id);
  return it != pending_.end() && it->second.seq == ex->request_seq;
}

void ClientChannelImpl::pump() {
  if (!started_ || closed_ || failing_) return;
  if (!setup_error_.empty()) {
    // The first request is answered with the reason, then the channel closes; posted, so that
    // send() never calls back into its caller.
    if (pending_.empty() || setup_failure_posted_) return;
    setup_failure_posted_ = true;
    net::post(executor_, [self = shared_from_this()] {
      self->fail_session(CloseReason::Kind::error, self->upstream() + ": " + self->setup_error_,
                         jsonrpc::code::internal_error,
                         self->upstream() + " cannot be used: " + self->setup_error_, false);
    });
    return;
  }
  while (!urgent_.empty() && short_in_flight_ < spec_.max_concurrent_short) {
    Message m = std::move(urgent_.front());
    urgent_.pop_front();
    start_post(std::move(m));
  }
  // Requests and other notifications keep their order: a notification (such as
  // notifications/initialized) is accepted before anything after it is sent, and nothing follows
  // initialize before its result gives the session id.
  while (!ordered_.empty() && !barrier_) {
    const Message& next = ordered_.front();
    if (next.is_request() ? requests_in_flight_ >= spec_.max_concurrent_requests
                          : short_in_flight_ >= spec_.max_concurrent_short) {
      break;
    }
    Message m = std::move(ordered_.front());
    ordered_.pop_front();
    start_post(std::move(m));
  }
}

void ClientChannelImpl::start_post(Message m) {
  auto ex = std::make_shared<Exchange>();
  ex->kind = Exchange::Kind::post;
  ex->method = m.method();
  if (m.is_request()) {
    const auto pending = pending_.find(m.id());
    if (pending == pending_.end()) {
      log_->debug("{} request {} was answered before it was sent; not sending it", label_,
                  m.id().to_string());
      return;
    }
    ex->request_id = m.id();
    ex->request_seq = pending->second.seq;
    ex->slot = Exchange::Slot::request;
    ++requests_in_flight_;
    if (is_initialize(ex)) {
      ex->holds_barrier = true;
      barrier_ = true;
    }
  } else {
    ex->slot = Exchange::Slot::short_message;
    ++short_in_flight_;
    if (m.is_notification() && !is_urgent(m)) {
      ex->holds_barrier = true;
      barrier_ = true;
    }
  }
  ex->modern = is_modern(m);
  if (ex->modern) {
    // streamable-http §Standard Request Headers: what the body says, repeated for routing.
    ModernHeaders h;
    if (auto envelope = modern::read_envelope(m)) h.protocol_version = envelope->protocol_version;
    if (m.is_request()) {
      h.method = modern::encode_header_value(m.method());
      if (auto name = modern::name_of(m)) {
        h.name = modern::encode_header_value(*name);
        if (spec_.tool_headers && m.method() == "tools/call")
          h.params = modern::param_header_values(m, spec_.tool_headers->of(*name));
      }
    }
    ex->request = build_modern_post(context(), std::string(m.text()), h);
  } else {
    ex->carried_session = !session_id_.empty();
    ex->request = build_post(context(), std::string(m.text()));
  }
  ex->message = std::move(m);
  exchanges_.insert(ex);
  start_exchange(ex);
}

void ClientChannelImpl::start_exchange(const ExchangePtr& ex) {
  if (auto conn = take_idle()) {
    ex->conn = std::move(conn);
    do_write(ex);
    return;
  }
  ex->conn = std::make_shared<ClientConnection>(executor_, spec_.url, tls_, spec_.tls_verify);
  do_connect(ex);
}

void ClientChannelImpl::do_connect(const ExchangePtr& ex) {
  ex->conn->async_connect(spec_.connect_timeout, [self = shared_from_this(), ex](const auto& f) {
    if (ex->done) return;
    if (f) return self->on_failure(ex, *f);
    self->do_write(ex);
  });
}

void ClientChannelImpl::do_write(const ExchangePtr& ex) {
  static auto& bytes_out = metrics::bytes_counter("http", "out");
  bytes_out.inc(ex->request.body().size());
  // The request is copied: it is sent again if a kept-alive connection turns out stale.
  ex->conn->async_write(ex->request, spec_.response_timeout,
                        [self = shared_from_this(), ex](const auto& f) {
                          if (ex->done) return;
                          if (f) {
                            if (self->retry_on_fresh_connection(ex, *f)) return;
                            return self->on_failure(ex, *f);
                          }
                          self->do_read_header(ex);
                        });
}

void ClientChannelImpl::do_read_header(const ExchangePtr& ex) {
  ex->conn->async_read_header(spec_.response_timeout,
                              [self = shared_from_this(), ex](const auto& f) {
                                if (ex->done) return;
                                if (f) {
                                  if (self->retry_on_fresh_connection(ex, *f)) return;
                                  return self->on_failure(ex, *f);
                                }
                                self->on_header(ex);
                              });
}

void ClientChannelImpl::do_read_body(const ExchangePtr& ex) {
  const auto timeout =
      ex->body == Exchange::Body::sse ? spec_.stream_idle_timeout : spec_.response_timeout;
  ex->conn->async_read_body(timeout, [self = shared_from_this(), ex](
                                         const auto& f, std::string_view data, bool complete) {
    if (ex->done) return;
    if (f) return self->on_failure(ex, *f);
    self->on_body(ex, data, complete);
  });
}

bool ClientChannelImpl::retry_on_fresh_connection(const ExchangePtr& ex,
                                                  const ClientConnection::Failure& f) {
  // A kept-alive connection the server closed while it was idle fails before any byte of a
  // response; the request never reached the server, so it is sent again, once.
  if (ex->retried || f.timed_out || ex->conn->exchanges() < 2 || ex->conn->got_response_bytes()) {
    return false;
  }
  log_->debug("{} kept-alive connection was closed by the server ({}); retrying", label_, f.cause);
  ex->retried = true;
  ex->conn->close();
  ex->conn = std::make_shared<ClientConnection>(executor_, spec_.url, tls_, spec_.tls_verify);
  do_connect(ex);
  return true;
}

void ClientChannelImpl::on_failure(const ExchangePtr& ex, const ClientConnection::Failure& f) {
  using Stage = ClientConnection::Stage;
  ex->conn->close();
  const bool connecting =
      f.stage == Stage::resolve || f.stage == Stage::connect || f.stage == Stage::tls;
  if (connecting) {
    std::string message;
    auto kind = CloseReason::Kind::peer_gone;
    if (f.tls_verify) {
      message = upstream() + " TLS certificate verification failed: " + f.cause;
      kind = CloseReason::Kind::error;
    } else if (f.stage == Stage::tls) {
      message = upstream() + " " + f.cause;
      kind = CloseReason::Kind::error;
    } else {
      message = upstream() + " unreachable: " + f.cause;
    }
    if (ex->kind == Exchange::Kind::listen &&
        ++listen_connect_failures_ < spec_.max_connect_failures) {
      log_->warn("{} GET stream: {}", label_, message);
      return on_listen_end(ex, true);
    }
    // The server cannot be reached (or trusted): nothing else of this session can work either.
    return fail_session(kind, message, jsonrpc::code::connection_closed, message, false);
  }

  if (ex->kind == Exchange::Kind::listen) {
    // An idle GET stream is reopened; a silent server is probed that way.
    if (f.timed_out) {
      log_->debug("{} GET stream silent for {}; reopening", label_,
                  log::duration_text(spec_.stream_idle_timeout));
    } else {
      log_->debug("{} GET stream ended: {}", label_, f.cause);
    }
    return on_listen_end(ex, f.stage != Stage::read_body);
  }
  if (f.stage == Stage::read_body && ex->body == Exchange::Body::sse) {
    if (f.timed_out) {
      log_->warn("{} event stream for {} silent for {}", label_, quoted_method(ex),
                 log::duration_text(spec_.stream_idle_timeout));
    }
    return on_stream_end(ex);
  }

  std::string message;
  auto kind = CloseReason::Kind::peer_gone;
  if (f.timed_out) {
    message = upstream() + " did not answer " + quoted_method(ex) + " within " +
              log::duration_text(spec_.response_timeout);
    kind = CloseReason::Kind::timeout;
  } else {
    message = upstream() + " connection lost before the response to " + quoted_method(ex) + ": " +
              f.cause;
  }
  if (is_initialize(ex)) {
    return fail_session(kind, message, jsonrpc::code::connection_closed, message, false);
  }
  if (ex->request_id) {
    fail_request(ex, jsonrpc::code::connection_closed, message);
  } else if (ex->kind == Exchange::Kind::post) {
    log_->warn("{} could not deliver {}: {}", label_,
               ex->method.empty() ? std::string("a response") : quoted_method(ex), message);
  }
  finish(ex);
}

void ClientChannelImpl::on_header(const ExchangePtr& ex) {
  const auto& h = ex->conn->header();
  ex->status = h.result_int();
  ex->content_type = std::string(h[beast_http::field::content_type]);
  if (ex->kind == Exchange::Kind::post && !ex->request_id) release_barrier(ex);

  // 002 §Session Management: 404 to a request carrying the session id ends the session.
  if (ex->status == 404 && ex->carried_session) {
    ex->conn->close();
    return session_expired();
  }
  const bool ok = ex->status >= 200 && ex->status < 300;
  const std::string type = media_type(ex->content_type);
  if (ok && is_initialize(ex)) {
    const auto sid_field = h["Mcp-Session-Id"];
    const std::string_view sid(sid_field.data(), sid_field.size());
    if (!sid.empty()) {
      if (!is_valid_session_id(sid)) {
        const std::string message =
            upstream() +
            " sent an invalid Mcp-Session-Id header (it must be 1 to 1024 visible "
            "ASCII characters)";
        ex->conn->close();
        return fail_session(CloseReason::Kind::error, message, jsonrpc::code::internal_error,
                            message, false);
      }
      session_id_ = std::string(sid);
      label_ = "[upstream " + spec_.name + " " + spec_.url.display() + " S " +
               session_id_.substr(0, 8) + "]";
    }
  }
  switch (ex->kind) {
    case Exchange::Kind::post:
      if (!ok) {
        ex->body = Exchange::Body::error;
      } else if (type == "text/event-stream") {
        ex->body = Exchange::Body::sse;
      } else if (type == "application/json") {
        ex->body = Exchange::Body::json;
      } else {
        ex->body = Exchange::Body::ignore;  // 202 Accepted; judged when the body ends
      }
      break;
    case Exchange::Kind::listen:
      if (ex->status == 405) {
        // 002 §Listening for Messages from the Server: 405 means no GET stream is offered.
        log_->info(
            "{} the server offers no GET stream (HTTP 405); server-initiated messages "
            "arrive only on POST streams",
            label_);
        listen_unsupported_ = true;
        ex->conn->close();
        return finish(ex);
      }
      ex->body = ok && type == "text/event-stream" ? Exchange::Body::sse : Exchange::Body::error;
      if (ex->body == Exchange::Body::sse) {
        listen_connect_failures_ = 0;
        log_->debug(
            "{} GET stream open{}", label_,
            ex->resume_from.empty() ? "" : " (resumed after event " + ex->resume_from + ")");
      }
      break;
    case Exchange::Kind::resume:
      ex->body = ok && type == "text/event-stream" ? Exchange::Body::sse : Exchange::Body::error;
      break;
  }
  if (ex->body == Exchange::Body::sse) ex->sse.emplace(spec_.max_event_bytes);
  do_read_body(ex);
  pump();
}

void ClientChannelImpl::on_body(const ExchangePtr& ex, std::string_view data, bool complete) {
  static auto& bytes_in = metrics::bytes_counter("http", "in");
  bytes_in.inc(data.size());
  switch (ex->body) {
    case Exchange::Body::json:
      if (ex->text.size() + data.size() > spec_.max_body_bytes) {
        const std::string message = upstream() + " sent a response to " + quoted_method(ex) +
                                    " larger than the limit of " +
                                    std::to_string(spec_.max_body_bytes) + " bytes";
        ex->conn->close();
        if (is_initialize(ex)) {
          return fail_session(CloseReason::Kind::error, message, jsonrpc::code::internal_error,
                              message, true);
        }
        fail_request(ex, jsonrpc::code::internal_error, message);
        return finish(ex);
      }
      ex->text.append(data);
      break;
    case Exchange::Body::error:
      ex->text.append(data.substr(0, kErrorBodyLimit - std::min(kErrorBodyLimit, ex->text.size())));
      if (ex->text.size() >= kErrorBodyLimit && !complete) {
        ex->conn->close();  // the rest is not needed; the connection cannot be reused
        return on_complete(ex);
      }
      break;
    case Exchange::Body::ignore:
      ex->ignored_bytes += data.size();
      if (ex->ignored_bytes > spec_.max_body_bytes && !complete) {
        ex->conn->close();
        return on_complete(ex);
      }
      break;
    case Exchange::Body::sse:
      on_sse_data(ex, data);
      if (closed_ || failing_ || ex->done) return;
      break;
  }
  if (complete) return on_complete(ex);
  do_read_body(ex);
}

void ClientChannelImpl::on_sse_data(const ExchangePtr& ex, std::string_view data) {
  std::vector<SseParser::Event> events;
  const bool ok = ex->sse->feed(data, events);
  for (const auto& e : events) {
    on_event(ex, e);
    if (closed_ || failing_ || ex->done) return;
  }
  if (ex->kind == Exchange::Kind::listen) {
    if (!ex->sse->last_event_id().empty()) listen_last_id_ = ex->sse->last_event_id();
    if (ex->sse->retry()) listen_retry_ = ex->sse->retry();
  }
  if (ok) return;
  const std::string message = upstream() + " sent an event larger than the limit of " +
                              std::to_string(spec_.max_event_bytes) + " bytes";
  ex->conn->close();
  if (ex->kind == Exchange::Kind::listen) {
    log_->error("{} GET stream: {}; reopening it", label_, message);
    return on_listen_end(ex, true);
  }
  if (is_initialize(ex)) {
    return fail_session(CloseReason::Kind::error, message, jsonrpc::code::internal_error, message,
                        true);
  }
  // Resuming would replay the same event; the request cannot be answered.
  fail_request(ex, jsonrpc::code::internal_error, message + " in reply to " + quoted_method(ex));
  finish(ex);
}

void ClientChannelImpl::on_event(const ExchangePtr& ex, const SseParser::Event& event) {
  // Events without data (the priming event of 2025-06-18 streams) only carry an id or a retry.
  if (blank(event.data)) return;
  if (event.type != "message") {
    log_->debug("{} ignoring SSE event of type \"{}\"", label_, sanitize_excerpt(event.type, 64));
    return;
  }
  auto body = jsonrpc::parse_body(event.data, jsonrpc::Limits{spec_.max_event_bytes, 100});
  if (!body) {
    log_->warn("{} ignoring an SSE event that is not JSON-RPC: {}", label_,
               body.error().error.message);
    return;
  }
  for (auto& m : body->messages) {
    ++ex->delivered;
    on_upstream_message(ex, std::move(m));
    if (closed_ || failing_ || ex->done) return;
  }
}

void ClientChannelImpl::on_upstream_message(const ExchangePtr& ex, Message m) {
  if (!m.is_response()) return deliver(std::move(m));
  // A server that cannot read the request answers with a null id; on a stream that carries one
  // request, that answer is this request's.
  if (m.id().is_null() && ex && ex->request_id && request_pending(ex)) {
    m = m.with_id(*ex->request_id);
  }
  const auto it = pending_.find(m.id());
  if (it == pending_.end()) {
    log_->debug("{} dropping a response to {}, which is not pending (cancelled or replayed)",
                label_, m.id().to_string());
    return;
  }
  const bool init = init_seq_ && it->second.seq == *init_seq_;
  pending_.erase(it);
  if (init) return on_initialize_response(std::move(m));
  deliver(std::move(m));
}

void ClientChannelImpl::on_initialize_response(Message m) {
  if (m.kind() == jsonrpc::Kind::error && spec_.modern_fallback &&
      m.error().code == modern::code::unsupported_version) {
    return on_initialize_refused(std::move(m));
  }
  if (m.kind() != jsonrpc::Kind::result) {
    const std::string message =
        upstream() + " rejected initialize: " + sanitize_excerpt(m.error().message);
    deliver(std::move(m));
    return fail_session(CloseReason::Kind::error, message, jsonrpc::code::connection_closed,
                        message, true);
  }
  const rapidjson::Value* result = m.result_value();
  if (result && result->IsObject()) {
    const auto v = result->FindMember("protocolVersion");
    if (v != result->MemberEnd() && v->value.IsString() &&
        is_valid_protocol_version({v->value.GetString(), v->value.GetStringLength()})) {
      protocol_version_.assign(v->value.GetString(), v->value.GetStringLength());
    }
  }
  if (protocol_version_.empty()) {
    log_->warn(
        "{} the initialize result has no valid protocolVersion; requests go without "
        "MCP-Protocol-Version",
        label_);
  }
  log_->info("{} session initialized{}{}", label_,
             session_id_.empty() ? " (the server keeps no session id)" : "",
             protocol_version_.empty() ? "" : ", protocol " + protocol_version_);
  for (const auto& ex : exchanges_) {
    if (ex->holds_barrier && is_initialize(ex)) {
      release_barrier(ex);
      break;
    }
  }
  deliver(std::move(m));
  if (closed_ || failing_) return;
  open_listen();
  pump();
}

void ClientChannelImpl::on_complete(const ExchangePtr& ex) {
  give_back(ex->conn);
  if (ex->kind == Exchange::Kind::listen) {
    if (ex->body == Exchange::Body::error) {
      // Retried with backoff; only the first refusal in a row is worth a warning.
      log_->log(listen_failures_ == 0 ? spdlog::level::warn : spdlog::level::debug,
                "{} GET stream refused with HTTP {}: {}; retrying", label_, ex->status,
                describe_error_body(ex->content_type, ex->text));
      return on_listen_end(ex, true);
    }
    return on_listen_end(ex, !ex->sse->got_bytes());
  }
  if (ex->body == Exchange::Body::error) return on_http_error(ex);
  if (ex->body == Exchange::Body::sse) return on_stream_end(ex);
  if (ex->body == Exchange::Body::json && !blank(ex->text)) {
    const jsonrpc::Limits limits{spec_.max_body_bytes, 100};
    // A text of one line is moved into the parser; one of several is kept for a second reading.
    const bool lines = ex->text.find('\n') != std::string::npos;
    auto body = lines ? jsonrpc::parse_body(ex->text, limits)
                      : jsonrpc::parse_body(std::move(ex->text), limits);
    if (!body && lines) {
      // Liberal where the spec's own test client is: several messages, one per line, under
      // application/json are read as those messages.
      if (auto several = jsonrpc::parse_lines(ex->text, limits)) body = std::move(several);
    }
    if (!body) {
      const std::string message = upstream() + " answered " + quoted_method(ex) +
                                  " with invalid JSON-RPC: " + body.error().error.message;
      if (is_initialize(ex)) {
        return fail_session(CloseReason::Kind::error, message, jsonrpc::code::internal_error,
                            message, true);
      }
      if (ex->request_id) {
        fail_request(ex, jsonrpc::code::internal_error, message);
      } else {
        log_->warn("{} {}", label_, message);
      }
      return finish(ex);
    }
    for (auto& m : body->messages) {
      on_upstream_message(ex, std::move(m));
      if (closed_ || failing_ || ex->done) return;
    }
  }
  if (request_pending(ex)) {
    const std::string message = upstream() + " answered HTTP " + std::to_string(ex->status) +
                                " without a response to " + quoted_method(ex);
    if (is_initialize(ex)) {
      return fail_session(CloseReason::Kind::error, message, jsonrpc::code::internal_error, message,
                          true);
    }
    fail_request(ex, jsonrpc::code::internal_error, message);
  }
  finish(ex);
}

bool ClientChannelImpl::deliver_error_body(const ExchangePtr& ex) {
  if (!request_pending(ex) || media_type(ex->content_type) != "application/json") return false;
  auto body = jsonrpc::parse_body(ex->text, jsonrpc::Limits{kErrorBodyLimit, 100});
  if (!body || body->batch || body->messages.size() != 1 ||
      body->messages[0].kind() != jsonrpc::Kind::error) {
    return false;
  }
  Message m = std::move(body->messages[0]);
  if (m.id() != *ex->request_id) m = m.with_id(*ex->request_id);
  if (is_initialize(ex)) {
    if (!spec_.modern_fallback || m.error().code != modern::code::unsupported_version) return false;
    pending_.erase(*ex->request_id);
    on_initialize_refused(std::move(m));
    return true;
  }
  // A 2026-07-28 server answers its checks (-32020, -32021, -32022, -32602 of the envelope) and
  // unknown methods (-32601) with a 4xx whose body is the JSON-RPC error of the request: that
  // error is the answer (the v2 SDK client delivers it the same way).
  pending_.erase(*ex->request_id);
  deliver(std::move(m));
  return true;
}

void ClientChannelImpl::on_initialize_refused(Message m) {
  // A 2026-only server refuses a 2025 initialize with -32022 naming its versions (basic/versioning
  // §Backward Compatibility). The owner may go on in 2026-07-28 on this channel: no session was
  // made, so nothing is closed; the refusal is the answer.
  log_->info(
      "{} the server refused initialize with -32022 (unsupported protocol version); no session "
      "was made",
      label_);
  init_seq_.reset();
  for (const auto& ex : exchanges_) {
    if (ex->holds_barrier && ex->request_id && *ex->request_id == m.id()) {
      release_barrier(ex);
      break;
    }
  }
  deliver(std::move(m));
  pump();
}

void ClientChannelImpl::on_http_error(const ExchangePtr& ex) {
  if (ex->kind == Exchange::Kind::post && (ex->modern || is_initialize(ex)) &&
      deliver_error_body(ex)) {
    return finish(ex);
  }
  std::string status = "HTTP " + std::to_string(ex->status);
  const auto reason = beast_http::obsolete_reason(beast_http::int_to_status(ex->status));
  if (beast_http::int_to_status(ex->status) != beast_http::status::unknown) {
    status += " " + std::string(reason.data(), reason.size());
  }
  std::string excerpt = describe_error_body(ex->content_type, ex->text);
  if (ex->status == 401 || ex->status == 403) {
    excerpt += std::string(excerpt.empty() ? "" : " ") +
               "(check the credentials in the headers configured for this server)";
  }
  if (ex->kind == Exchange::Kind::resume) {
    fail_request(ex, jsonrpc::code::connection_closed,
                 upstream() + " closed the event stream before answering " + quoted_method(ex) +
                     "; resuming it was refused with " + status);
    return finish(ex);
  }
  const std::string message =
      upstream() + " answered " + status + (excerpt.empty() ? "" : ": " + excerpt);
  if (is_initialize(ex)) {
    return fail_session(CloseReason::Kind::error, message, jsonrpc::code::internal_error, message,
                        false);
  }
  if (ex->request_id) {
    fail_request(ex, jsonrpc::code::internal_error, message);
  } else {
    log_->warn("{} could not deliver {}: {}", label_,
               ex->method.empty() ? std::string("a response") : quoted_method(ex), message);
  }
  finish(ex);
}

void ClientChannelImpl::on_stream_end(const ExchangePtr& ex) {
  if (!request_pending(ex)) return finish(ex);
  // 002 §Resumability and Redelivery: a stream cut before its response is resumed with GET and
  // Last-Event-ID when the server numbered its events.
  const std::string last =
      ex->sse && !ex->sse->last_event_id().empty() ? ex->sse->last_event_id() : ex->resume_from;
  const bool progressed = ex->delivered > 0 || last != ex->resume_from;
  const unsigned attempts = progressed ? 1 : ex->resume_attempts + 1;
  std::string why;
  if (ex->modern) {
    // 2026-07-28 removed resumability: a broken stream loses the request (changelog Major §9).
    why = "2026-07-28 streams cannot be resumed";
  } else if (last.empty()) {
    why = "it gave no event id to resume it";
  } else if (attempts > spec_.max_resume_attempts) {
    why = "resuming it brought nothing " + std::to_string(spec_.max_resume_attempts) + " times";
  }
  if (!why.empty()) {
    const std::string message =
        upstream() + " closed the event stream before answering " + quoted_method(ex) + "; " + why;
    if (is_initialize(ex)) {
      return fail_session(CloseReason::Kind::error, message, jsonrpc::code::connection_closed,
                          message, true);
    }
    fail_request(ex, jsonrpc::code::connection_closed, message);
    return finish(ex);
  }

  auto r = std::make_shared<Exchange>();
  r->kind = Exchange::Kind::resume;
  r->request_id = ex->request_id;
  r->request_seq = ex->request_seq;
  r->method = ex->method;
  r->slot = ex->slot;  // the request keeps its place among those in flight
  ex->slot = Exchange::Slot::none;
  r->holds_barrier = ex->holds_barrier;
  ex->holds_barrier = false;
  r->resume_from = last;
  r->resume_attempts = attempts;
  const auto delay = ex->sse && ex->sse->retry() ? *ex->sse->retry() : spec_.reconnect_min;
  finish(ex);
  log_->debug("{} event stream of {} cut; resuming after event {} in {}", label_, quoted_method(r),
              last, log::duration_text(delay));
  exchanges_.insert(r);
  r->delay = std::make_shared<net::steady_timer>(executor_, delay);
  r->delay->async_wait([self = shared_from_this(), r](const boost::system::error_code& ec) {
    if (ec || r->done || self->closed_ || self->failing_) return;
    r->carried_session = !self->session_id_.empty();
    r->request = build_get(self->context(), r->resume_from);
    self->start_exchange(r);
  });
}

void ClientChannelImpl::fail_request(const ExchangePtr& ex, int code, const std::string& message) {
  if (!request_pending(ex)) return;
  pending_.erase(*ex->request_id);
  log_->warn("{} request {} {} failed: {}", label_, ex->request_id->to_string(), quoted_method(ex),
             message);
  deliver(Message::error(*ex->request_id, code, message));
}

void ClientChannelImpl::release_barrier(const ExchangePtr& ex) {
  if (!ex->holds_barrier) return;
  ex->holds_barrier = false;
  barrier_ = false;
}

void ClientChannelImpl::finish(ExchangePtr ex) {
  if (ex->done) return;
  ex->done = true;
  if (ex->delay) ex->delay->cancel();
  if (ex->slot == Exchange::Slot::request) --requests_in_flight_;
  if (ex->slot == Exchange::Slot::short_message) --short_in_flight_;
  ex->slot = Exchange::Slot::none;
  release_barrier(ex);
  exchanges_.erase(ex);
  if (listen_ == ex) listen_.reset();
  pump();
}

void ClientChannelImpl::abandon_request(const Id& id, std::uint64_t seq) {
  for (const auto& ex : exchanges_) {
    if (ex->request_id && *ex->request_id == id && ex->request_seq == seq) {
      if (ex->conn) ex->conn->close();
      finish(ex);  // erases from exchanges_: stop iterating
      return;
    }
  }
}

std::shared_ptr<ClientConnection> ClientChannelImpl::take_idle() {
  const auto now = Clock::now();
  while (!idle_.empty()) {
    auto conn = std::move(idle_.back());
    idle_.pop_back();
    if (conn->is_open() && now - conn->idle_since < spec_.idle_keepalive) return conn;
    conn->close();
  }
  return nullptr;
}

void ClientChannelImpl::give_back(const std::shared_ptr<ClientConnection>& conn) {
  if (closed_ || failing_ || !conn->reusable() || idle_.size() >= spec_.max_idle_connections) {
    conn->close();
    return;
  }
  conn->idle_since = Clock::now();
  idle_.push_back(conn);
}

void ClientChannelImpl::open_listen() {
  if (closed_ || failing_ || listen_unsupported_ || listen_) return;
  auto ex = std::make_shared<Exchange>();
  ex->kind = Exchange::Kind::listen;
  ex->method = "GET stream";
  ex->resume_from = listen_last_id_;
  ex->carried_session = !session_id_.empty();
  ex->request = build_get(context(), listen_last_id_);
  listen_ = ex;
  exchanges_.insert(ex);
  start_exchange(ex);
}

void ClientChannelImpl::on_listen_end(const ExchangePtr& ex, bool failed) {
  finish(ex);
  if (closed_ || failing_ || listen_unsupported_) return;
  // The server's retry sets the pace; failures back off from there, doubling.
  listen_failures_ = failed ? listen_failures_ + 1 : 0;
  const std::chrono::milliseconds base = listen_retry_.value_or(spec_.reconnect_min);
  std::chrono::milliseconds delay = base;
  for (unsigned i = 1; i < listen_failures_; ++i)
    delay = std::min(delay * 2, std::max(spec_.reconnect_max, base));
  log_->debug("{} reopening the GET stream in {}{}", label_, log::duration_text(delay),
              listen_last_id_.empty() ? "" : " after event " + listen_last_id_);
  listen_timer_ = std::make_shared<net::steady_timer>(executor_, delay);
  listen_timer_->async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->closed_ || self->failing_) return;
    self->open_listen();
  });
}

void ClientChannelImpl::session_expired() {
  log_->warn("{} the server ended the session (HTTP 404 to a request with its session id)", label_);
  fail_session(CloseReason::Kind::peer_gone, "upstream session expired (HTTP 404)",
               jsonrpc::code::connection_closed,
               upstream() + " session expired (HTTP 404); initialize a new session", false);
}

void ClientChannelImpl::fail_session(CloseReason::Kind kind, const std::string& detail, int code,
                                     const std::string& message, bool send_delete) {
  if (closed_) return;
  if (!started_) {
    // Nobody to tell yet: start() reports it.
    if (!close_before_start_) close_before_start_ = CloseReason{kind, detail};
    failing_ = true;
    return;
  }
  failing_ = true;
  log_->warn("{} closing: {}", label_, detail);
  // Every request still waiting gets its one response, in the order they were sent.
  std::vector<std::pair<std::uint64_t, Id>> waiting;
  waiting.reserve(pending_.size());
  for (const auto& [id, p] : pending_)
    waiting.emplace_back(p.seq, id);
  std::sort(waiting.begin(), waiting.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [seq, id] : waiting) {
    if (!pending_.erase(id)) continue;
    deliver(Message::error(id, code, message));
    if (closed_) return;  // the owner closed the channel meanwhile
  }
  closed_ = true;
  teardown(send_delete);
  auto on_close = receiver_.on_close;
  if (on_close) on_close(CloseReason{kind, detail});
}

void ClientChannelImpl::teardown(bool send_delete) {
  std::vector<ExchangePtr> all(exchanges_.begin(), exchanges_.end());
  exchanges_.clear();
  for (const auto& ex : all) {
    ex->done = true;
    if (ex->delay) ex->delay->cancel();
    if (ex->conn) ex->conn->close();
  }
  listen_.reset();
  if (listen_timer_) listen_timer_->cancel();
  for (const auto& conn : idle_)
    conn->close();
  idle_.clear();
  ordered_.clear();
  urgent_.clear();
  pending_.clear();
  // 002 §Session Management: a client that no longer needs the session SHOULD DELETE it.
  if (send_delete && !session_id_.empty()) do_delete();
  // The receiver may hold its owner; let it go once the current callback has returned.
  net::post(executor_, [self = shared_from_this()] { self->receiver_ = {}; });
}

void ClientChannelImpl::do_delete() {
  auto conn = std::make_shared<ClientConnection>(executor_, spec_.url, tls_, spec_.tls_verify);
  // The connection keeps each completion until it runs, and its pending operations keep it:
  // the completions hold it weakly, or one still waiting when the event loop stops (the daemon
  // exiting) would hold the connection that holds it, and neither would ever be freed.
  std::weak_ptr<ClientConnection> weak = conn;
  auto timer = std::make_shared<net::steady_timer>(executor_, spec_.delete_timeout);
  timer->async_wait([weak](const boost::system::error_code& ec) {
    if (auto c = weak.lock(); c && !ec) c->close();  // best effort, bounded
  });
  auto request = build_delete(context());
  const auto timeout = spec_.delete_timeout;
  auto self = shared_from_this();
  auto report = [self, weak, timer](const std::string& what) {
    timer->cancel();
    if (auto c = weak.lock()) c->close();
    self->log_->debug("{} DELETE: {}", self->label_, what);
  };
  conn->async_connect(timeout, [weak, request, timeout, report](const auto& f) mutable {
    auto c1 = weak.lock();
    if (!c1) return;
    if (f) return report(f->cause);
    c1->async_write(std::move(request), timeout, [weak, timeout, report](const auto& fw) {
      auto c2 = weak.lock();
      if (!c2) return;
      if (fw) return report(fw->cause);
      c2->async_read_header(timeout, [weak, report](const auto& fr) {
        auto c3 = weak.lock();
        if (!c3) return;
        if (fr) return report(fr->cause);
        // 405: the server does not let clients end sessions; that is allowed.
        report("HTTP " + std::to_string(c3->header().result_int()));
      });
    });
  });
}

}  // namespace

std::shared_ptr<ClientChannel> ClientChannel::create(net::any_io_executor executor,
                                                     UpstreamSpec spec) {
  return std::make_shared<ClientChannelImpl>(std::move(executor), std::move(spec));
}

}  // namespace mcpmqtt::http

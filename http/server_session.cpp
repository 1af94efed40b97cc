#include "http/server_session.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/http/field.hpp>

#include "bridge/jsonrpc/raw_json.hpp"
#include "common/time_grid.hpp"
#include "http/server_sse.hpp"

namespace mcpmqtt::http {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using bridge::CloseReason;
using bridge::StreamRouter;
using jsonrpc::Message;

namespace {

// Finished POST streams a session keeps for Last-Event-ID (each holds at most
// replay_buffer_events events).
constexpr std::size_t kRetainedStreams = 8;
// Client messages held before the backend calls start(): only the initialize request can
// arrive then, since no other request can name a session that is not yet established.
constexpr std::size_t kInboxLimit = 16;

std::optional<jsonrpc::Id> id_from_json(const rapidjson::Value& v) {
  if (v.IsInt64()) return jsonrpc::Id::integer(v.GetInt64());
  if (v.IsString()) return jsonrpc::Id::string(std::string(v.GetString(), v.GetStringLength()));
  return std::nullopt;
}

std::string describe_message(const Message& m) {
  if (m.is_response()) return "response " + m.id().to_string();
  if (m.is_request()) return "request " + m.id().to_string() + " (" + m.method() + ")";
  return "notification " + m.method();
}

// The string at `path` in a message's text.
std::optional<std::string> string_at(std::string_view text,
                                     std::initializer_list<std::string_view> path) {
  const auto v = raw_json::member(text, path);
  return v ? raw_json::string_value(*v) : std::nullopt;
}

bool upstream_unavailable(CloseReason::Kind k) {
  using K = CloseReason::Kind;
  return k == K::peer_gone || k == K::timeout || k == K::exited || k == K::shutdown;
}

}  // namespace

ServerSession::ServerSession(std::shared_ptr<ServerState> state, std::string id,
                             std::string server_name)
    : state_(std::move(state)),
      strand_(net::make_strand(state_->ioc)),
      timers_(loop::TimerList::of(state_->ioc)),
      id_(std::move(id)),
      server_name_(std::move(server_name)),
      label_("[S " + short_id(id_) + "]"),
      router_(StreamRouter::Limits{
          state_->http.limits.session_backlog_messages, state_->http.limits.replay_buffer_events,
          kRetainedStreams, StreamRouter::Limits{}.retained_bytes,
          state_->http.limits.session_backlog_bytes, state_->http.limits.replay_buffer_bytes}),
      last_activity_(std::chrono::steady_clock::now()) {}

ServerSession::~ServerSession() {
  timers_.cancel(*this);
}

// ---- entry points (any strand) -----------------------------------------------------------------

void ServerSession::begin(std::shared_ptr<Exchange> exchange, Message initialize) {
  net::post(strand_, [self = shared_from_this(), exchange = std::move(exchange),
                      initialize = std::move(initialize)]() mutable {
    self->do_begin(std::move(exchange), std::move(initialize));
  });
}

void ServerSession::handle_post(std::shared_ptr<Exchange> exchange, jsonrpc::Body body,
                                std::string protocol_version) {
  net::post(strand_, [self = shared_from_this(), exchange = std::move(exchange),
                      body = std::move(body), v = std::move(protocol_version)]() mutable {
    self->do_post(std::move(exchange), std::move(body), std::move(v));
  });
}

void ServerSession::handle_get(std::shared_ptr<Exchange> exchange, std::string last_event_id,
                               std::string protocol_version) {
  net::post(strand_, [self = shared_from_this(), exchange = std::move(exchange),
                      last = std::move(last_event_id), v = std::move(protocol_version)]() mutable {
    self->do_get(std::move(exchange), std::move(last), std::move(v));
  });
}

void ServerSession::handle_delete(std::shared_ptr<Exchange> exchange) {
  net::post(strand_, [self = shared_from_this(), exchange = std::move(exchange)]() mutable {
    self->do_delete(std::move(exchange));
  });
}

void ServerSession::shutdown(std::string why) {
  net::post(strand_, [self = shared_from_this(), why = std::move(why)] {
    self->terminate(CloseReason{CloseReason::Kind::shutdown, why}, true);
  });
}

void ServerSession::evict(std::string why) {
  net::post(strand_, [self = shared_from_this(), why = std::move(why)] {
    self->terminate(CloseReason{CloseReason::Kind::timeout, why}, true);
  });
}

std::optional<std::chrono::steady_clock::time_point> ServerSession::idle_since() const {
  const auto ticks = idle_since_.load(std::memory_order_relaxed);
  if (ticks == kBusy) return std::nullopt;
  return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(ticks));
}

void ServerSession::publish_idle() {
  const bool busy = phase_ != Phase::established || !exchanges_.empty() || init_exchange_ ||
                    router_.pending_count() > 0;
  idle_since_.store(busy ? kBusy : last_activity_.time_since_epoch().count(),
                    std::memory_order_relaxed);
}

void ServerSession::start(Receiver receiver) {
  if (!strand_.running_in_this_thread()) {
    net::post(strand_, [self = shared_from_this(), r = std::move(receiver)]() mutable {
      self->start(std::move(r));
    });
    return;
  }
  if (phase_ == Phase::closed || receiver_) return;
  receiver_ = std::make_shared<Receiver>(std::move(receiver));
  while (!inbox_.empty() && phase_ != Phase::closed) {
    auto m = std::move(inbox_.front());
    inbox_.pop_front();
    to_receiver(m);
  }
  inbox_.clear();  // its memory: only messages before start() wait here
}

void ServerSession::send(Message message) {
  if (!strand_.running_in_this_thread()) {
    net::post(strand_, [self = shared_from_this(), m = std::move(message)]() mutable {
      self->do_send(std::move(m));
    });
    return;
  }
  do_send(std::move(message));
}

void ServerSession::close(const CloseReason& why) {
  if (!strand_.running_in_this_thread()) {
    net::post(strand_, [self = shared_from_this(), why] { self->do_close(why); });
    return;
  }
  do_close(why);
}

// ---- initialize --------------------------------------------------------------------------------

void ServerSession::do_begin(std::shared_ptr<Exchange> exchange, Message initialize) {
  touch();
  if (state_->stopping) {
    phase_ = Phase::closed;
    state_->sessions.erase(id_);
    reply_error(exchange, 503, jsonrpc::code::connection_closed,
                "the bridge is stopping; try again later");
    return;
  }
  init_id_ = initialize.id();
  // Read from the text: a document built here would be kept as long as the message is.
  if (auto v = string_at(initialize.text(), {"params", "protocolVersion"}))
    requested_version_ = std::move(*v);
  const bool json = state_->http.json_response;
  StreamRouter::StreamOptions options;
  options.format = json ? StreamRouter::Format::json : StreamRouter::Format::sse;
  // An SSE response cannot start before the outcome is known: a failed initialize is answered
  // without a session id. Until then the stream is detached and its events wait in its buffer.
  options.attached = json;
  auto stream = router_.open_post({initialize}, std::move(options));
  init_stream_ = stream ? *stream : 0;
  init_exchange_ = exchange;
  exchange->watch([w = weak_from_this(), we = std::weak_ptr<Exchange>(exchange)] {
    if (auto self = w.lock()) net::post(self->strand_, [self, we] { self->on_exchange_gone(we); });
  });
  inbox_.push_back(std::move(initialize));
  arm_idle_timer(std::chrono::milliseconds(state_->http.limits.session_idle_timeout_ms));
  state_->log->debug("{} initialize for {} (client asks for protocol {})", label_, server_name_,
                     requested_version_.empty() ? "?" : requested_version_);
  state_->backend.attach_session(server_name_, shared_from_this(), strand_, principal_);
}

void ServerSession::on_initialize_response(const Message& response,
                                           const StreamRouter::Routed& routed) {
  if (response.kind() != jsonrpc::Kind::result) {
    init_error_ = response;
    // The owner usually closes right after sending the error; look again once it had the chance.
    net::post(strand_, [self = shared_from_this()] { self->check_initialize_failure(); });
    return;
  }
  negotiated_version_ = requested_version_;
  // Read from the text, not a document: the response stays in the stream kept for Last-Event-ID,
  // and its document would stay with it (about 0.8 KiB of every idle session, issue 34).
  if (auto v = string_at(response.text(), {"result", "protocolVersion"}))
    negotiated_version_ = std::move(*v);
  phase_ = Phase::established;
  state_->sessions.publish(id_);
  touch();
  state_->log->info("{} session with {} established (protocol {})", label_, server_name_,
                    negotiated_version_);
  auto exchange = std::move(init_exchange_);
  if (!exchange) {
    state_->log->info(
        "{} the client left before initialize was answered; the session ends "
        "after http.limits.session_idle_timeout_ms",
        label_);
    return;
  }
  if (!routed.json_body.empty()) {
    Response res = head(200);
    res.set(bhttp::field::content_type, "application/json");
    res.set("Mcp-Session-Id", id_);
    res.body() = std::string(routed.json_body.front().text());
    exchange->reply(std::move(res));
    return;
  }
  Response res = head(200);
  res.set(bhttp::field::content_type, "text/event-stream");
  res.set(bhttp::field::cache_control, "no-cache, no-transform");
  res.set("X-Accel-Buffering", "no");
  res.set("Mcp-Session-Id", id_);
  exchange->open_stream(std::move(res));
  std::string bytes;
  if (wants_priming(negotiated_version_))
    bytes += sse_priming(router_.priming_event_id(init_stream_));
  for (const auto& e : router_.attach_from_start(init_stream_).events)
    bytes += sse_event(e.id, e.message.text());
  exchange->push(std::move(bytes));
  exchange->end();
}

void ServerSession::check_initialize_failure() {
  if (phase_ != Phase::initializing) return;
  finish_initialize_failure();
}

void ServerSession::finish_initialize_failure() {
  const bool unavailable = owner_close_ && upstream_unavailable(owner_close_->kind);
  std::string message;
  std::string body;
  if (init_error_) {
    message = init_error_->error().message;
    body = std::string(init_error_->text());
  } else {
    message = owner_close_ && !owner_close_->detail.empty()
                  ? owner_close_->detail
                  : "the MCP server \"" + server_name_ + "\" is not available";
    body = error_body(jsonrpc::code::connection_closed, message, init_id_);
  }
  const unsigned status = unavailable ? 503 : 200;
  state_->log->info("{} initialize for {} failed (HTTP {}): {}", label_, server_name_, status,
                    message);
  // Gone from the registry before the client hears of it.
  state_->sessions.erase(id_);
  if (auto exchange = std::move(init_exchange_)) {
    Response res = head(status);
    res.set(bhttp::field::content_type, "application/json");
    res.body() = std::move(body);
    exchange->reply(std::move(res));
  }
  if (owner_close_) {
    terminate(*owner_close_, false);
  } else {
    terminate(CloseReason{CloseReason::Kind::normal,
                          "initialize failed (" + message + "); the HTTP client got the error"},
              true);
  }
}

// ---- requests ----------------------------------------------------------------------------------

void ServerSession::do_post(std::shared_ptr<Exchange> exchange, jsonrpc::Body body,
                            std::string protocol_version) {
  touch();
  if (phase_ != Phase::established) {
    reply_error(exchange, 404, jsonrpc::code::request_timeout,
                "Session not found: it has ended; send initialize without Mcp-Session-Id",
                reply_id(body));
    return;
  }
  const bool has_requests = std::any_of(body.messages.begin(), body.messages.end(),
                                        [](const Message& m) { return m.is_request(); });
  if (has_requests) {
    StreamRouter::StreamOptions options;
    options.format =
        state_->http.json_response ? StreamRouter::Format::json : StreamRouter::Format::sse;
    options.batch = body.batch;
    // 000: a subscriptions/listen request keeps its SSE stream open for the notifications
    // tagged with its id (the router sends them nowhere else), and that stream takes no
    // other unsolicited traffic.
    std::vector<jsonrpc::Id> listens;
    for (const auto& m : body.messages)
      if (m.is_request() && m.method() == "subscriptions/listen") listens.push_back(m.id());
    if (!listens.empty()) {
      if (options.format == StreamRouter::Format::json) {
        reply_error(exchange, 400, jsonrpc::code::invalid_request,
                    "subscriptions/listen needs an SSE response stream, and this bridge answers "
                    "POSTs with JSON (http.json_response)",
                    reply_id(body));
        return;
      }
      options.listen = true;
    }
    auto stream = router_.open_post(body.messages, std::move(options));
    if (!stream) {
      reply_error(exchange, 400, jsonrpc::code::invalid_request, stream.error(), reply_id(body));
      return;
    }
    if (!listens.empty()) listen_streams_[*stream] = std::move(listens);
    attach(*stream, exchange);
    if (!state_->http.json_response) {
      open_sse(*stream, exchange,
               wants_priming(version_for(protocol_version))
                   ? sse_priming(router_.priming_event_id(*stream))
                   : std::string());
    }
  }
  for (const auto& m : body.messages) {
    if (phase_ != Phase::established) break;  // the owner closed the session meanwhile
    if (m.is_notification() && m.method() == "notifications/cancelled") {
      // 002 §Cancellation: no response follows; the request's stream may end now.
      if (const auto* p = m.params(); p && p->IsObject()) {
        auto it = p->FindMember("requestId");
        if (it != p->MemberEnd()) {
          if (auto rid = id_from_json(it->value)) {
            if (auto routed = router_.cancel(*rid)) deliver(*routed, m);
          }
        }
      }
    }
    to_receiver(m);
  }
  // 002 §Sending Messages: only notifications and responses → 202 with no body.
  if (!has_requests) exchange->reply(head(202));
}

void ServerSession::do_get(std::shared_ptr<Exchange> exchange, std::string last_event_id,
                           std::string protocol_version) {
  touch();
  if (phase_ != Phase::established) {
    reply_error(exchange, 404, jsonrpc::code::request_timeout,
                "Session not found: it has ended; send initialize without Mcp-Session-Id");
    return;
  }
  if (!last_event_id.empty()) {
    // 002 §Resumability: replay what followed on that stream only, then continue it.
    auto resumed = router_.resume(last_event_id);
    if (!resumed) {
      reply_error(exchange, 400, jsonrpc::code::connection_closed, resumed.error());
      return;
    }
    const StreamId stream = resumed->stream;
    // The stream is still attached to a connection the client has evidently given up on (a
    // half-open TCP connection looks alive until a write fails): the resume takes it over
    // rather than being refused until that connection times out.
    if (resumed->replaced) {
      if (auto it = exchanges_.find(stream); it != exchanges_.end()) {
        it->second->abort();
        exchanges_.erase(it);
      }
      state_->log->info("{} stream {} resumed by a new connection; the old one is closed", label_,
                        stream);
    }
    if (resumed->incomplete)
      state_->log->warn(
          "{} stream {} resumed after {}, but some events that followed are no longer held "
          "(http.limits.replay_buffer_events is {})",
          label_, stream, last_event_id, state_->http.limits.replay_buffer_events);
    state_->log->debug("{} stream {} resumed after {} ({} events replayed)", label_, stream,
                       last_event_id, resumed->events.size());
    std::string bytes;
    for (const auto& e : resumed->events)
      bytes += sse_event(e.id, e.message.text());
    if (resumed->finished) {
      open_sse(stream, exchange, std::move(bytes));
      exchange->end();
      return;
    }
    attach(stream, exchange);
    open_sse(stream, exchange, std::move(bytes));
    return;
  }
  if (!router_.open_get()) {
    reply_error(exchange, 409, jsonrpc::code::connection_closed,
                "Conflict: this session already has an open GET stream (one per session); "
                "close it first, or resume it with Last-Event-ID");
    return;
  }
  attach(StreamRouter::kGetStream, exchange);
  open_sse(StreamRouter::kGetStream, exchange,
           wants_priming(version_for(protocol_version))
               ? sse_priming(router_.priming_event_id(StreamRouter::kGetStream))
               : std::string());
}

void ServerSession::do_delete(std::shared_ptr<Exchange> exchange) {
  touch();
  if (phase_ != Phase::established) {
    reply_error(exchange, 404, jsonrpc::code::request_timeout,
                "Session not found: it has already ended");
    return;
  }
  terminate(CloseReason{CloseReason::Kind::normal, "client sent DELETE"}, true);
  exchange->reply(head(200));
}

// ---- messages from the backend -----------------------------------------------------------------

void ServerSession::do_send(Message message) {
  if (phase_ == Phase::closed) return;
  auto routed = router_.route(message);
  if (phase_ == Phase::initializing && message.is_response() && message.id() == init_id_) {
    on_initialize_response(message, routed);
    return;
  }
  deliver(routed, message);
  publish_idle();
}

void ServerSession::do_close(CloseReason why) {
  if (phase_ == Phase::closed) return;
  if (phase_ == Phase::initializing) {
    owner_close_ = std::move(why);
    finish_initialize_failure();
    return;
  }
  terminate(why, false);
}

void ServerSession::deliver(const StreamRouter::Routed& routed, const Message& message) {
  log_evicted(routed.evicted);
  using To = StreamRouter::Routed::To;
  switch (routed.to) {
    case To::stream:
      if (routed.event && routed.write) {
        // The stream's last event takes the end of the body with it (one write).
        write_event(routed.stream, *routed.event, routed.finished && routed.json_body.empty());
      }
      if (!routed.finished) break;
      if (!routed.json_body.empty()) {
        if (routed.write) {
          reply_json(routed.stream, routed.json_body, routed.json_batch);
        } else {
          state_->messages_dropped += routed.json_body.size() - 1;
          warn_dropped(std::to_string(routed.json_body.size()) +
                       " response(s) dropped: the client closed the connection of its JSON "
                       "POST before they came (a JSON response cannot be resumed)");
        }
      } else if (routed.write) {
        end_stream(routed.stream);
      }
      break;
    case To::backlog:
      state_->log->debug("{} {} held until the client opens a stream ({} held)", label_,
                         describe_message(message), router_.backlog_size());
      break;
    case To::nowhere:
      if (routed.refuse_request) {
        refuse_request(message, routed.why);
      } else if (routed.expected) {
        state_->log->debug("{} {} not delivered: {}", label_, describe_message(message),
                           routed.why);
      } else {
        warn_dropped(describe_message(message) + " dropped: " + routed.why);
      }
      break;
  }
}

void ServerSession::refuse_request(const Message& request, const std::string& why) {
  warn_dropped(describe_message(request) + " not delivered: " + why +
               "; answered it with an error so the server does not wait");
  auto error = Message::error(request.id(), jsonrpc::code::connection_closed,
                              "the HTTP client cannot take this request now: " + why);
  // Not from inside the owner's send(): the answer arrives as a separate delivery.
  net::post(strand_, [self = shared_from_this(), error] { self->to_receiver(error); });
}

void ServerSession::log_evicted(const std::vector<Message>& evicted) {
  for (const auto& m : evicted) {
    const auto& L = state_->http.limits;
    warn_dropped(describe_message(m) +
                 " not kept (a response over the bytes is replaced by an error)"
                 " to stay within http.limits (session_backlog_messages " +
                 std::to_string(L.session_backlog_messages) + ", session_backlog_bytes " +
                 std::to_string(L.session_backlog_bytes) + ", replay_buffer_events " +
                 std::to_string(L.replay_buffer_events) + ", replay_buffer_bytes " +
                 std::to_string(L.replay_buffer_bytes) + "); no stream took it in time");
  }
}

void ServerSession::warn_dropped(const std::string& what) {
  ++state_->messages_dropped;
  // A peer can cause these at will: one line a second at most (log::Throttle).
  std::size_t held_back = 0;
  if (!drop_log_.allow(held_back)) return;
  if (held_back > 0) {
    state_->log->warn("{} {} (and {} more not delivered since the last report)", label_, what,
                      held_back);
  } else {
    state_->log->warn("{} {}", label_, what);
  }
}

void ServerSession::to_receiver(const Message& message) {
  if (phase_ == Phase::closed) return;
  if (!receiver_) {
    if (inbox_.size() >= kInboxLimit) {
      terminate(
          CloseReason{CloseReason::Kind::error, "the backend did not start the session in time"},
          true);
      return;
    }
    inbox_.push_back(message);
    return;
  }
  auto receiver = receiver_;  // the call may end the session and release receiver_
  if (receiver->on_message) receiver->on_message(message);
}

// ---- streams -----------------------------------------------------------------------------------

void ServerSession::attach(StreamId stream, std::shared_ptr<Exchange> exchange) {
  exchange->watch([w = weak_from_this(), we = std::weak_ptr<Exchange>(exchange)] {
    if (auto self = w.lock()) net::post(self->strand_, [self, we] { self->on_exchange_gone(we); });
  });
  exchanges_[stream] = std::move(exchange);
  publish_idle();
}

void ServerSession::open_sse(StreamId stream, const std::shared_ptr<Exchange>& exchange,
                             std::string first) {
  Response res = head(200);
  res.set(bhttp::field::content_type, "text/event-stream");
  res.set(bhttp::field::cache_control, "no-cache, no-transform");
  res.set("X-Accel-Buffering", "no");
  res.set("Mcp-Session-Id", id_);
  exchange->open_stream(std::move(res));
  std::string bytes = std::move(first);
  for (const auto& e : router_.drain_backlog(stream))
    bytes += sse_event(e.id, e.message.text());
  if (!bytes.empty()) exchange->push(std::move(bytes));
}

void ServerSession::write_event(StreamId stream, const StreamRouter::Event& event, bool last) {
  auto it = exchanges_.find(stream);
  if (it != exchanges_.end()) it->second->push_event(event.id, event.message.text(), last);
}

void ServerSession::end_stream(StreamId stream) {
  listen_streams_.erase(stream);
  auto it = exchanges_.find(stream);
  if (it == exchanges_.end()) return;
  it->second->end();
  exchanges_.erase(it);
  touch();
}

void ServerSession::reply_json(StreamId stream, const std::vector<Message>& body, bool batch) {
  auto it = exchanges_.find(stream);
  if (it == exchanges_.end()) return;
  Response res = head(200);
  res.set(bhttp::field::content_type, "application/json");
  res.set("Mcp-Session-Id", id_);
  res.body() = batch ? jsonrpc::serialize_batch(body) : std::string(body.front().text());
  it->second->reply(std::move(res));
  exchanges_.erase(it);
  touch();
}

void ServerSession::on_exchange_gone(const std::weak_ptr<Exchange>& gone) {
  auto exchange = gone.lock();
  if (!exchange) return;
  touch();
  if (exchange == init_exchange_) {
    init_exchange_.reset();
    router_.detach(init_stream_);
    state_->log->debug("{} the client left while initialize was in progress", label_);
    return;
  }
  for (const auto& [stream, held] : exchanges_) {
    if (held != exchange) continue;
    const StreamId lost = stream;  // what follows may change exchanges_
    if (auto listen = listen_streams_.find(lost); listen != listen_streams_.end()) {
      end_listens(lost, listen->second);
      listen_streams_.erase(listen);
    }
    // 002: a disconnect is not a cancellation; the stream's events wait for a resume.
    router_.detach(lost);
    state_->log->debug("{} stream {} lost its connection; its requests stay pending", label_, lost);
    exchanges_.erase(lost);
    publish_idle();
    return;
  }
}

// 000 §Cancellation: closing the SSE stream of a subscriptions/listen cancels it. The stream
// ends with an error response (kept for a client that resumes it, and telling it why), and the
// bridge is told with notifications/cancelled so it releases what the listen held upstream.
void ServerSession::end_listens(StreamId stream, const std::vector<jsonrpc::Id>& listens) {
  for (const auto& rid : listens) {
    if (!router_.pending(rid)) continue;
    auto error = Message::error(
        rid, jsonrpc::code::connection_closed,
        "subscriptions/listen ended: its stream's connection closed (closed by the client, or a "
        "reader too slow for http.limits.stream_queue_messages)");
    auto routed = router_.route(error);
    log_evicted(routed.evicted);
    state_->log->debug("{} subscription {} on stream {} cancelled: its connection closed", label_,
                       rid.to_string(), stream);
    to_receiver(Message::notification(
        "notifications/cancelled",
        "{\"requestId\":" + rid.to_json() +
            ",\"reason\":\"the client closed the subscriptions/listen stream\"}"));
    if (phase_ == Phase::closed) return;
  }
}

// ---- the end -----------------------------------------------------------------------------------

void ServerSession::terminate(const CloseReason& why, bool tell_receiver) {
  if (phase_ == Phase::closed) return;
  phase_ = Phase::closed;
  publish_idle();
  state_->sessions.erase(id_);
  ++idle_generation_;
  timers_.cancel(*this);
  // Open streams still waiting for responses get errors, so no client waits for nothing.
  for (const auto& rid : router_.pending_requests(true)) {
    auto error =
        Message::error(rid, jsonrpc::code::connection_closed,
                       "the MCP session ended (" + std::string(bridge::to_string(why.kind)) +
                           (why.detail.empty() ? "" : ": " + why.detail) + ")");
    deliver(router_.route(error), error);
  }
  for (auto& [stream, exchange] : exchanges_)
    exchange->end();
  exchanges_.clear();
  if (auto exchange = std::move(init_exchange_)) {
    reply_error(exchange, 503, jsonrpc::code::connection_closed,
                "the MCP session ended before initialize was answered (" + why.detail + ")");
  }
  if (std::size_t held_back = 0; drop_log_.allow(held_back) && held_back > 0)
    state_->log->warn("{} {} more message(s) were not delivered since the last report", label_,
                      held_back);
  if (router_.backlog_size() > 0)
    state_->log->info("{} {} server message(s) held for the client are discarded", label_,
                      router_.backlog_size());
  state_->log->info("{} session ended ({}{}{})", label_, bridge::to_string(why.kind),
                    why.detail.empty() ? "" : ": ", why.detail);
  inbox_.clear();
  auto receiver = std::move(receiver_);
  receiver_.reset();
  if (tell_receiver && receiver && receiver->on_close) receiver->on_close(why);
}

void ServerSession::arm_idle_timer(std::chrono::steady_clock::duration after) {
  // A check at least 10 s away may come up to a second late: the checks of sessions opened in
  // the same second are taken together. A shorter one (tests) comes on time.
  auto at = std::chrono::steady_clock::now() + after;
  if (after >= std::chrono::seconds(10)) at = on_grid(at, std::chrono::seconds(1), true);
  // Target is a private base: the aliasing constructor converts where the base is accessible.
  timers_.arm(std::shared_ptr<loop::TimerList::Target>(shared_from_this(), this),
              ++idle_generation_, at);
}

void ServerSession::on_due(std::uint64_t generation) {
  // On the timer's thread: the generation is compared on the strand, where it changes.
  net::post(strand_, [self = shared_from_this(), generation] {
    if (generation == self->idle_generation_) self->on_idle_timer();
  });
}

void ServerSession::on_idle_timer() {
  if (phase_ == Phase::closed) return;
  const auto limit = std::chrono::milliseconds(state_->http.limits.session_idle_timeout_ms);
  if (!exchanges_.empty() || init_exchange_) {
    arm_idle_timer(limit);
    return;
  }
  const auto idle_for = std::chrono::steady_clock::now() - last_activity_;
  if (idle_for >= limit) {
    terminate(CloseReason{CloseReason::Kind::timeout, "no HTTP request and no open stream for " +
                                                          log::duration_text(limit) +
                                                          " (http.limits.session_idle_timeout_ms)"},
              true);
    return;
  }
  arm_idle_timer(limit - idle_for);
}

// ---- helpers -----------------------------------------------------------------------------------

Response ServerSession::head(unsigned status) const {
  Response res{static_cast<bhttp::status>(status), 11};
  return res;
}

void ServerSession::reply_error(const std::shared_ptr<Exchange>& exchange, unsigned status,
                                int code, const std::string& message, const jsonrpc::Id& id) {
  Response res = head(status);
  res.set(bhttp::field::content_type, "application/json");
  res.body() = error_body(code, message, id);
  exchange->reply(std::move(res));
}

std::string ServerSession::version_for(const std::string& header) const {
  return header.empty() ? negotiated_version_ : header;
}

}  // namespace mcpmqtt::http

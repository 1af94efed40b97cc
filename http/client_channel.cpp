#include "http/client_channel.hpp"

#include <algorithm>

#include <boost/asio/post.hpp>

#include "bridge/modern/protocol.hpp"
#include "common/log.hpp"
#include "common/metrics.hpp"
#include "http/client_channel_impl.hpp"
#include "http/client_upstream.hpp"

namespace mcpmqtt::http {
namespace net = boost::asio;
namespace beast_http = boost::beast::http;
using bridge::CloseReason;
using jsonrpc::Id;
using jsonrpc::Message;

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

ClientChannelImpl::ClientChannelImpl(net::any_io_executor executor, UpstreamSpec spec)
    : executor_(std::move(executor)),
      spec_(std::move(spec)),
      log_(log::http()),
      queue_(spec_.max_concurrent_requests, spec_.max_concurrent_short),
      pool_(spec_.idle_keepalive, spec_.max_idle_connections) {
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
      if (queue_.remove_request(*target)) {
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
  if (queue_.size() >= spec_.max_queued_messages) {
    log_->warn("{} {} messages wait for a connection; closing", label_, queue_.size());
    const std::string detail = "upstream request queue full (" +
                               std::to_string(spec_.max_queued_messages) + " messages waiting)";
    net::post(executor_, [self = shared_from_this(), detail] {
      self->fail_session(CloseReason::Kind::error, detail, jsonrpc::code::internal_error,
                         self->upstream() + ": " + detail, true);
    });
    failing_ = true;  // nothing more is taken; the posted call answers what is pending
    return;
  }
  queue_.push(std::move(m));
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
  // Urgent messages first; then requests and other notifications in their order (SendQueue).
  while (auto m = queue_.pop())
    start_post(std::move(*m));
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
    queue_.occupy(Exchange::Slot::request);
    if (is_initialize(ex)) {
      ex->holds_barrier = true;
      queue_.raise_barrier();
    }
  } else {
    ex->slot = Exchange::Slot::short_message;
    queue_.occupy(Exchange::Slot::short_message);
    if (m.is_notification() && !SendQueue::is_urgent(m)) {
      ex->holds_barrier = true;
      queue_.raise_barrier();
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
  if (spec_.bearer && ex->bearer.empty()) return authorize(ex);
  if (auto conn = pool_.take()) {
    ex->conn = std::move(conn);
    do_write(ex);
    return;
  }
  ex->conn = std::make_shared<ClientConnection>(executor_, spec_.url, tls_, spec_.tls_verify);
  do_connect(ex);
}

void ClientChannelImpl::authorize(const ExchangePtr& ex) {
  // Usually the cached token, answered at once on the source's strand; back to ours to send.
  spec_.bearer->bearer(
      [self = shared_from_this(), ex](const Expected<std::string, std::string>& r) {
        net::post(self->executor_, [self, ex, r] {
          if (ex->done) return;
          if (!r) return self->on_no_token(ex, r.error());
          if (r->empty())
            return self->on_no_token(ex, "the authorization server gave an empty token");
          ex->bearer = *r;
          self->last_bearer_ = *r;
          ex->request.set(beast_http::field::authorization, "Bearer " + *r);
          self->start_exchange(ex);
        });
      });
}

void ClientChannelImpl::on_no_token(const ExchangePtr& ex, const std::string& reason) {
  const std::string message = upstream() + " needs an access token, and " +
                              spec_.bearer->describe() + " has none: " + reason;
  if (ex->kind == Exchange::Kind::listen) {
    log_->log(listen_failures_ == 0 ? spdlog::level::warn : spdlog::level::debug,
              "{} GET stream: {}; retrying", label_, message);
    return on_listen_end(ex, true);
  }
  fail_exchange(ex, message);
}

void ClientChannelImpl::fail_exchange(const ExchangePtr& ex, const std::string& message) {
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

bool ClientChannelImpl::renew_bearer(const ExchangePtr& ex) {
  // RFC 6750 §3.1 invalid_token: the upstream no longer takes the token (revoked, its keys
  // rotated, expired before we thought): the request goes once more, with another.
  if (!spec_.bearer || ex->bearer.empty() || ex->bearer_renewed) return false;
  log_->info("{} the access token was refused (HTTP 401) for {}; sending it again with another",
             label_, ex->method.empty() ? std::string("the GET stream") : quoted_method(ex));
  ex->conn->close();
  ex->conn.reset();
  spec_.bearer->refused(ex->bearer);
  ex->bearer.clear();
  ex->bearer_renewed = true;
  ex->status = 0;
  ex->content_type.clear();
  start_exchange(ex);
  return true;
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
  queue_.lower_barrier();
}

void ClientChannelImpl::finish(ExchangePtr ex) {
  if (ex->done) return;
  ex->done = true;
  if (ex->delay) ex->delay->cancel();
  queue_.release(ex->slot);
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

std::shared_ptr<ClientChannel> ClientChannel::create(net::any_io_executor executor,
                                                     UpstreamSpec spec) {
  return std::make_shared<ClientChannelImpl>(std::move(executor), std::move(spec));
}

}  // namespace mcpmqtt::http

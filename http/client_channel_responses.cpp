#include <algorithm>
#include <vector>

#include <boost/beast/http/status.hpp>

#include "bridge/modern/protocol.hpp"
#include "common/log.hpp"
#include "common/metrics.hpp"
#include "http/client_channel_impl.hpp"

namespace mcpmqtt::http {
namespace net = boost::asio;
namespace beast_http = boost::beast::http;
using bridge::CloseReason;
using jsonrpc::Id;
using jsonrpc::Message;

void ClientChannelImpl::on_header(const ExchangePtr& ex) {
  const auto& h = ex->conn->header();
  ex->status = h.result_int();
  ex->content_type = std::string(h[beast_http::field::content_type]);
  if (ex->status == 401 && renew_bearer(ex)) return;
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

void ClientChannelImpl::on_complete(const ExchangePtr& ex) {
  pool_.give_back(ex->conn, !closed_ && !failing_);
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
    std::string hint = "check the credentials in the headers configured for this server";
    if (spec_.bearer && ex->status == 401) {
      hint = "a fresh access token of " + spec_.bearer->describe() + " was refused too";
    } else if (spec_.bearer) {
      hint = "the access token of " + spec_.bearer->describe() +
             " does not grant this: check the scope configured for it";
    }
    excerpt += std::string(excerpt.empty() ? "" : " ") + "(" + hint + ")";
  }
  if (ex->kind == Exchange::Kind::resume) {
    fail_request(ex, jsonrpc::code::connection_closed,
                 upstream() + " closed the event stream before answering " + quoted_method(ex) +
                     "; resuming it was refused with " + status);
    return finish(ex);
  }
  fail_exchange(ex, upstream() + " answered " + status + (excerpt.empty() ? "" : ": " + excerpt));
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

}  // namespace mcpmqtt::http

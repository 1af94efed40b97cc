#include <algorithm>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>

#include "bridge/modern/protocol.hpp"
#include "common/log.hpp"
#include "http/client_channel_impl.hpp"

namespace mcpmqtt::http {
namespace net = boost::asio;
namespace beast_http = boost::beast::http;
using bridge::CloseReason;
using jsonrpc::Id;
using jsonrpc::Message;

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
  pool_.close_all();
  queue_.clear();
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
  if (!last_bearer_.empty())
    request.set(boost::beast::http::field::authorization, "Bearer " + last_bearer_);
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

}  // namespace mcpmqtt::http

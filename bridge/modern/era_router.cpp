#include "bridge/modern/era_router.hpp"

#include "bridge/modern/protocol.hpp"
#include "common/log.hpp"

namespace mcpmqtt::bridge {

namespace {

std::optional<jsonrpc::Id> cancelled_request(const jsonrpc::Message& m) {
  const auto* p = m.params();
  if (!p || !p->IsObject()) return std::nullopt;
  auto it = p->FindMember("requestId");
  if (it == p->MemberEnd()) return std::nullopt;
  if (it->value.IsString())
    return jsonrpc::Id::string(std::string(it->value.GetString(), it->value.GetStringLength()));
  if (it->value.IsInt64()) return jsonrpc::Id::integer(it->value.GetInt64());
  return std::nullopt;
}

}  // namespace

// The host as seen by the legacy ingress session: messages from the pin on, sends to the host.
class EraRouter::LegacyView : public Channel {
 public:
  explicit LegacyView(std::shared_ptr<Channel> host) : host_(std::move(host)) {}
  void start(Receiver receiver) override {
    if (started_) return;
    started_ = true;
    receiver_ = std::move(receiver);
    while (!held_.empty() && !closed_) {
      auto m = std::move(held_.front());
      held_.pop_front();
      if (receiver_.on_message) receiver_.on_message(std::move(m));
    }
    if (held_close_ && !closed_) {
      closed_ = true;
      if (receiver_.on_close) receiver_.on_close(*held_close_);
    }
  }
  void send(jsonrpc::Message m) override {
    if (!closed_) host_->send(std::move(m));
  }
  void close(const CloseReason& why) override {
    if (closed_) return;
    closed_ = true;
    receiver_ = {};
    host_->close(why);
  }
  std::string describe() const override { return host_->describe(); }

  void from_host(jsonrpc::Message m) {
    if (closed_) return;
    if (!started_) {
      held_.push_back(std::move(m));
      return;
    }
    if (receiver_.on_message) receiver_.on_message(std::move(m));
  }
  void host_closed(const CloseReason& why) {
    if (closed_) return;
    if (!started_) {
      held_close_ = why;
      return;
    }
    closed_ = true;
    auto r = std::move(receiver_);
    receiver_ = {};
    if (r.on_close) r.on_close(why);
  }

 private:
  std::shared_ptr<Channel> host_;
  Receiver receiver_;
  std::deque<jsonrpc::Message> held_;
  std::optional<CloseReason> held_close_;
  bool started_ = false;
  bool closed_ = false;
};

std::shared_ptr<EraRouter> EraRouter::create(std::shared_ptr<Channel> host, Hooks hooks) {
  return std::shared_ptr<EraRouter>(new EraRouter(std::move(host), std::move(hooks)));
}

void EraRouter::start() {
  std::weak_ptr<EraRouter> weak = weak_from_this();
  host_->start(Channel::Receiver{[weak](jsonrpc::Message m) {
                                   if (auto self = weak.lock()) self->on_message(std::move(m));
                                 },
                                 [weak](const CloseReason& why) {
                                   if (auto self = weak.lock()) self->on_host_closed(why);
                                 }});
}

void EraRouter::send_modern(jsonrpc::Message m) {
  if (!closed_) host_->send(std::move(m));
}

void EraRouter::close(const CloseReason& why) {
  if (closed_) return;
  closed_ = true;
  host_->close(why);
}

void EraRouter::on_host_closed(const CloseReason& why) {
  if (closed_) return;
  closed_ = true;
  if (legacy_) legacy_->host_closed(why);
  if (hooks_.on_closed) hooks_.on_closed(why);
}

void EraRouter::pin_legacy(jsonrpc::Message first) {
  era_ = Era::legacy;
  log::bridge()->debug(
      "{} the client opened with {}: serving MCP 2025 (a session)", host_->describe(),
      first.is_request() ? first.method() : std::string("a message without _meta"));
  legacy_ = std::make_shared<LegacyView>(host_);
  legacy_->from_host(std::move(first));
  if (hooks_.on_legacy) hooks_.on_legacy(legacy_);
}

void EraRouter::on_message(jsonrpc::Message m) {
  if (closed_) return;
  switch (era_) {
    case Era::legacy:
      legacy_->from_host(std::move(m));
      return;
    case Era::modern:
      on_modern_pinned(m);
      return;
    case Era::undecided:
      break;
  }
  if (!modern::claims_modern(m)) {
    pin_legacy(std::move(m));
    return;
  }
  if (m.is_request()) {
    // The v2 client's probe (basic/versioning §Compatibility Matrix): answered, the connection
    // stays undecided.
    if (m.method() != "server/discover") {
      era_ = Era::modern;
      log::bridge()->debug("{} the client opened with a {} request: serving MCP {} (no session)",
                           host_->describe(), m.method(), modern::kVersion);
    }
    if (hooks_.on_modern_request) hooks_.on_modern_request(m);
    return;
  }
  if (m.is_notification() && m.method() == "notifications/cancelled") {
    if (auto id = cancelled_request(m); id && hooks_.on_modern_cancel) hooks_.on_modern_cancel(*id);
  }
}

void EraRouter::on_modern_pinned(const jsonrpc::Message& m) {
  if (m.is_request()) {
    if (modern::claims_modern(m)) {
      if (hooks_.on_modern_request) hooks_.on_modern_request(m);
      return;
    }
    // basic/versioning §Backward Compatibility: a modern-only connection names what it serves.
    std::string requested;
    if (m.method() == "initialize") {
      if (const auto* p = m.params(); p && p->IsObject()) {
        auto it = p->FindMember("protocolVersion");
        if (it != p->MemberEnd() && it->value.IsString())
          requested.assign(it->value.GetString(), it->value.GetStringLength());
      }
    }
    host_->send(jsonrpc::Message::error(m.id(), modern::unsupported_version(requested)));
    return;
  }
  if (m.is_notification() && m.method() == "notifications/cancelled") {
    if (auto id = cancelled_request(m); id && hooks_.on_modern_cancel) hooks_.on_modern_cancel(*id);
  }
}

}  // namespace mcpmqtt::bridge

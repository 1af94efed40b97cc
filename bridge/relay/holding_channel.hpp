// A channel whose messages are held until its owner is ready for them.
//
// Ingress sessions begin with the client's initialize arriving before there is anything to send
// it to: the server instance is still being chosen (perhaps waiting for its presence) and its
// MQTT session is still connecting. A HoldingChannel starts the inner channel at once, keeps
// what arrives (bounded), lets the owner look at it (the initialize and its protocol version),
// and delivers it in order when start() is finally called — by the splice, typically.
//
// One strand; not thread-safe (the inner channel's strand).
#pragma once

#include <deque>
#include <memory>
#include <optional>

#include "bridge/relay/channel.hpp"
#include "common/lazy_deque.hpp"

namespace mcpmqtt::bridge {

class HoldingChannel : public Channel, public std::enable_shared_from_this<HoldingChannel> {
 public:
  struct Hooks {
    // Sees each message that arrives while held; returning false declines it (it is not held,
    // and the owner has dealt with it — answered it with an error, say).
    std::function<bool(const jsonrpc::Message&)> on_held;
    // Called if the inner channel closes before start() (the owner may stop getting ready).
    std::function<void(const CloseReason&)> on_closed_while_held;
  };
  // Starts the inner channel at once — it may deliver right away, so the hooks come with it.
  // `max_held`: past this many messages before start(), the inner channel is closed with an
  // error (the peer is sending without waiting for answers).
  static std::shared_ptr<HoldingChannel> create(std::shared_ptr<Channel> inner, Hooks hooks,
                                                std::size_t max_held = 256);

  const std::deque<jsonrpc::Message>& held() const { return held_.view(); }
  // Set when the inner channel closed while held; start() reports it after the held messages.
  const std::optional<CloseReason>& closed_while_held() const { return held_close_; }

  void start(Receiver receiver) override;
  void send(jsonrpc::Message message) override { inner_->send(std::move(message)); }
  void close(const CloseReason& why) override;
  std::string describe() const override { return inner_->describe(); }
  Channel& inner() { return *inner_; }

 private:
  HoldingChannel(std::shared_ptr<Channel> inner, Hooks hooks, std::size_t max_held)
      : inner_(std::move(inner)),
        max_held_(max_held),
        on_held_(std::move(hooks.on_held)),
        on_held_close_(std::move(hooks.on_closed_while_held)) {}
  void open();

  std::shared_ptr<Channel> inner_;
  std::size_t max_held_;
  std::function<bool(const jsonrpc::Message&)> on_held_;
  std::function<void(const CloseReason&)> on_held_close_;
  LazyDeque<jsonrpc::Message> held_;
  std::optional<CloseReason> held_close_;
  Receiver receiver_;
  bool started_ = false;
  bool closed_ = false;        // closed by the owner, or reported to the receiver
  bool inner_closed_ = false;  // the inner channel is closed (held_close_ says why)
};

}  // namespace mcpmqtt::bridge

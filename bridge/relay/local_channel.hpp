// A channel whose peer is code of the bridge's own rather than a transport: the modern gateway
// plays the MCP client of an MQTT session through it. The owner (an ingress session: its holding
// channel and splice) uses it like any downstream channel; the peer sends "client" messages with
// deliver(), hears what the owner sends through Peer::on_message, ends the session with
// hang_up(), and hears of an end the owner decided through Peer::on_closed.
//
// Messages delivered before start() are held (bounded: past `max_held` the channel closes with
// Kind::error, as a transport whose peer floods it would).
//
// One strand; not thread-safe. Peer callbacks run inside the owner's calls (send, close): the
// peer must not assume a fresh stack.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "bridge/relay/channel.hpp"

namespace mcpmqtt::bridge {

class LocalChannel : public Channel, public std::enable_shared_from_this<LocalChannel> {
 public:
  struct Peer {
    std::function<void(jsonrpc::Message)> on_message;   // the owner sent this to the "client"
    std::function<void(const CloseReason&)> on_closed;  // the owner closed the channel
  };

  static std::shared_ptr<LocalChannel> create(std::string label, Peer peer,
                                              std::size_t max_held = 64);

  // Channel: the owner's side.
  void start(Receiver receiver) override;
  void send(jsonrpc::Message message) override;
  void close(const CloseReason& why) override;
  std::string describe() const override { return label_; }

  // The peer's side.
  void deliver(jsonrpc::Message message);
  // The "client" goes away: the owner's on_close (once), unless the channel is closed already.
  void hang_up(const CloseReason& why);
  bool closed() const { return closed_; }

 private:
  LocalChannel(std::string label, Peer peer, std::size_t max_held)
      : label_(std::move(label)), peer_(std::move(peer)), max_held_(max_held) {}

  std::string label_;
  Peer peer_;
  std::size_t max_held_;
  Receiver receiver_;
  std::deque<jsonrpc::Message> held_;
  std::optional<CloseReason> hung_up_;  // before start(): reported by start()
  bool started_ = false;
  bool closed_ = false;
};

}  // namespace mcpmqtt::bridge

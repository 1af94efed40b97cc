#include "bridge/relay/local_channel.hpp"

namespace mcpmqtt::bridge {

std::shared_ptr<LocalChannel> LocalChannel::create(std::string label, Peer peer,
                                                   std::size_t max_held) {
  return std::shared_ptr<LocalChannel>(
      new LocalChannel(std::move(label), std::move(peer), max_held));
}

void LocalChannel::start(Receiver receiver) {
  if (started_) return;
  started_ = true;
  if (closed_) {
    // The peer hung up before the owner started: the owner still hears of it, once.
    if (hung_up_ && receiver.on_close) receiver.on_close(*hung_up_);
    hung_up_.reset();
    return;
  }
  receiver_ = std::move(receiver);
  auto self = shared_from_this();  // a delivery may end the session and release the owner
  while (!held_.empty() && !closed_) {
    auto m = std::move(held_.front());
    held_.pop_front();
    if (receiver_.on_message) receiver_.on_message(std::move(m));
  }
}

void LocalChannel::send(jsonrpc::Message message) {
  if (closed_) return;
  if (peer_.on_message) peer_.on_message(std::move(message));
}

void LocalChannel::close(const CloseReason& why) {
  if (closed_) return;
  closed_ = true;
  held_.clear();
  receiver_ = {};
  auto on_closed = std::move(peer_.on_closed);
  peer_ = {};
  if (on_closed) on_closed(why);
}

void LocalChannel::deliver(jsonrpc::Message message) {
  if (closed_) return;
  if (!started_) {
    if (held_.size() >= max_held_) {
      hang_up({CloseReason::Kind::error, "more than " + std::to_string(max_held_) +
                                             " messages held before the session started"});
      return;
    }
    held_.push_back(std::move(message));
    return;
  }
  auto self = shared_from_this();
  if (receiver_.on_message) receiver_.on_message(std::move(message));
}

void LocalChannel::hang_up(const CloseReason& why) {
  if (closed_) return;
  closed_ = true;
  held_.clear();
  peer_ = {};
  if (!started_) {
    hung_up_ = why;
    return;
  }
  auto receiver = std::move(receiver_);
  receiver_ = {};
  if (receiver.on_close) receiver.on_close(why);
}

}  // namespace mcpmqtt::bridge

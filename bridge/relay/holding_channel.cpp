#include "bridge/relay/holding_channel.hpp"

namespace mcpmqtt::bridge {

std::shared_ptr<HoldingChannel> HoldingChannel::create(std::shared_ptr<Channel> inner, Hooks hooks,
                                                       std::size_t max_held) {
  auto self = std::shared_ptr<HoldingChannel>(
      new HoldingChannel(std::move(inner), std::move(hooks), max_held));
  self->open();
  return self;
}

void HoldingChannel::open() {
  std::weak_ptr<HoldingChannel> weak = weak_from_this();
  inner_->start({[weak](jsonrpc::Message m) {
                   auto self = weak.lock();
                   if (!self || self->closed_ || self->inner_closed_) return;
                   if (self->started_) {
                     if (self->receiver_.on_message) self->receiver_.on_message(std::move(m));
                     return;
                   }
                   if (self->on_held_ && !self->on_held_(m)) return;
                   if (self->held_.size() >= self->max_held_) {
                     self->held_close_ =
                         CloseReason{CloseReason::Kind::error,
                                     "more than " + std::to_string(self->max_held_) +
                                         " messages arrived before the session was ready"};
                     self->inner_closed_ = true;
                     self->held_.clear();
                     self->inner_->close(*self->held_close_);
                     return;
                   }
                   self->held_.push_back(std::move(m));
                 },
                 [weak](const CloseReason& why) {
                   auto self = weak.lock();
                   if (!self || self->closed_) return;
                   if (self->started_) {
                     self->closed_ = true;
                     if (self->receiver_.on_close) self->receiver_.on_close(why);
                     return;
                   }
                   self->inner_closed_ = true;
                   self->held_close_ = why;
                   if (self->on_held_close_) self->on_held_close_(why);
                 },
                 [weak](const std::string& detail) {
                   // Before start(), nothing was sent through us that could be lost.
                   auto self = weak.lock();
                   if (self && self->started_ && !self->closed_ && self->receiver_.on_interrupted)
                     self->receiver_.on_interrupted(detail);
                 }});
}

void HoldingChannel::start(Receiver receiver) {
  receiver_ = std::move(receiver);
  started_ = true;
  while (!held_.empty() && !closed_) {
    auto m = std::move(held_.front());
    held_.pop_front();
    if (receiver_.on_message) receiver_.on_message(std::move(m));
  }
  held_.clear();  // its memory: nothing is held after the start
  if (held_close_ && !closed_) {
    closed_ = true;
    if (receiver_.on_close) receiver_.on_close(*held_close_);
  }
}

void HoldingChannel::close(const CloseReason& why) {
  if (closed_) return;
  closed_ = true;
  held_.clear();
  inner_->close(why);
}

}  // namespace mcpmqtt::bridge

#include "mqtt/client_session.hpp"

#include <random>

#include <boost/asio/post.hpp>
#include <openssl/rand.h>

#include "bridge/protocol/topics.hpp"
#include "common/hex.hpp"
#include "common/log.hpp"

namespace mcpmqtt::mqtt {

namespace {

const std::string kDisconnected = R"({"jsonrpc":"2.0","method":"notifications/disconnected"})";

}  // namespace

std::string fresh_client_id(const std::string& prefix) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    // OpenSSL's generator failing is exceptional; fall back to the OS generator.
    std::random_device rd;
    for (auto& b : bytes)
      b = static_cast<unsigned char>(rd());
  }
  return prefix + "-" +
         hex_encode(std::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

std::shared_ptr<ClientSession> ClientSession::create(boost::asio::any_io_executor strand,
                                                     Options options) {
  return std::shared_ptr<ClientSession>(new ClientSession(std::move(strand), std::move(options)));
}

ClientSession::ClientSession(boost::asio::any_io_executor strand, Options options)
    : strand_(std::move(strand)),
      client_id_(std::move(options.client_id)),
      server_id_(std::move(options.server_id)),
      server_name_(std::move(options.server_name)),
      limits_(options.limits),
      max_queued_(options.max_queued),
      directory_(std::move(options.directory)),
      topics_(topics::scheme_for(options.broker.topic_prefix)),
      connect_(std::make_unique<Connect>(
          Connect{std::move(options.broker), std::move(options.connect_meta_json)})),
      prefix_("[mqtt client " + client_id_ + " → " + server_name_ + "]"),
      rpc_topic_(topics_.rpc(client_id_, server_id_, server_name_)),
      control_topic_(topics_.server_control(server_id_, server_name_)) {}

void ClientSession::start(Receiver receiver) {
  if (state_ != State::idle) return;
  receiver_ = std::move(receiver);
  state_ = State::subscribing;

  ConnectionOptions o;
  // The connection keeps them; a copy here would be held for the session's life.
  o.broker = std::move(connect_->broker);
  o.client_id = client_id_;
  o.role = Role::client;
  o.meta_json = std::move(connect_->meta_json);
  connect_.reset();
  // 004 §Client Disconnect: the will tells the server we vanished.
  o.will = Will{topics_.client_presence(client_id_), kDisconnected, false};
  o.reconnect = false;
  std::weak_ptr<ClientSession> weak = weak_from_this();
  BrokerConnection::Handlers h;
  h.on_message = [weak](const Incoming& in) {
    if (auto self = weak.lock()) self->on_message(in);
  };
  h.on_connected = [weak](const ConnackInfo& info, bool) {
    auto self = weak.lock();
    if (self && self->state_ != State::closed && self->on_connected_) self->on_connected_(info);
  };
  h.on_connection_lost = [weak](const std::string& cause) {
    if (auto self = weak.lock()) {
      self->fail({bridge::CloseReason::Kind::peer_gone,
                  "lost the connection to the MQTT broker" + (cause.empty() ? "" : ": " + cause)});
    }
  };
  h.on_connect_failed = [weak](const std::string& why, bool) {
    if (auto self = weak.lock()) self->fail({bridge::CloseReason::Kind::peer_gone, why});
  };
  conn_ = BrokerConnection::create(strand_, std::move(o), std::move(h));
  // 004 §Initialization, §Capability List Changed: these are in place before initialize goes
  // out. The presence subscription tells us when this server instance goes away.
  auto done = [weak](bool ok, const std::string& why) {
    if (auto self = weak.lock()) self->on_subscribed(ok, why);
  };
  if (directory_) {
    // The directory knows the instance, so the observer hears its capability topic already.
    listening_ = directory_->listen(server_name_, server_id_,
                                    [weak](bridge::Directory::InstanceEvent event,
                                           const std::shared_ptr<const std::string>& payload) {
                                      if (auto self = weak.lock()) {
                                        boost::asio::post(self->strand_, [self, event, payload] {
                                          self->on_instance(event, payload);
                                        });
                                      }
                                    });
    if (!listening_) {
      // Gone between the pick and now: end as if its presence had been cleared, after start().
      boost::asio::post(strand_, [self = shared_from_this()] { self->fail(self->offline()); });
      return;
    }
    conn_->subscribe(rpc_topic_, /*no_local=*/true, done);
  } else {
    // They go out when the connection comes up, in two SUBSCRIBE packets (see
    // BrokerConnection::subscribe).
    conn_->subscribe({{rpc_topic_, /*no_local=*/true},
                      {topics_.server_capability(server_id_, server_name_), false},
                      {topics_.server_presence(server_id_, server_name_), false}},
                     done);
  }
  conn_->connect();
}

void ClientSession::on_subscribed(bool ok, const std::string& why) {
  if (state_ != State::subscribing) return;
  if (!ok) {
    fail({bridge::CloseReason::Kind::error,
          "cannot subscribe to the session's topics on the broker: " + why});
    return;
  }
  state_ = State::ready;
  log::mqtt()->debug("{} subscribed; sending {} queued message(s)", prefix_, queued_.size());
  flush();
}

void ClientSession::send(jsonrpc::Message message) {
  if (state_ == State::closed) return;
  if (state_ == State::ready && !awaiting_init_) {
    publish(message);
    return;
  }
  if (queued_.size() >= max_queued_) {
    fail({bridge::CloseReason::Kind::error,
          "more than " + std::to_string(max_queued_) +
              " messages waiting for the MQTT session to be ready"});
    return;
  }
  queued_.push_back(std::move(message));
  flush();
}

void ClientSession::flush() {
  while (state_ == State::ready && !awaiting_init_ && !queued_.empty()) {
    auto m = std::move(queued_.front());
    queued_.pop_front();
    publish(m);
  }
  // Its memory: messages wait here only until the initialize is answered.
  if (queued_.empty()) queued_.clear();
}

void ClientSession::publish(const jsonrpc::Message& m) {
  const bool initialize = m.is_request() && m.method() == "initialize";
  if (initialize) {
    awaiting_init_ = m.id();
    init_ = m;
  }
  Done done;
  if (m.is_request()) {
    // A request the broker would not take (larger than its Maximum Packet Size, refused by
    // its ACL) is answered here: nothing else would ever answer it. A lost connection ends the
    // session before this runs, and the session's end answers what is pending.
    done = [weak = weak_from_this(), id = m.id(), method = m.method()](bool ok,
                                                                       const std::string& why) {
      auto self = weak.lock();
      if (ok || !self || self->state_ == State::closed) return;
      log::mqtt()->warn("{} {} could not be sent: {}", self->prefix_, method, why);
      if (self->awaiting_init_ && *self->awaiting_init_ == id) {
        self->awaiting_init_.reset();
        self->init_.reset();
      }
      if (self->receiver_.on_message) {
        self->receiver_.on_message(jsonrpc::Message::error(id, jsonrpc::code::internal_error,
                                                           "the bridge could not send " + method +
                                                               " to " + self->server_name_ +
                                                               " over MQTT: " + why));
      }
      self->flush();
    };
  }
  conn_->publish(initialize ? control_topic_ : rpc_topic_, m.shared_text(), false, std::move(done));
}

void ClientSession::on_message(const Incoming& in) {
  if (state_ == State::closed) return;
  auto t = topics_.parse(in.topic);
  if (!t) return;
  if (t->kind == topics::Kind::server_presence) {
    if (t->server_id == server_id_) on_presence(in);
    return;
  }
  if (t->kind == topics::Kind::server_capability) {
    on_capability(in.payload);
    return;
  }
  if (t->kind != topics::Kind::rpc) return;
  auto body = jsonrpc::parse_body(in.payload, limits_);
  if (!body) {
    log::mqtt()->warn("{} dropped a bad message from the server on {}: {}", prefix_, in.topic,
                      body.error().error.message);
    return;
  }
  for (auto& m : body->messages) {
    if (state_ == State::closed) return;
    if (m.is_notification() && m.method() == "notifications/disconnected") {
      fail({bridge::CloseReason::Kind::peer_gone, "server " + server_name_ + " ended the session"});
      return;
    }
    const bool init_answer = awaiting_init_ && m.is_response() && m.id() == *awaiting_init_;
    if (receiver_.on_message) receiver_.on_message(std::move(m));
    if (init_answer) {
      // The server is now subscribed to the RPC topic: what waited may go.
      awaiting_init_.reset();
      init_.reset();
      flush();
    }
  }
}

// 004 §Capability List Changed: the server's list-changed and resource-updated notifications.
void ClientSession::on_capability(const std::shared_ptr<const std::string>& payload) {
  // Before the session's own subscription is in place, nothing of it has gone out.
  if (state_ != State::ready) return;
  auto body = jsonrpc::parse_body(payload, limits_);
  if (!body) {
    log::mqtt()->warn("{} dropped a bad message from the server on its capability topic: {}",
                      prefix_, body.error().error.message);
    return;
  }
  for (auto& m : body->messages) {
    if (state_ == State::closed) return;
    if (m.is_notification() && receiver_.on_message) receiver_.on_message(std::move(m));
  }
}

void ClientSession::on_instance(bridge::Directory::InstanceEvent event,
                                const std::shared_ptr<const std::string>& payload) {
  if (state_ == State::closed) return;
  using Event = bridge::Directory::InstanceEvent;
  switch (event) {
    case Event::capability:
      on_capability(payload);
      return;
    case Event::announced_again:
      announced_again();
      return;
    case Event::unobserved:
      listening_ = 0;
      fail({bridge::CloseReason::Kind::peer_gone,
            "the bridge lost sight of server " + server_name_ + " (instance " + server_id_ +
                "): its presence observer's broker connection dropped"});
      return;
    case Event::offline:
      listening_ = 0;
      if (state_ != State::ready || !conn_->connected()) {
        fail(offline());
        return;
      }
      // What the server sent before it left reached this session's connection before the
      // broker takes the unsubscription: its UNSUBACK comes after them.
      conn_->unsubscribe(rpc_topic_, [weak = weak_from_this()](bool, const std::string&) {
        if (auto self = weak.lock()) self->fail(self->offline());
      });
      return;
  }
}

bridge::CloseReason ClientSession::offline() const {
  return {bridge::CloseReason::Kind::peer_gone,
          "server " + server_name_ + " (instance " + server_id_ + ") went offline"};
}

void ClientSession::on_presence(const Incoming& in) {
  if (in.payload->empty()) {
    // 004 §Server Disconnect: an empty presence means the instance is offline.
    fail(offline());
    return;
  }
  // The retained copy arrives with the subscription; a live one that repeats it is the instance
  // announcing itself again after its broker connection came back (004 §Server Online). A live
  // one that differs is an update of its metadata, and nothing was lost.
  const bool again = !in.retained && presence_ && *presence_ == *in.payload;
  presence_ = in.payload;
  if (again) announced_again();
}

void ClientSession::announced_again() {
  if (state_ != State::ready) return;
  const std::string detail = "server " + server_name_ + " (instance " + server_id_ +
                             ") announced itself again after its broker connection came back";
  log::mqtt()->info("{} {}{}", prefix_, detail,
                    init_ ? "; sending initialize again" : "; requests in flight may be lost");
  if (init_) {
    // Nothing else went out before its answer: sending it again is all there is to redo.
    const auto initialize = *init_;  // publish() records it again
    publish(initialize);
    return;
  }
  if (receiver_.on_interrupted) receiver_.on_interrupted(detail);
}

void ClientSession::stop_listening() {
  if (listening_) directory_->unlisten(listening_);
  listening_ = 0;
}

void ClientSession::fail(bridge::CloseReason why) {
  if (state_ == State::closed) return;
  state_ = State::closed;
  stop_listening();
  queued_.clear();
  log::mqtt()->info("{} session ended: {}", prefix_, why.detail);
  auto receiver = std::move(receiver_);
  receiver_ = {};
  if (conn_) {
    // Best effort: tell the server, then leave. The will covers us if the broker is gone.
    if (conn_->connected()) conn_->publish(topics_.client_presence(client_id_), kDisconnected);
    conn_->disconnect(std::chrono::seconds(2), [self = shared_from_this()] {
      if (auto fn = std::move(self->on_finished_)) fn();
    });
  }
  if (receiver.on_close) receiver.on_close(why);
}

void ClientSession::close(const bridge::CloseReason& why) {
  if (state_ == State::closed) return;
  state_ = State::closed;
  stop_listening();
  queued_.clear();
  receiver_ = {};
  log::mqtt()->debug("{} closing: {}", prefix_, why.detail);
  if (!conn_) {
    if (auto fn = std::move(on_finished_)) boost::asio::post(strand_, fn);
    return;
  }
  // 004 §Client Disconnect: `disconnected` on the presence topic before a clean disconnect
  // (Paho sends the publication before the DISCONNECT).
  if (conn_->connected()) conn_->publish(topics_.client_presence(client_id_), kDisconnected);
  // The completion keeps this session alive until the broker has seen it leave.
  conn_->disconnect(std::chrono::seconds(2), [self = shared_from_this()] {
    if (auto fn = std::move(self->on_finished_)) fn();
  });
}

}  // namespace mcpmqtt::mqtt

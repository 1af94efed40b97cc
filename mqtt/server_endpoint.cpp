#include "mqtt/server_endpoint.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "bridge/protocol/topics.hpp"
#include "common/log.hpp"
#include "common/metrics.hpp"

namespace mcpmqtt::mqtt {

namespace {

const std::string kDisconnected = R"({"jsonrpc":"2.0","method":"notifications/disconnected"})";

// What happens at max_sessions, per server-name: a session closed to make room, or an
// initialize refused because none could.
metrics::Counter& at_limit(const std::string& server_name, const char* outcome) {
  return metrics::registry().counter(
      "mcpmqtt_egress_session_limit_total",
      "Initializes that found a published server at its max_sessions or memory bound, by "
      "outcome: evicted (the least recently active session with nothing in flight and no "
      "subscription was closed to make room) or refused (none could be).",
      {"server_name", "outcome"}, {server_name, outcome});
}

bool is_disconnected(const Incoming& in) {
  if (in.payload->empty()) return true;
  auto m = jsonrpc::Message::parse(in.payload);
  return m && m->is_notification() && m->method() == "notifications/disconnected";
}

}  // namespace

bool is_capability_notification(const jsonrpc::Message& m) {
  if (!m.is_notification()) return false;
  const auto& method = m.method();
  if (method == "notifications/resources/updated") return true;
  constexpr std::string_view prefix = "notifications/", suffix = "/list_changed";
  return method.size() > prefix.size() + suffix.size() && method.starts_with(prefix) &&
         method.ends_with(suffix);
}

// ---- ClientLink --------------------------------------------------------------------------------

ClientLink::ClientLink(boost::asio::any_io_executor strand,
                       std::shared_ptr<ServerEndpoint> endpoint, std::string client_id,
                       std::string prefix, std::size_t max_held, std::size_t max_held_bytes)
    : strand_(std::move(strand)),
      endpoint_(std::move(endpoint)),
      client_id_(std::move(client_id)),
      prefix_(std::move(prefix)),
      max_held_(max_held),
      max_held_bytes_(max_held_bytes) {}

void ClientLink::start(Receiver receiver) {
  receiver_ = std::move(receiver);
  started_ = true;
  while (!held_.empty() && !closed_) {
    auto m = std::move(held_.front());
    held_.pop_front();
    held_bytes_ -= m.size();
    if (receiver_.on_message) receiver_.on_message(std::move(m));
  }
  if (held_close_ && !closed_) {
    closed_ = true;
    if (receiver_.on_close) receiver_.on_close(*held_close_);
  }
}

void ClientLink::deliver(jsonrpc::Message message) {
  if (closed_) return;
  if (!started_) {
    if (held_.size() >= max_held_ || held_bytes_ + message.size() > max_held_bytes_) {
      peer_closed(
          {bridge::CloseReason::Kind::error, "more than " + std::to_string(max_held_) +
                                                 " messages or " + std::to_string(max_held_bytes_) +
                                                 " bytes arrived before the session started"});
      return;
    }
    held_bytes_ += message.size();
    held_.push_back(std::move(message));
    return;
  }
  if (receiver_.on_message) receiver_.on_message(std::move(message));
}

void ClientLink::peer_closed(const bridge::CloseReason& why) {
  if (closed_) return;
  if (!started_) {
    held_close_ = why;
    return;
  }
  closed_ = true;
  if (receiver_.on_close) receiver_.on_close(why);
  receiver_ = {};
}

void ClientLink::send(jsonrpc::Message message) {
  if (closed_) return;
  boost::asio::post(endpoint_->strand_, [ep = endpoint_, cid = client_id_, m = std::move(message)] {
    ep->send_from_link(cid, m);
  });
}

void ClientLink::close(const bridge::CloseReason& why) {
  if (closed_) return;
  closed_ = true;
  receiver_ = {};
  held_.clear();
  held_bytes_ = 0;
  log::mqtt()->debug("{} session ended: {}", prefix_, why.detail);
  boost::asio::post(endpoint_->strand_, [ep = endpoint_, cid = client_id_] {
    ep->end_client(cid, /*send_disconnected=*/true, std::nullopt);
  });
}

// ---- ServerEndpoint ----------------------------------------------------------------------------

std::shared_ptr<ServerEndpoint> ServerEndpoint::create(boost::asio::any_io_executor strand,
                                                       StrandFactory session_strands,
                                                       Options options, Handlers handlers) {
  return std::shared_ptr<ServerEndpoint>(new ServerEndpoint(
      std::move(strand), std::move(session_strands), std::move(options), std::move(handlers)));
}

ServerEndpoint::ServerEndpoint(boost::asio::any_io_executor strand, StrandFactory session_strands,
                               Options options, Handlers handlers)
    : strand_(std::move(strand)),
      session_strands_(std::move(session_strands)),
      options_(std::move(options)),
      topics_(options_.broker.topic_prefix),
      handlers_(std::move(handlers)),
      handshake_timer_(strand_) {}

std::uint64_t ServerEndpoint::reconnects() const {
  return reconnects_before_ + (conn_ ? conn_->reconnects() : 0);
}

void ServerEndpoint::start() {
  open_connection();
}

void ServerEndpoint::open_connection() {
  ConnectionOptions o;
  o.broker = options_.broker;
  o.client_id = options_.server_id;
  o.role = Role::server;
  o.meta_json = options_.connect_meta_json;
  // 004 §Service Unregistration: an empty retained will clears presence if we vanish.
  o.will = Will{topics_.server_presence(options_.server_id, options_.server_name), "", true};
  o.reconnect = true;
  std::weak_ptr<ServerEndpoint> weak = weak_from_this();
  BrokerConnection::Handlers h;
  h.on_message = [weak](const Incoming& in) {
    if (auto self = weak.lock()) self->on_message(in);
  };
  h.on_connected = [weak](const ConnackInfo& info, bool reconnected) {
    if (auto self = weak.lock()) self->on_connected(info, reconnected);
  };
  h.on_connection_lost = [weak](const std::string& cause) {
    if (auto self = weak.lock()) {
      if (self->handlers_.on_broker)
        self->handlers_.on_broker(false, "lost the connection to the broker" +
                                             (cause.empty() ? std::string() : ": " + cause));
    }
  };
  h.on_connect_failed = [weak](const std::string& why, bool retrying) {
    if (auto self = weak.lock()) {
      // A retry is logged by the connection with its delay: once per backoff step.
      if (!retrying) log::mqtt()->warn("{} {}; giving up", self->describe(), why);
      if (self->handlers_.on_broker) self->handlers_.on_broker(false, why);
    }
  };
  conn_ = BrokerConnection::create(strand_, std::move(o), std::move(h));
  conn_->subscribe(topics_.server_control(options_.server_id, options_.server_name), false);
  conn_->connect();
}

void ServerEndpoint::on_connected(const ConnackInfo& info, bool reconnected) {
  if (stopping_) return;
  // 004 §Terminology: a server-name suggested by the broker MUST be used. The will names the
  // presence topic, so reconnect once under the assigned name before announcing anything.
  if (info.server_name && *info.server_name != options_.server_name) {
    const auto why = topics::check_server_name(*info.server_name);
    if (!why.empty()) {
      log::mqtt()->warn("{} ignoring broker-assigned server-name \"{}\": it {}", describe(),
                        *info.server_name, why);
    } else if (!name_adopted_ && clients_.empty()) {
      log::mqtt()->info("{} the broker assigns server-name \"{}\"; reconnecting under it",
                        describe(), *info.server_name);
      name_adopted_ = true;
      options_.server_name = *info.server_name;
      reconnects_before_ += conn_->reconnects();
      auto old = conn_;
      old->disconnect(std::chrono::seconds(2), [self = shared_from_this(), old] {
        if (!self->stopping_) self->open_connection();
      });
      return;
    } else {
      log::mqtt()->warn(
          "{} the broker now assigns server-name \"{}\"; keeping \"{}\" for the live sessions",
          describe(), *info.server_name, options_.server_name);
    }
  }
  // Online once the broker took the presence: a broker whose ACL refuses it (Mosquitto answers
  // PUBACK 0x87 and keeps the connection) leaves the server invisible to every client.
  std::weak_ptr<ServerEndpoint> weak = weak_from_this();
  publish_presence([weak, reconnected](bool ok, const std::string& why) {
    auto self = weak.lock();
    if (!self || self->stopping_) return;
    if (!ok) {
      if (!self->conn_->connected()) return;  // the connection's loss says why
      const std::string what =
          "cannot announce presence on " +
          self->topics_.server_presence(self->options_.server_id, self->options_.server_name) +
          ": " + why;
      log::mqtt()->error("{} {}; clients cannot discover this server (check the broker's ACL)",
                         self->describe(), what);
      if (self->handlers_.on_broker) self->handlers_.on_broker(false, what);
      return;
    }
    log::mqtt()->info("{} online as {} on the broker{}", self->describe(), self->options_.server_id,
                      reconnected ? " again" : "");
    if (self->handlers_.on_broker) self->handlers_.on_broker(true, {});
  });
  if (reconnected && handlers_.on_reconnected) handlers_.on_reconnected();
}

void ServerEndpoint::set_meta(std::string meta_json) {
  if (options_.meta_json == meta_json) return;
  options_.meta_json = std::move(meta_json);
  // 004 §Service Registration: the retained online message is what clients read; a new one
  // replaces it.
  if (conn_ && conn_->connected() && !stopping_) publish_presence();
}

void ServerEndpoint::publish_presence(Done done) {
  std::string payload =
      R"({"jsonrpc":"2.0","method":"notifications/server/online","params":{"server_name":)" +
      jsonrpc::quote(options_.server_name) + R"(,"description":)" +
      jsonrpc::quote(options_.description) + R"(,"meta":)" +
      (options_.meta_json.empty() ? "{}" : options_.meta_json) + "}}";
  conn_->publish(topics_.server_presence(options_.server_id, options_.server_name), payload,
                 /*retained=*/true, std::move(done));
}

void ServerEndpoint::on_message(const Incoming& in) {
  if (stopping_) return;
  auto t = topics_.parse(in.topic);
  if (!t) return;
  switch (t->kind) {
    case topics::Kind::server_control:
      if (t->server_id == options_.server_id) on_control(in);
      break;
    case topics::Kind::rpc:
      if (t->server_id == options_.server_id) on_rpc(t->client_id, in);
      break;
    case topics::Kind::client_presence:
      on_client_presence(t->client_id, in);
      break;
    case topics::Kind::client_capability:
      on_client_capability(t->client_id, in);
      break;
    default:
      break;
  }
}

void ServerEndpoint::on_control(const Incoming& in) {
  if (!in.sender_id) {
    log::mqtt()->warn(
        "{} initialize on the control topic without the MCP-MQTT-CLIENT-ID user "
        "property: the client cannot be answered (004 §User Property)",
        describe());
    return;
  }
  const std::string& cid = *in.sender_id;
  if (const auto why = topics::check_id(cid); !why.empty()) {
    log::mqtt()->warn("{} ignoring initialize from client id \"{}\": it {}", describe(), cid, why);
    return;
  }
  auto parsed = jsonrpc::Message::parse(in.payload, options_.limits);
  if (!parsed) {
    reply_error(cid, parsed.error().id, parsed.error().error.code, parsed.error().error.message);
    return;
  }
  const auto& msg = *parsed;
  if (!msg.is_request() || msg.method() != "initialize") {
    if (msg.is_request()) {
      reply_error(cid, msg.id(), jsonrpc::code::invalid_request,
                  "only initialize is accepted on the control topic; send \"" + msg.method() +
                      "\" on the RPC topic after initializing (004 §Initialization)");
    }
    return;
  }
  if (auto known = clients_.find(cid); known != clients_.end()) {
    auto& k = known->second;
    if (k.init_id && *k.init_id == msg.id()) {
      // The same initialize again: answered as before, or (not answered yet) by the answer to
      // come. Repeating it has no effect (docs/brokers.md, Federated brokers).
      log::mqtt()->info("[server {} client {}] initialize repeated; {}", options_.server_name, cid,
                        k.init_reply ? "answering it again" : "its answer is on its way");
      if (k.init_reply) {
        conn_->publish(topics_.rpc(cid, options_.server_id, options_.server_name), k.init_reply);
        expect_client(k);
      }
      return;
    }
    reply_error(cid, msg.id(), jsonrpc::code::invalid_request,
                "client id " + cid + " already has a session with " + options_.server_name +
                    "; use a fresh MQTT client id for every initialize (004 §MQTT Client ID)");
    return;
  }
  // What stands in the way of one more session: the count, else the owner's budget.
  std::string limit;
  if (clients_.size() >= options_.max_sessions)
    limit = "is serving its maximum of " + std::to_string(options_.max_sessions) + " sessions";
  else if (options_.over_budget)
    limit = options_.over_budget();
  std::string why_not;
  if (!limit.empty() && !evict_idle(cid, limit, &why_not)) {
    at_limit(options_.server_name, "refused").inc();
    reply_error(cid, msg.id(), jsonrpc::code::connection_closed,
                options_.server_name + " " + limit + "; try again later");
    if (std::size_t held_back = 0; refuse_log_.allow(held_back)) {
      log::mqtt()->warn("{} refused client {}: {} {} and none can make room ({}){}", describe(),
                        cid, options_.server_name, limit, why_not,
                        held_back ? "; " + std::to_string(held_back) + " more since the last report"
                                  : std::string());
    }
    return;
  }
  auto& c = clients_[cid];
  c.initialize = msg;
  c.init_id = msg.id();
  // 004 §Initialization, §Capability List Changed, §Client Disconnect: all three subscriptions
  // are in place before the initialize response can be sent.
  std::weak_ptr<ServerEndpoint> weak = weak_from_this();
  auto done = [weak, cid](bool ok, const std::string& why) {
    if (auto self = weak.lock()) self->on_subscribed(cid, ok, why);
  };
  conn_->subscribe({{topics_.rpc(cid, options_.server_id, options_.server_name), /*no_local=*/true},
                    {topics_.client_capability(cid), false},
                    {topics_.client_presence(cid), false}},
                   done);
}

void ServerEndpoint::on_subscribed(const std::string& cid, bool ok, const std::string& why) {
  auto it = clients_.find(cid);
  if (it == clients_.end() || !it->second.initialize) return;
  auto& c = it->second;
  auto initialize = std::move(*c.initialize);
  c.initialize.reset();
  if (!ok) {
    reply_error(cid, initialize.id(), jsonrpc::code::internal_error,
                "the server could not subscribe to this client's topics: " + why);
    end_client(cid, false, std::nullopt);
    return;
  }
  const std::string prefix = "[server " + options_.server_name + " client " + cid + "]";
  auto link = std::shared_ptr<ClientLink>(new ClientLink(session_strands_(), shared_from_this(),
                                                         cid, prefix, options_.max_held_messages,
                                                         options_.max_held_bytes));
  c.link = link;
  log::mqtt()->info("{} new session", prefix);
  // The initialize is the link's first message, held until the owner starts the link; the
  // owner also gets a copy to decide whether (and how) to serve the session. What arrived while
  // subscribing follows it, in order.
  auto early = std::move(c.early);
  c.early.clear();
  c.early_bytes = 0;
  boost::asio::post(link->executor(), [self = shared_from_this(), link, m = std::move(initialize),
                                       early = std::move(early)] {
    link->deliver(m);
    if (self->handlers_.on_initialize) self->handlers_.on_initialize(link, m);
    for (const auto& e : early)
      link->deliver(e);
  });
}

void ServerEndpoint::on_rpc(const std::string& cid, const Incoming& in) {
  auto it = clients_.find(cid);
  if (it == clients_.end()) return;  // not ours any more; we unsubscribed
  // Whatever it sends, the client is there (Options::handshake_timeout).
  it->second.spoke = true;
  it->second.quiet_until.reset();
  auto body = jsonrpc::parse_body(in.payload, options_.limits);
  if (!body) {
    log::mqtt()->warn("[server {} client {}] bad message on the RPC topic: {}",
                      options_.server_name, cid, body.error().error.message);
    reply_error(cid, body.error().id, body.error().error.code, body.error().error.message);
    return;
  }
  for (auto& m : body->messages) {
    if (m.is_notification() && m.method() == "notifications/disconnected") {
      // 004 §Client Disconnect: the client de-initialized; unsubscribe its topics.
      end_client(cid, false,
                 bridge::CloseReason{bridge::CloseReason::Kind::normal,
                                     "the client sent notifications/disconnected"});
      return;
    }
    auto& c = it->second;
    note(c, m, /*from_client=*/true);
    if (auto link = c.link.lock()) {
      boost::asio::post(link->executor(), [link, m = std::move(m)] { link->deliver(m); });
    } else if (c.early.size() < options_.max_early_messages &&
               c.early_bytes + m.size() <= options_.max_early_bytes) {
      c.early_bytes += m.size();
      c.early.push_back(std::move(m));
    } else {
      refuse_early(cid, m);
    }
  }
}

void ServerEndpoint::refuse_early(const std::string& cid, const jsonrpc::Message& m) {
  const std::string why = "more than " + std::to_string(options_.max_early_messages) +
                          " messages or " + std::to_string(options_.max_early_bytes) +
                          " bytes arrived before the initialize response; send requests after "
                          "it (004 §Initialization)";
  auto it = clients_.find(cid);
  if (it != clients_.end() && it->second.early_refused++ == 0)
    log::mqtt()->warn(
        "[server {} client {}] refusing what the client sends until its session is "
        "set up: {}",
        options_.server_name, cid, why);
  if (m.is_request()) reply_error(cid, m.id(), jsonrpc::code::connection_closed, why);
}

void ServerEndpoint::on_client_presence(const std::string& cid, const Incoming& in) {
  if (!clients_.count(cid) || !is_disconnected(in)) return;
  end_client(cid, false,
             bridge::CloseReason{bridge::CloseReason::Kind::peer_gone,
                                 "client " + cid + " is gone (its presence says disconnected)"});
}

void ServerEndpoint::on_client_capability(const std::string& cid, const Incoming& in) {
  auto it = clients_.find(cid);
  if (it == clients_.end()) return;
  auto m = jsonrpc::Message::parse(in.payload, options_.limits);
  if (!m || !m->is_notification()) return;
  if (auto link = it->second.link.lock()) {
    boost::asio::post(link->executor(), [link, m = std::move(*m)] { link->deliver(m); });
  }
}

void ServerEndpoint::send_from_link(const std::string& cid, const jsonrpc::Message& m) {
  auto client = clients_.find(cid);
  if (client == clients_.end() || !conn_) return;
  note(client->second, m, /*from_client=*/false);
  if (auto& c = client->second;
      !c.init_reply && c.init_id && m.is_response() && m.id() == *c.init_id) {
    c.init_reply = m.shared_text();
    expect_client(c);
  }
  const std::string topic =
      is_capability_notification(m)
          ? topics_.server_capability(options_.server_id, options_.server_name)
          : topics_.rpc(cid, options_.server_id, options_.server_name);
  Done done;
  if (m.is_response() || m.is_request()) {
    // What the broker would not take (larger than its Maximum Packet Size, refused by its ACL)
    // must not leave a request unanswered: the client gets an error response in place of a
    // response, and the server one in place of its own request's answer. (A publication lost
    // with the connection may have reached the broker: nothing is substituted for it.)
    done = [weak = weak_from_this(), cid, id = m.id(), request = m.is_request(),
            what = m.is_request() ? m.method() : std::string("the response")](
               bool ok, const std::string& why) {
      auto self = weak.lock();
      if (ok || !self || self->stopping_ || !self->conn_->connected()) return;
      auto it = self->clients_.find(cid);
      if (it == self->clients_.end()) return;
      log::mqtt()->warn("[server {} client {}] {} could not be sent: {}",
                        self->options_.server_name, cid, what, why);
      const auto message = "the bridge could not send " + what + " over MQTT: " + why;
      if (!request) {
        self->reply_error(cid, id, jsonrpc::code::internal_error, message);
      } else if (auto link = it->second.link.lock()) {
        auto err = jsonrpc::Message::error(id, jsonrpc::code::internal_error, message);
        boost::asio::post(link->executor(), [link, err = std::move(err)] { link->deliver(err); });
      }
    };
  }
  conn_->publish(topic, m.shared_text(), false, std::move(done));
}

void ServerEndpoint::note(Client& c, const jsonrpc::Message& m, bool from_client) {
  constexpr std::size_t kMaxTracked = 4096;
  c.last_activity = std::chrono::steady_clock::now();
  // A request waits for the other side: "c" for the client's, "s" for the server's.
  const char* const mine = from_client ? "c" : "s";
  const char* const theirs = from_client ? "s" : "c";
  if (m.is_request()) {
    if (c.pending.size() < kMaxTracked)
      c.pending.insert(mine + m.id().to_json());
    else
      c.pending_overflow = true;
    if (!from_client) return;
    // A subscription counts once the server acknowledged it (MCP server/resources
    // §Subscriptions); unsubscribe ends it at once.
    const bool subscribe = m.method() == "resources/subscribe";
    if (!subscribe && m.method() != "resources/unsubscribe") return;
    const auto* p = m.params();
    if (!p || !p->IsObject()) return;
    auto uri = p->FindMember("uri");
    if (uri == p->MemberEnd() || !uri->value.IsString()) return;
    std::string u(uri->value.GetString(), uri->value.GetStringLength());
    if (!subscribe)
      c.subscribed.erase(u);
    else if (c.subscribing.size() < kMaxTracked && c.subscribed.size() < kMaxTracked)
      c.subscribing.emplace(m.id().to_json(), std::move(u));
  } else if (m.is_response()) {
    const auto id = m.id().to_json();
    c.pending.erase(theirs + id);
    if (from_client || c.subscribing.empty()) return;
    if (auto it = c.subscribing.find(id); it != c.subscribing.end()) {
      if (m.kind() == jsonrpc::Kind::result) c.subscribed.insert(std::move(it->second));
      c.subscribing.erase(it);
    }
  } else if (m.method() == "notifications/cancelled") {
    // MCP basic/utilities/cancellation: a cancelled request may never be answered.
    const auto* p = m.params();
    if (!p || !p->IsObject()) return;
    auto rid = p->FindMember("requestId");
    if (rid == p->MemberEnd()) return;
    jsonrpc::Id id;
    if (rid->value.IsInt64())
      id = jsonrpc::Id::integer(rid->value.GetInt64());
    else if (rid->value.IsString())
      id = jsonrpc::Id::string(std::string(rid->value.GetString(), rid->value.GetStringLength()));
    else
      return;
    c.pending.erase(mine + id.to_json());
  }
}

bool ServerEndpoint::evict_idle(const std::string& for_client, const std::string& cause,
                                std::string* why_not) {
  const auto now = std::chrono::steady_clock::now();
  auto victim = clients_.end();
  std::size_t opening = 0, busy = 0, streaming = 0, recent = 0;
  std::string busy_example;
  for (auto it = clients_.begin(); it != clients_.end(); ++it) {
    const auto& c = it->second;
    if (c.initialize || c.link.expired()) {  // still subscribing, or already ending
      ++opening;
      continue;
    }
    if ((!c.pending.empty() || c.pending_overflow) &&
        now - c.last_activity <= options_.busy_horizon) {
      if (busy++ == 0 && !c.pending.empty()) busy_example = *c.pending.begin();
      continue;
    }
    if (!c.subscribed.empty()) {
      ++streaming;
      continue;
    }
    if (options_.idle_floor.count() > 0 && now - c.last_activity < options_.idle_floor) {
      ++recent;
      continue;
    }
    if (victim == clients_.end() || c.last_activity < victim->second.last_activity) victim = it;
  }
  if (victim == clients_.end()) {
    if (why_not) {
      *why_not = std::to_string(opening) + " opening, " + std::to_string(busy) +
                 " with a request unanswered" +
                 (busy_example.empty() ? "" : " (e.g. " + busy_example + ")") + ", " +
                 std::to_string(streaming) + " with resource subscriptions";
      if (options_.idle_floor.count() > 0)
        *why_not += ", " + std::to_string(recent) + " active within egress.idle_floor_ms (" +
                    log::duration_text(options_.idle_floor) + ")";
    }
    return false;
  }
  const std::string cid = victim->first;
  const auto quiet =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - victim->second.last_activity);
  const std::string why = "closed to make room for a new session (" + options_.server_name + " " +
                          cause +
                          "): the least recently active with nothing in flight and no "
                          "subscription, quiet for " +
                          log::duration_text(quiet);
  ++evicted_;
  at_limit(options_.server_name, "evicted").inc();
  if (std::size_t held_back = 0; evict_log_.allow(held_back)) {
    log::mqtt()->info("[server {} client {}] {}; client {} takes its place{}", options_.server_name,
                      cid, why, for_client,
                      held_back ? " (" + std::to_string(held_back) + " more since the last report)"
                                : std::string());
  }
  // 004 §Server Disconnect: the client is told `disconnected`; the owner ends the upstream.
  auto link = victim->second.link.lock();
  end_client(cid, /*send_disconnected=*/true, std::nullopt);
  if (link) {
    boost::asio::post(link->executor(), [link, why] {
      link->peer_closed(bridge::CloseReason{bridge::CloseReason::Kind::timeout, why});
    });
  }
  return true;
}

void ServerEndpoint::reply_error(const std::string& cid, const jsonrpc::Id& id, int code,
                                 const std::string& message) {
  auto err = jsonrpc::Message::error(id, code, message);
  conn_->publish(topics_.rpc(cid, options_.server_id, options_.server_name), err.shared_text());
}

void ServerEndpoint::end_client(const std::string& cid, bool send_disconnected,
                                std::optional<bridge::CloseReason> tell_link) {
  auto it = clients_.find(cid);
  if (it == clients_.end()) return;
  auto link = it->second.link.lock();
  clients_.erase(it);
  const auto rpc = topics_.rpc(cid, options_.server_id, options_.server_name);
  // 004 §Server Disconnect: de-initialize with `disconnected` on the RPC topic, then unsubscribe.
  if (send_disconnected) conn_->publish(rpc, kDisconnected);
  conn_->unsubscribe({rpc, topics_.client_capability(cid), topics_.client_presence(cid)});
  if (tell_link && link) {
    log::mqtt()->info("[server {} client {}] {}", options_.server_name, cid, tell_link->detail);
    boost::asio::post(link->executor(), [link, why = *tell_link] { link->peer_closed(why); });
  }
}

void ServerEndpoint::expect_client(Client& c) {
  if (c.spoke || options_.handshake_timeout.count() <= 0) return;
  c.quiet_until = std::chrono::steady_clock::now() + options_.handshake_timeout;
  arm_sweep(*c.quiet_until);
}

void ServerEndpoint::arm_sweep(std::chrono::steady_clock::time_point at) {
  if (sweep_at_ && *sweep_at_ <= at) return;
  sweep_at_ = at;
  handshake_timer_.expires_at(at);
  handshake_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    self->sweep_at_.reset();
    self->sweep_quiet_clients();
  });
}

void ServerEndpoint::sweep_quiet_clients() {
  if (stopping_) return;
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::string> quiet;
  std::optional<std::chrono::steady_clock::time_point> next;
  for (const auto& [cid, c] : clients_) {
    if (!c.quiet_until) continue;
    if (*c.quiet_until <= now)
      quiet.push_back(cid);
    else if (!next || *c.quiet_until < *next)
      next = c.quiet_until;
  }
  for (const auto& cid : quiet) {
    log::mqtt()->warn(
        "[server {} client {}] the client sent nothing within {} of its initialize "
        "response: it is taken as gone (timeouts.initialize)",
        options_.server_name, cid, log::duration_text(options_.handshake_timeout));
    end_client(
        cid, true,
        bridge::CloseReason{bridge::CloseReason::Kind::peer_gone,
                            "client " + cid + " sent nothing after its initialize response"});
  }
  if (next) arm_sweep(*next);
}

void ServerEndpoint::stop(std::chrono::milliseconds timeout, std::function<void()> done) {
  if (stopping_ || !conn_) {
    stopping_ = true;
    if (done) boost::asio::post(strand_, std::move(done));
    return;
  }
  stopping_ = true;
  handshake_timer_.cancel();
  std::vector<std::string> ids;
  for (const auto& [cid, c] : clients_)
    ids.push_back(cid);
  for (const auto& cid : ids) {
    end_client(cid, true,
               bridge::CloseReason{bridge::CloseReason::Kind::shutdown,
                                   "the bridge is stopping " + options_.server_name});
  }
  // 004 §Service Unregistration: clear presence before a clean disconnect. The whole stop is
  // bounded by `timeout`, even against a broker that stopped acknowledging.
  auto self = shared_from_this();
  auto finished = std::make_shared<bool>(false);
  auto timer = std::make_shared<boost::asio::steady_timer>(strand_, timeout);
  auto finish = [self, done, finished, timer] {
    if (*finished) return;
    *finished = true;
    timer->cancel();
    log::mqtt()->info("{} offline", self->describe());
    if (self->handlers_.on_broker) self->handlers_.on_broker(false, "stopped");
    if (done) done();
  };
  timer->async_wait([finish](const boost::system::error_code& ec) {
    if (!ec) finish();
  });
  if (conn_->connected()) {
    conn_->publish(topics_.server_presence(options_.server_id, options_.server_name),
                   std::make_shared<const std::string>(), /*retained=*/true);
  }
  conn_->disconnect(timeout, finish);
}

}  // namespace mcpmqtt::mqtt

#include "mqtt/broker_connection.hpp"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <random>
#include <utility>

#include <boost/asio/post.hpp>
#include <rapidjson/document.h>

#include "common/log.hpp"
#include "common/metrics.hpp"
#include "mqtt/codec/codec.hpp"

namespace mcpmqtt::mqtt {

namespace {

// Filters per SUBSCRIBE or UNSUBSCRIBE packet when many go at once (a server endpoint's
// reconnect restores three for every client session).
constexpr std::size_t kFiltersPerPacket = 64;
// Packet identifiers are 16 bits: keep some free for SUBSCRIBE and UNSUBSCRIBE while the
// broker's Receive Maximum (up to 65,535) is in flight.
constexpr std::size_t kMaxInFlight = 65535 - 2 * kFiltersPerPacket;

// `filters` split into the groups that share a SUBSCRIBE or UNSUBSCRIBE packet, in order.
template <typename T>
std::vector<std::vector<T>> in_packets(std::vector<T> filters) {
  std::vector<std::vector<T>> out;
  for (std::size_t at = 0; at < filters.size(); at += kFiltersPerPacket) {
    const auto end = std::min(at + kFiltersPerPacket, filters.size());
    out.emplace_back(std::make_move_iterator(filters.begin() + static_cast<std::ptrdiff_t>(at)),
                     std::make_move_iterator(filters.begin() + static_cast<std::ptrdiff_t>(end)));
  }
  return out;
}

// A completion that runs `done` once, after `n` calls: ok when every call was, and otherwise
// with the first failure's reason.
Done all_of(std::size_t n, Done done) {
  struct State {
    std::size_t left;
    bool ok = true;
    std::string why;
    Done done;
  };
  auto st = std::make_shared<State>(State{n, true, {}, std::move(done)});
  return [st](bool ok, const std::string& why) {
    if (!ok && st->ok) {
      st->ok = false;
      st->why = why;
    }
    if (--st->left == 0) st->done(st->ok, st->why);
  };
}

// `publish_properties`: what every PUBLISH carries (004 §User Property), the will included.
EngineConnect engine_params(const ConnectionOptions& o, const BrokerAddress& a,
                            const UserProperties& publish_properties) {
  const auto& b = o.broker;
  EngineConnect p;
  using T = EngineConnect::Transport;
  p.transport = a.websocket ? (a.tls ? T::websocket_tls : T::websocket) : (a.tls ? T::tls : T::tcp);
  p.host = a.host;
  p.port = a.port;
  p.ws_path = a.ws_path;
  p.ca_file = b.tls.ca_file;
  p.cert_file = b.tls.cert_file;
  p.key_file = b.tls.key_file;
  p.verify = b.tls.verify;
  p.client_id = o.client_id;
  if (!b.username.empty()) p.username = b.username;
  if (!b.password.empty()) p.password = b.password;
  p.keep_alive_s = static_cast<std::uint16_t>(b.keepalive_s);
  p.connect_timeout = std::chrono::milliseconds(b.connect_timeout_ms);
  // 004 §MQTT Requirements: clean start and no session expiry, on every connection.
  p.clean_start = true;
  p.session_expiry_s = 0;
  p.maximum_packet_size = b.max_packet_bytes;
  // Brokers that alias long topics (the RPC topics are) may do so toward us.
  p.topic_alias_maximum = 64;
  p.user_properties = {{"MCP-COMPONENT-TYPE", component_type(o.role)}, {"MCP-META", o.meta_json}};
  if (o.will) {
    EngineConnect::Will w;
    w.topic = o.will->topic;
    w.payload = o.will->payload;
    w.qos = b.qos;
    w.retain = o.will->retained;
    w.user_properties = publish_properties;
    p.will = std::move(w);
  }
  return p;
}

ConnackInfo connack_info(const EngineConnack& ack) {
  ConnackInfo info;
  info.receive_maximum = ack.receive_maximum;
  info.maximum_packet_size = ack.maximum_packet_size;
  for (const auto& [key, value] : ack.user_properties) {
    if (key == "MCP-SERVER-NAME") {
      info.server_name = value;
    } else if (key == "MCP-RBAC") {
      info.rbac_json = value;
    } else if (key == "MCP-SERVER-NAME-FILTERS") {
      rapidjson::Document d;
      d.Parse(value.c_str(), value.size());
      std::vector<std::string> filters;
      if (!d.HasParseError() && d.IsArray()) {
        for (const auto& f : d.GetArray()) {
          if (f.IsString()) filters.emplace_back(f.GetString(), f.GetStringLength());
        }
      }
      info.server_name_filters = std::move(filters);
    }
  }
  return info;
}

// Why a publication's Response Topic or Correlation Data cannot be sent, or empty. Refused here
// rather than by the broker, which would end the connection over them.
std::string request_properties_problem(const PublishOptions& o) {
  // §1.5.4, §1.5.6: a two-byte length.
  if (o.response_topic.size() > 65535 || o.correlation_data.size() > 65535) {
    return "the Response Topic (" + std::to_string(o.response_topic.size()) +
           " bytes) or the Correlation Data (" + std::to_string(o.correlation_data.size()) +
           " bytes) is longer than the 65,535 bytes MQTT allows";
  }
  // §3.3.2.3.5 [MQTT-3.3.2-14]: a UTF-8 string with no wildcard characters.
  if (!o.response_topic.empty() && !codec::valid_topic_name(o.response_topic)) {
    return "the Response Topic \"" + o.response_topic +
           "\" is not a topic name (UTF-8 without '+' or '#', MQTT 5.0 §3.3.2.3.5)";
  }
  return {};
}

// With several brokers: the one that took the process's latest connection, where a new connection
// starts (a session opened after a failover goes straight to the broker that is up).
std::atomic<std::size_t> preferred_address{0};

// One generator per thread: a std::mt19937 in each connection cost 5 KB of its memory, and an
// ingress holds a connection per session.
std::mt19937& jitter_source() {
  thread_local std::mt19937 rng(std::random_device{}());
  return rng;
}

}  // namespace

const char* component_type(Role role) {
  return role == Role::server ? "mcp-server" : "mcp-client";
}

std::shared_ptr<BrokerConnection> BrokerConnection::create(boost::asio::any_io_executor strand,
                                                           ConnectionOptions options,
                                                           Handlers handlers) {
  return std::shared_ptr<BrokerConnection>(
      new BrokerConnection(std::move(strand), std::move(options), std::move(handlers)));
}

BrokerConnection::BrokerConnection(boost::asio::any_io_executor strand, ConnectionOptions options,
                                   Handlers handlers)
    : strand_(std::move(strand)),
      options_(std::move(options)),
      handlers_(std::move(handlers)),
      retry_timer_(strand_) {
  // 004 §User Property: on every PUBLISH.
  publish_properties_ = std::make_shared<const UserProperties>(
      UserProperties{{"MCP-COMPONENT-TYPE", component_type(options_.role)},
                     {"MCP-MQTT-CLIENT-ID", options_.client_id}});
  for (const auto& p : *publish_properties_)
    publish_properties_bytes_ += 1 + 2 + p.key.size() + 2 + p.value.size();  // §2.2.2.2
}

BrokerConnection::~BrokerConnection() {
  count_up(false);
  retry_timer_.cancel();
}

BrokerAddress BrokerConnection::address() const {
  const auto& b = options_.broker;
  if (address_ == 0 || address_ > b.fallbacks.size())
    return {b.host, b.port, b.tls.enabled, b.websocket, b.ws_path};
  return b.fallbacks[address_ - 1];
}

std::string BrokerConnection::broker_url() const {
  const auto a = address();
  const bool v6 = a.host.find(':') != std::string::npos;
  const char* scheme =
      a.websocket ? (a.tls ? "wss://" : "ws://") : (a.tls ? "mqtts://" : "mqtt://");
  return scheme + (v6 ? "[" + a.host + "]" : a.host) + ":" + std::to_string(a.port) +
         (a.websocket ? a.ws_path : "");
}

void BrokerConnection::connect() {
  if (state_ != State::idle) return;
  std::weak_ptr<BrokerConnection> weak = weak_from_this();
  Engine::Events events;
  events.on_message = [weak](const ReceivedMessage& m) {
    if (auto self = weak.lock()) self->on_message(m);
  };
  events.on_lost = [weak](const std::string& why) {
    if (auto self = weak.lock()) self->on_lost(why);
  };
  engine_ = options_.broker.engine == EngineKind::paho
                ? make_paho_engine(strand_, std::move(events))
                : make_native_engine(strand_, std::move(events));
  if (brokers() > 1) address_ = preferred_address.load() % brokers();
  do_connect();
}

void BrokerConnection::on_message(const ReceivedMessage& m) {
  if (state_ != State::connected || !handlers_.on_message) return;
  static auto& bytes_in = metrics::bytes_counter("mqtt", "in");
  bytes_in.inc(m.payload->size());
  Incoming in;
  in.topic = m.topic;
  in.payload = m.payload;
  in.retained = m.retain;
  in.qos = m.qos;
  for (const auto& p : m.user_properties) {
    if (p.key == "MCP-COMPONENT-TYPE")
      in.component_type = std::string(p.value);
    else if (p.key == "MCP-MQTT-CLIENT-ID")
      in.sender_id = std::string(p.value);
  }
  if (m.response_topic) in.response_topic = std::string(*m.response_topic);
  if (m.correlation_data) in.correlation_data = std::string(*m.correlation_data);
  handlers_.on_message(in);
}

void BrokerConnection::do_connect() {
  state_ = State::connecting;
  std::weak_ptr<BrokerConnection> weak = weak_from_this();
  engine_->connect(engine_params(options_, address(), *publish_properties_),
                   [weak](const ConnectOutcome& r) {
                     if (auto self = weak.lock()) self->on_connect_result(r);
                   });
}

void BrokerConnection::on_connect_result(const ConnectOutcome& r) {
  if (state_ != State::connecting) return;
  if (!r.ok) {
    std::string why = "cannot connect to " + broker_url() + ": " + r.why;
    if (r.reason_code == 0x86 || r.reason_code == 0x87) {
      why += options_.broker.credentials_source.empty()
                 ? " (check mqtt.username and the password from mqtt.password_file or "
                   "MCPMQTT_MQTT_PASSWORD)"
                 : " (" + options_.broker.credentials_source + ")";
    }
    if (!options_.reconnect) {
      // One attempt at each broker of the list before the connection fails.
      if (++tried_ < brokers()) {
        log::mqtt()->info("{} {}; trying the next broker", describe(), why);
        address_ = (address_ + 1) % brokers();
        do_connect();
        return;
      }
      state_ = State::closed;
      if (handlers_.on_connect_failed) handlers_.on_connect_failed(why, false);
      fail_everything(why);
      return;
    }
    if (handlers_.on_connect_failed) handlers_.on_connect_failed(why, true);
    schedule_retry(why);
    return;
  }
  const auto info = connack_info(r.connack);
  state_ = State::connected;
  if (brokers() > 1) preferred_address.store(address_);
  attempt_ = 0;
  ++generation_;
  in_flight_ = 0;
  in_flight_bytes_ = 0;
  receive_maximum_ = std::min<std::size_t>(info.receive_maximum, kMaxInFlight);
  max_packet_size_ = info.maximum_packet_size;
  const bool reconnected = ever_connected_;
  count_up(true);
  if (reconnected) {
    ++reconnects_;
    static auto& reconnects = metrics::registry().counter(
        "mcpmqtt_mqtt_reconnects_total",
        "MQTT connections of the bridge made again after they were lost.");
    reconnects.inc();
  }
  ever_connected_ = true;
  if (!options_.reconnect) {
    // Connected once, never again: what only CONNECT needed goes, a few hundred bytes of each of
    // an ingress's thousands of idle sessions (issue 34).
    options_.will.reset();
    std::string().swap(options_.meta_json);
    std::string().swap(options_.broker.username);
    std::string().swap(options_.broker.password);
  }
  log::mqtt()->debug("{} connected to {}{} ({} client)", describe(), broker_url(),
                     reconnected ? " again" : "",
                     options_.broker.engine == EngineKind::paho ? "Paho" : "native");
  // 004: restore every subscription before the owner publishes anything (presence, backlog).
  if (!subscriptions_.empty()) {
    std::vector<Filter> all;
    all.reserve(subscriptions_.size());
    for (const auto& [filter, sub] : subscriptions_)
      all.push_back({filter, sub.no_local});
    send_subscribe(std::move(all));
  }
  if (handlers_.on_connected) handlers_.on_connected(info, reconnected);
  while (!backlog_.empty()) {
    window_bytes_ += backlog_.front().bytes();
    window_.push_back(std::move(backlog_.front()));
    backlog_.pop_front();
  }
  backlog_bytes_ = 0;
  drain_window();
}

void BrokerConnection::on_lost(const std::string& cause) {
  if (state_ == State::disconnecting) return finish_disconnect();
  if (state_ != State::connected) return;
  log::mqtt()->warn("{} lost the broker connection: {}", describe(),
                    cause.empty() ? "connection closed" : cause);
  state_ = options_.reconnect ? State::waiting_retry : State::closed;
  count_up(false);
  static auto& losses = metrics::registry().counter(
      "mcpmqtt_mqtt_connection_losses_total",
      "MQTT connections of the bridge lost without a disconnect of its own.");
  losses.inc();
  // What waited for the window is sent after the reconnect, ahead of anything newer.
  while (!window_.empty()) {
    backlog_bytes_ += window_.back().bytes();
    backlog_.push_front(std::move(window_.back()));
    window_.pop_back();
  }
  window_bytes_ = 0;
  if (handlers_.on_connection_lost) handlers_.on_connection_lost(cause);
  // The owner may have disconnected us from its handler.
  if (state_ == State::waiting_retry) schedule_retry(cause);
}

void BrokerConnection::schedule_retry(const std::string& why) {
  state_ = State::waiting_retry;
  const auto& b = options_.broker;
  // With several brokers (mqtt.url as a list) the next one is tried; the delay doubles once per
  // round through the list, so a dead broker costs the others no more than its own attempt.
  if (brokers() > 1) address_ = (address_ + 1) % brokers();
  const auto rounds = static_cast<std::size_t>(attempt_) / brokers();
  double delay = b.reconnect_min_ms;
  for (std::size_t i = 0; i < rounds && delay < b.reconnect_max_ms; ++i)
    delay *= 2;
  delay = std::min<double>(delay, b.reconnect_max_ms);
  // ±20% jitter, so a fleet of bridges does not reconnect in lockstep after a broker restart.
  delay *= std::uniform_real_distribution<double>(0.8, 1.2)(jitter_source());
  ++attempt_;
  // The one line per backoff step that says why (the owners do not repeat it).
  if (brokers() > 1) {
    log::mqtt()->warn("{} reconnecting to {} in {} ms (attempt {}): {}", describe(), broker_url(),
                      static_cast<long>(delay), attempt_, why);
  } else {
    log::mqtt()->warn("{} reconnecting in {} ms (attempt {}): {}", describe(),
                      static_cast<long>(delay), attempt_, why);
  }
  retry_timer_.expires_after(std::chrono::milliseconds(static_cast<long>(delay)));
  retry_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->state_ != State::waiting_retry) return;
    self->do_connect();
  });
}

void BrokerConnection::subscribe(std::vector<Filter> filters, Done done) {
  if (filters.empty()) {
    if (done) boost::asio::post(strand_, [done = std::move(done)] { done(true, {}); });
    return;
  }
  // Each filter keeps its own waiter (a reconnect or an unsubscribe answers filters one by one);
  // the caller's `done` runs once all of them answered.
  const Done each = done ? all_of(filters.size(), std::move(done)) : Done{};
  for (const auto& f : filters) {
    auto& sub = subscriptions_[f.filter];
    sub.no_local = f.no_local;
    if (each) sub.waiting.push_back(each);
  }
  if (state_ == State::connected) send_subscribe(std::move(filters));
}

void BrokerConnection::send_subscribe(std::vector<Filter> filters) {
  for (auto& packet : in_packets(std::move(filters))) {
    std::vector<SubscribeRequest> requests;
    std::vector<std::string> names;
    requests.reserve(packet.size());
    names.reserve(packet.size());
    for (auto& f : packet) {
      requests.push_back({f.filter, options_.broker.qos, f.no_local});
      names.push_back(std::move(f.filter));
    }
    std::weak_ptr<BrokerConnection> weak = weak_from_this();
    engine_->subscribe(std::move(requests), [weak, names = std::move(names)](const AckOutcome& r) {
      if (auto self = weak.lock()) self->on_subscribe_result(names, r.ok, r.why, r.reason_codes);
    });
  }
}

void BrokerConnection::on_subscribe_result(const std::vector<std::string>& filters, bool ok_all,
                                           const std::string& why_all,
                                           const std::vector<std::uint8_t>& codes) {
  // SUBACK reason codes of 0x80 and above refuse a subscription (MQTT 5.0 §3.9.3), one code per
  // filter in the order of the SUBSCRIBE. Should a broker send fewer, a refusal counts for all.
  const bool one_each = codes.size() == filters.size();
  std::uint8_t shared = 0;  // the refusal that counts for all, when the codes cannot be told apart
  if (!one_each) {
    for (auto rc : codes) {
      if (rc >= 0x80) shared = rc;
    }
  }
  for (std::size_t i = 0; i < filters.size(); ++i) {
    auto it = subscriptions_.find(filters[i]);
    if (it == subscriptions_.end()) continue;
    bool ok = ok_all;
    std::string why = why_all;
    const std::uint8_t rc = one_each ? codes[i] : shared;
    const bool refused = ok && rc >= 0x80;
    if (refused) {
      ok = false;
      // Named: an ACL refuses some of a connection's topics, and the owner passes this on.
      why = "the broker refused the subscription to " + filters[i] + ": " + codec::reason_text(rc);
    }
    if (!ok && state_ == State::connected) {
      if (refused)
        log::mqtt()->warn("{} {}", describe(), why);
      else
        log::mqtt()->warn("{} subscribe {} failed: {}", describe(), filters[i], why);
    }
    auto waiting = std::move(it->second.waiting);
    it->second.waiting.clear();
    for (auto& done : waiting)
      done(ok, why);
  }
}

void BrokerConnection::unsubscribe(std::vector<std::string> filters, Done done) {
  std::vector<std::string> held;
  for (auto& filter : filters) {
    auto it = subscriptions_.find(filter);
    if (it == subscriptions_.end()) continue;
    auto waiting = std::move(it->second.waiting);
    subscriptions_.erase(it);
    for (auto& w : waiting)
      w(false, "unsubscribed before the broker acknowledged");
    held.push_back(std::move(filter));
  }
  if (held.empty() || state_ != State::connected) {
    if (done) boost::asio::post(strand_, [done] { done(true, {}); });
    return;
  }
  // One completion for the whole call, whatever the number of packets.
  auto packets = in_packets(std::move(held));
  const Done each = done ? all_of(packets.size(), std::move(done)) : Done{};
  for (auto& names : packets) {
    const auto op = add_op(each);
    std::weak_ptr<BrokerConnection> weak = weak_from_this();
    engine_->unsubscribe(std::move(names), [weak, op](const AckOutcome& r) {
      if (auto self = weak.lock()) self->complete_op(op, r.ok, r.why);
    });
  }
}

void BrokerConnection::publish(const std::string& topic, std::shared_ptr<const std::string> payload,
                               PublishOptions options, Done done) {
  Publication p{topic, std::move(payload), options.retained, std::move(done), nullptr};
  std::string why = request_properties_problem(options);
  if (why.empty()) {
    if (!options.response_topic.empty() || !options.correlation_data.empty()) {
      p.request = std::make_unique<RequestProperties>(RequestProperties{
          std::move(options.response_topic), std::move(options.correlation_data)});
    }
    if (state_ == State::connected) return send_or_queue(std::move(p));
    const bool will_connect =
        state_ == State::idle || state_ == State::connecting || state_ == State::waiting_retry;
    if (!will_connect) {
      why = "the broker connection is closed";
    } else if (backlog_.size() >= options_.max_backlog_messages ||
               backlog_bytes_ + p.bytes() > options_.max_backlog_bytes) {
      why = "the backlog of messages waiting for the broker connection is full (" +
            std::to_string(backlog_.size()) + " messages)";
    }
  }
  if (!why.empty()) {
    warn_refused(topic, why);
    if (p.done) boost::asio::post(strand_, [done = std::move(p.done), why] { done(false, why); });
    return;
  }
  backlog_bytes_ += p.bytes();
  backlog_.push_back(std::move(p));
}

void BrokerConnection::warn_refused(const std::string& topic, const std::string& why) {
  // A publisher that keeps going past a bound would otherwise write a line per message.
  std::size_t held_back = 0;
  if (!refusal_log_.allow(held_back)) return;
  if (held_back)
    log::mqtt()->warn("{} cannot publish to {}: {} ({} more refused in the last second)",
                      describe(), topic, why, held_back);
  else
    log::mqtt()->warn("{} cannot publish to {}: {}", describe(), topic, why);
}

bool BrokerConnection::in_flight_room(std::size_t bytes) const {
  return in_flight_ < receive_maximum_ &&
         (in_flight_bytes_ == 0 || in_flight_bytes_ + bytes <= options_.max_in_flight_bytes);
}

void BrokerConnection::send_or_queue(Publication p) {
  const std::size_t size = p.bytes();
  if (window_.empty() && in_flight_room(size)) return send_publish(std::move(p));
  std::string why;
  if (window_.size() >= static_cast<std::size_t>(options_.max_queued_messages))
    why = "too many publications wait for the broker's acknowledgements (" +
          std::to_string(window_.size()) + " messages)";
  else if (window_bytes_ + size > options_.max_queued_bytes)
    why = "the publications waiting for the broker's acknowledgements would exceed " +
          std::to_string(options_.max_queued_bytes) + " bytes (" + std::to_string(window_bytes_) +
          " queued, this one " + std::to_string(size) + ")";
  if (!why.empty()) {
    warn_refused(p.topic, why);
    if (p.done) boost::asio::post(strand_, [done = std::move(p.done), why] { done(false, why); });
    return;
  }
  window_bytes_ += size;
  window_.push_back(std::move(p));
}

LazyDeque<BrokerConnection::Publication> BrokerConnection::take_unsent() {
  auto out = std::move(window_);
  window_.clear();
  window_bytes_ = 0;
  for (auto& p : backlog_)
    out.push_back(std::move(p));
  backlog_.clear();
  backlog_bytes_ = 0;
  return out;
}

void BrokerConnection::drain_window() {
  const bool draining = state_ == State::disconnecting && !disconnect_sent_;
  while ((state_ == State::connected || draining) && !window_.empty() &&
         in_flight_room(window_.front().bytes())) {
    auto p = std::move(window_.front());
    window_.pop_front();
    window_bytes_ -= p.bytes();
    send_publish(std::move(p));
  }
}

std::size_t BrokerConnection::publish_packet_size(const Publication& p) const {
  // MQTT 5.0 §3.3: fixed header, topic, packet identifier (QoS > 0), properties, payload. Each
  // of Response Topic and Correlation Data is an identifier byte and a length-prefixed string.
  std::size_t properties = publish_properties_bytes_;
  if (p.request) {
    if (!p.request->response_topic.empty()) properties += 1 + 2 + p.request->response_topic.size();
    if (!p.request->correlation_data.empty())
      properties += 1 + 2 + p.request->correlation_data.size();
  }
  const std::size_t remaining = 2 + p.topic.size() + (options_.broker.qos > 0 ? 2 : 0) +
                                codec::varint_size(properties) + properties + p.payload->size();
  return 1 + codec::varint_size(remaining) + remaining;
}

void BrokerConnection::send_publish(Publication p) {
  if (max_packet_size_) {
    // MQTT 5.0 §3.2.2.3.6: the broker would end the connection over it (Mosquitto sends
    // DISCONNECT 0x95). Refused here, with both sizes, and the connection goes on.
    const auto size = publish_packet_size(p);
    if (size > max_packet_size_) {
      const std::string why = "the message is " + std::to_string(size) +
                              " bytes as an MQTT packet; the broker takes at most " +
                              std::to_string(max_packet_size_) + " (its Maximum Packet Size)";
      warn_refused(p.topic, why);
      if (p.done) boost::asio::post(strand_, [done = std::move(p.done), why] { done(false, why); });
      return;
    }
  }
  static auto& bytes_out = metrics::bytes_counter("mqtt", "out");
  bytes_out.inc(p.payload->size());
  const auto op = add_op(std::move(p.done));
  const auto generation = generation_;
  const std::size_t bytes = p.bytes();
  ++in_flight_;
  in_flight_bytes_ += bytes;
  PublishRequest request;
  request.topic = p.topic;
  request.payload = std::move(p.payload);
  request.qos = options_.broker.qos;
  request.retain = p.retained;
  request.user_properties = publish_properties_;
  if (p.request) {
    request.response_topic = std::move(p.request->response_topic);
    request.correlation_data = std::move(p.request->correlation_data);
  }
  std::weak_ptr<BrokerConnection> weak = weak_from_this();
  engine_->publish(std::move(request), [weak, op, topic = std::move(p.topic), generation,
                                        bytes](const AckOutcome& r) {
    auto self = weak.lock();
    if (!self) return;
    if (!r.ok && self->state_ == State::connected) {
      log::mqtt()->warn("{} publish to {} failed: {}", self->describe(), topic, r.why);
    }
    self->complete_op(op, r.ok, r.why);
    if (generation == self->generation_ && self->in_flight_ > 0) {
      --self->in_flight_;
      self->in_flight_bytes_ -= std::min(bytes, self->in_flight_bytes_);
      self->drain_window();
      self->disconnect_when_drained();
    }
  });
}

std::uint64_t BrokerConnection::add_op(Done done) {
  const auto op = next_op_++;
  if (done) ops_.emplace(op, std::move(done));
  return op;
}

void BrokerConnection::complete_op(std::uint64_t op, bool ok, const std::string& why) {
  auto it = ops_.find(op);
  if (it == ops_.end()) return;
  auto done = std::move(it->second);
  ops_.erase(it);
  done(ok, why);
}

void BrokerConnection::fail_everything(const std::string& why) {
  auto ops = std::move(ops_);
  ops_.clear();
  auto backlog = take_unsent();
  for (auto& [id, done] : ops)
    done(false, why);
  for (auto& p : backlog) {
    if (p.done) p.done(false, why);
  }
  for (auto& [filter, sub] : subscriptions_) {
    auto waiting = std::move(sub.waiting);
    sub.waiting.clear();
    for (auto& w : waiting)
      w(false, why);
  }
}

void BrokerConnection::disconnect(std::chrono::milliseconds timeout, std::function<void()> done) {
  retry_timer_.cancel();
  if (state_ != State::connected) {
    // An attempt in flight is abandoned: the engine closes whatever it opens.
    if (state_ == State::connecting && engine_) engine_->disconnect(timeout, {});
    state_ = State::closed;
    fail_everything("the connection was closed");
    if (done) boost::asio::post(strand_, std::move(done));
    return;
  }
  state_ = State::disconnecting;
  count_up(false);
  disconnect_done_ = std::move(done);
  disconnect_sent_ = false;
  disconnect_deadline_ = std::chrono::steady_clock::now() + timeout;
  // Bound the wait ourselves: a broker that stopped acknowledging must not hold the caller. The
  // timer also keeps this connection alive until the disconnect is over.
  disconnect_timer_ = std::make_shared<boost::asio::steady_timer>(strand_, disconnect_deadline_);
  disconnect_timer_->async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (!ec) self->on_disconnect_timeout();
  });
  // What was published before goes first (a server's `disconnected` to its clients and its
  // empty presence, a client's `disconnected`), paced by the window as ever.
  disconnect_when_drained();
}

void BrokerConnection::disconnect_when_drained() {
  if (state_ != State::disconnecting || disconnect_sent_ || !window_.empty()) return;
  disconnect_sent_ = true;
  const auto left = std::max(std::chrono::steady_clock::duration::zero(),
                             disconnect_deadline_ - std::chrono::steady_clock::now());
  // The engine waits (within what is left) for acknowledgements, then sends DISCONNECT; our
  // timer gives it half a second more before it is cut off.
  disconnect_timer_->expires_at(disconnect_deadline_ + std::chrono::milliseconds(500));
  disconnect_timer_->async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (!ec) self->finish_disconnect();
  });
  std::weak_ptr<BrokerConnection> weak = weak_from_this();
  engine_->disconnect(std::chrono::duration_cast<std::chrono::milliseconds>(left), [weak] {
    if (auto self = weak.lock()) self->finish_disconnect();
  });
}

void BrokerConnection::on_disconnect_timeout() {
  if (state_ != State::disconnecting || disconnect_sent_) return;
  // Publications still wait for the window: a clean DISCONNECT would make the broker discard
  // our will, and with it the last word the peers would get (004: a server's empty presence,
  // a client's `disconnected`). Leave without one instead, so the broker sends the will.
  log::mqtt()->warn(
      "{} {} publication(s) still queued at the disconnect timeout; closing without "
      "DISCONNECT so that the broker publishes the will",
      describe(), window_.size());
  engine_.reset();
  finish_disconnect();
}

void BrokerConnection::count_up(bool up) {
  static auto& connections = metrics::registry().gauge(
      "mcpmqtt_mqtt_connections", "MQTT connections of the bridge that are up.");
  if (up == counted_up_) return;
  counted_up_ = up;
  if (up)
    connections.inc();
  else
    connections.dec();
}

void BrokerConnection::finish_disconnect() {
  if (state_ != State::disconnecting) return;
  state_ = State::closed;
  if (disconnect_timer_) disconnect_timer_->cancel();
  fail_everything("the connection was closed");
  if (auto done = std::move(disconnect_done_)) done();
}

}  // namespace mcpmqtt::mqtt

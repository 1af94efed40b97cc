#include "mqtt/connection.hpp"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <boost/asio/post.hpp>
#include <mqtt/async_client.h>
#include <rapidjson/document.h>

#include "bridge/log.hpp"
#include "bridge/metrics.hpp"
#include "mqtt/executor_gate.hpp"
#include "mqtt/tcp_nodelay.hpp"

namespace mcpmqtt::mqtt {

namespace {

auto logger() {
  static auto l = log::get("mqtt");
  return l;
}

constexpr auto kDestroyDelay = std::chrono::seconds(2);
// Filters per SUBSCRIBE or UNSUBSCRIBE packet when many go at once (a server endpoint's
// reconnect restores three for every client session).
constexpr std::size_t kFiltersPerPacket = 64;

std::string paho_error(int rc, int reason) {
  return ::mqtt::exception::printable_error(rc, reason, "");
}

// A connect failure in words: Paho's generic codes say little about what a person should check.
std::string connect_error(int rc, int reason) {
  // Paho C reports a refusing MQTT 5 CONNACK with its reason code as the return code.
  if (reason < 0x80 && rc >= 0x80) reason = rc;
  if (reason == 0x86 || reason == 0x87)
    return "the broker refused the connection: " + ::mqtt::exception::reason_code_str(reason) +
           " (check mqtt.username and the password from mqtt.password_file or "
           "MCPMQTT_MQTT_PASSWORD)";
  if (reason >= 0x80)
    return "the broker refused the connection: " + ::mqtt::exception::reason_code_str(reason);
  switch (rc) {
    case MQTTASYNC_FAILURE:
      return "connection refused, broker unreachable, or the connection closed during the MQTT/TLS "
             "handshake";
    case MQTTASYNC_BAD_PROTOCOL:
      return "the broker does not speak MQTT 5";
    default:
      return paho_error(rc, reason);
  }
}

std::string server_uri(const config::MqttConfig& b) {
  const bool v6 = b.host.find(':') != std::string::npos;
  return std::string(b.tls.enabled ? "ssl://" : "tcp://") + (v6 ? "[" + b.host + "]" : b.host) +
         ":" + std::to_string(b.port);
}

// `filters` split into the groups that share a SUBSCRIBE or UNSUBSCRIBE packet, in order.
std::vector<std::vector<std::string>> in_packets(std::vector<std::string> filters) {
  std::vector<std::vector<std::string>> out;
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

}  // namespace

const char* component_type(Role role) {
  return role == Role::server ? "mcp-server" : "mcp-client";
}

// What a Paho operation reported, copied off the Paho thread.
struct Connection::OpResult {
  bool ok = false;
  std::string why;
  ConnackInfo connack;
  std::vector<int> reason_codes;  // SUBACK / UNSUBACK
};

namespace {

// When Paho's receive thread last called us (an operation's outcome, a message): while it
// does, it is cycling through poll() and needs no wake-up (see PahoWaker).
std::atomic<std::int64_t> g_paho_active_ns{0};

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void note_paho_active() {
  g_paho_active_ns.store(steady_ns(), std::memory_order_relaxed);
}

}  // namespace

// An action listener that copies the token's outcome and posts it; deletes itself afterwards.
// Listeners still registered when the Paho client is destroyed are deleted with it.
class PahoListener final : public ::mqtt::iaction_listener {
 public:
  using Fn = std::function<void(const ::mqtt::token&, bool ok)>;
  struct Registry {
    std::mutex mu;
    std::unordered_set<PahoListener*> live;
  };

  static PahoListener& make(const std::shared_ptr<Registry>& reg, Fn fn) {
    auto* l = new PahoListener(reg, std::move(fn));
    std::lock_guard lock(reg->mu);
    reg->live.insert(l);
    return *l;
  }

  // For an operation that never started (Paho threw): remove and delete now.
  void discard() {
    if (retire()) delete this;
  }

 private:
  PahoListener(std::shared_ptr<Registry> reg, Fn fn) : reg_(std::move(reg)), fn_(std::move(fn)) {}
  bool retire() {
    std::lock_guard lock(reg_->mu);
    return reg_->live.erase(this) != 0;
  }
  void on_success(const ::mqtt::token& tok) override { fire(tok, true); }
  void on_failure(const ::mqtt::token& tok) override { fire(tok, false); }
  void fire(const ::mqtt::token& tok, bool ok) {
    note_paho_active();
    if (!retire()) return;  // the client is being destroyed
    fn_(tok, ok);
    delete this;
  }

  std::shared_ptr<Registry> reg_;
  Fn fn_;
};

// Paho C's receive thread waits in poll() with a one-second timeout on the sockets it had when
// the wait began, so a new connection's TCP handshake and CONNACK (and a DISCONNECT's end) are
// only noticed when that wait ends: about two seconds for every connect while another client
// is idle. Traffic on any established connection ends the wait at once. While a connection of
// ours connects or disconnects, another one sends an UNSUBSCRIBE of a filter nobody holds — the
// broker only answers UNSUBACK, whatever its ACLs — and its answer wakes the thread.
//
// One wake-up at a time for the whole process, at most one per kWakeInterval, and none while
// the thread is visibly busy: one UNSUBACK wakes the thread for every connection waiting. Paho
// handles each packet with scans over all of its clients, so wake-ups sent faster than it answers
// them piled up in its queue: with 6,000 sessions opened 16 at a time, the backlog kept its receive
// thread busy for minutes after the last one was open (the sessions benchmark, bench/README.md).
class PahoWaker {
 public:
  static PahoWaker& instance() {
    static auto* w = new PahoWaker;  // never destroyed: Paho's thread may still answer a poke
    return *w;
  }
  void add(const std::shared_ptr<::mqtt::async_client>& c) {
    std::lock_guard lock(mu_);
    connected_[c.get()] = c;
  }
  void remove(const ::mqtt::async_client* c) {
    std::lock_guard lock(mu_);
    connected_.erase(c);
  }
  void poke(const ::mqtt::async_client* except) {
    // Busy with traffic, the thread polls again within the interval anyway.
    const auto since_active =
        std::chrono::nanoseconds(steady_ns() - g_paho_active_ns.load(std::memory_order_relaxed));
    if (since_active < kWakeInterval) return;
    const auto now = std::chrono::steady_clock::now();
    std::shared_ptr<::mqtt::async_client> peer;
    {
      std::lock_guard lock(mu_);
      if (now - sent_at_ < (outstanding_ ? kLostAfter : kWakeInterval)) return;
      for (const auto& [raw, weak] : connected_) {
        if (raw == except) continue;
        if (auto s = weak.lock()) {
          peer = std::move(s);
          break;
        }
      }
      if (!peer) return;
      outstanding_ = true;
      sent_at_ = now;
    }
    try {
      peer->unsubscribe("$mcp-bridge/wake", nullptr, answered_);
    } catch (const ::mqtt::exception&) {
      answered();  // not connected any more: the next poke uses another peer
    }
  }

 private:
  // Paho drops the listener of a client destroyed with the UNSUBSCRIBE pending: after
  // kLostAfter another poke goes anyway.
  static constexpr auto kWakeInterval = std::chrono::milliseconds(5);
  static constexpr auto kLostAfter = std::chrono::seconds(1);

  struct Answered : ::mqtt::iaction_listener {
    PahoWaker* waker;
    explicit Answered(PahoWaker* w) : waker(w) {}
    void on_success(const ::mqtt::token&) override { waker->answered(); }
    void on_failure(const ::mqtt::token&) override { waker->answered(); }
  };
  void answered() {
    std::lock_guard lock(mu_);
    outstanding_ = false;
  }

  std::mutex mu_;
  std::unordered_map<const ::mqtt::async_client*, std::weak_ptr<::mqtt::async_client>> connected_;
  bool outstanding_ = false;
  std::chrono::steady_clock::time_point sent_at_{};
  Answered answered_{this};
};

// The last TLS error Paho reported (on its thread), to explain a failed connect.
struct TlsErrors {
  std::mutex mu;
  std::string last;
  void set(const std::string& e) {
    std::lock_guard lock(mu);
    last = e;
  }
  std::string take() {
    std::lock_guard lock(mu);
    return std::exchange(last, {});
  }
};

// The Paho client and what must live exactly as long as it.
struct Connection::Paho {
  std::shared_ptr<PahoListener::Registry> listeners = std::make_shared<PahoListener::Registry>();
  std::shared_ptr<TlsErrors> tls_errors = std::make_shared<TlsErrors>();
  // Paho 1.2's connect_options copies keep `connectProperties` aimed at the source object's
  // properties, so the options live here, beside the client, and are only ever passed as this
  // lvalue (whose copy then points at live memory).
  ::mqtt::connect_options connect_options;
  std::shared_ptr<::mqtt::async_client> client;

  ~Paho() {
    if (client) PahoWaker::instance().remove(client.get());
    client.reset();  // MQTTAsync_destroy: no callback of this client runs after it
    std::lock_guard lock(listeners->mu);
    for (auto* l : listeners->live)
      delete l;
    listeners->live.clear();
  }
};

std::shared_ptr<Connection> Connection::create(boost::asio::any_io_executor strand,
                                               ConnectionOptions options, Handlers handlers) {
  return std::shared_ptr<Connection>(
      new Connection(std::move(strand), std::move(options), std::move(handlers)));
}

Connection::Connection(boost::asio::any_io_executor strand, ConnectionOptions options,
                       Handlers handlers)
    : strand_(std::move(strand)),
      options_(std::move(options)),
      handlers_(std::move(handlers)),
      retry_timer_(strand_),
      wake_timer_(strand_),
      rng_(std::random_device{}()) {}

Connection::~Connection() {
  count_up(false);
  retry_timer_.cancel();
  wake_timer_.cancel();
  if (!paho_) return;
  // Destroy the Paho client later, on our executor: a Paho callback may still be returning.
  auto timer = std::make_shared<boost::asio::steady_timer>(strand_, kDestroyDelay);
  timer->async_wait([paho = std::move(paho_), timer](const boost::system::error_code&) {});
}

void Connection::connect() {
  if (state_ != State::idle) return;
  paho_ = std::make_shared<Paho>();
  try {
    // Not create_options(version, n): that also turns on Paho's offline buffering, and while
    // disconnected the backlog is ours (bounded by max_backlog_*).
    ::mqtt::create_options create(MQTTVERSION_5);
    create.set_max_buffered_messages(options_.max_queued_messages);
    paho_->client = std::make_shared<::mqtt::async_client>(server_uri(options_.broker),
                                                           options_.client_id, create);
  } catch (const ::mqtt::exception& e) {
    state_ = State::closed;
    auto self = shared_from_this();
    boost::asio::post(strand_, [self, why = std::string(e.what())] {
      if (self->handlers_.on_connect_failed) self->handlers_.on_connect_failed(why, false);
    });
    return;
  }
  gate_ = Gate::open(strand_);
  std::weak_ptr<Connection> weak = weak_from_this();
  auto gate = gate_;
  paho_->client->set_message_callback([weak, gate](::mqtt::const_message_ptr m) {
    note_paho_active();
    if (!m) return;
    Incoming in;
    in.topic = m->get_topic();
    in.payload = m->get_payload_ref().ptr();
    if (!in.payload) in.payload = std::make_shared<const std::string>();
    static auto& bytes_in = metrics::bytes_counter("mqtt", "in");
    bytes_in.inc(in.payload->size());
    in.retained = m->is_retained();
    in.qos = m->get_qos();
    const auto& props = m->get_properties();
    const auto n = props.count(::mqtt::property::USER_PROPERTY);
    for (std::size_t i = 0; i < n; ++i) {
      auto kv = ::mqtt::get<::mqtt::string_pair>(props, ::mqtt::property::USER_PROPERTY, i);
      if (std::get<0>(kv) == "MCP-COMPONENT-TYPE")
        in.component_type = std::get<1>(kv);
      else if (std::get<0>(kv) == "MCP-MQTT-CLIENT-ID")
        in.sender_id = std::get<1>(kv);
    }
    gate->post([weak, in = std::move(in)] {
      if (auto self = weak.lock()) {
        if (self->state_ == State::connected && self->handlers_.on_message) {
          self->handlers_.on_message(in);
        }
      }
    });
  });
  auto lost = [weak, gate](const std::string& cause) {
    gate->post([weak, cause] {
      if (auto self = weak.lock()) self->on_lost(cause);
    });
  };
  paho_->client->set_connection_lost_handler(lost);
  paho_->client->set_disconnected_handler(
      [lost](const ::mqtt::properties&, ::mqtt::ReasonCode reason) {
        lost("the broker sent DISCONNECT: " +
             ::mqtt::exception::reason_code_str(static_cast<int>(reason)));
      });
  do_connect();
}

void Connection::wake_paho() {
  // See PahoWaker. Bounded: after two seconds Paho's own cycle has noticed anyway.
  if (wake_deadline_ == std::chrono::steady_clock::time_point{}) {
    wake_deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  }
  if (std::chrono::steady_clock::now() > wake_deadline_) return;
  wake_timer_.expires_after(std::chrono::milliseconds(5));
  wake_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || !self->paho_) return;
    if (self->state_ != State::connecting && self->state_ != State::disconnecting) return;
    PahoWaker::instance().poke(self->paho_->client.get());
    self->wake_paho();
  });
}

void Connection::do_connect() {
  state_ = State::connecting;
  wake_deadline_ = {};
  wake_paho();
  const auto& b = options_.broker;
  ::mqtt::properties connect_props{
      {::mqtt::property::SESSION_EXPIRY_INTERVAL, 0},
      {::mqtt::property::USER_PROPERTY, "MCP-COMPONENT-TYPE", component_type(options_.role)},
      {::mqtt::property::USER_PROPERTY, "MCP-META", options_.meta_json},
  };
  auto builder = ::mqtt::connect_options_builder()
                     .mqtt_version(MQTTVERSION_5)
                     .clean_start(true)
                     .automatic_reconnect(false)
                     .keep_alive_interval(std::chrono::seconds(b.keepalive_s))
                     .connect_timeout(std::chrono::seconds(b.connect_timeout_s))
                     .max_inflight(65535)
                     .properties(connect_props);
  if (options_.will) {
    ::mqtt::properties will_props{
        {::mqtt::property::USER_PROPERTY, "MCP-COMPONENT-TYPE", component_type(options_.role)},
        {::mqtt::property::USER_PROPERTY, "MCP-MQTT-CLIENT-ID", options_.client_id},
    };
    builder.will(::mqtt::will_options(options_.will->topic, options_.will->payload.data(),
                                      options_.will->payload.size(), options_.broker.qos,
                                      options_.will->retained, will_props));
  }
  if (!b.username.empty()) builder.user_name(b.username);
  if (!b.password.empty()) builder.password(b.password);
  if (b.tls.enabled) {
    auto ssl = ::mqtt::ssl_options_builder()
                   .enable_server_cert_auth(b.tls.verify)
                   .verify(b.tls.verify)
                   .error_handler(
                       [errors = paho_->tls_errors](const std::string& msg) { errors->set(msg); });
    if (!b.tls.ca_file.empty()) ssl.trust_store(b.tls.ca_file);
    if (!b.tls.cert_file.empty()) ssl.key_store(b.tls.cert_file);
    if (!b.tls.key_file.empty()) ssl.private_key(b.tls.key_file);
    builder.ssl(ssl.finalize());
  }

  std::weak_ptr<Connection> weak = weak_from_this();
  auto gate = gate_;
  auto& listener =
      PahoListener::make(paho_->listeners, [weak, gate](const ::mqtt::token& tok, bool ok) {
        OpResult r;
        r.ok = ok;
        if (ok) {
          const auto rsp = tok.get_connect_response();
          const auto& props = rsp.get_properties();
          if (props.contains(::mqtt::property::RECEIVE_MAXIMUM)) {
            const auto rm = ::mqtt::get<std::uint16_t>(props, ::mqtt::property::RECEIVE_MAXIMUM);
            if (rm > 0) r.connack.receive_maximum = rm;
          }
          const auto n = props.count(::mqtt::property::USER_PROPERTY);
          for (std::size_t i = 0; i < n; ++i) {
            auto kv = ::mqtt::get<::mqtt::string_pair>(props, ::mqtt::property::USER_PROPERTY, i);
            const auto& key = std::get<0>(kv);
            if (key == "MCP-SERVER-NAME")
              r.connack.server_name = std::get<1>(kv);
            else if (key == "MCP-RBAC")
              r.connack.rbac_json = std::get<1>(kv);
            else if (key == "MCP-SERVER-NAME-FILTERS") {
              rapidjson::Document d;
              d.Parse(std::get<1>(kv).c_str());
              std::vector<std::string> filters;
              if (!d.HasParseError() && d.IsArray()) {
                for (const auto& f : d.GetArray()) {
                  if (f.IsString()) filters.emplace_back(f.GetString(), f.GetStringLength());
                }
              }
              r.connack.server_name_filters = std::move(filters);
            }
          }
        } else {
          r.why = connect_error(tok.get_return_code(), static_cast<int>(tok.get_reason_code()));
        }
        gate->post([weak, r = std::move(r)] {
          if (auto self = weak.lock()) self->on_connect_result(r);
        });
      });
  paho_->connect_options = builder.finalize();
  paho_->connect_options.set_properties(connect_props);  // re-aim at our own copy (see Paho)
  try {
    paho_->client->connect(paho_->connect_options, nullptr, listener);
  } catch (const ::mqtt::exception& e) {
    listener.discard();
    OpResult r;
    r.why = e.what();
    boost::asio::post(
        strand_, [self = shared_from_this(), r = std::move(r)] { self->on_connect_result(r); });
  }
}

void Connection::on_connect_result(const OpResult& r) {
  if (state_ == State::disconnecting || state_ == State::closed) {
    if (r.ok && paho_) {
      try {
        paho_->client->disconnect(0);
      } catch (const ::mqtt::exception&) {
      }
    }
    return;
  }
  if (!r.ok) {
    std::string why = "cannot connect to " + server_uri(options_.broker) + ": " + r.why;
    if (auto tls = paho_->tls_errors->take(); !tls.empty()) why += " (TLS: " + tls + ")";
    if (!options_.reconnect) {
      state_ = State::closed;
      if (handlers_.on_connect_failed) handlers_.on_connect_failed(why, false);
      fail_everything(why);
      return;
    }
    if (handlers_.on_connect_failed) handlers_.on_connect_failed(why, true);
    schedule_retry(why);
    return;
  }
  state_ = State::connected;
  attempt_ = 0;
  ++generation_;
  in_flight_ = 0;
  receive_maximum_ = r.connack.receive_maximum;
  PahoWaker::instance().add(paho_->client);
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
  logger()->debug("{} connected to {}{}{}", describe(), server_uri(options_.broker),
                  reconnected ? " again" : "",
                  tcp_nodelay_active() ? "" : " (TCP_NODELAY could not be set: expect delays)");
  // 004: restore every subscription before the owner publishes anything (presence, backlog).
  if (!subscriptions_.empty()) {
    std::vector<Filter> all;
    all.reserve(subscriptions_.size());
    for (const auto& [filter, sub] : subscriptions_)
      all.push_back({filter, sub.no_local});
    send_subscribe(std::move(all));
  }
  if (handlers_.on_connected) handlers_.on_connected(r.connack, reconnected);
  while (!backlog_.empty()) {
    window_.push_back(std::move(backlog_.front()));
    backlog_.pop_front();
  }
  backlog_bytes_ = 0;
  drain_window();
}

void Connection::on_lost(const std::string& cause) {
  if (state_ != State::connected) return;
  logger()->warn("{} lost the broker connection: {}", describe(),
                 cause.empty() ? "connection closed" : cause);
  state_ = options_.reconnect ? State::waiting_retry : State::closed;
  count_up(false);
  static auto& losses = metrics::registry().counter(
      "mcpmqtt_mqtt_connection_losses_total",
      "MQTT connections of the bridge lost without a disconnect of its own.");
  losses.inc();
  PahoWaker::instance().remove(paho_->client.get());
  // What waited for the window is sent after the reconnect, ahead of anything newer.
  while (!window_.empty()) {
    backlog_bytes_ += window_.back().payload->size();
    backlog_.push_front(std::move(window_.back()));
    window_.pop_back();
  }
  if (handlers_.on_connection_lost) handlers_.on_connection_lost(cause);
  // The owner may have disconnected us from its handler.
  if (state_ == State::waiting_retry) schedule_retry(cause);
}

void Connection::schedule_retry(const std::string& why) {
  state_ = State::waiting_retry;
  const auto& b = options_.broker;
  double delay = b.reconnect_min_ms;
  for (int i = 0; i < attempt_ && delay < b.reconnect_max_ms; ++i)
    delay *= 2;
  delay = std::min<double>(delay, b.reconnect_max_ms);
  // ±20% jitter, so a fleet of bridges does not reconnect in lockstep after a broker restart.
  delay *= std::uniform_real_distribution<double>(0.8, 1.2)(rng_);
  ++attempt_;
  logger()->info("{} reconnecting in {} ms (attempt {}): {}", describe(), static_cast<long>(delay),
                 attempt_, why);
  retry_timer_.expires_after(std::chrono::milliseconds(static_cast<long>(delay)));
  retry_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->state_ != State::waiting_retry) return;
    self->do_connect();
  });
}

void Connection::subscribe(std::vector<Filter> filters, Done done) {
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

void Connection::send_subscribe(std::vector<Filter> filters) {
  // Filters without options go kFiltersPerPacket to a SUBSCRIBE. A filter with No Local goes in
  // one of its own: Paho C++ 1.2.0's many-filter subscribe hands Paho C a subscribe-options list
  // that no longer exists (its response options are copied after the list was aimed at), and
  // Paho C reads it. Without options the list is not read, and every filter gets the defaults.
  std::vector<std::string> plain;
  for (auto& f : filters) {
    if (f.no_local)
      send_subscribe_packet({std::move(f.filter)}, true);
    else
      plain.push_back(std::move(f.filter));
  }
  for (auto& names : in_packets(std::move(plain)))
    send_subscribe_packet(std::move(names), false);
}

void Connection::send_subscribe_packet(std::vector<std::string> names, bool no_local) {
  std::weak_ptr<Connection> weak = weak_from_this();
  auto gate = gate_;
  auto& listener =
      PahoListener::make(paho_->listeners, [weak, gate, names](const ::mqtt::token& tok, bool ok) {
        OpResult r;
        r.ok = ok;
        if (ok) {
          const auto rsp = tok.get_subscribe_response();
          for (auto rc : rsp.get_reason_codes())
            r.reason_codes.push_back(rc);
        } else {
          r.why = paho_error(tok.get_return_code(), static_cast<int>(tok.get_reason_code()));
        }
        gate->post([weak, names, r = std::move(r)] {
          if (auto self = weak.lock()) self->on_subscribe_result(names, r);
        });
      });
  try {
    if (names.size() == 1) {
      paho_->client->subscribe(names.front(), options_.broker.qos, nullptr, listener,
                               ::mqtt::subscribe_options(no_local));
    } else {
      paho_->client->subscribe(
          ::mqtt::string_collection::create(names),
          ::mqtt::iasync_client::qos_collection(names.size(), options_.broker.qos), nullptr,
          listener);
    }
  } catch (const ::mqtt::exception& e) {
    listener.discard();
    OpResult r;
    r.why = e.what();
    boost::asio::post(strand_, [self = shared_from_this(), names, r = std::move(r)] {
      self->on_subscribe_result(names, r);
    });
  }
}

void Connection::on_subscribe_result(const std::vector<std::string>& filters, const OpResult& r) {
  // SUBACK reason codes of 0x80 and above refuse a subscription (MQTT 5.0 §3.9.3), one code per
  // filter in the order of the SUBSCRIBE. Should a broker send fewer, a refusal counts for all.
  const bool one_each = r.reason_codes.size() == filters.size();
  int shared = 0;  // the refusal that counts for all, when the codes cannot be told apart
  if (!one_each) {
    for (int rc : r.reason_codes) {
      if (rc >= 0x80) shared = rc;
    }
  }
  for (std::size_t i = 0; i < filters.size(); ++i) {
    auto it = subscriptions_.find(filters[i]);
    if (it == subscriptions_.end()) continue;
    bool ok = r.ok;
    std::string why = r.why;
    const int rc = one_each ? r.reason_codes[i] : shared;
    if (ok && rc >= 0x80) {
      ok = false;
      why = "the broker refused it: " + ::mqtt::exception::reason_code_str(rc);
    }
    if (!ok && state_ == State::connected) {
      logger()->warn("{} subscribe {} failed: {}", describe(), filters[i], why);
    }
    auto waiting = std::move(it->second.waiting);
    it->second.waiting.clear();
    for (auto& done : waiting)
      done(ok, why);
  }
}

void Connection::unsubscribe(std::vector<std::string> filters, Done done) {
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
    std::weak_ptr<Connection> weak = weak_from_this();
    auto gate = gate_;
    auto& listener =
        PahoListener::make(paho_->listeners, [weak, gate, op](const ::mqtt::token& tok, bool ok) {
          std::string why =
              ok ? std::string{}
                 : paho_error(tok.get_return_code(), static_cast<int>(tok.get_reason_code()));
          gate->post([weak, op, ok, why] {
            if (auto self = weak.lock()) self->complete_op(op, ok, why);
          });
        });
    try {
      if (names.size() == 1)
        paho_->client->unsubscribe(names.front(), nullptr, listener);
      else
        paho_->client->unsubscribe(::mqtt::string_collection::create(names), nullptr, listener);
    } catch (const ::mqtt::exception& e) {
      listener.discard();
      complete_op(op, false, e.what());
    }
  }
}

void Connection::publish(const std::string& topic, std::shared_ptr<const std::string> payload,
                         bool retained, Done done) {
  if (state_ == State::connected) {
    send_or_queue(Pending{topic, std::move(payload), retained, std::move(done)});
    return;
  }
  const bool will_connect =
      state_ == State::idle || state_ == State::connecting || state_ == State::waiting_retry;
  std::string why;
  if (!will_connect) {
    why = "the broker connection is closed";
  } else if (backlog_.size() >= options_.max_backlog_messages ||
             backlog_bytes_ + payload->size() > options_.max_backlog_bytes) {
    why = "the backlog of messages waiting for the broker connection is full (" +
          std::to_string(backlog_.size()) + " messages)";
  }
  if (!why.empty()) {
    logger()->warn("{} cannot publish to {}: {}", describe(), topic, why);
    if (done) boost::asio::post(strand_, [done, why] { done(false, why); });
    return;
  }
  backlog_bytes_ += payload->size();
  backlog_.push_back(Pending{topic, std::move(payload), retained, std::move(done)});
}

void Connection::send_or_queue(Pending p) {
  if (window_.empty() && in_flight_ < receive_maximum_) {
    send_publish(p.topic, std::move(p.payload), p.retained, std::move(p.done));
    return;
  }
  if (window_.size() >= static_cast<std::size_t>(options_.max_queued_messages)) {
    const std::string why = "too many publications wait for the broker's acknowledgements (" +
                            std::to_string(window_.size()) + ")";
    logger()->warn("{} cannot publish to {}: {}", describe(), p.topic, why);
    if (p.done) boost::asio::post(strand_, [done = std::move(p.done), why] { done(false, why); });
    return;
  }
  window_.push_back(std::move(p));
}

std::deque<Connection::Pending> Connection::take_unsent() {
  auto out = std::move(window_);
  window_.clear();
  for (auto& p : backlog_)
    out.push_back(std::move(p));
  backlog_.clear();
  backlog_bytes_ = 0;
  return out;
}

void Connection::drain_window() {
  while (state_ == State::connected && !window_.empty() && in_flight_ < receive_maximum_) {
    auto p = std::move(window_.front());
    window_.pop_front();
    send_publish(p.topic, std::move(p.payload), p.retained, std::move(p.done));
  }
}

void Connection::send_publish(const std::string& topic, std::shared_ptr<const std::string> payload,
                              bool retained, Done done) {
  ::mqtt::properties props{
      {::mqtt::property::USER_PROPERTY, "MCP-COMPONENT-TYPE", component_type(options_.role)},
      {::mqtt::property::USER_PROPERTY, "MCP-MQTT-CLIENT-ID", options_.client_id},
  };
  auto msg = ::mqtt::message_ptr_builder()
                 .topic(topic)
                 .payload(::mqtt::binary_ref(payload))
                 .qos(options_.broker.qos)
                 .retained(retained)
                 .properties(std::move(props))
                 .finalize();
  static auto& bytes_out = metrics::bytes_counter("mqtt", "out");
  bytes_out.inc(payload->size());
  payload.reset();
  const auto op = add_op(std::move(done));
  const auto generation = generation_;
  ++in_flight_;
  std::weak_ptr<Connection> weak = weak_from_this();
  auto gate = gate_;
  auto& listener = PahoListener::make(
      paho_->listeners, [weak, gate, op, topic, generation](const ::mqtt::token& tok, bool ok) {
        std::string why =
            ok ? std::string{}
               : paho_error(tok.get_return_code(), static_cast<int>(tok.get_reason_code()));
        gate->post([weak, op, ok, why, topic, generation] {
          if (auto self = weak.lock()) {
            if (!ok && self->state_ == State::connected) {
              logger()->warn("{} publish to {} failed: {}", self->describe(), topic, why);
            }
            self->complete_op(op, ok, why);
            if (generation == self->generation_ && self->in_flight_ > 0) {
              --self->in_flight_;
              self->drain_window();
            }
          }
        });
      });
  try {
    paho_->client->publish(msg, nullptr, listener);
  } catch (const ::mqtt::exception& e) {
    listener.discard();
    --in_flight_;
    logger()->warn("{} publish to {} failed: {}", describe(), topic, e.what());
    complete_op(op, false, e.what());
  }
}

std::uint64_t Connection::add_op(Done done) {
  const auto op = next_op_++;
  if (done) ops_.emplace(op, std::move(done));
  return op;
}

void Connection::complete_op(std::uint64_t op, bool ok, const std::string& why) {
  auto it = ops_.find(op);
  if (it == ops_.end()) return;
  auto done = std::move(it->second);
  ops_.erase(it);
  done(ok, why);
}

void Connection::fail_everything(const std::string& why) {
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

void Connection::disconnect(std::chrono::milliseconds timeout, std::function<void()> done) {
  retry_timer_.cancel();
  if (state_ != State::connected) {
    state_ = State::closed;
    fail_everything("the connection was closed");
    if (done) boost::asio::post(strand_, std::move(done));
    return;
  }
  state_ = State::disconnecting;
  count_up(false);
  PahoWaker::instance().remove(paho_->client.get());
  wake_deadline_ = {};
  wake_paho();
  // Messages still waiting for a connection or for the window will not get one.
  auto backlog = take_unsent();
  for (auto& p : backlog) {
    if (p.done) p.done(false, "the connection was closed");
  }
  disconnect_done_ = std::move(done);
  // Bound the wait ourselves too: a broker that stopped answering must not hold the caller. The
  // timer also keeps this connection alive until the disconnect is over.
  disconnect_timer_ = std::make_shared<boost::asio::steady_timer>(
      strand_, timeout + std::chrono::milliseconds(500));
  disconnect_timer_->async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (!ec) self->finish_disconnect();
  });
  std::weak_ptr<Connection> weak = weak_from_this();
  auto gate = gate_;
  auto& listener = PahoListener::make(paho_->listeners, [weak, gate](const ::mqtt::token&, bool) {
    gate->post([weak] {
      if (auto self = weak.lock()) self->finish_disconnect();
    });
  });
  try {
    // Paho sends what is in flight (within the timeout) before the DISCONNECT.
    paho_->client->disconnect(static_cast<int>(timeout.count()), nullptr, listener);
  } catch (const ::mqtt::exception&) {
    listener.discard();
    finish_disconnect();
  }
}

void Connection::count_up(bool up) {
  static auto& connections = metrics::registry().gauge(
      "mcpmqtt_mqtt_connections", "MQTT connections of the bridge that are up.");
  if (up == counted_up_) return;
  counted_up_ = up;
  if (up)
    connections.inc();
  else
    connections.dec();
}

void Connection::finish_disconnect() {
  if (state_ != State::disconnecting) return;
  state_ = State::closed;
  if (disconnect_timer_) disconnect_timer_->cancel();
  fail_everything("the connection was closed");
  if (auto done = std::move(disconnect_done_)) done();
}

}  // namespace mcpmqtt::mqtt

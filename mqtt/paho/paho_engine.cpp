// The Eclipse Paho C++ 1.2 engine (mqtt.client: "paho"), and every workaround Paho needs:
// - TCP_NODELAY through an interposed connect(2) (tcp_nodelay.hpp);
// - wake-ups for Paho C's receive thread while a connection connects or disconnects (PahoWaker);
// - No Local filters in SUBSCRIBE packets of their own (Paho C++ 1.2.0's many-filter subscribe
//   hands Paho C a dangling subscribe-options list);
// - the lengths of Response Topic and Correlation Data checked before Paho C encodes them;
// - callbacks on Paho's threads, copied and posted onto the engine's strand through a ExecutorGate
// and a
//   weak_ptr; the Paho client destroyed later on a timer, never on a Paho thread.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <mqtt/async_client.h>

#include "common/log.hpp"
#include "mqtt/codec/codec.hpp"
#include "mqtt/engine.hpp"
#include "mqtt/paho/executor_gate.hpp"
#include "mqtt/paho/tcp_nodelay.hpp"

namespace mcpmqtt::mqtt {

namespace paho {
namespace {

constexpr auto kDestroyDelay = std::chrono::seconds(2);
// Publications Paho may hold unwritten. The BrokerConnection keeps the broker's Receive Maximum, so
// Paho holds few; its default of 100 refused bursts all the same.
constexpr int kMaxBuffered = 65536;

std::string paho_error(int rc, int reason) {
  return ::mqtt::exception::printable_error(rc, reason, "");
}

std::string server_uri(const EngineConnect& p) {
  const bool v6 = p.host.find(':') != std::string::npos;
  const char* scheme = "tcp://";
  switch (p.transport) {
    case EngineConnect::Transport::tcp:
      break;
    case EngineConnect::Transport::tls:
      scheme = "ssl://";
      break;
    case EngineConnect::Transport::websocket:
      scheme = "ws://";
      break;
    case EngineConnect::Transport::websocket_tls:
      scheme = "wss://";
      break;
  }
  std::string uri =
      std::string(scheme) + (v6 ? "[" + p.host + "]" : p.host) + ":" + std::to_string(p.port);
  if (p.transport == EngineConnect::Transport::websocket ||
      p.transport == EngineConnect::Transport::websocket_tls)
    uri += p.ws_path;
  return uri;
}

::mqtt::properties to_paho(const UserProperties& props) {
  ::mqtt::properties out;
  for (const auto& p : props)
    out.add({::mqtt::property::USER_PROPERTY, p.key, p.value});
  return out;
}

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

// The Paho client and what must live exactly as long as it.
struct Client {
  std::shared_ptr<PahoListener::Registry> listeners = std::make_shared<PahoListener::Registry>();
  // Paho 1.2's connect_options copies keep `connectProperties` aimed at the source object's
  // properties, so the options live here, beside the client, and are only ever passed as this
  // lvalue (whose copy then points at live memory).
  ::mqtt::connect_options connect_options;
  ::mqtt::properties connect_properties;
  std::shared_ptr<::mqtt::async_client> client;

  ~Client() {
    if (client) PahoWaker::instance().remove(client.get());
    client.reset();  // MQTTAsync_destroy: no callback of this client runs after it
    std::lock_guard lock(listeners->mu);
    for (auto* l : listeners->live)
      delete l;
    listeners->live.clear();
  }
};

// What a message callback copied off Paho's thread.
struct Arrived {
  std::string topic;
  std::shared_ptr<const std::string> payload;
  int qos = 0;
  bool retain = false;
  UserProperties props;
  std::optional<std::string> response_topic;    // MQTT 5.0 §4.10
  std::optional<std::string> correlation_data;  // binary
};

}  // namespace
}  // namespace paho

namespace {

using paho::PahoListener;

class PahoEngine final : public Engine {
 public:
  PahoEngine(boost::asio::any_io_executor strand, Events events)
      : core_(std::make_shared<Core>(std::move(strand), std::move(events))) {
    paho::use_tcp_nodelay_interposition();
  }
  ~PahoEngine() override {
    core_->wake_timer.cancel();
    // Unlike the contract (engine.hpp), the broker may discard the will: MQTTAsync_destroy of a
    // connected client sends DISCONNECT 0x00 when its socket takes it, and Paho C++ 1.2 cannot
    // ask for 0x04 (Disconnect with Will Message) instead: its disconnect options reach Paho C
    // as version 0, which ignores the reason code.
    auto client = std::move(core_->client);
    core_->gate.reset();
    if (!client) return;
    // Destroy the Paho client later, on our executor: a Paho callback may still be returning.
    auto timer = std::make_shared<boost::asio::steady_timer>(core_->strand, paho::kDestroyDelay);
    timer->async_wait([client = std::move(client), timer](const boost::system::error_code&) {});
  }

  void connect(const EngineConnect& params, ConnectDone done) override;
  void subscribe(std::vector<SubscribeRequest> filters, AckDone done) override;
  void unsubscribe(std::vector<std::string> filters, AckDone done) override;
  void publish(PublishRequest message, AckDone done) override;
  void disconnect(std::chrono::milliseconds timeout, std::function<void()> done) override;
  bool connected() const override { return core_->state == State::connected; }

 private:
  enum class State { idle, connecting, connected, disconnecting };

  // What Paho's callbacks reach (through a weak_ptr, on the strand); dies with the engine.
  struct Core : std::enable_shared_from_this<Core> {
    Core(boost::asio::any_io_executor s, Events e)
        : strand(std::move(s)), events(std::move(e)), wake_timer(strand), drain_timer(strand) {}
    boost::asio::any_io_executor strand;
    Events events;
    std::shared_ptr<paho::Client> client;
    std::shared_ptr<paho::ExecutorGate> gate;
    State state = State::idle;
    std::uint64_t next_op = 1;
    std::map<std::uint64_t, AckDone> pending;  // operations Paho has not answered
    boost::asio::steady_timer wake_timer;
    std::chrono::steady_clock::time_point wake_deadline{};
    // disconnect(): waiting for `pending` to empty (or drain_timer) before the DISCONNECT.
    boost::asio::steady_timer drain_timer;
    std::function<void()> disconnect_done;
    bool draining = false;

    // Posts `fn(core)` from a Paho thread onto the strand, if the engine still exists.
    template <typename Fn>
    static void post_from_paho(const std::shared_ptr<paho::ExecutorGate>& gate,
                               const std::weak_ptr<Core>& weak, Fn fn) {
      gate->post([weak, fn = std::move(fn)]() mutable {
        if (auto self = weak.lock()) fn(*self);
      });
    }
    std::uint64_t add(AckDone done) {
      const auto id = next_op++;
      pending.emplace(id, std::move(done));
      return id;
    }
    void complete(std::uint64_t id, const AckOutcome& outcome) {
      auto it = pending.find(id);
      if (it == pending.end()) return;
      auto done = std::move(it->second);
      pending.erase(it);
      if (done) done(outcome);
      if (draining && pending.empty()) send_disconnect();
    }
    void fail_pending(const std::string& why) {
      auto ops = std::move(pending);
      pending.clear();
      for (auto& [id, done] : ops) {
        if (done) done(AckOutcome{false, why, {}});
      }
    }
    void lost(std::string why) {
      if (state != State::connected) return;
      if (why.empty()) why = "the broker closed the connection";
      state = State::idle;
      paho::PahoWaker::instance().remove(client->client.get());
      if (events.on_lost) events.on_lost(why);
      fail_pending(why);
    }
    // See PahoWaker. Bounded: after two seconds Paho's own cycle has noticed anyway.
    void wake() {
      if (wake_deadline == std::chrono::steady_clock::time_point{}) {
        wake_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      }
      if (std::chrono::steady_clock::now() > wake_deadline) return;
      wake_timer.expires_after(std::chrono::milliseconds(5));
      wake_timer.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
        auto self = weak.lock();
        if (ec || !self || !self->client) return;
        if (self->state != State::connecting && self->state != State::disconnecting) return;
        paho::PahoWaker::instance().poke(self->client->client.get());
        self->wake();
      });
    }
    void start_waking() {
      wake_deadline = {};
      wake();
    }
    // DISCONNECT with Paho's own wait at 0: what was in flight has been answered (or the wait
    // for it is over). Left to wait itself (a 2-s timeout), Paho C closed an ended session's
    // socket 0.9-3 s after the session ended, acknowledgements or not; this way, in 22 ms.
    void send_disconnect() {
      draining = false;
      drain_timer.cancel();
      std::weak_ptr<Core> weak = weak_from_this();
      auto finish = [](Core& c) {
        if (c.state != State::disconnecting) return;
        c.state = State::idle;
        c.fail_pending("the connection was closed");
        if (auto done = std::move(c.disconnect_done)) done();
      };
      auto& listener = PahoListener::make(
          client->listeners, [weak, gate = gate, finish](const ::mqtt::token&, bool) {
            post_from_paho(gate, weak, [finish](Core& c) { finish(c); });
          });
      try {
        client->client->disconnect(0, nullptr, listener);
      } catch (const ::mqtt::exception&) {
        listener.discard();
        finish(*this);
      }
    }
  };

  // Fails `done` on the strand: the operation could not start.
  void fail_soon(AckDone done, std::string why) {
    if (!done) return;
    boost::asio::post(core_->strand, [done = std::move(done), why = std::move(why)] {
      done(AckOutcome{false, why, {}});
    });
  }
  bool create_client(const EngineConnect& params, std::string& why);
  void send_subscribe(std::vector<std::string> names, int qos, bool no_local,
                      std::function<void(const AckOutcome&)> done);
  // Hands `send` a listener for a SUBSCRIBE or UNSUBSCRIBE it makes; `done` gets the reason codes
  // that `codes_of` reads from the broker's answer, or why it failed (also when `send` throws).
  template <typename CodesOf, typename Send>
  void send_acked(std::function<void(const AckOutcome&)> done, CodesOf codes_of, Send send);

  std::shared_ptr<Core> core_;
};

bool PahoEngine::create_client(const EngineConnect& params, std::string& why) {
  auto c = std::make_shared<paho::Client>();
  try {
    // Not create_options(version, n): that also turns on Paho's offline buffering, and while
    // disconnected the backlog is the BrokerConnection's.
    ::mqtt::create_options create(MQTTVERSION_5);
    create.set_max_buffered_messages(paho::kMaxBuffered);
    c->client =
        std::make_shared<::mqtt::async_client>(paho::server_uri(params), params.client_id, create);
  } catch (const ::mqtt::exception& e) {
    why = e.what();
    return false;
  }
  core_->client = c;
  core_->gate = paho::ExecutorGate::open(core_->strand);
  std::weak_ptr<Core> weak = core_;
  auto gate = core_->gate;
  c->client->set_message_callback([weak, gate](::mqtt::const_message_ptr m) {
    paho::note_paho_active();
    if (!m) return;
    paho::Arrived in;
    in.topic = m->get_topic();
    in.payload = m->get_payload_ref().ptr();
    if (!in.payload) in.payload = std::make_shared<const std::string>();
    in.retain = m->is_retained();
    in.qos = m->get_qos();
    const auto& props = m->get_properties();
    const auto n = props.count(::mqtt::property::USER_PROPERTY);
    for (std::size_t i = 0; i < n; ++i) {
      auto kv = ::mqtt::get<::mqtt::string_pair>(props, ::mqtt::property::USER_PROPERTY, i);
      in.props.push_back({std::get<0>(kv), std::get<1>(kv)});
    }
    // Paho keeps binary values with their length: Correlation Data may hold any byte.
    if (props.contains(::mqtt::property::RESPONSE_TOPIC))
      in.response_topic = ::mqtt::get<std::string>(props, ::mqtt::property::RESPONSE_TOPIC);
    if (props.contains(::mqtt::property::CORRELATION_DATA))
      in.correlation_data = ::mqtt::get<std::string>(props, ::mqtt::property::CORRELATION_DATA);
    Core::post_from_paho(gate, weak, [in = std::move(in)](Core& core) {
      if (core.state != State::connected || !core.events.on_message) return;
      std::vector<UserPropertyView> views;
      views.reserve(in.props.size());
      for (const auto& p : in.props)
        views.push_back({p.key, p.value});
      ReceivedMessage msg;
      msg.topic = in.topic;
      msg.payload = in.payload;
      msg.qos = in.qos;
      msg.retain = in.retain;
      msg.user_properties = views;
      if (in.response_topic) msg.response_topic = *in.response_topic;
      if (in.correlation_data) msg.correlation_data = *in.correlation_data;
      core.events.on_message(msg);
    });
  });
  auto lost = [weak, gate](const std::string& cause) {
    Core::post_from_paho(gate, weak, [cause](Core& core) { core.lost(cause); });
  };
  c->client->set_connection_lost_handler(lost);
  c->client->set_disconnected_handler([lost](const ::mqtt::properties&, ::mqtt::ReasonCode reason) {
    lost("the broker sent DISCONNECT: " +
         codec::reason_with_code(static_cast<std::uint8_t>(reason)));
  });
  return true;
}

void PahoEngine::connect(const EngineConnect& params, ConnectDone done) {
  auto& core = *core_;
  if (core.state != State::idle) {
    boost::asio::post(core.strand, [done = std::move(done)] {
      ConnectOutcome out;
      out.why = "a connection is already open or opening";
      done(out);
    });
    return;
  }
  std::string why;
  if (!core.client && !create_client(params, why)) {
    boost::asio::post(core.strand, [done = std::move(done), why] {
      ConnectOutcome out;
      out.why = why;
      done(out);
    });
    return;
  }
  core.state = State::connecting;
  core.start_waking();
  auto& client = *core.client;
  // Topic aliases: Paho C does not resolve them, so none are announced.
  client.connect_properties = ::mqtt::properties{
      {::mqtt::property::SESSION_EXPIRY_INTERVAL, static_cast<int>(params.session_expiry_s)},
  };
  if (params.receive_maximum != 65535)
    client.connect_properties.add({::mqtt::property::RECEIVE_MAXIMUM, params.receive_maximum});
  if (params.maximum_packet_size != 0) {
    client.connect_properties.add(
        {::mqtt::property::MAXIMUM_PACKET_SIZE, static_cast<int>(params.maximum_packet_size)});
  }
  for (const auto& p : params.user_properties)
    client.connect_properties.add({::mqtt::property::USER_PROPERTY, p.key, p.value});
  auto builder = ::mqtt::connect_options_builder()
                     .mqtt_version(MQTTVERSION_5)
                     .clean_start(params.clean_start)
                     .automatic_reconnect(false)
                     .keep_alive_interval(std::chrono::seconds(params.keep_alive_s))
                     .connect_timeout(std::chrono::duration_cast<std::chrono::seconds>(
                         params.connect_timeout + std::chrono::milliseconds(999)))
                     .max_inflight(65535)
                     .properties(client.connect_properties);
  // The broker of this attempt: the client was made for the first one it tried, and with
  // mqtt.url a list each attempt may go to another (Paho C's serverURIs, one per attempt).
  builder.servers(::mqtt::string_collection::create({paho::server_uri(params)}));
  if (params.will) {
    const auto& w = *params.will;
    builder.will(::mqtt::will_options(w.topic, w.payload.data(), w.payload.size(), w.qos, w.retain,
                                      paho::to_paho(w.user_properties)));
  }
  if (params.username) builder.user_name(*params.username);
  if (params.password) builder.password(*params.password);
  if (params.transport == EngineConnect::Transport::tls ||
      params.transport == EngineConnect::Transport::websocket_tls) {
    // No error handler: Paho C keeps a pointer to the ssl_options it calls it through, and
    // async_client::connect takes the options by value, so that pointer dangles once connect
    // returns (a crash on the first certificate that failed to verify). A failed handshake is
    // reported without OpenSSL's detail; the native engine gives it.
    auto ssl =
        ::mqtt::ssl_options_builder().enable_server_cert_auth(params.verify).verify(params.verify);
    if (!params.ca_file.empty()) ssl.trust_store(params.ca_file);
    if (!params.cert_file.empty()) ssl.key_store(params.cert_file);
    if (!params.key_file.empty()) ssl.private_key(params.key_file);
    builder.ssl(ssl.finalize());
  }

  std::weak_ptr<Core> weak = core_;
  auto gate = core.gate;
  auto finish = [done = std::move(done)](Core& c, ConnectOutcome out) {
    if (c.state != State::connecting) {
      // disconnect() or the engine's end overtook the attempt: close what may have opened.
      if (out.ok && c.client) {
        try {
          c.client->client->disconnect(0);
        } catch (const ::mqtt::exception&) {
        }
      }
      return;
    }
    if (out.ok) {
      c.state = State::connected;
      paho::PahoWaker::instance().add(c.client->client);
    } else {
      c.state = State::idle;
    }
    done(out);
  };
  // Paho C reports a connect that timed out as it reports a refused one: the time tells them
  // apart.
  const auto started = std::chrono::steady_clock::now();
  const auto limit = params.connect_timeout;
  auto& listener = PahoListener::make(client.listeners, [weak, gate, finish, started, limit](
                                                            const ::mqtt::token& tok, bool ok) {
    ConnectOutcome out;
    out.ok = ok;
    if (ok) {
      const auto rsp = tok.get_connect_response();
      const auto& props = rsp.get_properties();
      auto& ack = out.connack;
      ack.session_present = rsp.is_session_present();
      if (props.contains(::mqtt::property::RECEIVE_MAXIMUM)) {
        const auto rm = ::mqtt::get<std::uint16_t>(props, ::mqtt::property::RECEIVE_MAXIMUM);
        if (rm > 0) ack.receive_maximum = rm;
      }
      if (props.contains(::mqtt::property::MAXIMUM_PACKET_SIZE)) {
        ack.maximum_packet_size =
            ::mqtt::get<std::uint32_t>(props, ::mqtt::property::MAXIMUM_PACKET_SIZE);
      }
      if (props.contains(::mqtt::property::MAXIMUM_QOS))
        ack.maximum_qos = ::mqtt::get<std::uint8_t>(props, ::mqtt::property::MAXIMUM_QOS);
      if (props.contains(::mqtt::property::RETAIN_AVAILABLE))
        ack.retain_available = ::mqtt::get<std::uint8_t>(props, ::mqtt::property::RETAIN_AVAILABLE);
      if (props.contains(::mqtt::property::SERVER_KEEP_ALIVE)) {
        ack.server_keep_alive =
            ::mqtt::get<std::uint16_t>(props, ::mqtt::property::SERVER_KEEP_ALIVE);
      }
      if (props.contains(::mqtt::property::ASSIGNED_CLIENT_IDENTIFER)) {
        ack.assigned_client_id =
            ::mqtt::get<std::string>(props, ::mqtt::property::ASSIGNED_CLIENT_IDENTIFER);
      }
      if (props.contains(::mqtt::property::REASON_STRING))
        ack.reason_string = ::mqtt::get<std::string>(props, ::mqtt::property::REASON_STRING);
      const auto n = props.count(::mqtt::property::USER_PROPERTY);
      for (std::size_t i = 0; i < n; ++i) {
        auto kv = ::mqtt::get<::mqtt::string_pair>(props, ::mqtt::property::USER_PROPERTY, i);
        ack.user_properties.push_back({std::get<0>(kv), std::get<1>(kv)});
      }
    } else {
      int rc = tok.get_return_code();
      int reason = static_cast<int>(tok.get_reason_code());
      // Paho C reports a refusing MQTT 5 CONNACK with its reason code as the return code.
      if (reason < 0x80 && rc >= 0x80) reason = rc;
      if (reason >= 0x80) {
        out.reason_code = static_cast<std::uint8_t>(reason);
        out.why = "the broker refused the connection: " +
                  codec::reason_with_code(static_cast<std::uint8_t>(reason));
      } else if (rc == MQTTASYNC_FAILURE && std::chrono::steady_clock::now() - started >= limit) {
        out.why = "no TCP connection, TLS handshake or CONNACK from the broker within " +
                  log::duration_text(limit);
      } else if (rc == MQTTASYNC_FAILURE) {
        out.why =
            "connection refused, broker unreachable, or the connection closed during the "
            "MQTT/TLS handshake";
      } else if (rc == MQTTASYNC_BAD_PROTOCOL) {
        out.why = "the broker does not speak MQTT 5";
      } else {
        out.why = paho::paho_error(rc, reason);
      }
    }
    Core::post_from_paho(gate, weak,
                         [finish, out = std::move(out)](Core& c) mutable { finish(c, out); });
  });
  client.connect_options = builder.finalize();
  // Re-aim at our own copy (see paho::Client).
  client.connect_options.set_properties(client.connect_properties);
  try {
    client.client->connect(client.connect_options, nullptr, listener);
  } catch (const ::mqtt::exception& e) {
    listener.discard();
    ConnectOutcome out;
    out.why = e.what();
    boost::asio::post(core.strand, [weak, finish, out = std::move(out)]() mutable {
      if (auto self = weak.lock()) finish(*self, out);
    });
  }
}

template <typename CodesOf, typename Send>
void PahoEngine::send_acked(std::function<void(const AckOutcome&)> done, CodesOf codes_of,
                            Send send) {
  auto& core = *core_;
  const auto op = core.add(std::move(done));
  std::weak_ptr<Core> weak = core_;
  auto gate = core.gate;
  auto& listener = PahoListener::make(
      core.client->listeners, [weak, gate, op, codes_of](const ::mqtt::token& tok, bool ok) {
        AckOutcome r;
        r.ok = ok;
        if (ok) {
          for (auto rc : codes_of(tok))
            r.reason_codes.push_back(static_cast<std::uint8_t>(rc));
        } else {
          r.why = paho::paho_error(tok.get_return_code(), static_cast<int>(tok.get_reason_code()));
        }
        Core::post_from_paho(gate, weak, [op, r = std::move(r)](Core& c) { c.complete(op, r); });
      });
  try {
    send(listener);
  } catch (const ::mqtt::exception& e) {
    listener.discard();
    boost::asio::post(core.strand, [weak, op, why = std::string(e.what())] {
      if (auto self = weak.lock()) self->complete(op, AckOutcome{false, why, {}});
    });
  }
}

void PahoEngine::send_subscribe(std::vector<std::string> names, int qos, bool no_local,
                                std::function<void(const AckOutcome&)> done) {
  auto& client = *core_->client->client;
  send_acked(
      std::move(done),
      [](const ::mqtt::token& tok) { return tok.get_subscribe_response().get_reason_codes(); },
      [&](PahoListener& listener) {
        if (names.size() == 1) {
          client.subscribe(names.front(), qos, nullptr, listener,
                           ::mqtt::subscribe_options(no_local));
        } else {
          client.subscribe(::mqtt::string_collection::create(names),
                           ::mqtt::iasync_client::qos_collection(names.size(), qos), nullptr,
                           listener);
        }
      });
}

void PahoEngine::subscribe(std::vector<SubscribeRequest> filters, AckDone done) {
  if (core_->state != State::connected) return fail_soon(std::move(done), "not connected");
  // Filters without options share a SUBSCRIBE. A filter with No Local goes in one of its own:
  // Paho C++ 1.2.0's many-filter subscribe hands Paho C a subscribe-options list that no longer
  // exists (its response options are copied after the list was aimed at), and Paho C reads it.
  // Without options the list is not read, and every filter gets the defaults. The caller gets
  // one outcome, with the reason codes in the order of its filters.
  struct Gather {
    std::size_t left = 0;
    AckOutcome out;
    AckDone done;
  };
  std::vector<std::vector<std::size_t>> groups;  // indexes into filters, per packet
  std::vector<std::size_t> plain;
  for (std::size_t i = 0; i < filters.size(); ++i) {
    if (filters[i].no_local)
      groups.push_back({i});
    else
      plain.push_back(i);
  }
  if (!plain.empty()) groups.push_back(std::move(plain));
  auto g = std::make_shared<Gather>();
  g->left = groups.size();
  g->out.ok = true;
  g->out.reason_codes.assign(filters.size(), 0);
  g->done = std::move(done);
  for (const auto& group : groups) {
    std::vector<std::string> names;
    for (auto i : group)
      names.push_back(filters[i].filter);
    const int qos = filters[group.front()].qos;
    const bool no_local = filters[group.front()].no_local;
    send_subscribe(std::move(names), qos, no_local, [g, group](const AckOutcome& r) {
      if (!r.ok && g->out.ok) {
        g->out.ok = false;
        g->out.why = r.why;
      }
      // Should a broker send fewer codes than filters, the first stands for the rest.
      for (std::size_t k = 0; k < group.size(); ++k) {
        if (!r.reason_codes.empty())
          g->out.reason_codes[group[k]] = r.reason_codes[std::min(k, r.reason_codes.size() - 1)];
      }
      if (--g->left == 0 && g->done) g->done(g->out);
    });
  }
}

void PahoEngine::unsubscribe(std::vector<std::string> filters, AckDone done) {
  if (core_->state != State::connected) return fail_soon(std::move(done), "not connected");
  auto& client = *core_->client->client;
  send_acked(
      std::move(done),
      [](const ::mqtt::token& tok) { return tok.get_unsubscribe_response().get_reason_codes(); },
      [&](PahoListener& listener) {
        if (filters.size() == 1)
          client.unsubscribe(filters.front(), nullptr, listener);
        else
          client.unsubscribe(::mqtt::string_collection::create(filters), nullptr, listener);
      });
}

void PahoEngine::publish(PublishRequest message, AckDone done) {
  auto& core = *core_;
  if (core.state != State::connected) return fail_soon(std::move(done), "not connected");
  // Paho C writes a string's length in two bytes without checking it (§1.5.4, §1.5.6).
  if (message.response_topic.size() > 65535 || message.correlation_data.size() > 65535) {
    return fail_soon(std::move(done),
                     "the Response Topic or the Correlation Data is longer than 65,535 bytes");
  }
  auto props =
      message.user_properties ? paho::to_paho(*message.user_properties) : ::mqtt::properties{};
  // MQTT 5.0 §4.10; empty: not sent.
  if (!message.response_topic.empty())
    props.add({::mqtt::property::RESPONSE_TOPIC, message.response_topic});
  if (!message.correlation_data.empty())
    props.add({::mqtt::property::CORRELATION_DATA, message.correlation_data});
  auto msg = ::mqtt::message_ptr_builder()
                 .topic(message.topic)
                 .payload(::mqtt::binary_ref(std::move(message.payload)))
                 .qos(message.qos)
                 .retained(message.retain)
                 .properties(std::move(props))
                 .finalize();
  const auto op = core.add(std::move(done));
  std::weak_ptr<Core> weak = core_;
  auto gate = core.gate;
  auto& listener = PahoListener::make(
      core.client->listeners, [weak, gate, op](const ::mqtt::token& tok, bool ok) {
        AckOutcome r;
        r.ok = ok;
        if (!ok) {
          // A PUBACK or PUBREC with a failure reason code, in the native engine's words.
          const int reason = static_cast<int>(tok.get_reason_code());
          r.why = reason >= 0x80 && reason <= 0xFF
                      ? "the broker refused the publication: " +
                            codec::reason_with_code(static_cast<std::uint8_t>(reason))
                      : paho::paho_error(tok.get_return_code(), reason);
        }
        Core::post_from_paho(gate, weak, [op, r = std::move(r)](Core& c) { c.complete(op, r); });
      });
  try {
    core.client->client->publish(msg, nullptr, listener);
  } catch (const ::mqtt::exception& e) {
    listener.discard();
    boost::asio::post(core.strand, [weak, op, why = std::string(e.what())] {
      if (auto self = weak.lock()) self->complete(op, AckOutcome{false, why, {}});
    });
  }
}

void PahoEngine::disconnect(std::chrono::milliseconds timeout, std::function<void()> done) {
  auto& core = *core_;
  if (core.state != State::connected) {
    // A connect attempt in flight is closed when it completes (see connect's finish).
    core.state = State::idle;
    core.fail_pending("the connection was closed");
    if (done) boost::asio::post(core.strand, std::move(done));
    return;
  }
  core.state = State::disconnecting;
  paho::PahoWaker::instance().remove(core.client->client.get());
  core.start_waking();
  core.disconnect_done = std::move(done);
  if (core.pending.empty()) return core.send_disconnect();
  // What is in flight gets its acknowledgements first, within the timeout.
  core.draining = true;
  core.drain_timer.expires_after(timeout);
  core.drain_timer.async_wait(
      [weak = std::weak_ptr<Core>(core_)](const boost::system::error_code& ec) {
        auto self = weak.lock();
        if (ec || !self || !self->draining) return;
        self->send_disconnect();
      });
}

}  // namespace

std::unique_ptr<Engine> make_paho_engine(boost::asio::any_io_executor strand,
                                         Engine::Events events) {
  return std::make_unique<PahoEngine>(std::move(strand), std::move(events));
}

}  // namespace mcpmqtt::mqtt

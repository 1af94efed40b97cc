// One MQTT v5 connection of the bridge: the front the rest of the bridge calls, with the policy;
// the packets are an Engine's (mqtt/engine.hpp): the native one, or Paho's (mqtt.client).
//
// What it guarantees (004 §MQTT Requirements and Conventions):
// - MQTT 5.0 only; clean start; Session Expiry Interval 0.
// - CONNECT carries user properties MCP-COMPONENT-TYPE and MCP-META; every PUBLISH (and the will)
//   carries MCP-COMPONENT-TYPE and MCP-MQTT-CLIENT-ID.
// - CONNACK user properties MCP-SERVER-NAME, MCP-SERVER-NAME-FILTERS and MCP-RBAC are handed to
//   the owner on every (re)connect.
// - Reconnect with exponential backoff and jitter (our own timer, so every CONNACK is seen);
//   afterwards every subscription is restored before the owner's on_connected runs, and
//   publications made while disconnected (bounded) are sent after it.
// - Flow control (MQTT 5.0 §4.9): at most the broker's Receive Maximum of our QoS 1 and 2
//   publications are unacknowledged; the rest wait in a bounded window.
// - A publication larger than the broker's Maximum Packet Size fails at once, saying so.
// - A publication may carry a Response Topic and Correlation Data (MQTT 5.0 §4.10, for request /
//   response between peers); they go with it through the backlog and the window, count in its
//   packet size and its bytes, and arrive with an Incoming. One with a Response Topic that is no
//   topic name (wildcards, bad UTF-8) or either property over 65,535 bytes fails at once.
//
// One strand; not thread-safe: call every member on the executor given to create().
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/lazy_deque.hpp"
#include "common/log.hpp"
#include "mqtt/broker_options.hpp"
#include "mqtt/engine.hpp"

namespace mcpmqtt::mqtt {

// MCP-COMPONENT-TYPE (004 §User Property).
enum class Role { client, server };
const char* component_type(Role role);  // "mcp-client" / "mcp-server"

struct Will {
  std::string topic;
  std::string payload;
  bool retained = false;
};

struct ConnectionOptions {
  BrokerOptions broker;  // host, port, TLS, credentials, keep-alive, QoS, reconnect delays
  std::string client_id;
  Role role = Role::client;
  std::string meta_json = "{}";  // MCP-META on CONNECT: a JSON object
  std::optional<Will> will;
  bool reconnect = true;                    // retry the first connect and reconnect after a loss
  std::size_t max_backlog_messages = 1000;  // publications held while disconnected
  std::size_t max_backlog_bytes = 16 << 20;
  // Publications held while connected but not yet handed to the engine, while the broker's
  // Receive Maximum (or max_in_flight_bytes) is used up: a server endpoint's burst to all its
  // clients (responses, `disconnected` at shutdown). Past either bound a publish fails (its Done
  // says so, and the MCP peer gets a JSON-RPC error from whoever published).
  int max_queued_messages = 65536;
  std::size_t max_queued_bytes = 64u << 20;
  // Bytes (payload, Response Topic, Correlation Data) handed to the engine and not yet
  // acknowledged (or, at QoS 0, not yet written): what a slow broker can make the bridge hold
  // besides the queue. One publication larger than this still goes when nothing else is in
  // flight.
  std::size_t max_in_flight_bytes = 16u << 20;
};

// CONNACK user properties (004 §User Property). Values as received; parsed by the owner.
struct ConnackInfo {
  std::optional<std::string> server_name;                       // MCP-SERVER-NAME
  std::optional<std::vector<std::string>> server_name_filters;  // MCP-SERVER-NAME-FILTERS
  std::optional<std::string> rbac_json;                         // MCP-RBAC
  std::uint16_t receive_maximum = 65535;  // QoS 1 and 2 publications the broker takes at once
  std::uint32_t maximum_packet_size = 0;  // the largest packet the broker takes; 0: no limit
};

struct Incoming {
  std::string topic;
  std::shared_ptr<const std::string> payload;  // shared with the engine's copy: no further one
  bool retained = false;
  int qos = 0;
  // User properties; peers in the wild omit them, so both may be absent.
  std::optional<std::string> component_type;  // MCP-COMPONENT-TYPE
  std::optional<std::string> sender_id;       // MCP-MQTT-CLIENT-ID
  // MQTT 5.0 §4.10, when the PUBLISH carried them; correlation data is binary (any bytes).
  std::optional<std::string> response_topic;
  std::optional<std::string> correlation_data;
};

// How a publication goes; the QoS is the connection's (mqtt.qos).
struct PublishOptions {
  bool retained = false;
  // MQTT 5.0 §4.10: where the receiver should answer (a topic name: no wildcards) and what it
  // hands back with its answer (binary, any bytes). At most 65,535 bytes each; empty: not sent.
  std::string response_topic;
  std::string correlation_data;
};

// Completion of an operation, on the connection's strand. It must not hold a strong reference to
// the BrokerConnection (the BrokerConnection holds it until it runs); pending ones run with
// ok=false when the connection closes.
using Done = std::function<void(bool ok, const std::string& why)>;

class BrokerConnection : public std::enable_shared_from_this<BrokerConnection> {
 public:
  struct Handlers {
    std::function<void(const Incoming&)> on_message;
    // After a (re)connect, once every subscription has been sent again.
    std::function<void(const ConnackInfo&, bool reconnected)> on_connected;
    // An established connection dropped; reconnect follows when enabled.
    std::function<void(const std::string& cause)> on_connection_lost;
    // A connect attempt failed; `retrying` says whether another attempt is scheduled.
    std::function<void(const std::string& why, bool retrying)> on_connect_failed;
  };

  static std::shared_ptr<BrokerConnection> create(boost::asio::any_io_executor strand,
                                                  ConnectionOptions options, Handlers handlers);
  ~BrokerConnection();
  BrokerConnection(const BrokerConnection&) = delete;
  BrokerConnection& operator=(const BrokerConnection&) = delete;

  void connect();

  struct Filter {
    std::string filter;
    bool no_local = false;
  };
  // Subscriptions are kept and restored after every reconnect. Filters without options share
  // SUBSCRIBE packets (up to 64 in each), one with No Local has a packet of its own (see
  // send_subscribe). `done` runs once: when the broker acknowledged every filter of the call (or
  // refused one of them) on the current connection or on the next.
  void subscribe(std::vector<Filter> filters, Done done = {});
  void subscribe(const std::string& filter, bool no_local, Done done = {}) {
    subscribe(std::vector<Filter>{{filter, no_local}}, std::move(done));
  }
  // The filters of one call share UNSUBSCRIBE packets (up to 64 in each).
  void unsubscribe(std::vector<std::string> filters, Done done = {});
  void unsubscribe(const std::string& filter, Done done = {}) {
    unsubscribe(std::vector<std::string>{filter}, std::move(done));
  }
  // QoS from the options. While disconnected the message waits in a bounded backlog.
  void publish(const std::string& topic, std::shared_ptr<const std::string> payload,
               PublishOptions options, Done done = {});
  void publish(const std::string& topic, std::shared_ptr<const std::string> payload,
               bool retained = false, Done done = {}) {
    PublishOptions options;
    options.retained = retained;
    publish(topic, std::move(payload), std::move(options), std::move(done));
  }
  void publish(const std::string& topic, const std::string& payload, bool retained = false,
               Done done = {}) {
    publish(topic, std::make_shared<const std::string>(payload), retained, std::move(done));
  }
  // A clean DISCONNECT (the broker does not send the will) once what was published before is
  // sent. Stops reconnecting. `done` runs when the broker connection is closed, within the
  // timeout (and half a second). When the timeout passes with publications still queued, the
  // connection closes without DISCONNECT, so that the broker publishes the will instead.
  void disconnect(std::chrono::milliseconds timeout, std::function<void()> done = {});
  bool connected() const { return state_ == State::connected; }
  const std::string& client_id() const { return options_.client_id; }
  std::uint64_t reconnects() const { return reconnects_; }
  // What this connection holds for the broker: publications waiting (for the connection or for
  // the broker's acknowledgements) and those handed to the engine, unacknowledged.
  struct Held {
    std::size_t queued_messages = 0;
    std::size_t queued_bytes = 0;
    std::size_t in_flight_messages = 0;
    std::size_t in_flight_bytes = 0;
  };
  Held held() const {
    return {window_.size() + backlog_.size(), window_bytes_ + backlog_bytes_, in_flight_,
            in_flight_bytes_};
  }
  std::string describe() const { return "[mqtt " + options_.client_id + "]"; }
  // The URL of the broker this connection uses (or tries next), as the log and errors name it.
  std::string broker_url() const;

 private:
  enum class State { idle, connecting, connected, waiting_retry, disconnecting, closed };

  BrokerConnection(boost::asio::any_io_executor strand, ConnectionOptions options,
                   Handlers handlers);
  void do_connect();
  void on_connect_result(const ConnectOutcome& r);
  void on_message(const ReceivedMessage& m);
  void on_lost(const std::string& cause);
  void schedule_retry(const std::string& why);
  void send_subscribe(std::vector<Filter> filters);
  void on_subscribe_result(const std::vector<std::string>& filters, bool ok, const std::string& why,
                           const std::vector<std::uint8_t>& codes);
  struct Publication;
  void send_publish(Publication p);
  std::size_t publish_packet_size(const Publication& p) const;
  void disconnect_when_drained();
  void on_disconnect_timeout();
  void finish_disconnect();
  std::uint64_t add_op(Done done);
  void complete_op(std::uint64_t op, bool ok, const std::string& why);
  void fail_everything(const std::string& why);

  boost::asio::any_io_executor strand_;
  ConnectionOptions options_;
  Handlers handlers_;
  std::unique_ptr<Engine> engine_;
  // The MCP user properties of every PUBLISH (004 §User Property), built once.
  std::shared_ptr<const UserProperties> publish_properties_;
  std::size_t publish_properties_bytes_ = 0;  // their encoded size, for publish_packet_size()
  State state_ = State::idle;
  bool ever_connected_ = false;
  int attempt_ = 0;
  // Which broker: 0 the first (options_.broker), i the fallback i - 1. Moves on to the next one
  // after a failed attempt or a loss; stays on one that took the connection.
  std::size_t address_ = 0;
  std::size_t tried_ = 0;  // brokers tried by a connection without reconnect
  BrokerAddress address() const;
  std::size_t brokers() const { return 1 + options_.broker.fallbacks.size(); }
  std::uint64_t reconnects_ = 0;
  bool counted_up_ = false;  // in mcpmqtt_mqtt_connections
  void count_up(bool up);
  boost::asio::steady_timer retry_timer_;

  struct Subscription {
    bool no_local = false;
    std::vector<Done> waiting;  // acknowledgements the owner waits for
  };
  std::map<std::string, Subscription> subscriptions_;

  // A publication's Response Topic and Correlation Data, apart: one without them (nearly all)
  // costs a null pointer, not two strings, while it waits.
  struct RequestProperties {
    std::string response_topic;
    std::string correlation_data;
  };
  struct Publication {
    std::string topic;
    std::shared_ptr<const std::string> payload;
    bool retained = false;
    Done done;
    std::unique_ptr<RequestProperties> request;  // null: neither is sent
    // What it holds, for the bounds on queued and in-flight bytes.
    std::size_t bytes() const {
      return payload->size() +
             (request ? request->response_topic.size() + request->correlation_data.size() : 0);
    }
  };
  LazyDeque<Publication> backlog_;
  std::size_t backlog_bytes_ = 0;

  // Flow control (MQTT 5 §4.9): at most the broker's Receive Maximum of our publications are
  // handed to the engine unacknowledged; the rest wait here, bounded by max_queued_messages and
  // max_queued_bytes.
  // (At QoS 0 the same window counts publications the engine has not yet written.) Each
  // acknowledgement hands the next one over.
  void send_or_queue(Publication p);
  void drain_window();
  // Empties the window and the backlog, in the order they would have been sent.
  LazyDeque<Publication> take_unsent();
  LazyDeque<Publication> window_;
  std::size_t window_bytes_ = 0;
  std::size_t in_flight_ = 0;
  std::size_t in_flight_bytes_ = 0;
  // Whether `bytes` more may be handed to the engine now.
  bool in_flight_room(std::size_t bytes) const;
  // Logs a refused publication, at most once a second (with how many were not logged).
  void warn_refused(const std::string& topic, const std::string& why);
  log::Throttle refusal_log_;
  std::size_t receive_maximum_ = 65535;
  std::uint64_t generation_ = 0;  // of the broker connection, for acknowledgements of an old one

  std::size_t max_packet_size_ = 0;    // the broker's, from CONNACK; 0: no limit
  std::map<std::uint64_t, Done> ops_;  // publish and unsubscribe completions
  std::uint64_t next_op_ = 1;

  std::function<void()> disconnect_done_;
  std::shared_ptr<boost::asio::steady_timer> disconnect_timer_;
  std::chrono::steady_clock::time_point disconnect_deadline_{};
  bool disconnect_sent_ = false;  // handed to the engine: the window is empty
};

}  // namespace mcpmqtt::mqtt

// The bridge as an MCP server on MQTT, for one server-name: retained presence, the control
// topic, and one ClientLink per initialized MQTT client (004 §Service Registration,
// §Initialization, §Capability List Changed, §Shutdown).
//
// Duties:
// - connect with an empty retained will on $mcp-server/presence/{server-id}/{server-name};
//   publish notifications/server/online there, retained (server_name, description, meta);
//   adopt a broker-assigned MCP-SERVER-NAME (reconnecting so the will matches it);
// - subscribe the control topic; for each initialize, subscribe the client's RPC topic (No
//   Local), capability and presence topics *before* the owner can answer it;
// - route the server's list_changed and resources/updated notifications to the shared
//   capability topic, everything else to the client's RPC topic;
// - a client's will, `disconnected` on its presence or RPC topic: tell the owner, unsubscribe;
// - the owner ending a session: `disconnected` on the RPC topic, then unsubscribe;
// - stop: `disconnected` to every client, empty retained presence, clean DISCONNECT;
// - after a reconnect: subscriptions and presence restored (the BrokerConnection resubscribes).
//
// ServerEndpoint: one strand; not thread-safe. ClientLink: the strand of its session.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/protocol/topics.hpp"
#include "bridge/relay/channel.hpp"
#include "common/log.hpp"
#include "mqtt/broker_connection.hpp"

namespace mcpmqtt::mqtt {

class ServerEndpoint;

// One initialized MQTT client of a ServerEndpoint: the downstream end of an egress session.
// Runs on its own session strand (executor()); reaches the endpoint by posting to it.
class ClientLink : public bridge::Channel, public std::enable_shared_from_this<ClientLink> {
 public:
  const std::string& client_id() const { return client_id_; }
  const boost::asio::any_io_executor& executor() const { return strand_; }

  void start(Receiver receiver) override;
  void send(jsonrpc::Message message) override;
  void close(const bridge::CloseReason& why) override;
  std::string describe() const override { return prefix_; }

 private:
  friend class ServerEndpoint;
  ClientLink(boost::asio::any_io_executor strand, std::shared_ptr<ServerEndpoint> endpoint,
             std::string client_id, std::string prefix, std::size_t max_held,
             std::size_t max_held_bytes);
  void deliver(jsonrpc::Message message);
  void peer_closed(const bridge::CloseReason& why);

  boost::asio::any_io_executor strand_;
  std::shared_ptr<ServerEndpoint> endpoint_;
  std::string client_id_;
  std::string prefix_;
  std::size_t max_held_;
  std::size_t max_held_bytes_;
  std::size_t held_bytes_ = 0;
  Receiver receiver_;
  bool started_ = false;
  bool closed_ = false;
  std::deque<jsonrpc::Message> held_;
  std::optional<bridge::CloseReason> held_close_;
};

class ServerEndpoint : public std::enable_shared_from_this<ServerEndpoint> {
 public:
  struct Options {
    BrokerOptions broker;
    std::string server_id;  // our MQTT client id; unique, stable for the life of the process
    std::string server_name;
    std::string description;
    std::string meta_json = "{}";          // presence params.meta
    std::string connect_meta_json = "{}";  // MCP-META on CONNECT
    std::size_t max_sessions = 32;
    // When max_sessions are held (or `over_budget` says so), a new client's initialize first
    // closes the least recently active session with no request unanswered and no resource
    // subscription, the client being told `disconnected`; a session active within this floor
    // is spared (0: however recently it was used). Only when none can go is the client refused.
    std::chrono::milliseconds idle_floor{0};
    // Besides the count: a sentence when one more session cannot be afforded now (stdio: the
    // children's memory), empty when it can. Runs on the endpoint's strand.
    std::function<std::string()> over_budget;
    // A request unanswered for longer than this (the longest per-method timeout, after which
    // the bridge has answered it one way or another) no longer keeps its session busy.
    std::chrono::milliseconds busy_horizon{std::chrono::minutes(10)};
    jsonrpc::Limits limits;
    // A client's RPC messages that arrive while its topics are being subscribed (before its
    // initialize is answered): past either bound its requests get a JSON-RPC error at once.
    std::size_t max_early_messages = 256;
    std::size_t max_early_bytes = 4u << 20;
    // Messages a session's link holds until its owner starts it: past either bound the session
    // ends with an error (the client gets `disconnected`).
    std::size_t max_held_messages = 10000;
    std::size_t max_held_bytes = 32u << 20;
    // A session whose client sends nothing for this long after its initialize response ends
    // (0: never). A client that vanished while its topics were being subscribed had its will
    // published before the server watched its presence (004 §Initialization): nothing else
    // would end that session, nor free its child.
    std::chrono::milliseconds handshake_timeout{std::chrono::seconds(30)};
  };
  struct Handlers {
    // A new client's initialize; its subscriptions are in place. Runs on the link's strand. The
    // initialize is also the first message the link delivers once started; the owner starts
    // the link and answers the initialize through it.
    std::function<void(std::shared_ptr<ClientLink>, jsonrpc::Message initialize)> on_initialize;
    // Broker connection state changes (readiness), with what keeps the server offline when it
    // is (a refused or lost connection, in the broker's words); runs on the endpoint's strand.
    std::function<void(bool connected, const std::string& why)> on_broker;
    // The broker connection came back; links are still there. Runs on the endpoint's strand.
    std::function<void()> on_reconnected;
  };
  using StrandFactory = std::function<boost::asio::any_io_executor()>;

  static std::shared_ptr<ServerEndpoint> create(boost::asio::any_io_executor strand,
                                                StrandFactory session_strands, Options options,
                                                Handlers handlers);
  void start();
  // Replaces the presence's params.meta (a JSON object) and announces it again when online.
  void set_meta(std::string meta_json);
  // Ends every session (`disconnected` to each client), clears presence, disconnects.
  void stop(std::chrono::milliseconds timeout, std::function<void()> done);

  const std::string& server_id() const { return options_.server_id; }
  const std::string& server_name() const { return options_.server_name; }
  bool connected() const { return conn_ && conn_->connected(); }
  std::size_t session_count() const { return clients_.size(); }
  std::uint64_t sessions_evicted() const { return evicted_; }
  std::uint64_t reconnects() const;
  std::string describe() const { return "[server " + options_.server_name + "]"; }

 private:
  friend class ClientLink;
  struct Client {
    std::weak_ptr<ClientLink> link;  // empty while subscribing
    std::optional<jsonrpc::Message> initialize;
    // The initialize's id and its response as sent: the same initialize again (a client whose
    // initialize or response was lost while a federated broker's link came back sends it again)
    // gets the same answer, and the session goes on.
    std::optional<jsonrpc::Id> init_id;
    std::shared_ptr<const std::string> init_reply;
    std::deque<jsonrpc::Message> early;  // arrived while subscribing
    std::size_t early_bytes = 0;
    std::size_t early_refused = 0;  // past the bounds; logged once
    std::chrono::steady_clock::time_point last_activity = std::chrono::steady_clock::now();
    // Requests either way not answered yet ("c" or "s" and the id): a session with one is busy,
    // however long it has been quiet.
    std::unordered_set<std::string> pending;
    bool pending_overflow = false;  // more than kMaxTracked: busy until the session ends
    // resources/subscribe in flight (request id → URI) and acknowledged: a session with a
    // subscription holds a stream of updates its client waits for, and is not evicted.
    std::unordered_map<std::string, std::string> subscribing;
    std::unordered_set<std::string> subscribed;
    // Set when the initialize response goes out unless the client has sent something since its
    // initialize (`spoke`); cleared by its next message. Past it, the session ends
    // (Options::handshake_timeout).
    std::optional<std::chrono::steady_clock::time_point> quiet_until;
    bool spoke = false;
  };

  ServerEndpoint(boost::asio::any_io_executor strand, StrandFactory session_strands,
                 Options options, Handlers handlers);
  void open_connection();
  void on_connected(const ConnackInfo& info, bool reconnected);
  void on_message(const Incoming& in);
  void on_control(const Incoming& in);
  void on_rpc(const std::string& client_id, const Incoming& in);
  void on_client_presence(const std::string& client_id, const Incoming& in);
  void on_client_capability(const std::string& client_id, const Incoming& in);
  void on_subscribed(const std::string& client_id, bool ok, const std::string& why);
  // A message past the bounds of what is held before the initialize response: a request gets
  // an error, anything else is dropped (the first refusal per client is logged).
  void refuse_early(const std::string& client_id, const jsonrpc::Message& m);
  void reply_error(const std::string& client_id, const jsonrpc::Id& id, int code,
                   const std::string& message);
  void publish_presence(Done done = nullptr);
  // Activity of a session, for the idle floor: `from_client` is what the client sent.
  void note(Client& c, const jsonrpc::Message& m, bool from_client);
  // Closes the least recently active session that has nothing in flight and no subscription
  // (and is quiet for longer than idle_floor); false when none is. `cause`: why room is needed;
  // `why_not`: what the sessions were doing instead, for the log.
  bool evict_idle(const std::string& for_client, const std::string& cause,
                  std::string* why_not = nullptr);
  // Called by links (posted onto our strand).
  void send_from_link(const std::string& client_id, const jsonrpc::Message& message);
  void end_client(const std::string& client_id, bool send_disconnected,
                  std::optional<bridge::CloseReason> tell_link);
  // After the initialize response: the client must speak by Client::quiet_until, and the
  // sweep (one timer for all of them) ends those that did not.
  void expect_client(Client& c);
  void arm_sweep(std::chrono::steady_clock::time_point at);
  void sweep_quiet_clients();

  boost::asio::any_io_executor strand_;
  StrandFactory session_strands_;
  Options options_;
  topics::Scheme topics_;  // under options_.broker.topic_prefix
  Handlers handlers_;
  std::shared_ptr<BrokerConnection> conn_;
  std::map<std::string, Client> clients_;
  boost::asio::steady_timer handshake_timer_;
  std::optional<std::chrono::steady_clock::time_point> sweep_at_;  // when handshake_timer_ fires
  bool stopping_ = false;
  bool name_adopted_ = false;
  std::uint64_t reconnects_before_ = 0;
  std::uint64_t evicted_ = 0;
  log::Throttle evict_log_;
  log::Throttle refuse_log_;
};

// True for the notifications 004 sends on the shared capability topic: every
// notifications/*/list_changed and notifications/resources/updated.
bool is_capability_notification(const jsonrpc::Message& m);

}  // namespace mcpmqtt::mqtt

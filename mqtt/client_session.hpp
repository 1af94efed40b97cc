// The bridge as an MCP client on MQTT: one MCP session with one instance of an MQTT-hosted
// server, on its own MQTT connection. It is the upstream end of an ingress session.
//
// Duties (004 §MQTT Client ID, §Initialization, §Capability List Changed, §Shutdown):
// - a fresh MQTT client id per session (the caller makes one with fresh_client_id());
// - will = notifications/disconnected on $mcp-client/presence/{client-id};
// - before initialize is sent: the RPC topic subscribed with No Local, and the server's
//   capability topic; also the server instance's presence topic, to learn when it vanishes.
//   With Options::directory (an ingress's sessions), the session hears the capability and
//   presence messages of its instance from the directory, which the bridge's DirectoryObserver
//   feeds from one subscription for all its sessions (the directory knows the instance, so those
//   filters are in place), and its own connection subscribes only the RPC topic. On a
//   directory's `offline` the session first unsubscribes its RPC topic, so that what the server
//   sent before leaving (answers, its `disconnected`), on another connection, is delivered;
// - initialize goes to the server's control topic, everything else to the RPC topic — and only
//   after the initialize response: the server subscribes the RPC topic when initialize reaches
//   it, so anything sent there earlier would be lost. Messages in between are held (bounded);
// - close: notifications/disconnected on the presence topic, then a clean DISCONNECT;
// - the server ends the session (`disconnected` on the RPC topic), its presence is cleared, or
//   the broker connection is lost: on_close with Kind::peer_gone and a detail to pass on. A
//   lost connection ends the session rather than reconnecting: the broker has sent our will, so
//   the server has already forgotten it.
// - the instance announces itself again, live and with the presence it had (its broker
//   connection was cut and came back, as when a federated broker's link returns): what was
//   published to it around the cut may be lost. An initialize not yet answered is sent again
//   (the server answers a repeated initialize as it did the first; nothing else has gone out
//   before its answer); past it, the receiver hears on_interrupted, so that the requests in
//   flight are answered at once.
//
// One strand; not thread-safe.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/any_io_executor.hpp>

#include "bridge/protocol/topics.hpp"
#include "bridge/relay/channel.hpp"
#include "bridge/relay/directory.hpp"
#include "common/lazy_deque.hpp"
#include "mqtt/broker_connection.hpp"

namespace mcpmqtt::mqtt {

class ClientSession : public bridge::Channel, public std::enable_shared_from_this<ClientSession> {
 public:
  struct Options {
    BrokerOptions broker;
    std::string client_id;  // fresh for this session
    std::string server_id;
    std::string server_name;
    std::string connect_meta_json = "{}";  // MCP-META on CONNECT
    jsonrpc::Limits limits;
    std::size_t max_queued = 1000;  // messages sent before the subscriptions are in place
    // Where the instance's presence and capability messages come from; none: subscribed on
    // the session's own connection.
    std::shared_ptr<bridge::Directory> directory;
  };

  static std::shared_ptr<ClientSession> create(boost::asio::any_io_executor strand,
                                               Options options);

  void start(Receiver receiver) override;
  void send(jsonrpc::Message message) override;
  void close(const bridge::CloseReason& why) override;
  std::string describe() const override { return prefix_; }

  const std::string& client_id() const { return client_id_; }
  const std::string& server_id() const { return server_id_; }
  const std::string& server_name() const { return server_name_; }
  // Subscriptions are in place and messages flow.
  bool ready() const { return state_ == State::ready; }
  // Runs (on the strand) once the MQTT connection is closed after the session ended, so a
  // process can wait for its `disconnected` to be on the wire before exiting.
  void on_finished(std::function<void()> fn) { on_finished_ = std::move(fn); }
  // Runs (on the strand) with the broker's CONNACK (its MCP user properties: MCP-RBAC), before
  // any message of the session is published; set before start().
  void on_connected(std::function<void(const ConnackInfo&)> fn) { on_connected_ = std::move(fn); }

 private:
  enum class State { idle, subscribing, ready, closed };
  ClientSession(boost::asio::any_io_executor strand, Options options);
  void on_message(const Incoming& in);
  void on_subscribed(bool ok, const std::string& why);
  void publish(const jsonrpc::Message& m);
  void flush();
  void fail(bridge::CloseReason why);
  void on_presence(const Incoming& in);
  // What happens to the instance, from either source.
  void on_instance(bridge::Directory::InstanceEvent event,
                   const std::shared_ptr<const std::string>& payload);
  // The payload is shared by every session of the instance: parsed without a copy of it.
  void on_capability(const std::shared_ptr<const std::string>& payload);
  void announced_again();
  bridge::CloseReason offline() const;
  void stop_listening();

  boost::asio::any_io_executor strand_;
  // What Options says, kept member by member: the broker options go to the connection at
  // start(), so that a session does not hold them (a session is made by the thousand).
  std::string client_id_;
  std::string server_id_;
  std::string server_name_;
  jsonrpc::Limits limits_;
  std::size_t max_queued_;
  std::shared_ptr<bridge::Directory> directory_;
  const topics::Scheme& topics_;  // under the broker's topic_prefix (topics::scheme_for)
  struct Connect {
    BrokerOptions broker;
    std::string meta_json;
  };
  std::unique_ptr<Connect> connect_;  // until start()
  std::string prefix_;
  std::string rpc_topic_;
  std::string control_topic_;
  std::shared_ptr<BrokerConnection> conn_;
  Receiver receiver_;
  State state_ = State::idle;
  LazyDeque<jsonrpc::Message> queued_;
  std::optional<jsonrpc::Id> awaiting_init_;     // the initialize sent, until its response arrives
  std::optional<jsonrpc::Message> init_;         // that initialize, to send again
  std::shared_ptr<const std::string> presence_;  // the instance's presence as last seen
  bridge::Directory::ListenId listening_ = 0;    // on directory_
  std::function<void()> on_finished_;
  std::function<void(const ConnackInfo&)> on_connected_;
};

// A fresh MQTT client id for one MCP session: prefix + 128 random bits in hex.
std::string fresh_client_id(const std::string& prefix);

}  // namespace mcpmqtt::mqtt

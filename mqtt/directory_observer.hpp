// Keeps a bridge::Directory up to date from retained and live presence messages
// (004 §Service Discovery), on one observer connection per bridge. Subscribes
// $mcp-server/presence/+/{filter} for each configured server-name filter, or for the filters
// the broker suggests in CONNACK (MCP-SERVER-NAME-FILTERS), which win. While the broker
// connection is down the directory is empty: nothing in it could be reached.
//
// It also subscribes $mcp-server/capability/+/{filter} (004 §Message Topics), before the
// presence filters, and hands each message to the directory, which fans it out to the sessions
// with that instance (Directory::listen): a session's own connection subscribes only its RPC
// topic.
//
// One strand; not thread-safe (the Directory itself is).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "bridge/protocol/topics.hpp"
#include "bridge/relay/directory.hpp"
#include "common/log.hpp"
#include "mqtt/broker_connection.hpp"

namespace mcpmqtt::mqtt {

class DirectoryObserver : public std::enable_shared_from_this<DirectoryObserver> {
 public:
  struct Options {
    BrokerOptions broker;
    std::string client_id;
    std::vector<std::string> filters = {"#"};
    std::string connect_meta_json = "{}";
  };
  static std::shared_ptr<DirectoryObserver> create(boost::asio::any_io_executor strand,
                                                   Options options,
                                                   std::shared_ptr<bridge::Directory> directory);
  void start();
  void stop(std::chrono::milliseconds timeout, std::function<void()> done);
  bool connected() const { return conn_ && conn_->connected(); }
  std::uint64_t reconnects() const { return conn_ ? conn_->reconnects() : 0; }
  // Broker connection state changes, for readiness: connected, or not and why (the last failed
  // attempt or the loss). Runs on the observer's strand.
  std::function<void(bool connected, const std::string& why)> on_broker;

 private:
  DirectoryObserver(boost::asio::any_io_executor strand, Options options,
                    std::shared_ptr<bridge::Directory> directory);
  void on_connected(const ConnackInfo& info);
  void on_message(const Incoming& in);
  void use_filters(const std::vector<std::string>& filters);

  boost::asio::any_io_executor strand_;
  Options options_;
  topics::Scheme topics_;  // under options_.broker.topic_prefix
  std::shared_ptr<bridge::Directory> directory_;
  std::shared_ptr<BrokerConnection> conn_;
  std::vector<std::string> subscribed_;
  log::Throttle ignored_log_;
};

}  // namespace mcpmqtt::mqtt

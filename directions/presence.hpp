// The presence directory of an ingress: a bridge::Directory kept up to date from the retained
// presence of the server-names it may reach (004 §Service Discovery), on an observer connection
// of its own. The one set-up of it, for the HTTP ingress and `mcp-mqtt-bridge stdio` alike.
//
// One strand (given to create); not thread-safe. The Directory itself is.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "bridge/relay/directory.hpp"
#include "config/config.hpp"

namespace mcpmqtt::mqtt {
class DirectoryObserver;
}

namespace mcpmqtt::directions {

class Presence {
 public:
  // `filters`: the server-name filters to watch; `description`: what the connection is, in its
  // MCP-META on CONNECT.
  static std::shared_ptr<Presence> create(boost::asio::any_io_executor strand,
                                          const config::MqttConfig& mqtt,
                                          std::vector<std::string> filters,
                                          const std::string& description);
  ~Presence();
  Presence(const Presence&) = delete;
  Presence& operator=(const Presence&) = delete;

  const std::shared_ptr<bridge::Directory>& directory() const { return directory_; }
  // Broker connection state changes, for readiness: connected, or not and why. Set before
  // start(); runs on the strand.
  void on_broker(std::function<void(bool connected, const std::string& why)> fn);
  void start();
  void stop(std::chrono::milliseconds timeout, std::function<void()> done);

 private:
  Presence() = default;
  std::shared_ptr<bridge::Directory> directory_;
  std::shared_ptr<mqtt::DirectoryObserver> observer_;
};

}  // namespace mcpmqtt::directions

// An MCP client on MQTT for tests, written on the independent Observer (Paho directly), not on
// the bridge's own code: it finds a server instance by presence, connects with the
// `disconnected` will, subscribes its RPC topic (No Local) and the server's capability topic,
// sends initialize to the control topic and everything else to the RPC topic (004).
//
// Used from one test thread.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "tests/support/observer.hpp"

namespace mcpmqtt::test {

class McpMqttClient {
 public:
  // How it reaches the broker, for brokers other than a default Mosquitto.
  struct Options {
    std::string topic_prefix = "$mcp-";  // every participant's (mqtt.topic_prefix)
    std::string username, password;      // ejabberd wants both
    int qos = 1;                         // of what it publishes and subscribes to: 0, 1 or 2
  };
  // Waits (up to `wait`) for an instance of `server_name` to announce itself.
  McpMqttClient(const std::string& broker_url, const std::string& server_name,
                std::string client_id = {},
                std::chrono::milliseconds wait = std::chrono::seconds(20))
      : McpMqttClient(broker_url, server_name, Options{}, std::move(client_id), wait) {}
  McpMqttClient(const std::string& broker_url, const std::string& server_name, Options options,
                std::string client_id = {},
                std::chrono::milliseconds wait = std::chrono::seconds(20));

  const std::string& client_id() const { return client_id_; }
  const std::string& server_id() const { return server_id_; }
  std::string rpc_topic() const;

  // Sends initialize (with `capabilities_json`) and notifications/initialized; returns the
  // initialize response text.
  std::optional<std::string> initialize(
      const std::string& capabilities_json = "{}",
      std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Sends a request and waits for the response with its id; other messages are kept for next().
  std::optional<std::string> request(const std::string& method,
                                     const std::string& params_json = "{}",
                                     std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Sends a request without waiting; returns its id.
  int send_request(const std::string& method, const std::string& params_json = "{}");
  // Waits for the response to `id`.
  std::optional<std::string> response(int id,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(30));
  void notify(const std::string& method, const std::string& params_json = "");
  void respond(const std::string& id_json, const std::string& result_json);
  void publish_raw(const std::string& topic, const std::string& payload);

  // The next message that is not a response to one of our requests (server requests,
  // notifications), with the topic it came on.
  struct Incoming {
    std::string topic;
    std::string payload;
  };
  std::optional<Incoming> next(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // The next such message whose payload contains `needle`.
  std::optional<Incoming> next_containing(
      const std::string& needle, std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // 004 §Client Disconnect: `disconnected` on the presence topic, then a clean DISCONNECT.
  void disconnect();
  Observer& mqtt() { return *mqtt_; }

 private:
  void pump(std::chrono::milliseconds timeout);
  std::string url_;
  Options options_;
  std::string server_name_;
  std::string client_id_;
  std::string server_id_;
  std::unique_ptr<Observer> mqtt_;
  int next_id_ = 1;
  std::deque<Incoming> others_;
  std::deque<std::pair<std::string, std::string>> responses_;  // id json → payload
};

// The JSON text of a member path ("result.content.0.text"), or nullopt.
std::optional<std::string> json_at(const std::string& json, const std::string& path);

}  // namespace mcpmqtt::test

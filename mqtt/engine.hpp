// The MQTT v5 client engine below mqtt::BrokerConnection: one broker connection's packets, without
// policy. BrokerConnection (the front the rest of the bridge calls) decides when to connect, what
// to restore after a reconnect, how many publications may be in flight and which MCP user
// properties each one carries; an engine only does what it is asked, on the broker connection
// it holds now.
//
// Two engines implement it (mqtt.client): the native one (mqtt/native/, on the daemon's own
// io_context: no thread hand-off per message) and Eclipse Paho C++ (mqtt/paho/). Nothing outside
// mqtt/ sees which one runs.
//
// Contract of every engine:
// - all calls on the strand given at creation; every completion and event runs on that strand,
//   never inside the call that started the operation;
// - connect() may be called again after a failed attempt or a lost connection;
// - an operation started while not connected fails (its completion says why);
// - when the connection is lost, on_lost runs first, then every pending completion with
//   ok=false;
// - destroying the engine with operations pending is safe: their completions never run, and the
//   broker connection is closed (without DISCONNECT: the broker sends the will; the Paho engine
//   cannot keep this part, see ~PahoEngine).
//
// Not thread-safe: one strand.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "mqtt/protocol/types.hpp"

namespace mcpmqtt::mqtt {

class Engine {
 public:
  struct Events {
    std::function<void(const ReceivedMessage&)> on_message;
    // An established connection ended without a disconnect() of ours: the socket closed, the
    // keep-alive expired, the broker sent DISCONNECT (its reason in `why`), or the broker broke
    // the protocol (we sent DISCONNECT with the reason).
    std::function<void(const std::string& why)> on_lost;
  };
  using ConnectDone = std::function<void(const ConnectOutcome&)>;
  using AckDone = std::function<void(const AckOutcome&)>;

  virtual ~Engine() = default;
  Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  virtual void connect(const EngineConnect& params, ConnectDone done) = 0;
  virtual void subscribe(std::vector<SubscribeRequest> filters, AckDone done) = 0;
  virtual void unsubscribe(std::vector<std::string> filters, AckDone done) = 0;
  // QoS 0: done once written to the socket; QoS 1 and 2: once the broker acknowledged.
  virtual void publish(PublishRequest message, AckDone done) = 0;
  // Waits (at most `timeout`) for acknowledgements of what is in flight, sends DISCONNECT with
  // reason 0x00 (the broker discards the will) and closes. `done` runs once it is closed.
  virtual void disconnect(std::chrono::milliseconds timeout, std::function<void()> done) = 0;
  virtual bool connected() const = 0;
};

std::unique_ptr<Engine> make_native_engine(boost::asio::any_io_executor strand,
                                           Engine::Events events);
std::unique_ptr<Engine> make_paho_engine(boost::asio::any_io_executor strand,
                                         Engine::Events events);

}  // namespace mcpmqtt::mqtt

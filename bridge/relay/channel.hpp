// One end of an MCP session: whole JSON-RPC messages in, whole messages out, and a close with a
// reason. Every transport end is a Channel (an HTTP session, the bridge's own stdio, a child
// process, an MQTT client session, one client of an MQTT server endpoint, an upstream HTTP
// session); the bridge core joins two of them in a splice.
//
// Contract for implementations and users:
// - Every call and every callback happens on the channel's executor (one strand per session).
//   Implementations that receive data on other threads (Paho) post onto that executor first.
// - start() is called once; messages that arrive before it are held (bounded) and delivered
//   after it, in order.
// - send() never blocks. Queues toward a slow peer are bounded; a channel that cannot take more
//   closes itself with Kind::error and a detail that says so. It never drops a message silently.
// - on_close is called exactly once, when the channel closes for a reason of its own or its
//   peer's. It is not called for a close the owner requested with close().
// - Messages sent before close() still go out, as far as the transport allows (the splice
//   answers pending requests and then closes).
// - After closing (either way) no message is delivered and send() is ignored.
// - on_interrupted (optional) says the channel's transport was cut and came back while the
//   session lives on: what was sent to the peer around the cut may be lost, so requests it was
//   sent may never be answered. The channel has already redone what it can (an initialize).
#pragma once

#include <functional>
#include <string>

#include "bridge/jsonrpc/jsonrpc.hpp"

namespace mcpmqtt::bridge {

struct CloseReason {
  enum class Kind {
    normal,     // the peer ended the session (HTTP DELETE, stdin closed, `disconnected`)
    peer_gone,  // the peer vanished (will message, presence cleared, connection lost)
    exited,     // a child process exited
    timeout,    // idle session, initialize never answered
    error,      // protocol or I/O error, full queue
    shutdown,   // the bridge is stopping or reloading
  };
  Kind kind = Kind::normal;
  std::string detail;  // for people: "child exited with status 1", "server sid-1 went offline"
};

const char* to_string(CloseReason::Kind kind);

class Channel {
 public:
  struct Receiver {
    std::function<void(jsonrpc::Message)> on_message;
    std::function<void(const CloseReason&)> on_close;
    std::function<void(const std::string& detail)> on_interrupted = nullptr;
  };

  virtual ~Channel() = default;
  virtual void start(Receiver receiver) = 0;
  virtual void send(jsonrpc::Message message) = 0;
  virtual void close(const CloseReason& why) = 0;
  // A short label for logs, such as "[http S 1a2b]" or "[child demo/x pid 42]".
  virtual std::string describe() const = 0;
};

}  // namespace mcpmqtt::bridge

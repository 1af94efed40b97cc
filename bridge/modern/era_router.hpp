// Picks the protocol era of a connection whose client speaks one era for its lifetime (the
// bridge's own stdio, `mcp-mqtt-bridge stdio`), message by message, as the v2 SDK's serveStdio
// does (basic/versioning §Compatibility Matrix: "an initialize request
// selects legacy semantics, scoped to the stdio process"):
//   - before anything pins it: a modern `server/discover` (the v2 client's probe) is answered
//     without pinning — the probe copy of the bridge exits at EOF, and a following initialize may
//     still pin legacy; any other request that claims the modern envelope pins the connection
//     modern; a message without the claim (initialize first) pins it legacy;
//   - pinned legacy: every message goes to the legacy channel (joined to a 2025 ingress session,
//     today's path, unchanged); a later modern request there is the session's business;
//   - pinned modern: modern requests go to the gateway; `initialize` or another request without
//     the claim gets -32022 naming the supported versions (basic/versioning §Backward
//     Compatibility); notifications/cancelled cancels a modern request; other messages are
//     dropped.
//
// One strand; not thread-safe (the host channel's).
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>

#include "bridge/relay/channel.hpp"

namespace mcpmqtt::bridge {

class EraRouter : public std::enable_shared_from_this<EraRouter> {
 public:
  enum class Era { undecided, legacy, modern };
  struct Hooks {
    // The connection opened the 2025 way: join `legacy` to an ingress session. It delivers the
    // host's messages (the opening one first) and writes what it is sent to the host; closing it
    // closes the host.
    std::function<void(std::shared_ptr<Channel> legacy)> on_legacy;
    // A request that claims the modern envelope: answers go back through send_modern().
    std::function<void(const jsonrpc::Message&)> on_modern_request;
    // notifications/cancelled from the host while not pinned legacy.
    std::function<void(const jsonrpc::Id& request_id)> on_modern_cancel;
    // The host went away (stdin closed, a write failed); after the legacy channel heard of it.
    std::function<void(const CloseReason&)> on_closed;
  };

  static std::shared_ptr<EraRouter> create(std::shared_ptr<Channel> host, Hooks hooks);
  void start();
  // A message of the modern gateway for the host (ignored once the router is closed).
  void send_modern(jsonrpc::Message m);
  // Closes the host (the owner's end).
  void close(const CloseReason& why);
  Era era() const { return era_; }

 private:
  class LegacyView;
  EraRouter(std::shared_ptr<Channel> host, Hooks hooks)
      : host_(std::move(host)), hooks_(std::move(hooks)) {}
  void on_message(jsonrpc::Message m);
  void on_host_closed(const CloseReason& why);
  void pin_legacy(jsonrpc::Message first);
  void on_modern_pinned(const jsonrpc::Message& m);

  std::shared_ptr<Channel> host_;
  Hooks hooks_;
  std::shared_ptr<LegacyView> legacy_;
  Era era_ = Era::undecided;
  bool closed_ = false;
};

}  // namespace mcpmqtt::bridge

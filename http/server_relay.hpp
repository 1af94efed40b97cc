// Replicas of the HTTP ingress behind one load balancer (docs/replicas.md): the HTTP side of
// relaying a request to the replica that holds its session.
//
// - SessionIds: session ids that name the replica holding the session and that no one without
//   the replicas' shared secret can make: `{replica}.{random}.{MAC}`.
// - Relay: what the HTTP server asks of the daemon's relay (directions/replica_relay): forward a
//   request to its owner; the owner's answer arrives as the operations of an Exchange.
// - The wire form of relayed requests and of those operations (frames), and RemoteExchange: an
//   Exchange on the owner whose operations become frames for the replica that relayed.
//
// Thread-safe: SessionIds is immutable; RemoteExchange as Exchange says; the rest is stateless.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/http/verb.hpp>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/modern/request_state.hpp"
#include "bridge/protocol/principal.hpp"
#include "http/server_exchange.hpp"

namespace mcpmqtt::http {

class SessionIds {
 public:
  // `replica`: letters, digits, '-' and '_'; `secret`: the key (the replicas' shared secret, or
  // one of this process).
  SessionIds(std::string replica, std::string_view secret);
  const std::string& replica() const { return replica_; }
  // A new session id of this replica; empty when the system has no random bytes.
  std::string mint() const;
  // The replica a genuine id names (the MAC checked, in constant time); nullopt for any other
  // string.
  std::optional<std::string> owner(std::string_view id) const;

 private:
  std::string mac(std::string_view signed_part) const;
  std::string replica_;
  bridge::HmacKey key_;
};

// A request to an MCP endpoint that reached this replica for a session (or a parked 2026-07-28
// request) another replica holds, with what the owner needs to serve it as if it had arrived
// there: what the client sent, and who sent it (checked here).
struct RelayedRequest {
  std::string owner;
  boost::beast::http::verb method = boost::beast::http::verb::post;
  std::string target;  // the request's path
  // The fields the MCP endpoint reads (Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID,
  // Accept, Content-Type, Mcp-Method, Mcp-Name, Mcp-Param-*), as received.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bridge::Principal principal;
  bool modern = false;  // a 2026-07-28 request (relayed for its requestState)
};

// What this replica answers a relayed request itself, with the request's id (JSON-RPC 2.0 §5):
// when its owner is gone — a 2025 session 404 (the client initializes again), a parked
// 2026-07-28 request the revision's error for stale requestState — and when the relay could not
// deliver it (no answer in time, too many relays in flight, no broker): 503 with `why`.
Response relay_owner_gone(const RelayedRequest& request);
// The last event of a relayed POST's stream that its owner can no longer finish (it is gone, or
// the relay broke): the request's JSON-RPC error, so that no client waits in vain; empty when
// the request carries no id to answer (a GET stream, notifications).
std::string relay_stream_error(const RelayedRequest& request, const std::string& why);
Response relay_unavailable(const RelayedRequest& request, const std::string& why);

class Relay {
 public:
  virtual ~Relay() = default;
  // Sends `request` to its owner; what the owner answers is played into `exchange` (reply, or a
  // stream's head, events and end). Every request gets an answer: the owner's,
  // relay_owner_gone, or relay_unavailable. Any thread.
  virtual void forward(RelayedRequest request, std::shared_ptr<Exchange> exchange) = 0;
  // Whether `replica` is known to be up now (its presence on the broker). Any thread.
  virtual bool live(const std::string& replica) const = 0;
};

// ---- wire form
// ------------------------------------------------------------------------------------
//
// A message is a list of byte strings: a 4-byte big-endian count, then each as a 4-byte
// big-endian length and its bytes. The first names the kind:
//   replica → owner: "request" method target principal body (name value)*;  "gone"
//   owner → replica: "reply" status body (name value)*;  "open" status (name value)*;
//                    "push" bytes;  "event" id data last("1"|"0");  "end";  "abort"
namespace relay_wire {

std::string encode(const std::vector<std::string_view>& parts);
// Views into `message`; nullopt when it is not a well-formed list (or has more than `max` parts).
std::optional<std::vector<std::string_view>> decode(std::string_view message,
                                                    std::size_t max = 4096);

std::string encode_request(const RelayedRequest& request);
// The request in `parts` (from decode, kind "request"); nullopt when malformed.
std::optional<RelayedRequest> decode_request(const std::vector<std::string_view>& parts);

std::string encode_principal(const bridge::Principal& principal);
std::optional<bridge::Principal> decode_principal(std::string_view json);

enum class Applied { more, done, malformed };
// Plays one owner → replica frame into the exchange that answers the client: `done` after
// reply, end or abort.
Applied apply(const std::vector<std::string_view>& parts, Exchange& exchange);

}  // namespace relay_wire

// The Exchange a relayed request is served through on its owner: each operation becomes a
// frame handed to `send` (in call order, on the caller's thread: `send` must be thread-safe and
// keep the order). gone() tells it that the client (or the replica that relayed) went away.
class RemoteExchange : public Exchange {
 public:
  using Send = std::function<void(std::string frame, bool last)>;
  explicit RemoteExchange(Send send) : send_(std::move(send)) {}

  // The client or the relaying replica is gone: runs on_gone (once), and sends nothing more.
  void gone();
  bool complete() const;

  void watch(std::function<void()> on_gone) override;
  void reply(Response response) override;
  void open_stream(Response head) override;
  void push(std::string bytes) override;
  void push_event(std::string_view id, std::string_view data, bool last = false) override;
  void end() override;
  void abort() override;

 private:
  void emit(std::string frame, bool last);
  mutable std::mutex mu_;
  Send send_;
  std::function<void()> on_gone_;
  bool gone_ = false;
  bool complete_ = false;
};

}  // namespace mcpmqtt::http

// Subscription bookkeeping and fan-out for one downstream session (no I/O).
//
// An MQTT-hosted server announces resource updates and list changes on its capability topic,
// which every client of that server shares (004 §Capability change notifications). The
// downstream client asked for some of them, in one of two ways:
// - legacy `resources/subscribe` / `resources/unsubscribe` (2024-11-05 … 2025-11-25): the
//   requests go to the server; `notifications/resources/updated` is delivered only when a URI
//   the session subscribed to covers the update's (events::covers: the same URI, or a
//   sub-resource after '/', '?' or '#', SEP-1803); list changes go to every session, as a direct
//   server would send them;
// - `subscriptions/listen` streams (000): the bridge answers them itself, since the servers on
//   MQTT are session-based and do not know the method. Each listen gets the acknowledgement
//   first, holding only what the server can honour (its `listChanged` capabilities, and
//   `resources.subscribe` for resource URIs); then every matching notification, tagged with
//   `_meta["io.modelcontextprotocol/subscriptionId"]` = the listen request's id. A client may
//   hold several listens, each with its own filter. `notifications/cancelled` naming a listen
//   ends it; a graceful end of the session answers each listen with a result.
//
// Toward the server the hub keeps one subscription per URI, reference-counted over the
// session's legacy subscriptions and its listens: `resources/subscribe` when the first becomes
// interested, `resources/unsubscribe` when the last goes away. The owner performs those calls
// (`Actions::subscribe` / `unsubscribe`) and reports the outcome of each subscribe with
// subscribed(); a listen's acknowledgement waits for the outcomes of its URIs.
//
// One strand; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bridge/jsonrpc/jsonrpc.hpp"

namespace mcpmqtt::bridge {

inline constexpr std::string_view kSubscriptionIdKey = "io.modelcontextprotocol/subscriptionId";

// The `_meta["io.modelcontextprotocol/subscriptionId"]` of a notification, if it has one.
std::optional<jsonrpc::Id> subscription_id(const jsonrpc::Message& m);

struct SubscriptionLimits {
  std::size_t max_listens = 1024;          // open listens per session
  std::size_t max_uris_per_listen = 1024;  // resourceSubscriptions of one listen
};

class SubscriptionHub {
 public:
  using Limits = SubscriptionLimits;

  // What the owner does with one message, and what else it sends.
  struct Actions {
    // The message was handled here and must not travel on (the hub may have answered it).
    bool consumed = false;
    std::vector<jsonrpc::Message> to_client;  // to send downstream, in order
    std::vector<std::string> subscribe;       // resources/subscribe {uri} to the server
    std::vector<std::string> unsubscribe;     // resources/unsubscribe {uri} to the server
  };

  explicit SubscriptionHub(Limits limits = {});

  // A message from the downstream client on its way to the server.
  Actions from_client(const jsonrpc::Message& m);
  // A message from the server on its way to the client.
  Actions from_server(const jsonrpc::Message& m);
  // The outcome of a resources/subscribe the hub asked for: nullopt on success, else the error.
  Actions subscribed(const std::string& uri, const std::optional<std::string>& error);
  // The session ends: each open listen's final response — an empty result when the end is
  // graceful (000 §Cancellation: the server tears the stream down), else an error naming why.
  std::vector<jsonrpc::Message> close(bool graceful, const std::string& why);

  std::size_t listen_count() const { return listens_.size(); }
  // Legacy subscriptions plus listens interested in `uri`.
  std::size_t interest(const std::string& uri) const;
  // The hub holds (or is requesting) the server-side subscription of `uri`.
  bool subscribed_upstream(const std::string& uri) const;

 private:
  struct Filter {
    bool tools = false;
    bool prompts = false;
    bool resources = false;
    std::vector<std::string> uris;  // in request order, without repeats
  };
  struct Listen {
    jsonrpc::Id id;
    Filter requested;
    Filter honoured;                       // uris filled in as subscribes succeed
    std::unordered_set<std::string> uris;  // honoured uris, for lookups
    std::unordered_set<std::string> waiting;
    bool acknowledged = false;
  };
  enum class Upstream { none, subscribing, subscribed };
  struct Capabilities {
    bool tools = false;      // tools.listChanged
    bool prompts = false;    // prompts.listChanged
    bool resources = false;  // resources.listChanged
    bool subscribe = false;  // resources.subscribe
  };

  Actions open_listen(const jsonrpc::Message& m);
  void end_listen(std::uint64_t key, Actions& out);
  void release(const std::string& uri, Actions& out);
  void acknowledge(Listen& l, Actions& out);
  void fan_out(const jsonrpc::Message& m, Actions& out);
  // `uri` is honoured for the listen `key` (its subscription upstream is in place).
  void honour(std::uint64_t key, Listen& l, const std::string& uri);
  Listen* find_listen(const jsonrpc::Id& id, std::uint64_t* key = nullptr);

  Limits limits_;
  Capabilities caps_;
  std::optional<jsonrpc::Id> initialize_id_;
  std::map<std::uint64_t, Listen> listens_;  // by opening order
  // For each honoured URI, the listens that hear of its updates (and of its sub-resources'),
  // by opening order: an update visits only those of its covering URIs (events::covering) (at
  // thousands of listens, hashing the URI once per listen cost more than the delivery).
  std::unordered_map<std::string, std::map<std::uint64_t, Listen*>> by_uri_;
  std::uint64_t next_key_ = 1;
  std::unordered_map<jsonrpc::Id, std::uint64_t, jsonrpc::IdHash> listen_keys_;
  std::unordered_set<std::string> legacy_;  // URIs the client subscribed to itself
  std::unordered_map<jsonrpc::Id, std::string, jsonrpc::IdHash> legacy_pending_;
  std::unordered_map<std::string, std::size_t> listen_interest_;
  std::unordered_map<std::string, Upstream> upstream_;
};

}  // namespace mcpmqtt::bridge

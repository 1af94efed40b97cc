// The live directory of MCP servers on the broker, built from presence messages
// (004 §Service Discovery): an online notification adds a server-id to its server-name, an empty
// payload removes it; a server-name is online while any instance is. New sessions pick an
// instance with a client-side strategy.
//
// It also fans out what happens to an instance to the sessions with it (listen()): its presence
// cleared, its presence repeated live, and the messages on its capability topic. The bridge hears
// those once, on the observer's connection, rather than on every session's own (issue 34: a
// broker scans a topic's subscribers for each new one, so a topic every session subscribes makes
// opening sessions quadratic).
//
// Thread-safe (one mutex): the presence observer writes on its strand, sessions pick on theirs,
// the HTTP listing reads from anywhere. Watch callbacks run outside the lock, on the writer's
// thread; they must post to their own executor.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mcpmqtt::bridge {

struct ServerInstance {
  std::string server_id;
  std::string server_name;
  std::string description;
  std::string meta_json = "{}";
  std::chrono::system_clock::time_point online_since;
  std::string presence;  // the payload of its last presence message
};

class Directory {
 public:
  enum class Pick { random, round_robin };
  // Presence is written by whoever may publish under the server-name filters: past
  // `max_instances` new instances are ignored (with a reason), so a flood of retained presence
  // cannot grow the directory without bound.
  explicit Directory(std::size_t max_instances = 10000) : max_instances_(max_instances) {}
  // announced_again: a live presence that repeats the instance's last one. The instance
  // announced itself again after its broker connection came back (as when a federated broker's
  // link returns): what was published to it around the cut may be lost. A live presence that
  // differs is an update of its metadata (`updated`), and a retained one is the broker's copy.
  enum class Change { added, updated, announced_again, removed, ignored };

  // A message on $mcp-server/presence/{server_id}/{server_name}; `live`: not the broker's
  // retained copy (the retain flag was 0). `why` (optional) says why a message was ignored, for
  // the log.
  Change apply_presence(std::string_view server_id, std::string_view server_name,
                        std::string_view payload, std::string* why = nullptr, bool live = false);
  // Forgets everything (before re-subscribing, retained presence rebuilds it). The listeners
  // hear InstanceEvent::unobserved.
  void clear();

  std::optional<ServerInstance> pick(const std::string& server_name, Pick how);
  std::vector<ServerInstance> instances(const std::string& server_name) const;
  bool online(const std::string& server_name) const;
  bool has_instance(const std::string& server_name, const std::string& server_id) const;
  std::size_t instance_count() const;

  // What the bridge subscribes with, and what the broker granted (for the listing).
  void set_filters(std::vector<std::string> filters);
  std::vector<std::string> filters() const;
  // MCP-RBAC from the broker (a JSON array); false, and ignored, when it is not one.
  bool set_rbac_json(std::string rbac_json);

  // {"filters":[...],"servers":[{"name":..,"instances":[{"server_id":..,"description":..,
  //  "meta":{..},"online_since":"2026-..Z"}]}],"rbac":[...]}
  // `visible`: only the server-names it accepts are listed (a principal's reach); none: all.
  std::string to_json(const std::function<bool(std::string_view)>& visible = {}) const;

  // Calls `fn` once, the next time an instance of `server_name` comes online (or at once, on the
  // caller's thread, if one is online already). Returns an id for unwatch().
  using WatchId = std::uint64_t;
  WatchId watch(const std::string& server_name, std::function<void()> fn);
  void unwatch(WatchId id);

  // What happens to an online instance, for the sessions with it.
  enum class InstanceEvent {
    offline,          // its presence was cleared (004 §Server Disconnect); the last event
    unobserved,       // the directory was cleared (its broker connection dropped); the last event
    announced_again,  // Change::announced_again
    capability,       // a message on its capability topic (004 §Capability List Changed)
  };
  // `payload`: the capability message; null for the other events.
  using InstanceListener =
      std::function<void(InstanceEvent, const std::shared_ptr<const std::string>& payload)>;
  using ListenId = std::uint64_t;
  // Calls `fn` with each event of the instance until unlisten() or its last event. 0 (and `fn`
  // is dropped) when the instance is not online. Listeners run outside the lock, on the
  // writer's thread, in the order the events were applied; they must post to their own
  // executor, and may run once more after unlisten() (with an event taken before it).
  ListenId listen(const std::string& server_name, const std::string& server_id,
                  InstanceListener fn);
  void unlisten(ListenId id);
  // A message on $mcp-server/capability/{server_id}/{server_name}: to the instance's listeners.
  // Returns how many heard it.
  std::size_t apply_capability(std::string_view server_id, std::string_view server_name,
                               const std::shared_ptr<const std::string>& payload);
  std::size_t listener_count() const;

 private:
  // Moves the listeners of an instance out (under mu_), for their last event.
  std::vector<InstanceListener> take_listeners(const std::string& server_name,
                                               const std::string& server_id);
  mutable std::mutex mu_;
  const std::size_t max_instances_;
  std::size_t count_ = 0;
  std::map<std::string, std::map<std::string, ServerInstance>> by_name_;  // name → id → instance
  std::map<std::string, std::size_t> round_robin_;  // names with an instance only
  std::mt19937 rng_{std::random_device{}()};
  std::vector<std::string> filters_;
  std::string rbac_json_;
  struct Watch {
    std::string server_name;
    std::function<void()> fn;
  };
  std::map<WatchId, Watch> watches_;
  WatchId next_watch_ = 1;
  // (server_name, server_id) → its listeners; and each listener's instance, for unlisten().
  using InstanceKey = std::pair<std::string, std::string>;
  using Listeners = std::map<InstanceKey, std::map<ListenId, InstanceListener>>;
  Listeners listeners_;
  std::map<ListenId, Listeners::iterator> listening_;
  ListenId next_listen_ = 1;
};

}  // namespace mcpmqtt::bridge

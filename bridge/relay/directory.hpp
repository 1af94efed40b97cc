// The live directory of MCP servers on the broker, built from presence messages
// (004 §Service Discovery): an online notification adds a server-id to its server-name, an empty
// payload removes it; a server-name is online while any instance is. New sessions pick an
// instance with a client-side strategy.
//
// Thread-safe (one mutex): the presence observer writes on its strand, sessions pick on theirs,
// the HTTP listing reads from anywhere. Watch callbacks run outside the lock, on the writer's
// thread; they must post to their own executor.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace mcpmqtt::bridge {

struct ServerInstance {
  std::string server_id;
  std::string server_name;
  std::string description;
  std::string meta_json = "{}";
  std::chrono::system_clock::time_point online_since;
};

class Directory {
 public:
  enum class Pick { random, round_robin };
  // Presence is written by whoever may publish under the server-name filters: past
  // `max_instances` new instances are ignored (with a reason), so a flood of retained presence
  // cannot grow the directory without bound.
  explicit Directory(std::size_t max_instances = 10000) : max_instances_(max_instances) {}
  enum class Change { added, updated, removed, ignored };

  // A message on $mcp-server/presence/{server_id}/{server_name}. `why` (optional) says why a
  // message was ignored, for the log.
  Change apply_presence(std::string_view server_id, std::string_view server_name,
                        std::string_view payload, std::string* why = nullptr);
  // Forgets everything (before re-subscribing, retained presence rebuilds it).
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

 private:
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
};

}  // namespace mcpmqtt::bridge

// What `server/discover` answers for each MQTT-hosted server, learnt from the initialize result
// of its MQTT sessions (schema DiscoverResult): kept per server-name until a session of it ends
// because the server went away, at most `kMaxServers` of them.
// One strand; not thread-safe (the gateway's).
#pragma once

#include <map>
#include <string>

#include <rapidjson/document.h>

namespace mcpmqtt::bridge {

// The parts of an initialize result a DiscoverResult is made of.
struct DiscoverInfo {
  std::string capabilities_json = "{}";
  std::string instructions_json;  // a JSON string, or empty
  std::string server_info_json;
  bool has_logging = false;  // capabilities declare logging
};

// Reads an initialize result: capabilities without `tasks` (not a 2026-07-28 server
// capability, schema ServerCapabilities), serverInfo and instructions.
DiscoverInfo discover_info_of(const rapidjson::Value* initialize_result);
// The result of server/discover made of `info`: supportedVersions, capabilities, instructions,
// serverInfo in _meta, ttlMs and cacheScope (modern::complete_result).
std::string discover_result_json(const DiscoverInfo& info);

class DiscoverCache {
 public:
  static constexpr std::size_t kMaxServers = 1024;

  const DiscoverInfo* find(const std::string& server_name) const;
  void put(const std::string& server_name, const DiscoverInfo& info);
  void forget(const std::string& server_name) { by_server_.erase(server_name); }

 private:
  std::map<std::string, DiscoverInfo> by_server_;
};

}  // namespace mcpmqtt::bridge

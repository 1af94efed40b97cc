// The x-mcp-header annotations of the tools each MQTT-hosted server listed (the tools/list
// results the gateway relayed), by which a tools/call's Mcp-Param-{Name} headers are checked
// (streamable-http §Standard Request Headers). At most `kMaxServers` servers of `kMaxTools`
// tools each.
// One strand; not thread-safe (the gateway's).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "bridge/modern/protocol.hpp"

namespace mcpmqtt::bridge {

class ServerParamHeaders {
 public:
  static constexpr std::size_t kMaxServers = 1024;
  static constexpr std::size_t kMaxTools = 4096;

  // A tools/list result of `server_name`.
  void learn(const std::string& server_name, const rapidjson::Value& tools_list_result);
  // The annotated arguments of a tool, or null when the server never listed it.
  const std::vector<modern::ParamHeader>* find(const std::string& server_name,
                                               const std::string& tool) const;

 private:
  std::map<std::string, std::map<std::string, std::vector<modern::ParamHeader>>> by_server_;
};

}  // namespace mcpmqtt::bridge

#include "bridge/modern/server_param_headers.hpp"

namespace mcpmqtt::bridge {

void ServerParamHeaders::learn(const std::string& server_name, const rapidjson::Value& result) {
  auto tools = modern::param_headers_of(result);
  if (tools.empty()) return;
  if (by_server_.size() >= kMaxServers && !by_server_.count(server_name))
    by_server_.erase(by_server_.begin());
  auto& known = by_server_[server_name];
  for (auto& [tool, params] : tools) {
    if (known.size() >= kMaxTools && !known.count(tool)) continue;
    known[tool] = std::move(params);
  }
}

const std::vector<modern::ParamHeader>* ServerParamHeaders::find(const std::string& server_name,
                                                                 const std::string& tool) const {
  auto server = by_server_.find(server_name);
  if (server == by_server_.end()) return nullptr;
  auto it = server->second.find(tool);
  return it == server->second.end() ? nullptr : &it->second;
}

}  // namespace mcpmqtt::bridge

#include "bridge/modern/discover_cache.hpp"

#include "bridge/jsonrpc/json_access.hpp"
#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/modern/protocol.hpp"

namespace mcpmqtt::bridge {

using jsonrpc::member;
using rapidjson::Value;

DiscoverInfo discover_info_of(const Value* result) {
  DiscoverInfo info;
  if (const Value* caps = member(result, "capabilities"); caps && caps->IsObject()) {
    rapidjson::Document d;
    d.CopyFrom(*caps, d.GetAllocator());
    d.RemoveMember("tasks");
    info.capabilities_json = jsonrpc::to_json(d);
    info.has_logging = d.HasMember("logging");
  }
  if (const Value* server = member(result, "serverInfo"); server && server->IsObject())
    info.server_info_json = jsonrpc::to_json(*server);
  if (const Value* text = member(result, "instructions"); text && text->IsString())
    info.instructions_json = jsonrpc::to_json(*text);
  return info;
}

std::string discover_result_json(const DiscoverInfo& info) {
  std::string versions;
  for (const auto& v : modern::supported_versions())
    versions += (versions.empty() ? "" : ",") + jsonrpc::quote(v);
  std::string body =
      R"({"supportedVersions":[)" + versions + R"(],"capabilities":)" + info.capabilities_json;
  if (!info.instructions_json.empty()) body += R"(,"instructions":)" + info.instructions_json;
  body += "}";
  rapidjson::Document d;
  d.Parse(body.data(), body.size());
  return modern::complete_result(d, "server/discover", info.server_info_json);
}

const DiscoverInfo* DiscoverCache::find(const std::string& server_name) const {
  auto it = by_server_.find(server_name);
  return it == by_server_.end() ? nullptr : &it->second;
}

void DiscoverCache::put(const std::string& server_name, const DiscoverInfo& info) {
  if (by_server_.size() >= kMaxServers && !by_server_.count(server_name))
    by_server_.erase(by_server_.begin());
  by_server_[server_name] = info;
}

}  // namespace mcpmqtt::bridge

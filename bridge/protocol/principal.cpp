#include "bridge/protocol/principal.hpp"

#include <rapidjson/document.h>

#include "bridge/jsonrpc/json_access.hpp"
#include "bridge/protocol/topics.hpp"

namespace mcpmqtt::bridge {

bool Principal::may_reach(std::string_view server_name) const {
  if (unrestricted) return true;
  for (const auto& f : server_filters)
    if (topics::filter_matches(f, server_name)) return true;
  return false;
}

std::string connect_meta_with(std::string_view meta_json, const Principal& principal) {
  if (!principal.is_oauth()) return std::string(meta_json);
  rapidjson::Document d;
  d.Parse(meta_json.data(), meta_json.size());
  if (d.HasParseError() || !d.IsObject()) return std::string(meta_json);
  auto& a = d.GetAllocator();
  auto str = [&a](const std::string& s) {
    return rapidjson::Value(s.c_str(), static_cast<rapidjson::SizeType>(s.size()), a);
  };
  rapidjson::Value who(rapidjson::kObjectType);
  if (!principal.issuer.empty()) who.AddMember("iss", str(principal.issuer), a);
  who.AddMember("sub", str(principal.subject), a);
  if (!principal.client_id.empty()) who.AddMember("client_id", str(principal.client_id), a);
  d.RemoveMember("principal");  // ours replaces anything configured under that name
  d.AddMember("principal", who, a);
  return jsonrpc::to_json(d);
}

}  // namespace mcpmqtt::bridge

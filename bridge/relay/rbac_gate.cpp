#include "bridge/relay/rbac_gate.hpp"

#include <rapidjson/document.h>

#include "bridge/jsonrpc/json_access.hpp"

namespace mcpmqtt::bridge {

namespace {

// A string member of the request's params, or nullopt.
std::optional<std::string> param(const jsonrpc::Message& m, const char* name) {
  const auto* v = jsonrpc::member(m.params(), name);
  if (!v || !v->IsString()) return std::nullopt;
  return std::string(v->GetString(), v->GetStringLength());
}

}  // namespace

jsonrpc::Message RbacGate::refuse(const jsonrpc::Message& request, const std::string& what,
                                  const std::string& allowed,
                                  const std::string& detail_json) const {
  std::string roles_json;
  for (const auto& r : policy_.roles)
    roles_json += (roles_json.empty() ? "" : ",") + jsonrpc::quote(r);
  jsonrpc::Error e;
  e.code = jsonrpc::code::forbidden;
  if (policy_.mode == rbac::Policy::Mode::deny) {
    e.message = "forbidden by MCP-RBAC: " + policy_.reason + "; every request to \"" +
                policy_.server_name + "\" but initialize is refused (" + request.method() + ")";
  } else {
    e.message =
        "forbidden by MCP-RBAC: " + std::string(policy_.roles.size() == 1 ? "role " : "roles ") +
        policy_.role_names() + " on server \"" + policy_.server_name + "\" do" +
        (policy_.roles.size() == 1 ? "es" : "") + " not allow " + what + " (allowed: " + allowed +
        ")";
  }
  e.data_json = R"({"reason":"mcp-rbac","server_name":)" + jsonrpc::quote(policy_.server_name) +
                R"(,"roles":[)" + roles_json + R"(],"method":)" + jsonrpc::quote(request.method()) +
                detail_json + "}";
  return jsonrpc::Message::error(request.id(), e);
}

std::optional<jsonrpc::Message> RbacGate::check(const jsonrpc::Message& m) {
  if (open()) return std::nullopt;
  if (m.is_notification()) {
    if (m.method() == "notifications/cancelled") {
      // The answer will not come: stop waiting for it.
      const auto* id = jsonrpc::member(m.params(), "requestId");
      if (id && id->IsString())
        lists_.erase(jsonrpc::Id::string(std::string(id->GetString(), id->GetStringLength())));
      else if (id && id->IsInt64())
        lists_.erase(jsonrpc::Id::integer(id->GetInt64()));
    }
    return std::nullopt;
  }
  if (!m.is_request()) return std::nullopt;
  const auto& method = m.method();
  // 004's example roles do not list initialize, and no session exists without it.
  if (method == "initialize") return std::nullopt;
  if (policy_.mode == rbac::Policy::Mode::deny) return refuse(m, "", "", "");
  if (!policy_.methods.allows(method)) {
    return refuse(m, "the method \"" + method + "\"", "methods " + policy_.methods.describe(), "");
  }
  if (method == "tools/call") {
    const auto name = param(m, "name");
    if (!name || !policy_.tools.allows(*name)) {
      const std::string shown = name ? *name : std::string("(no name)");
      return refuse(m, "the tool \"" + shown + "\"", "tools " + policy_.tools.describe(),
                    R"(,"tool":)" + jsonrpc::quote(shown));
    }
  } else if (method == "resources/read" || method == "resources/subscribe") {
    const auto uri = param(m, "uri");
    if (!uri || !policy_.resources.allows(*uri)) {
      const std::string shown = uri ? *uri : std::string("(no uri)");
      return refuse(m, "the resource \"" + shown + "\"",
                    "resources " + policy_.resources.describe(),
                    R"(,"uri":)" + jsonrpc::quote(shown));
    }
  }
  std::optional<List> list;
  if (method == "tools/list" && !policy_.tools.all) list = List::tools;
  if (method == "resources/list" && !policy_.resources.all) list = List::resources;
  if (method == "resources/templates/list" && !policy_.resources.all) list = List::templates;
  if (list) {
    if (lists_.size() >= kMaxListsInFlight && !lists_.count(m.id())) {
      jsonrpc::Error e;
      e.code = jsonrpc::code::connection_closed;
      e.message = "too many list requests in flight (" + std::to_string(lists_.size()) +
                  "); wait for their answers before sending more";
      return jsonrpc::Message::error(m.id(), e);
    }
    lists_[m.id()] = *list;
  }
  return std::nullopt;
}

void RbacGate::filter(jsonrpc::Message& m) {
  if (lists_.empty() || !m.is_response()) return;
  auto it = lists_.find(m.id());
  if (it == lists_.end()) return;
  const List list = it->second;
  lists_.erase(it);
  const auto* result = m.result_value();
  if (m.kind() != jsonrpc::Kind::result || !result || !result->IsObject()) return;
  const char* array = list == List::tools       ? "tools"
                      : list == List::resources ? "resources"
                                                : "resourceTemplates";
  const char* key = list == List::tools ? "name" : list == List::resources ? "uri" : "uriTemplate";
  const rbac::Allowance& allowed = list == List::tools ? policy_.tools : policy_.resources;
  rapidjson::Document out;
  out.CopyFrom(*result, out.GetAllocator());
  auto items = out.FindMember(array);
  if (items == out.MemberEnd() || !items->value.IsArray()) return;
  auto& a = items->value;
  for (auto e = a.Begin(); e != a.End();) {
    const auto* v = jsonrpc::member(e, key);
    if (v && v->IsString() &&
        allowed.allows(std::string_view(v->GetString(), v->GetStringLength())))
      ++e;
    else
      e = a.Erase(e);
  }
  m = jsonrpc::Message::result(m.id(), jsonrpc::to_json(out));
}

}  // namespace mcpmqtt::bridge

#include <algorithm>

#include "bridge/jsonrpc/json_access.hpp"
#include "bridge/modern/protocol.hpp"

namespace mcpmqtt::modern {

using jsonrpc::member;
using rapidjson::Value;

namespace {

std::string string_of(const Value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

// Parses an object text; an empty or malformed text gives an empty object.
void parse_object(rapidjson::Document& d, std::string_view json) {
  if (!json.empty()) d.Parse(json.data(), json.size());
  if (json.empty() || d.HasParseError() || !d.IsObject()) d.SetObject();
}

bool truthy(const Value* v) {
  return v && !v->IsNull() && !(v->IsBool() && !v->GetBool());
}

}  // namespace

const std::vector<std::string>& legacy_versions() {
  static const std::vector<std::string> v = {"2025-11-25", "2025-06-18", "2025-03-26",
                                             "2024-11-05"};
  return v;
}

std::string legacy_version_for(std::string_view requested) {
  const auto& v = legacy_versions();
  if (std::find(v.begin(), v.end(), requested) != v.end()) return std::string(requested);
  return v.front();
}

Expected<Discovered, std::string> read_discover_result(const Value& result) {
  if (!result.IsObject()) return unexpected(std::string("the result is not an object"));
  Discovered d;
  const Value* versions = member(&result, "supportedVersions");
  if (!versions || !versions->IsArray())
    return unexpected(std::string("supportedVersions is missing or not an array"));
  for (const auto& v : versions->GetArray()) {
    if (!v.IsString()) return unexpected(std::string("supportedVersions holds a non-string"));
    d.supported_versions.push_back(string_of(v));
  }
  const Value* caps = member(&result, "capabilities");
  if (!caps || !caps->IsObject())
    return unexpected(std::string("capabilities is missing or not an object"));
  d.capabilities_json = jsonrpc::to_json(*caps);
  if (const Value* i = member(&result, "instructions"); i && i->IsString())
    d.instructions = string_of(*i);
  const Value* info = member(member(&result, "_meta"), key::server_info);
  if (!info || !info->IsObject()) info = member(&result, "serverInfo");
  if (info && info->IsObject()) d.server_info_json = jsonrpc::to_json(*info);
  return d;
}

std::string common_modern_version(const Discovered& discovered) {
  for (const auto& mine : supported_versions()) {
    const auto& theirs = discovered.supported_versions;
    if (std::find(theirs.begin(), theirs.end(), mine) != theirs.end()) return mine;
  }
  return {};
}

std::string legacy_initialize_result(const Discovered& discovered, std::string_view requested,
                                     std::string_view fallback_server_info_json) {
  const std::string& info = discovered.server_info_json.empty()
                                ? std::string(fallback_server_info_json)
                                : discovered.server_info_json;
  std::string out = R"({"protocolVersion":)" + jsonrpc::quote(legacy_version_for(requested)) +
                    R"(,"capabilities":)" +
                    (discovered.capabilities_json.empty() ? "{}" : discovered.capabilities_json) +
                    R"(,"serverInfo":)" + (info.empty() ? "{}" : info);
  if (discovered.instructions)
    out += R"(,"instructions":)" + jsonrpc::quote(*discovered.instructions);
  return out + "}";
}

bool is_input_required(const Value& result) {
  const Value* t = member(&result, "resultType");
  return t && t->IsString() &&
         std::string_view(t->GetString(), t->GetStringLength()) == "input_required";
}

Expected<InputRequired, std::string> read_input_required(const Value& result,
                                                         std::size_t max_requests) {
  InputRequired out;
  const Value* requests = member(&result, "inputRequests");
  const Value* state = member(&result, "requestState");
  if (requests && !requests->IsNull()) {
    if (!requests->IsObject()) return unexpected(std::string("inputRequests is not an object"));
    if (requests->MemberCount() > max_requests)
      return unexpected("inputRequests holds " + std::to_string(requests->MemberCount()) +
                        " requests, more than the " + std::to_string(max_requests) +
                        " the bridge takes in one round");
    for (auto it = requests->MemberBegin(); it != requests->MemberEnd(); ++it) {
      const std::string k = string_of(it->name);
      const Value& r = it->value;
      const Value* method = member(&r, "method");
      if (!r.IsObject() || !method || !method->IsString())
        return unexpected("inputRequests." + k + " is not a request ({method, params})");
      const Value* params = member(&r, "params");
      if (params && !params->IsNull() && !params->IsObject())
        return unexpected("inputRequests." + k + ".params is not an object");
      out.requests.push_back(
          {k, string_of(*method), params && params->IsObject() ? jsonrpc::to_json(*params) : ""});
    }
  }
  if (state && !state->IsNull()) {
    if (!state->IsString()) return unexpected(std::string("requestState is not a string"));
    out.request_state = string_of(*state);
  }
  // mrtr §Server Requirements 6: at least one of the two.
  if (out.requests.empty() && !out.request_state)
    return unexpected(std::string("it has neither inputRequests nor requestState"));
  return out;
}

std::string input_request_params(std::string_view params_json, std::string_view key,
                                 std::size_t round_size) {
  rapidjson::Document d;
  parse_object(d, params_json);
  auto& a = d.GetAllocator();
  if (!d.HasMember("_meta") || !d["_meta"].IsObject()) {
    d.RemoveMember("_meta");
    d.AddMember("_meta", Value(rapidjson::kObjectType), a);
  }
  auto& meta = d["_meta"];
  meta.RemoveMember(bridge_key::input_key);
  meta.RemoveMember(bridge_key::input_round);
  meta.AddMember(Value(bridge_key::input_key, a),
                 Value(key.data(), static_cast<rapidjson::SizeType>(key.size()), a), a);
  Value round(rapidjson::kObjectType);
  round.AddMember("size", static_cast<std::uint64_t>(round_size), a);
  meta.AddMember(Value(bridge_key::input_round, a), round, a);
  return jsonrpc::to_json(d);
}

std::string request_params(const Value* original, const Envelope& envelope,
                           const std::vector<InputResponse>* responses,
                           const std::optional<std::string>& request_state) {
  if (!responses) {
    return with_envelope(
        original && original->IsObject() ? jsonrpc::to_json(*original) : std::string(), envelope);
  }
  rapidjson::Document d;
  if (original && original->IsObject())
    d.CopyFrom(*original, d.GetAllocator());
  else
    d.SetObject();
  auto& a = d.GetAllocator();
  d.RemoveMember("inputResponses");
  d.RemoveMember("requestState");
  Value answers(rapidjson::kObjectType);
  for (const auto& r : *responses) {
    rapidjson::Document v;
    v.Parse(r.result_json.data(), r.result_json.size());
    if (v.HasParseError()) v.SetObject();
    answers.AddMember(Value(r.key.data(), static_cast<rapidjson::SizeType>(r.key.size()), a),
                      Value(v, a), a);
  }
  d.AddMember("inputResponses", answers, a);
  // mrtr §Client Requirements 2: echoed exactly; never added when the server gave none. The
  // string's value is copied, so the server reads back the very bytes it wrote.
  if (request_state)
    d.AddMember(
        "requestState",
        Value(request_state->data(), static_cast<rapidjson::SizeType>(request_state->size()), a),
        a);
  return with_envelope(jsonrpc::to_json(d), envelope);
}

ListenFilter honoured_filter(std::string_view capabilities_json,
                             const std::vector<std::string>& uris) {
  rapidjson::Document caps;
  parse_object(caps, capabilities_json);
  auto flag = [&](const char* cap, const char* name) {
    const Value* v = member(member(&caps, cap), name);
    return v && v->IsBool() && v->GetBool();
  };
  ListenFilter f;
  f.tools_list_changed = flag("tools", "listChanged");
  f.prompts_list_changed = flag("prompts", "listChanged");
  f.resources_list_changed = flag("resources", "listChanged");
  if (flag("resources", "subscribe")) f.resource_subscriptions = uris;
  return f;
}

std::string listen_params(const ListenFilter& f, const Envelope& envelope) {
  std::string n;
  auto add = [&](const char* k, bool on) {
    if (on) n += std::string(n.empty() ? "" : ",") + "\"" + k + "\":true";
  };
  add("toolsListChanged", f.tools_list_changed);
  add("promptsListChanged", f.prompts_list_changed);
  add("resourcesListChanged", f.resources_list_changed);
  if (!f.resource_subscriptions.empty()) {
    std::string list;
    for (const auto& u : f.resource_subscriptions)
      list += (list.empty() ? "" : ",") + jsonrpc::quote(u);
    n += std::string(n.empty() ? "" : ",") + R"("resourceSubscriptions":[)" + list + "]";
  }
  return with_envelope(R"({"notifications":{)" + n + "}}", envelope);
}

bool has_capability(std::string_view capabilities_json, std::string_view path) {
  rapidjson::Document caps;
  parse_object(caps, capabilities_json);
  const Value* v = &caps;
  std::size_t start = 0;
  while (v) {
    const auto dot = path.find('.', start);
    const std::string part(
        path.substr(start, dot == std::string_view::npos ? path.npos : dot - start));
    v = member(v, part.c_str());
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return truthy(v);
}

std::string without_subscription_id(const Value* params) {
  if (!params) return {};
  rapidjson::Document d;
  d.CopyFrom(*params, d.GetAllocator());
  if (d.IsObject() && d.HasMember("_meta") && d["_meta"].IsObject()) {
    d["_meta"].RemoveMember(key::subscription_id);
    if (d["_meta"].MemberCount() == 0) d.RemoveMember("_meta");
  }
  return jsonrpc::to_json(d);
}

}  // namespace mcpmqtt::modern

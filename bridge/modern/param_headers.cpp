#include <algorithm>
#include <cctype>

#include "bridge/jsonrpc/json_access.hpp"
#include "bridge/modern/protocol.hpp"

namespace mcpmqtt::modern {

using jsonrpc::member;
using rapidjson::Value;

std::vector<std::pair<std::string, std::vector<ParamHeader>>> param_headers_of(
    const rapidjson::Value& result) {
  std::vector<std::pair<std::string, std::vector<ParamHeader>>> out;
  const Value* tools = member(&result, "tools");
  if (!tools || !tools->IsArray()) return out;
  for (const auto& tool : tools->GetArray()) {
    const Value* name = member(&tool, "name");
    if (!name || !name->IsString()) continue;
    std::vector<ParamHeader> params;
    const Value* props = member(member(&tool, "inputSchema"), "properties");
    if (props && props->IsObject()) {
      for (auto it = props->MemberBegin(); it != props->MemberEnd(); ++it) {
        const Value* header = member(&it->value, "x-mcp-header");
        if (!header || !header->IsString() || header->GetStringLength() == 0) continue;
        std::string lower(header->GetString(), header->GetStringLength());
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        params.push_back({std::string(it->name.GetString(), it->name.GetStringLength()), lower});
      }
    }
    out.emplace_back(std::string(name->GetString(), name->GetStringLength()), std::move(params));
  }
  return out;
}

namespace {

// The text an annotated argument is mirrored as: a string as is, a number or boolean as its JSON
// text; nullopt when absent, null, an object or an array (only primitive values are mirrored).
std::optional<std::string> mirrored_text(const Value* value) {
  if (!value || value->IsNull()) return std::nullopt;
  if (value->IsString()) return std::string(value->GetString(), value->GetStringLength());
  if (value->IsNumber() || value->IsBool()) return jsonrpc::to_json(*value);
  return std::nullopt;
}

}  // namespace

std::optional<jsonrpc::Error> check_param_headers(
    const jsonrpc::Message& call, const std::vector<ParamHeader>& params,
    const std::vector<std::pair<std::string, std::string>>& sent) {
  const Value* args = member(call.params(), "arguments");
  for (const auto& p : params) {
    const Value* value = member(args, p.argument.c_str());
    const auto mirrored = mirrored_text(value);
    if (!mirrored) continue;
    const std::string& expected = *mirrored;
    const std::string shown = "Mcp-Param-" + p.header;
    auto it =
        std::find_if(sent.begin(), sent.end(), [&](const auto& h) { return h.first == p.header; });
    if (it == sent.end())
      return header_mismatch("(missing)",
                             shown + " is missing but arguments." + p.argument + " is present");
    const auto decoded = decode_header_value(it->second);
    if (!decoded) return header_mismatch(it->second, shown + " carries an invalid Base64 value");
    bool same = *decoded == expected;
    if (!same && value->IsNumber()) {
      // 1.0 and 1 are the same number.
      rapidjson::Document d;
      d.Parse(decoded->data(), decoded->size());
      same = !d.HasParseError() && d.IsNumber() && d.GetDouble() == value->GetDouble();
    }
    if (!same)
      return header_mismatch(it->second, shown + " value does not match arguments." + p.argument);
  }
  return std::nullopt;
}

std::vector<std::pair<std::string, std::string>> param_header_values(
    const jsonrpc::Message& call, const std::vector<ParamHeader>& params) {
  // RFC 9110 §5.6.2: a header name is a token; an annotation that is not one names no header.
  auto token = [](std::string_view name) {
    return !name.empty() && std::all_of(name.begin(), name.end(), [](unsigned char c) {
      return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) !=
                                    std::string_view::npos;
    });
  };
  std::vector<std::pair<std::string, std::string>> out;
  const Value* args = member(call.params(), "arguments");
  for (const auto& p : params) {
    if (!token(p.header)) continue;
    if (const auto text = mirrored_text(member(args, p.argument.c_str())))
      out.emplace_back("Mcp-Param-" + p.header, encode_header_value(*text));
  }
  return out;
}

void ToolHeaders::learn(const rapidjson::Value& result, bool complete) {
  auto tools = param_headers_of(result);
  std::lock_guard lock(mu_);
  for (auto& [name, params] : tools)
    tools_[name] = std::move(params);
  if (complete) listed_ = true;
}

std::vector<ParamHeader> ToolHeaders::of(const std::string& tool) const {
  std::lock_guard lock(mu_);
  auto it = tools_.find(tool);
  return it == tools_.end() ? std::vector<ParamHeader>{} : it->second;
}

bool ToolHeaders::listed() const {
  std::lock_guard lock(mu_);
  return listed_;
}

void ToolHeaders::forget() {
  std::lock_guard lock(mu_);
  tools_.clear();
  listed_ = false;
}

}  // namespace mcpmqtt::modern

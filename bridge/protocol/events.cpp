#include "bridge/protocol/events.hpp"

#include <rapidjson/document.h>

#include "bridge/raw_json.hpp"

namespace mcpmqtt::events {

namespace {

bool is_separator(char c) {
  return c == '/' || c == '?' || c == '#';
}

}  // namespace

bool covers(std::string_view subscribed, std::string_view updated) {
  if (updated.size() == subscribed.size()) return updated == subscribed;
  return updated.size() > subscribed.size() && updated.substr(0, subscribed.size()) == subscribed &&
         is_separator(updated[subscribed.size()]);
}

std::vector<std::string_view> covering(std::string_view updated) {
  std::vector<std::string_view> out{updated};
  for (std::size_t i = updated.size(); i-- > 0;)
    if (is_separator(updated[i])) out.push_back(updated.substr(0, i));
  return out;
}

Capabilities capabilities(std::string_view initialize_result) {
  Capabilities out;
  rapidjson::Document d;
  d.Parse(initialize_result.data(), initialize_result.size());
  if (d.HasParseError() || !d.IsObject()) return out;
  auto caps = d.FindMember("capabilities");
  if (caps == d.MemberEnd() || !caps->value.IsObject()) return out;
  auto res = caps->value.FindMember("resources");
  if (res == caps->value.MemberEnd() || !res->value.IsObject()) return out;
  auto sub = res->value.FindMember("subscribe");
  out.subscribe = sub != res->value.MemberEnd() && sub->value.IsBool() && sub->value.GetBool();
  auto protocols = res->value.FindMember("subscription");
  if (protocols != res->value.MemberEnd() && protocols->value.IsArray()) {
    for (const auto& p : protocols->value.GetArray())
      out.webhook |= p.IsString() && std::string_view(p.GetString()) == "webhook";
  }
  return out;
}

std::optional<std::string> with_webhook(std::string_view result) {
  const auto caps = raw_json::member(result, "capabilities");
  if (!caps) return std::nullopt;
  const auto res = raw_json::member(*caps, "resources");
  if (!res) return std::nullopt;
  std::string list = "[\"webhook\"]";
  if (const auto sub = raw_json::member(*res, "subscription");
      sub && sub->size() >= 2 && sub->front() == '[') {
    std::string_view inner = sub->substr(1, sub->size() - 2);
    while (!inner.empty() && (inner.front() == ' ' || inner.front() == '\n'))
      inner.remove_prefix(1);
    list = inner.empty() ? list : "[" + std::string(inner) + ",\"webhook\"]";
  }
  auto new_res = raw_json::with_member(*res, "subscription", list);
  if (!new_res) return std::nullopt;
  auto new_caps = raw_json::with_member(*caps, "resources", *new_res);
  if (!new_caps) return std::nullopt;
  return raw_json::with_member(result, "capabilities", *new_caps);
}

}  // namespace mcpmqtt::events

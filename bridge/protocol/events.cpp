#include "bridge/protocol/events.hpp"

#include <rapidjson/document.h>

#include "bridge/jsonrpc/raw_json.hpp"

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

std::optional<std::string> with_resources_appended(std::string_view result,
                                                   std::string_view items) {
  const auto list = raw_json::member(result, "resources");
  if (!list || list->size() < 2 || list->front() != '[' || list->back() != ']') return std::nullopt;
  if (items.empty()) return std::string(result);
  // `list` is a view into `result`: the bytes before its closing bracket stay as written.
  const std::size_t close =
      static_cast<std::size_t>(list->data() - result.data()) + list->size() - 1;
  std::string_view inner = list->substr(1, list->size() - 2);
  const bool empty = inner.find_first_not_of(" \t\r\n") == std::string_view::npos;
  std::string out(result.substr(0, close));
  if (!empty) out += ',';
  out += items;
  out += result.substr(close);
  return out;
}

namespace {

// One RFC 6570 expression's operator ('\0' for a simple one) could expand to `text`.
bool expands_to(char op, std::string_view text) {
  if (text.empty()) return true;  // undefined variables expand to nothing
  auto none_of = [&](std::string_view from, std::string_view chars) {
    return from.find_first_of(chars) == std::string_view::npos;
  };
  switch (op) {
    case '\0':
      return none_of(text, "/?#");
    case '+':
      return true;
    case '#':
      return text.front() == '#';
    case '.':
      return text.front() == '.' && none_of(text, "/?#");
    case '/':
      return text.front() == '/' && none_of(text, "?#");
    case ';':
      return text.front() == ';' && none_of(text, "/?#");
    case '?':
    case '&':
      return text.front() == op && none_of(text, "#");
    default:
      return false;
  }
}

bool match_from(std::string_view tpl, std::string_view uri) {
  if (tpl.empty()) return uri.empty();
  if (tpl.front() != '{') {
    const auto brace = tpl.find('{');
    const auto literal = tpl.substr(0, brace);
    if (literal.find('}') != std::string_view::npos) return false;
    if (uri.substr(0, literal.size()) != literal) return false;
    return match_from(tpl.substr(literal.size()), uri.substr(literal.size()));
  }
  const auto end = tpl.find('}');
  if (end == std::string_view::npos || end == 1) return false;
  char op = tpl[1];
  if (std::string_view("+#./;?&").find(op) == std::string_view::npos) op = '\0';
  const auto rest = tpl.substr(end + 1);
  // Shortest first: a literal that follows the expression anchors it.
  for (std::size_t n = 0; n <= uri.size(); ++n) {
    if (!expands_to(op, uri.substr(0, n))) {
      // Once a prefix cannot be an expansion, no longer one can (each rule only forbids
      // characters) — except the empty prefix, which always can.
      if (n > 0) break;
      continue;
    }
    if (match_from(rest, uri.substr(n))) return true;
  }
  return false;
}

}  // namespace

bool template_matches(std::string_view uri_template, std::string_view uri) {
  return match_from(uri_template, uri);
}

}  // namespace mcpmqtt::events

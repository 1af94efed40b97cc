#include "bridge/jsonrpc/raw_json.hpp"

#include <rapidjson/document.h>

namespace mcpmqtt::raw_json {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

void skip_space(std::string_view t, std::size_t& i) {
  while (i < t.size() && is_space(t[i]))
    ++i;
}

// At an opening quote: moves past the closing one.
bool skip_string(std::string_view t, std::size_t& i) {
  if (i >= t.size() || t[i] != '"') return false;
  for (++i; i < t.size(); ++i) {
    if (t[i] == '\\') {
      ++i;
    } else if (t[i] == '"') {
      ++i;
      return true;
    }
  }
  return false;
}

// Moves past one value (objects and arrays by nesting, strings by their quotes).
bool skip_value(std::string_view t, std::size_t& i) {
  if (i >= t.size()) return false;
  if (t[i] == '"') return skip_string(t, i);
  if (t[i] == '{' || t[i] == '[') {
    std::size_t depth = 0;
    while (i < t.size()) {
      const char c = t[i];
      if (c == '"') {
        if (!skip_string(t, i)) return false;
        continue;
      }
      if (c == '{' || c == '[') ++depth;
      if (c == '}' || c == ']') {
        if (--depth == 0) {
          ++i;
          return true;
        }
      }
      ++i;
    }
    return false;
  }
  // A number, true, false or null: up to the next delimiter.
  const std::size_t start = i;
  while (i < t.size() && t[i] != ',' && t[i] != '}' && t[i] != ']' && !is_space(t[i]))
    ++i;
  return i > start;
}

}  // namespace

std::optional<std::vector<Member>> members(std::string_view t) {
  std::size_t i = 0;
  skip_space(t, i);
  if (i >= t.size() || t[i] != '{') return std::nullopt;
  ++i;
  std::vector<Member> out;
  skip_space(t, i);
  if (i < t.size() && t[i] == '}') return out;
  while (i < t.size()) {
    skip_space(t, i);
    const std::size_t name_start = i;
    if (!skip_string(t, i)) return std::nullopt;
    const auto name = t.substr(name_start + 1, i - name_start - 2);
    skip_space(t, i);
    if (i >= t.size() || t[i] != ':') return std::nullopt;
    ++i;
    skip_space(t, i);
    const std::size_t value_start = i;
    if (!skip_value(t, i)) return std::nullopt;
    out.push_back({name, t.substr(value_start, i - value_start)});
    skip_space(t, i);
    if (i < t.size() && t[i] == ',') {
      ++i;
      continue;
    }
    if (i < t.size() && t[i] == '}') return out;
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<std::string_view> member(std::string_view text, std::string_view name) {
  auto all = members(text);
  if (!all) return std::nullopt;
  for (const auto& m : *all)
    if (m.name == name) return m.value;
  return std::nullopt;
}

std::optional<std::string_view> member(std::string_view text,
                                       std::initializer_list<std::string_view> path) {
  std::optional<std::string_view> at = text;
  for (const auto name : path) {
    at = member(*at, name);
    if (!at) break;
  }
  return at;
}

std::optional<std::string> with_member(std::string_view text, std::string_view name,
                                       std::string_view value) {
  auto all = members(text);
  if (!all) return std::nullopt;
  std::string out = "{";
  bool found = false;
  auto add = [&](std::string_view n, std::string_view v) {
    if (out.size() > 1) out.push_back(',');
    out.push_back('"');
    out.append(n);
    out += "\":";
    out.append(v);
  };
  for (const auto& m : *all) {
    if (m.name == name) {
      found = true;
      add(m.name, value);
    } else {
      add(m.name, m.value);
    }
  }
  if (!found) add(name, value);
  out.push_back('}');
  return out;
}

std::optional<std::string> string_value(std::string_view value) {
  if (value.size() < 2 || value.front() != '"' || value.back() != '"') return std::nullopt;
  const auto inner = value.substr(1, value.size() - 2);
  if (inner.find('\\') == std::string_view::npos) {
    if (inner.find('"') != std::string_view::npos) return std::nullopt;
    return std::string(inner);
  }
  // Escapes (rare in the values read this way): the JSON parser decodes them.
  rapidjson::Document d;
  d.Parse(value.data(), value.size());
  if (d.HasParseError() || !d.IsString()) return std::nullopt;
  return std::string(d.GetString(), d.GetStringLength());
}

}  // namespace mcpmqtt::raw_json

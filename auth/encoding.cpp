// Strict reading of the JSON objects that JOSE headers, claims and JWKs are.
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "auth/internal.hpp"
#include "auth/token.hpp"

namespace mcpmqtt::auth {

namespace detail {

bool distinct_members(const rapidjson::Value& object) {
  const auto n = object.MemberCount();
  if (n < 2) return true;
  std::vector<std::string_view> names;
  names.reserve(n);
  for (auto it = object.MemberBegin(); it != object.MemberEnd(); ++it)
    names.push_back(text_of(it->name));
  std::sort(names.begin(), names.end());
  return std::adjacent_find(names.begin(), names.end()) == names.end();
}

std::optional<std::string> read_object(std::string_view text, rapidjson::Document& doc) {
  // RapidJSON stops at a NUL as at the end of the text, so "{}\0junk" would read as "{}"; a JSON
  // text never holds a raw NUL.
  if (text.find('\0') != std::string_view::npos) return std::string("not JSON (a NUL byte)");
  doc.Parse<kJsonFlags>(text.data(), text.size());
  if (doc.HasParseError()) return std::string("not JSON");
  if (!doc.IsObject()) return std::string("not a JSON object");
  if (!distinct_members(doc)) return std::string("a member name twice");
  return std::nullopt;
}

const rapidjson::Value* member(const rapidjson::Value& object, std::string_view name) {
  for (auto it = object.MemberBegin(); it != object.MemberEnd(); ++it)
    if (text_of(it->name) == name) return &it->value;
  return nullptr;
}

}  // namespace detail

}  // namespace mcpmqtt::auth

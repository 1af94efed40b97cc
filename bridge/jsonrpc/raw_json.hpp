// The members of a JSON object as spans of its text, for code that must pass values on exactly
// as they were written (numbers beyond 2^64, escapes, key order: SEP-1803 payloads) without
// serializing a document again. No I/O.
//
// The text must be valid JSON (Message texts are validated when parsed); on anything else the
// functions return nullopt rather than guess.
//
// Thread-safe (no state).
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mcpmqtt::raw_json {

struct Member {
  std::string_view name;   // as written between the quotes (escapes not decoded)
  std::string_view value;  // the value's text, without surrounding white space
};

// The members of the object `text` (white space around it allowed), in order.
std::optional<std::vector<Member>> members(std::string_view text);
// The text of the member `name` of the object `text`, if there is one.
std::optional<std::string_view> member(std::string_view text, std::string_view name);
// The text at `path` below the object `text`: member(member(text, path[0]), path[1])…, nullopt
// as soon as one is missing.
std::optional<std::string_view> member(std::string_view text,
                                       std::initializer_list<std::string_view> path);
// The string a JSON string literal `value` (a member's text, quotes included) stands for, escapes
// decoded; nullopt when `value` is not a string.
std::optional<std::string> string_value(std::string_view value);
// The object `text` with member `name` set to `value` (JSON text): in its place when present,
// else appended; every other member as written.
std::optional<std::string> with_member(std::string_view text, std::string_view name,
                                       std::string_view value);

}  // namespace mcpmqtt::raw_json

// Reading and writing parts of a RapidJSON document: a member looked up through a pointer that
// may be null, and a value serialized as compact JSON text.
//
// Free functions with no state; safe from any thread on values no one is writing.
#pragma once

#include <string>

#include <rapidjson/document.h>

namespace mcpmqtt::jsonrpc {

// The member `name` of `obj`; nullptr when `obj` is null, not an object, or has no such member.
// Calls chain: member(member(params, "_meta"), "progressToken").
const rapidjson::Value* member(const rapidjson::Value* obj, const char* name);

// A value as compact JSON text (no whitespace between tokens).
std::string to_json(const rapidjson::Value& v);

}  // namespace mcpmqtt::jsonrpc

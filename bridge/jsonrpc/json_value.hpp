// Reading a parsed JSON value without a chain of IsObject/FindMember checks.
// Stateless; thread-safe.
#pragma once

#include <rapidjson/document.h>

namespace mcpmqtt::jsonrpc {

// The member `name` of `v` when `v` is an object that has it; null otherwise (and for a null `v`),
// so lookups chain: member(member(params, "_meta"), "progressToken").
const rapidjson::Value* member(const rapidjson::Value* v, const char* name);

}  // namespace mcpmqtt::jsonrpc

#include "bridge/jsonrpc/json_value.hpp"

namespace mcpmqtt::jsonrpc {

const rapidjson::Value* member(const rapidjson::Value* v, const char* name) {
  if (!v || !v->IsObject()) return nullptr;
  auto it = v->FindMember(name);
  return it == v->MemberEnd() ? nullptr : &it->value;
}

}  // namespace mcpmqtt::jsonrpc

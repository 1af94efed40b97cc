#include "bridge/jsonrpc/json_access.hpp"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace mcpmqtt::jsonrpc {

const rapidjson::Value* member(const rapidjson::Value* obj, const char* name) {
  if (!obj || !obj->IsObject()) return nullptr;
  auto it = obj->FindMember(name);
  return it == obj->MemberEnd() ? nullptr : &it->value;
}

std::string to_json(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

}  // namespace mcpmqtt::jsonrpc

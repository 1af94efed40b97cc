// What the test MCP servers written here share: JSON text from RapidJSON values and one
// JSON-RPC message per stdout line (MCP stdio transport).
#pragma once

#include <cstdio>
#include <string>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace mcpmqtt::test_servers {

// `s` as a JSON string literal.
inline std::string quote(const std::string& s) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  return {buf.GetString(), buf.GetSize()};
}

inline std::string to_json(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return {buf.GetString(), buf.GetSize()};
}

// One message, one line, flushed at once.
inline void emit(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

// The string member `name` of `obj`, or empty.
inline std::string str(const rapidjson::Value* obj, const char* name) {
  if (!obj || !obj->IsObject()) return {};
  auto it = obj->FindMember(name);
  return it != obj->MemberEnd() && it->value.IsString() ? it->value.GetString() : std::string();
}

}  // namespace mcpmqtt::test_servers

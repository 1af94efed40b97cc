// JSON-RPC messages of MCP as a client writes them, for tests that send raw bodies.
#pragma once

#include <string>

namespace mcpmqtt::test {

inline std::string initialize_body(int id = 1, const std::string& version = "2025-11-25") {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
         R"(,"method":"initialize","params":{"protocolVersion":")" + version +
         R"(","capabilities":{"sampling":{}},"clientInfo":{"name":"raw-test","version":"1"}}})";
}

inline std::string request_body(int id, const std::string& method,
                                const std::string& params = "{}") {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":")" + method +
         R"(","params":)" + params + "}";
}

inline std::string tool_call(int id, const std::string& tool, const std::string& extra = "") {
  return request_body(id, "tools/call",
                      R"({"name":")" + tool + R"(","arguments":{"text":"hello"})" + extra + "}");
}

inline const std::string kInitialized = R"({"jsonrpc":"2.0","method":"notifications/initialized"})";

}  // namespace mcpmqtt::test

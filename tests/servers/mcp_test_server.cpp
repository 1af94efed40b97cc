// A small stdio MCP server for tests and benchmarks, in C++ so that the server itself costs
// next to nothing. One JSON-RPC message per line on stdin and stdout (002 §stdio).
//
// Capabilities: tools and prompts with listChanged, resources with subscribe and listChanged.
// Tools:
//   echo           {text}            → a text content block holding `text` unchanged
//   blob           {bytes}           → a text content block of `bytes` bytes ("x" repeated)
//   notify         {method, uri?,    → first sends the notification `method` (with params.uri
//                   count?}            when given) `count` times (default 1), then answers
//   subscriptions  {}                → a text block: the JSON array of URIs subscribed to now
//   sleep          {ms}              → sends notifications/progress first when the request has
//                                      _meta.progressToken, then answers "slept" after `ms`
//   crash          {}                → exits at once (status 3), never answering
//   garbage        {lines}           → writes `lines` lines that are not JSON, then answers
//   flood          {}                → writes to stdout forever, never a newline, never answering
// resources/subscribe and resources/unsubscribe keep the set; a URI starting with "refuse:" is
// refused with -32602. Anything else is -32601.
//
// Misbehaviours for the fault tests (tests/directions/faults_integration_test.cpp), by option:
//   --exit-at-once            exits (status 3) before reading anything
//   --stop-reading-after N    answers the first N requests, then never reads stdin again
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <set>
#include <string>
#include <thread>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "tests/servers/line_json.hpp"

namespace {

using mcpmqtt::test_servers::emit;
using mcpmqtt::test_servers::quote;
using mcpmqtt::test_servers::str;
using mcpmqtt::test_servers::to_json;

const char* kTools =
    R"({"tools":[)"
    R"({"name":"echo","description":"Returns its text argument","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}},)"
    R"({"name":"blob","description":"Returns a text of the given size","inputSchema":{"type":"object","properties":{"bytes":{"type":"integer"}}}},)"
    R"({"name":"notify","description":"Sends a notification, then answers","inputSchema":{"type":"object","properties":{"method":{"type":"string"},"uri":{"type":"string"}},"required":["method"]}},)"
    R"({"name":"subscriptions","description":"The resource URIs subscribed to","inputSchema":{"type":"object"}}]})";

std::string text_result(const std::string& text) {
  return R"({"content":[{"type":"text","text":)" + quote(text) + "}]}";
}

std::uint64_t uint_arg(const rapidjson::Value* obj, const char* name, std::uint64_t fallback) {
  if (!obj || !obj->IsObject()) return fallback;
  auto it = obj->FindMember(name);
  return it != obj->MemberEnd() && it->value.IsUint64() ? it->value.GetUint64() : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  long stop_reading_after = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--exit-at-once") == 0) return 3;
    if (std::strcmp(argv[i], "--stop-reading-after") == 0 && i + 1 < argc)
      stop_reading_after = std::stol(argv[++i]);
  }
  std::set<std::string> subscribed;
  std::string line;
  long requests = 0;
  while (std::getline(std::cin, line)) {
    rapidjson::Document d;
    d.Parse(line.data(), line.size());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("method")) continue;
    const std::string method = d["method"].GetString();
    if (!d.HasMember("id")) continue;  // notifications need no answer
    const std::string id = to_json(d["id"]);
    if (stop_reading_after >= 0 && requests++ >= stop_reading_after) {
      for (;;)
        std::this_thread::sleep_for(std::chrono::hours(1));
    }
    const rapidjson::Value* params = d.HasMember("params") ? &d["params"] : nullptr;
    auto result = [&](const std::string& r) {
      emit(R"({"jsonrpc":"2.0","id":)" + id + R"(,"result":)" + r + "}");
    };
    auto error = [&](int code, const std::string& message) {
      emit(R"({"jsonrpc":"2.0","id":)" + id + R"(,"error":{"code":)" + std::to_string(code) +
           R"(,"message":)" + quote(message) + "}}");
    };
    if (method == "initialize") {
      std::string version = str(params, "protocolVersion");
      if (version.empty()) version = "2025-06-18";
      result(R"({"protocolVersion":)" + quote(version) +
             R"(,"capabilities":{"tools":{"listChanged":true},"prompts":{"listChanged":true},)"
             R"("resources":{"subscribe":true,"listChanged":true}},)"
             R"("serverInfo":{"name":"mcpmqtt-test-server","version":"1.0.0"}})");
    } else if (method == "ping") {
      result("{}");
    } else if (method == "tools/list") {
      result(kTools);
    } else if (method == "resources/subscribe" || method == "resources/unsubscribe") {
      const std::string uri = str(params, "uri");
      if (uri.rfind("refuse:", 0) == 0) {
        error(-32602, "resource " + uri + " cannot be subscribed to");
      } else {
        if (method == "resources/subscribe")
          subscribed.insert(uri);
        else
          subscribed.erase(uri);
        result("{}");
      }
    } else if (method == "tools/call") {
      const std::string name = str(params, "name");
      const rapidjson::Value* args = nullptr;
      if (params && params->IsObject() && params->HasMember("arguments"))
        args = &(*params)["arguments"];
      if (name == "echo") {
        result(text_result(str(args, "text")));
      } else if (name == "blob") {
        std::size_t n = 0;
        if (args && args->IsObject() && args->HasMember("bytes") && (*args)["bytes"].IsUint64())
          n = (*args)["bytes"].GetUint64();
        result(text_result(std::string(n, 'x')));
      } else if (name == "notify") {
        const std::string uri = str(args, "uri");
        std::uint64_t count = 1;
        if (args && args->IsObject() && args->HasMember("count") && (*args)["count"].IsUint64())
          count = (*args)["count"].GetUint64();
        const std::string note =
            R"({"jsonrpc":"2.0","method":)" + quote(str(args, "method")) +
            (uri.empty() ? std::string() : R"(,"params":{"uri":)" + quote(uri) + "}") + "}";
        for (std::uint64_t i = 0; i < count; ++i)
          emit(note);
        result(text_result("sent"));
      } else if (name == "sleep") {
        const rapidjson::Value* meta = nullptr;
        if (params && params->IsObject() && params->HasMember("_meta")) meta = &(*params)["_meta"];
        if (meta && meta->IsObject() && meta->HasMember("progressToken"))
          emit(R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":)" +
               to_json((*meta)["progressToken"]) + R"(,"progress":0}})");
        std::this_thread::sleep_for(std::chrono::milliseconds(uint_arg(args, "ms", 0)));
        result(text_result("slept"));
      } else if (name == "crash") {
        std::fflush(stdout);
        std::_Exit(3);
      } else if (name == "garbage") {
        for (std::uint64_t i = 0, n = uint_arg(args, "lines", 1); i < n; ++i)
          emit("this is not JSON-RPC, line " + std::to_string(i));
        result(text_result("garbage sent"));
      } else if (name == "flood") {
        const std::string chunk(65536, 'f');
        for (;;)
          if (std::fwrite(chunk.data(), 1, chunk.size(), stdout) != chunk.size()) std::_Exit(4);
      } else if (name == "subscriptions") {
        std::string list;
        for (const auto& uri : subscribed)
          list += (list.empty() ? "" : ",") + quote(uri);
        result(text_result("[" + list + "]"));
      } else {
        error(-32602, "unknown tool " + name);
      }
    } else {
      error(-32601, "method not found: " + method);
    }
  }
  return 0;
}

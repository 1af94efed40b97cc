// A stdio MCP server with SEP-1803 events, for tests and benchmarks. One JSON-RPC message per
// line on stdin and stdout (002 §stdio). Every capability, resource, template and payload is
// written here as literal JSON text, so a test can check that they arrive byte for byte.
//
// Capabilities: tools; resources with subscribe, listChanged, events and subscription
// ["notification"] (with --webhook: ["notification","webhook"], and it answers
// resources/subscriptions/register and deregister itself, with a result naming this server).
// resources/list: event://x/tick (with _meta.eventSchema); resources/templates/list:
// event://x/tick/{n} (with _meta.paramsSchema, eventSchema and webhookType).
// Tools:
//   trigger        {uri, payload?,     → first sends `count` (default 1)
//                   count?,              notifications/resources/updated {uri, payload}, then
//                   interval_us?}        (`interval_us` apart, default 0),
//                                        answers; `payload` is JSON text, inserted as it is, with
//                                        every "{seq}" replaced by the event's index (0, 1, …)
//                                        and "{now_us}" by the wall clock when it is written
//                                        (µs since the epoch, for latency benchmarks);
//                                        without it, kPayload
//   subscriptions  {}                  → a text block: the JSON array of URIs subscribed to now
// Anything else is -32601.
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

const char* kCapabilities =
    R"({"tools":{},"resources":{"subscribe":true,"listChanged":true,"events":true,"subscription":["notification"]}})";
const char* kCapabilitiesWebhook =
    R"({"tools":{},"resources":{"subscribe":true,"listChanged":true,"events":true,"subscription":["notification","webhook"]}})";

const char* kResources =
    R"({"resources":[{"uri":"event://x/tick","name":"tick","mimeType":"application/json",)"
    R"("_meta":{"eventSchema":{"type":"object","properties":{"seq":{"type":"integer"},"big":{"type":"integer"}},"required":["seq"]}}}]})";

const char* kTemplates =
    R"({"resourceTemplates":[{"uriTemplate":"event://x/tick/{n}","name":"tick-n",)"
    R"("_meta":{"paramsSchema":{"type":"object","properties":{"n":{"type":"integer","minimum":0}},"required":["n"]},)"
    R"("eventSchema":{"type":"object","properties":{"seq":{"type":"integer"}},"required":["seq"]},)"
    R"("webhookType":"x.tick.n"}}]})";

// Keys out of alphabetical order, integers beyond 2^53 (and beyond 2^63).
const char* kPayload =
    R"({"z":1,"big":9007199254740993,"huge":12345678901234567891,"a":{"y":[3,2,1],"b":"\u00e9t\u00e9"},"seq":{seq}})";

const char* kTools =
    R"({"tools":[)"
    R"({"name":"trigger","description":"Emits events","inputSchema":{"type":"object","properties":{"uri":{"type":"string"},"payload":{"type":"string"},"count":{"type":"integer"}},"required":["uri"]}},)"
    R"({"name":"subscriptions","description":"The resource URIs subscribed to","inputSchema":{"type":"object"}}]})";

std::string text_result(const std::string& text) {
  return R"({"content":[{"type":"text","text":)" + quote(text) + "}]}";
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (auto pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  const bool webhook = argc > 1 && std::strcmp(argv[1], "--webhook") == 0;
  std::set<std::string> subscribed;
  std::string line;
  while (std::getline(std::cin, line)) {
    rapidjson::Document d;
    d.Parse(line.data(), line.size());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("method")) continue;
    const std::string method = d["method"].GetString();
    if (!d.HasMember("id")) continue;  // notifications need no answer
    const std::string id = to_json(d["id"]);
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
      result(R"({"protocolVersion":)" + quote(version) + R"(,"capabilities":)" +
             (webhook ? kCapabilitiesWebhook : kCapabilities) +
             R"(,"serverInfo":{"name":"mcpmqtt-events-server","version":"1.0.0"}})");
    } else if (method == "ping") {
      result("{}");
    } else if (method == "tools/list") {
      result(kTools);
    } else if (method == "resources/list") {
      result(kResources);
    } else if (method == "resources/templates/list") {
      result(kTemplates);
    } else if (method == "resources/subscribe" || method == "resources/unsubscribe") {
      const std::string uri = str(params, "uri");
      if (method == "resources/subscribe")
        subscribed.insert(uri);
      else
        subscribed.erase(uri);
      result("{}");
    } else if (webhook && method == "resources/subscriptions/register") {
      result(R"({"subscription":{"uri":"subscription://events-server/1","eventUris":[],)"
             R"("targetUri":)" +
             quote(str(params, "targetUri")) +
             R"(,"webhookSecret":{"type":"none"}},"_meta":{"servedBy":"events-server"}})");
    } else if (webhook && method == "resources/subscriptions/deregister") {
      result(R"({"_meta":{"servedBy":"events-server"}})");
    } else if (method == "tools/call") {
      const std::string name = str(params, "name");
      const rapidjson::Value* args = nullptr;
      if (params && params->IsObject() && params->HasMember("arguments"))
        args = &(*params)["arguments"];
      if (name == "trigger") {
        const std::string uri = str(args, "uri");
        std::string payload = str(args, "payload");
        if (payload.empty()) payload = kPayload;
        std::uint64_t count = 1;
        if (args && args->IsObject() && args->HasMember("count") && (*args)["count"].IsUint64())
          count = (*args)["count"].GetUint64();
        std::uint64_t interval_us = 0;
        if (args && args->IsObject() && args->HasMember("interval_us") &&
            (*args)["interval_us"].IsUint64())
          interval_us = (*args)["interval_us"].GetUint64();
        for (std::uint64_t i = 0; i < count; ++i) {
          if (i && interval_us) std::this_thread::sleep_for(std::chrono::microseconds(interval_us));
          const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
          std::string p = replace_all(payload, "{seq}", std::to_string(i));
          p = replace_all(std::move(p), "{now_us}", std::to_string(now_us));
          emit(R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":)" +
               quote(uri) + R"(,"payload":)" + p + "}}");
        }
        result(text_result("sent " + std::to_string(count)));
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

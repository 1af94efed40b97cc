// The 2026-07-28 vocabulary (bridge/modern/protocol.hpp).
#include "bridge/modern/protocol.hpp"

#include <catch2/catch.hpp>
#include <rapidjson/document.h>

namespace mcpmqtt::modern {
namespace {

jsonrpc::Message msg(const std::string& text) {
  auto m = jsonrpc::Message::parse(text);
  REQUIRE(m);
  return *m;
}

rapidjson::Document doc(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str());
  REQUIRE_FALSE(d.HasParseError());
  return d;
}

const std::string kEnvelope = R"("_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",)"
                              R"("io.modelcontextprotocol/clientCapabilities":{"sampling":{}},)"
                              R"("io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}})";

TEST_CASE("modern: the claim is params._meta protocolVersion, and only that key",
          "[modern][basic/versioning]") {
  CHECK(claims_modern(
      msg(R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{)" + kEnvelope + "}}")));
  CHECK_FALSE(claims_modern(msg(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/clientInfo":{}}}})")));
  CHECK_FALSE(claims_modern(msg(R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})")));
  CHECK_FALSE(claims_modern(msg(R"({"jsonrpc":"2.0","id":1,"result":{}})")));
  // Even a 2025 version in the claim makes the request modern (and then -32022).
  CHECK(claims_modern(msg(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}})")));
  // The key anywhere else claims nothing.
  CHECK_FALSE(claims_modern(msg(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}})")));
  CHECK_FALSE(claims_modern(msg(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}})")));
  CHECK_FALSE(claims_modern(msg(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":[{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}]})")));
  // Read by the classifying pass, without a document (issue 34); a built notification was not
  // read, and the document answers.
  auto read = msg(R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{)" + kEnvelope + "}}");
  CHECK(read.meta_has_protocol_version() == std::optional<bool>(true));
  CHECK(read.with_id(jsonrpc::Id::integer(2)).meta_has_protocol_version() ==
        std::optional<bool>(true));
  CHECK(msg(R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})").meta_has_protocol_version() ==
        std::optional<bool>(false));
  // Two _meta members in params: the first counts, for the classifying pass as for the
  // document's FindMember and so read_envelope (a fuzzer finding: the pass once read any).
  const std::string second_only =
      R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"x":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}})";
  CHECK_FALSE(claims_modern(msg(second_only)));
  CHECK_FALSE(read_envelope(msg(second_only)));
  const std::string first_only =
      R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"_meta":{"x":1}}})";
  CHECK(claims_modern(msg(first_only)));
  CHECK(msg(first_only).meta_has_protocol_version() == std::optional<bool>(true));
  auto built = jsonrpc::Message::built_notification("notifications/message", "{" + kEnvelope + "}",
                                                    std::nullopt);
  CHECK_FALSE(built.meta_has_protocol_version());
  CHECK(claims_modern(built));
}

TEST_CASE("modern: basic/index §_meta — the envelope is read, and a missing key is -32602",
          "[modern][basic/index]") {
  auto ok = read_envelope(msg(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/logLevel":"info","progressToken":7}}})"));
  REQUIRE(ok);
  CHECK(ok->protocol_version == "2026-07-28");
  CHECK(ok->client_capabilities_json == R"({"elicitation":{}})");
  CHECK(ok->client_info_json.empty());  // optional since spec PR #3002
  CHECK(ok->log_level == "info");
  CHECK(ok->progress_token == jsonrpc::Id::integer(7));

  auto no_meta = read_envelope(msg(R"({"jsonrpc":"2.0","id":1,"method":"server/discover"})"));
  REQUIRE_FALSE(no_meta);
  CHECK(no_meta.error().code == jsonrpc::code::invalid_params);
  CHECK(no_meta.error().data_json == R"({"envelope":{"key":"_meta","problem":"missing"}})");

  auto no_caps = read_envelope(msg(
      R"({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}})"));
  REQUIRE_FALSE(no_caps);
  CHECK(no_caps.error().code == jsonrpc::code::invalid_params);
  CHECK(no_caps.error().message.find("clientCapabilities: missing") != std::string::npos);

  auto bad_level = read_envelope(msg(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"loud"}}})"));
  REQUIRE_FALSE(bad_level);
  CHECK(bad_level.error().message.find("logLevel: invalid") != std::string::npos);

  auto bad_version_type = read_envelope(msg(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728,"io.modelcontextprotocol/clientCapabilities":{}}}})"));
  REQUIRE_FALSE(bad_version_type);
  CHECK(bad_version_type.error().message.find("protocolVersion: invalid") != std::string::npos);
}

TEST_CASE("modern: streamable-http §Server Validation — headers must agree with the body (-32020)",
          "[modern][streamable-http]") {
  const auto call =
      msg(R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"héllo",)" + kEnvelope +
          "}}");
  auto env = read_envelope(call);
  REQUIRE(env);
  const std::string encoded = encode_header_value("héllo");
  CHECK(encoded.rfind("=?base64?", 0) == 0);

  Headers good{"2026-07-28", "tools/call", encoded};
  CHECK_FALSE(check_headers(call, *env, good));

  auto check = [&](Headers h, const std::string& needle) {
    auto e = check_headers(call, *env, h);
    REQUIRE(e);
    CHECK(e->code == code::header_mismatch);
    CHECK(http_status_for(e->code) == 400);
    CHECK(e->message.find(needle) != std::string::npos);
  };
  check({std::nullopt, "tools/call", encoded}, "MCP-Protocol-Version is required");
  check({"2025-11-25", "tools/call", encoded}, "differs from _meta");
  check({"2026-07-28", std::nullopt, encoded}, "Mcp-Method is required");
  check({"2026-07-28", "TOOLS/CALL", encoded}, "does not name the method");  // case-sensitive
  check({"2026-07-28", "tools/call", std::nullopt}, "Mcp-Name is required");
  check({"2026-07-28", "tools/call", "hello"}, "differs from the body's name");
  check({"2026-07-28", "tools/call", "=?base64?aGk?=?="}, "not a valid");

  // Surrounding whitespace is not part of the value.
  Headers spaced{" 2026-07-28 ", " tools/call", " " + encoded + " "};
  CHECK_FALSE(check_headers(call, *env, spaced));
  // A notification needs only the version.
  const auto note =
      msg(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,)" +
          kEnvelope + "}}");
  CHECK_FALSE(check_headers(note, *env, Headers{"2026-07-28", std::nullopt, std::nullopt}));
}

TEST_CASE("modern: streamable-http §Value Encoding — base64 sentinel both ways, strictly",
          "[modern][streamable-http]") {
  CHECK(encode_header_value("tools/call") == "tools/call");
  CHECK(encode_header_value("with space") == "with space");
  CHECK(encode_header_value(" lead") == "=?base64?IGxlYWQ=?=");
  CHECK(encode_header_value("=?base64?x?=") == "=?base64?PT9iYXNlNjQ/eD89?=");
  for (std::string v : {"", "a", "ab", "abc", "abcd", "é", "日本語", "line\nbreak"}) {
    INFO(v);
    CHECK(decode_header_value(encode_header_value(v)) == v);
  }
  CHECK(decode_header_value("=?base64?YWJj?=") == "abc");
  CHECK_FALSE(decode_header_value("=?base64?YWJ?="));   // not a multiple of four
  CHECK_FALSE(decode_header_value("=?base64?YW=j?="));  // data after padding
  CHECK_FALSE(decode_header_value("=?base64?YW*j?="));  // outside the alphabet
  CHECK_FALSE(decode_header_value("=?base64?YWJ=?="));  // stray bits after the data ("ab" is YWI=)
  CHECK(decode_header_value("=?BASE64?YWJj?=") == "=?BASE64?YWJj?=");  // markers are case-sensitive
}

TEST_CASE("modern: methods — registry, removed ones, cacheable results, input_required",
          "[modern][schema]") {
  for (auto m : {"tools/call", "tools/list", "server/discover", "subscriptions/listen",
                 "resources/templates/list", "completion/complete"})
    CHECK(is_modern_request_method(m));
  for (auto m : {"initialize", "ping", "logging/setLevel", "resources/subscribe",
                 "resources/unsubscribe", "tasks/get", "elicitation/create", "roots/list",
                 "sampling/createMessage", "notifications/initialized"}) {
    INFO(m);
    CHECK(is_removed_method(m));
    CHECK_FALSE(is_modern_request_method(m));
  }
  CHECK_FALSE(is_removed_method("tools/call"));
  CHECK(is_cacheable_method("resources/read"));
  CHECK_FALSE(is_cacheable_method("tools/call"));
  CHECK(allows_input_required("prompts/get"));
  CHECK_FALSE(allows_input_required("tools/list"));
  CHECK(capability_for_input("elicitation/create") == "elicitation");
  CHECK(capability_for_input("tools/call").empty());
}

TEST_CASE("modern: versions and the -32022 error's data", "[modern][basic/versioning]") {
  CHECK(is_supported_version("2026-07-28"));
  CHECK_FALSE(is_supported_version("2025-11-25"));
  CHECK(is_modern_version_string("2026-07-28"));
  CHECK(is_modern_version_string("2027-01-01"));
  CHECK_FALSE(is_modern_version_string("2025-11-25"));
  CHECK_FALSE(is_modern_version_string("v999.0.0"));
  auto e = unsupported_version("v999.0.0");
  CHECK(e.code == -32022);
  CHECK(e.data_json == R"({"supported":["2026-07-28"],"requested":"v999.0.0"})");
  CHECK(http_status_for(e.code) == 400);
  CHECK(unsupported_version("").data_json == R"({"supported":["2026-07-28"]})");
  CHECK(http_status_for(jsonrpc::code::method_not_found) == 404);
  CHECK(http_status_for(code::missing_client_capability) == 400);
  CHECK(http_status_for(jsonrpc::code::invalid_params) == 200);
  CHECK(http_status_for(jsonrpc::code::invalid_params, true) == 400);
}

TEST_CASE("modern: basic/index §ResultType — results completed for a modern client",
          "[modern][basic/index]") {
  auto list = doc(R"({"tools":[]})");
  auto out = doc(complete_result(list, "tools/list", R"({"name":"s","version":"1"})"));
  CHECK(std::string(out["resultType"].GetString()) == "complete");
  CHECK(out["ttlMs"].GetInt() == 0);
  CHECK(std::string(out["cacheScope"].GetString()) == "private");
  CHECK(std::string(out["_meta"]["io.modelcontextprotocol/serverInfo"]["name"].GetString()) == "s");

  // What the server set stays.
  auto own = doc(R"({"tools":[],"ttlMs":500,"cacheScope":"public","resultType":"complete"})");
  auto kept = doc(complete_result(own, "tools/list"));
  CHECK(kept["ttlMs"].GetInt() == 500);
  CHECK(std::string(kept["cacheScope"].GetString()) == "public");
  CHECK_FALSE(kept.HasMember("_meta"));

  // Not cacheable: no ttlMs; input_required: no cache fields either.
  auto call = doc(complete_result(doc(R"({"content":[]})"), "tools/call"));
  CHECK_FALSE(call.HasMember("ttlMs"));
  auto ir = doc(complete_result(doc(R"({"resultType":"input_required","requestState":"x"})"),
                                "resources/read"));
  CHECK_FALSE(ir.HasMember("ttlMs"));
}

TEST_CASE("modern: the envelope added for a modern server and removed for a 2025 one",
          "[modern][basic/index]") {
  Envelope e;
  e.protocol_version = "2026-07-28";
  e.client_capabilities_json = R"({"roots":{}})";
  e.client_info_json = R"({"name":"c","version":"1"})";
  e.log_level = "debug";
  auto p = doc(with_envelope(R"({"name":"t","_meta":{"progressToken":4}})", e));
  const auto& meta = p["_meta"];
  CHECK(meta["progressToken"].GetInt() == 4);
  CHECK(std::string(meta[key::protocol_version].GetString()) == "2026-07-28");
  CHECK(meta[key::client_capabilities].HasMember("roots"));
  CHECK(std::string(meta[key::client_info]["name"].GetString()) == "c");
  CHECK(std::string(meta[key::log_level].GetString()) == "debug");
  CHECK(doc(with_envelope("", e))["_meta"].HasMember(key::protocol_version));

  auto stripped = doc(without_envelope(&p));
  CHECK(std::string(stripped["name"].GetString()) == "t");
  CHECK(stripped["_meta"].MemberCount() == 1);
  CHECK(stripped["_meta"]["progressToken"].GetInt() == 4);
  const auto enveloped = doc(with_envelope(R"({"a":1})", e));
  auto bare = doc(without_envelope(&enveloped));
  CHECK_FALSE(bare.HasMember("_meta"));
  CHECK(without_envelope(nullptr).empty());

  // A name repeated in the text (found by the jsonrpc fuzzer): the envelope read is the first
  // occurrence, and no other occurrence is left to pass on, in any _meta.
  const auto twice = doc(
      R"({"_meta":{"io.modelcontextprotocol/clientCapabilities":{"a":{}},"io.modelcontextprotocol/clientCapabilities":{"b":{}},"k":1},"_meta":{"io.modelcontextprotocol/logLevel":"info"}})");
  CHECK(without_envelope(&twice) == R"({"_meta":{"k":1}})");
}

// ---- egress: a 2026-07-28 server behind a 2025 session ----------------------------------------

TEST_CASE(
    "modern egress vocabulary (server/discover): a DiscoverResult is read, serverInfo from _meta "
    "or the pre-#3002 body, and a 2025 initialize result is made of it",
    "[modern][server/discover]") {
  auto d = read_discover_result(doc(
      R"({"supportedVersions":["2026-07-28","2027-01-01"],"capabilities":{"tools":{}},"instructions":"hi","resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}})"));
  REQUIRE(d);
  CHECK(d->supported_versions == std::vector<std::string>{"2026-07-28", "2027-01-01"});
  CHECK(d->capabilities_json == R"({"tools":{}})");
  CHECK(d->instructions == "hi");
  CHECK(d->server_info_json == R"({"name":"s","version":"1"})");
  CHECK(common_modern_version(*d) == "2026-07-28");
  auto init = doc(legacy_initialize_result(*d, "2025-03-26", R"({"name":"fallback"})"));
  CHECK(std::string(init["protocolVersion"].GetString()) == "2025-03-26");
  CHECK(init["capabilities"].HasMember("tools"));
  CHECK(std::string(init["serverInfo"]["name"].GetString()) == "s");
  CHECK(std::string(init["instructions"].GetString()) == "hi");
  // An unknown or modern version asked for: the newest 2025 one (2025-11-25 basic/lifecycle).
  CHECK(legacy_version_for("2024-11-05") == "2024-11-05");
  CHECK(legacy_version_for("2026-07-28") == "2025-11-25");
  CHECK(legacy_version_for("") == "2025-11-25");

  auto body_info = read_discover_result(doc(
      R"({"supportedVersions":["2027-01-01"],"capabilities":{},"serverInfo":{"name":"old-draft","version":"0"}})"));
  REQUIRE(body_info);
  CHECK(body_info->server_info_json == R"({"name":"old-draft","version":"0"})");
  CHECK(common_modern_version(*body_info).empty());
  auto no_info = read_discover_result(doc(R"({"supportedVersions":[],"capabilities":{}})"));
  REQUIRE(no_info);
  CHECK(doc(legacy_initialize_result(
            *no_info, "2025-06-18", R"({"name":"fallback"})"))["serverInfo"]["name"] == "fallback");
  CHECK_FALSE(doc(legacy_initialize_result(*no_info, "x", "{}")).HasMember("instructions"));

  CHECK(read_discover_result(doc(R"({"capabilities":{}})")).error() ==
        "supportedVersions is missing or not an array");
  CHECK(read_discover_result(doc(R"({"supportedVersions":[1],"capabilities":{}})")).error() ==
        "supportedVersions holds a non-string");
  CHECK(read_discover_result(doc(R"({"supportedVersions":[]})")).error() ==
        "capabilities is missing or not an object");
  CHECK(read_discover_result(doc("[]")).error() == "the result is not an object");
}

TEST_CASE(
    "modern egress vocabulary (basic/patterns/mrtr): input_required results are read in the "
    "server's order, and malformed ones are named",
    "[modern][mrtr]") {
  CHECK(is_input_required(doc(R"({"resultType":"input_required"})")));
  CHECK_FALSE(is_input_required(doc(R"({"resultType":"complete"})")));
  CHECK_FALSE(is_input_required(doc(R"({"content":[]})")));
  auto in = read_input_required(
      doc(R"({"resultType":"input_required","inputRequests":{"z":{"method":"roots/list"},"a":{"method":"elicitation/create","params":{"message":"m"}}},"requestState":"st"})"),
      8);
  REQUIRE(in);
  REQUIRE(in->requests.size() == 2);
  CHECK(in->requests[0].key == "z");
  CHECK(in->requests[0].method == "roots/list");
  CHECK(in->requests[0].params_json.empty());
  CHECK(in->requests[1].key == "a");
  CHECK(in->requests[1].params_json == R"({"message":"m"})");
  CHECK(in->request_state == "st");
  auto state_only = read_input_required(doc(R"({"requestState":""})"), 8);
  REQUIRE(state_only);
  CHECK(state_only->requests.empty());
  CHECK(state_only->request_state == "");

  auto bad = [](const std::string& text) {
    auto r = read_input_required(doc(text), 2);
    REQUIRE_FALSE(r);
    return r.error();
  };
  // mrtr §Server Requirements 6: at least one of the two.
  CHECK(bad(R"({"resultType":"input_required"})") ==
        "it has neither inputRequests nor requestState");
  CHECK(bad(R"({"inputRequests":[]})") == "inputRequests is not an object");
  CHECK(bad(R"({"inputRequests":{"k":{"params":{}}}})") ==
        "inputRequests.k is not a request ({method, params})");
  CHECK(bad(R"({"inputRequests":{"k":{"method":"roots/list","params":3}}})") ==
        "inputRequests.k.params is not an object");
  CHECK(bad(R"({"requestState":7})") == "requestState is not a string");
  CHECK(bad(R"({"inputRequests":{"a":{"method":"x"},"b":{"method":"x"},"c":{"method":"x"}}})") ==
        "inputRequests holds 3 requests, more than the 2 the bridge takes in one round");
}

TEST_CASE(
    "modern egress vocabulary: an input request on a 2025 session carries the bridge keys "
    "inputKey and inputRound",
    "[modern][mrtr]") {
  auto p =
      doc(input_request_params(R"({"message":"m","_meta":{"progressToken":1}})", "user_name", 3));
  CHECK(std::string(p["message"].GetString()) == "m");
  CHECK(p["_meta"]["progressToken"].GetInt() == 1);
  CHECK(std::string(p["_meta"][bridge_key::input_key].GetString()) == "user_name");
  CHECK(p["_meta"][bridge_key::input_round]["size"].GetInt() == 3);
  CHECK(input_request_params("", "r", 1) ==
        R"({"_meta":{"mcp-mqtt-bridge/inputKey":"r","mcp-mqtt-bridge/inputRound":{"size":1}}})");
}

TEST_CASE(
    "modern egress vocabulary (mrtr §Client Requirements 2): a retry carries this round's "
    "inputResponses and the requestState exactly, never one the server did not give",
    "[modern][mrtr]") {
  Envelope e;
  e.protocol_version = "2026-07-28";
  e.client_capabilities_json = R"({"sampling":{}})";
  const auto original = doc(
      R"({"name":"t","arguments":{"x":1},"inputResponses":{"old":{}},"requestState":"old-state","_meta":{"progressToken":"p"}})");
  // First attempt: as it came (a 2026 client's own retry passes through), envelope added.
  auto first = doc(request_params(&original, e));
  CHECK(first["inputResponses"].HasMember("old"));
  CHECK(std::string(first["requestState"].GetString()) == "old-state");
  CHECK(first["_meta"].HasMember(key::protocol_version));
  CHECK(std::string(first["_meta"]["progressToken"].GetString()) == "p");

  const std::string state = "v1.\xC3\xA9\"\\/\x01.sig";  // escapes, non-ASCII, a control char
  std::vector<InputResponse> answers = {{"k1", R"({"action":"accept"})"},
                                        {"k2", R"({"roots":[]})"}};
  auto retry = doc(request_params(&original, e, &answers, state));
  CHECK(std::string(retry["name"].GetString()) == "t");
  CHECK(retry["arguments"]["x"].GetInt() == 1);
  CHECK(retry["inputResponses"].MemberCount() == 2);
  CHECK(std::string(retry["inputResponses"]["k1"]["action"].GetString()) == "accept");
  CHECK(retry["inputResponses"]["k2"]["roots"].IsArray());
  CHECK(std::string(retry["requestState"].GetString(), retry["requestState"].GetStringLength()) ==
        state);
  CHECK(std::string(retry["_meta"][key::protocol_version].GetString()) == "2026-07-28");

  auto no_state = doc(request_params(&original, e, &answers, std::nullopt));
  CHECK_FALSE(no_state.HasMember("requestState"));
  auto bare = doc(request_params(nullptr, e));
  CHECK(bare["_meta"].HasMember(key::client_capabilities));
}

TEST_CASE(
    "modern egress vocabulary (subscriptions): a listen asks only for what the server "
    "declares, and its notifications lose the subscriptionId",
    "[modern][subscriptions]") {
  const std::string caps =
      R"({"tools":{"listChanged":true},"prompts":{},"resources":{"listChanged":false,"subscribe":true},"logging":{}})";
  auto f = honoured_filter(caps, {"a://1", "b://2"});
  CHECK(f.tools_list_changed);
  CHECK_FALSE(f.prompts_list_changed);
  CHECK_FALSE(f.resources_list_changed);
  CHECK(f.resource_subscriptions == std::vector<std::string>{"a://1", "b://2"});
  CHECK(honoured_filter(R"({"resources":{"subscribe":false}})", {"a://1"}).empty());
  CHECK(honoured_filter("not json", {}).empty());

  Envelope e;
  e.protocol_version = "2026-07-28";
  auto p = doc(listen_params(f, e));
  CHECK(p["notifications"]["toolsListChanged"].GetBool());
  CHECK_FALSE(p["notifications"].HasMember("promptsListChanged"));
  CHECK(p["notifications"]["resourceSubscriptions"].Size() == 2);
  CHECK(p["_meta"].HasMember(key::protocol_version));
  CHECK(doc(listen_params(ListenFilter{}, e))["notifications"].ObjectEmpty());

  CHECK(has_capability(caps, "logging"));
  CHECK(has_capability(caps, "resources.subscribe"));
  CHECK_FALSE(has_capability(caps, "resources.listChanged"));
  CHECK_FALSE(has_capability(caps, "completions"));
  CHECK_FALSE(has_capability(caps, "tools.listChanged.x"));

  const auto tagged =
      doc(R"({"uri":"a://1","_meta":{"io.modelcontextprotocol/subscriptionId":"listen:0","k":1}})");
  CHECK(without_subscription_id(&tagged) == R"({"uri":"a://1","_meta":{"k":1}})");
  const auto only = doc(R"({"_meta":{"io.modelcontextprotocol/subscriptionId":3}})");
  CHECK(without_subscription_id(&only) == "{}");
  CHECK(without_subscription_id(nullptr).empty());
}

// ---- the ingress's admission (admit, admit_notification, classify_post) -----------------------

std::string request(int id, const std::string& method, const std::string& params) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":")" + method +
         R"(","params":)" + params + "}";
}

const std::string kModernMeta =
    R"("_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}})";

TEST_CASE(
    "modern ingress: admission runs envelope, present-header mismatch, version, required "
    "headers, method — in that order (basic/versioning, conformance server-stateless)",
    "[modern][ingress][basic/index][streamable-http]") {
  const Headers good{"2026-07-28", "server/discover", std::nullopt};
  // 1. the envelope: -32602 / 400 before anything else, even with every header wrong.
  auto r =
      admit(msg(request(101, "server/discover",
                        R"({"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}})")),
            nullptr);
  REQUIRE_FALSE(r);
  CHECK(r.error().error.code == -32602);
  CHECK(r.error().status == 400);
  // 2. a present header that disagrees is -32020 even when the body names an unknown version
  //    (conformance: body v999.0.0 under a 2026-07-28 header is a mismatch).
  const auto v999 = msg(request(
      5, "server/discover",
      R"({"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}})"));
  r = admit(v999, &good);
  REQUIRE_FALSE(r);
  CHECK(r.error().error.code == -32020);
  CHECK(r.error().status == 400);
  // 3. the same body with a matching header: -32022 with supported and requested.
  Headers v999h{"v999.0.0", "server/discover", std::nullopt};
  r = admit(v999, &v999h);
  REQUIRE_FALSE(r);
  CHECK(r.error().error.code == -32022);
  CHECK(r.error().status == 400);
  CHECK(r.error().error.data_json == R"({"supported":["2026-07-28"],"requested":"v999.0.0"})");
  // On stdio (no headers) the version is checked all the same.
  r = admit(v999, nullptr);
  REQUIRE_FALSE(r);
  CHECK(r.error().error.code == -32022);
  // 4. required headers: missing Mcp-Method, missing Mcp-Name.
  const auto discover = msg(request(7, "server/discover", "{" + kModernMeta + "}"));
  Headers no_method{"2026-07-28", std::nullopt, std::nullopt};
  r = admit(discover, &no_method);
  REQUIRE_FALSE(r);
  CHECK(r.error().error.code == -32020);
  CHECK(r.error().error.message.find("Mcp-Method is required") != std::string::npos);
  const auto call = msg(request(9, "tools/call", R"({"name":"echo",)" + kModernMeta + "}"));
  Headers no_name{"2026-07-28", "tools/call", std::nullopt};
  r = admit(call, &no_name);
  REQUIRE_FALSE(r);
  CHECK(r.error().error.code == -32020);
  // 5. removed and unknown methods: 404 / -32601.
  for (const char* m : {"initialize", "ping", "logging/setLevel", "resources/subscribe",
                        "resources/unsubscribe", "unknown/method"}) {
    INFO(m);
    Headers h{"2026-07-28", m, std::nullopt};
    r = admit(msg(request(20, m, "{" + kModernMeta + "}")), &h);
    REQUIRE_FALSE(r);
    CHECK(r.error().error.code == -32601);
    CHECK(r.error().status == 404);
  }
  // All good.
  auto ok = admit(discover, &good);
  REQUIRE(ok);
  CHECK(ok->protocol_version == "2026-07-28");
}

TEST_CASE("modern ingress: notifications need the envelope and a matching version header only",
          "[modern][ingress][streamable-http]") {
  const auto note =
      msg(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,)" +
          kModernMeta + "}}");
  Headers only_version{"2026-07-28", std::nullopt, std::nullopt};
  CHECK_FALSE(admit_notification(note, &only_version));
  CHECK_FALSE(admit_notification(note, nullptr));
  Headers other{"2025-11-25", std::nullopt, std::nullopt};
  auto r = admit_notification(note, &other);
  REQUIRE(r);
  CHECK(r->error.code == -32020);
  auto bad = admit_notification(
      msg(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}})"),
      nullptr);
  REQUIRE(bad);
  CHECK(bad->error.code == -32602);
}

TEST_CASE("modern ingress: an HTTP POST body is classified by the claim, the header only refuses",
          "[modern][ingress][streamable-http]") {
  auto body = [](const std::string& text) {
    auto b = jsonrpc::parse_body(text);
    REQUIRE(b);
    return *b;
  };
  const std::string modern_list = request(1, "tools/list", "{" + kModernMeta + "}");
  CHECK(classify_post(body(modern_list), std::nullopt).era == PostEra::modern);
  // The claim decides, whatever the header says (its disagreement is admit()'s -32020).
  CHECK(classify_post(body(modern_list), std::string("2025-11-25")).era == PostEra::modern);
  const std::string legacy_list = request(2, "tools/list", "{}");
  CHECK(classify_post(body(legacy_list), std::nullopt).era == PostEra::legacy);
  CHECK(classify_post(body(legacy_list), std::string("2025-06-18")).era == PostEra::legacy);
  // A modern header without the claim: -32602 naming the missing envelope, the id echoed.
  auto c = classify_post(body(legacy_list), std::string("2026-07-28"));
  CHECK(c.era == PostEra::refused);
  REQUIRE(c.refusal);
  CHECK(c.refusal->status == 400);
  CHECK(c.refusal->error.code == -32602);
  CHECK(c.refusal->error.data_json == R"({"envelope":{"missing":["_meta"]}})");
  auto partial = classify_post(
      body(request(
          3, "server/discover",
          R"({"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"x","version":"1"}}})")),
      std::string("2026-07-28"));
  REQUIRE(partial.refusal);
  CHECK(
      partial.refusal->error.data_json ==
      R"({"envelope":{"missing":["io.modelcontextprotocol/protocolVersion","io.modelcontextprotocol/clientCapabilities"]}})");
  // initialize without the claim under a modern header: -32020.
  auto init = classify_post(
      body(request(
          4, "initialize",
          R"({"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}})")),
      std::string("2026-07-28"));
  REQUIRE(init.refusal);
  CHECK(init.refusal->error.code == -32020);
  // A notification under a modern header is modern (202); a batch with a claim is refused.
  CHECK(classify_post(body(R"({"jsonrpc":"2.0","method":"notifications/initialized"})"),
                      std::string("2026-07-28"))
            .era == PostEra::modern);
  auto batch = classify_post(body("[" + modern_list + "," + legacy_list + "]"), std::nullopt);
  CHECK(batch.era == PostEra::refused);
  REQUIRE(batch.refusal);
  CHECK(batch.refusal->error.code == -32600);
  CHECK(classify_post(body("[" + legacy_list + "]"), std::nullopt).era == PostEra::legacy);
}

TEST_CASE("modern ingress: canonical JSON, capabilities, and the errors the gateway sends",
          "[modern][ingress]") {
  CHECK(canonical_json(R"({"b":{"y":1,"x":[{"d":1,"c":2}]},"a":true})") ==
        R"({"a":true,"b":{"x":[{"c":2,"d":1}],"y":1}})");
  CHECK(canonical_json(R"({ "sampling" : {}, "elicitation":{"form":{}} })") ==
        canonical_json(R"({"elicitation":{"form":{}},"sampling":{}})"));
  CHECK(declares_capability(R"({"sampling":{}})", "sampling"));
  CHECK_FALSE(declares_capability(R"({"sampling":{}})", "elicitation"));
  CHECK_FALSE(declares_capability("{}", "roots"));
  auto e = missing_client_capability("elicitation", "x");
  CHECK(e.code == -32021);
  CHECK(e.data_json == R"({"requiredCapabilities":{"elicitation":{}}})");
  CHECK(http_status_for(e.code) == 400);
  CHECK(invalid_request_state().code == -32602);
  CHECK(invalid_request_state().data_json == R"({"reason":"invalid_request_state"})");
  CHECK(http_status_for(invalid_request_state().code) == 200);
  // -32002 from a 2025 server becomes -32602 with data.uri (conformance sep-2164).
  auto nf = modern_error({-32002, "Resource not found", ""}, "test://nope");
  CHECK(nf.code == -32602);
  CHECK(nf.data_json == R"({"uri":"test://nope"})");
  CHECK(modern_error({-32002, "gone", R"({"uri":"a"})"}, "b").data_json == R"({"uri":"a"})");
  CHECK(modern_error({-32603, "boom", ""}, "x").code == -32603);
}

TEST_CASE(
    "modern ingress streamable-http §Standard Request Headers: x-mcp-header annotations and "
    "the Mcp-Param-{Name} check",
    "[modern][ingress][streamable-http]") {
  auto list = doc(
      R"({"tools":[{"name":"a","inputSchema":{"properties":{"r":{"type":"string","x-mcp-header":"Region"},"q":{"type":"string"}}}},{"name":"b","inputSchema":{}}]})");
  auto params = param_headers_of(list);
  REQUIRE(params.size() == 2);
  CHECK(params[0].first == "a");
  REQUIRE(params[0].second.size() == 1);
  CHECK(params[0].second[0].argument == "r");
  CHECK(params[0].second[0].header == "region");
  CHECK(params[1].second.empty());
  const auto call = msg(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"r":"Hello"}}})");
  CHECK_FALSE(check_param_headers(call, params[0].second, {{"region", "Hello"}}));
  CHECK_FALSE(check_param_headers(call, params[0].second, {{"region", " =?base64?SGVsbG8=?= "}}));
  auto e = check_param_headers(call, params[0].second, {});
  REQUIRE(e);
  CHECK(e->code == code::header_mismatch);
  CHECK(e->message.find("Mcp-Param-region is missing") != std::string::npos);
  CHECK(check_param_headers(call, params[0].second, {{"region", "=?base64?SGVsbG8?="}}));
  CHECK(check_param_headers(call, params[0].second, {{"region", "hello"}}));  // case-sensitive
}

TEST_CASE(
    "modern egress streamable-http §Standard Request Headers (SEP-2243): the Mcp-Param-{Name} "
    "headers a client sends with tools/call, which the ingress's own check accepts",
    "[modern][egress][streamable-http]") {
  const std::vector<ParamHeader> params = {{"r", "region"}, {"n", "count"},  {"flag", "flag"},
                                           {"o", "obj"},    {"z", "absent"}, {"bad", "x y"}};
  const auto call =
      msg(R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":)"
          R"({"r":"Zürich","n":42,"flag":true,"o":{"k":1},"z":null,"bad":"v"}}})");
  const auto headers = param_header_values(call, params);
  REQUIRE(headers.size() == 3);  // no object, no null, no header name that is not a token
  CHECK(headers[0] ==
        std::pair<std::string, std::string>{"Mcp-Param-region", "=?base64?WsO8cmljaA==?="});
  CHECK(headers[1] == std::pair<std::string, std::string>{"Mcp-Param-count", "42"});
  CHECK(headers[2] == std::pair<std::string, std::string>{"Mcp-Param-flag", "true"});
  std::vector<std::pair<std::string, std::string>> sent;
  for (const auto& [name, value] : headers)
    sent.emplace_back(name.substr(std::string("Mcp-Param-").size()), value);
  CHECK_FALSE(check_param_headers(call, {params[0], params[1], params[2]}, sent));

  ToolHeaders memory;
  CHECK_FALSE(memory.listed());
  memory.learn(
      doc(R"({"tools":[{"name":"a","inputSchema":{"properties":{"r":{"x-mcp-header":"Region"}}}}],"nextCursor":"2"})"),
      false);
  CHECK_FALSE(memory.listed());
  CHECK(memory.of("a").size() == 1);
  memory.learn(doc(R"({"tools":[{"name":"b","inputSchema":{}}]})"), true);
  CHECK(memory.listed());
  CHECK(memory.of("a").size() == 1);
  CHECK(memory.of("b").empty());
  memory.forget();
  CHECK_FALSE(memory.listed());
  CHECK(memory.of("a").empty());
}

}  // namespace
}  // namespace mcpmqtt::modern

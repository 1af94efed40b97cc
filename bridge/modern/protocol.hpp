// The vocabulary of MCP revision 2026-07-28 ("modern": no sessions, a `_meta` envelope on every
// request, `server/discover`, `resultType`, `input_required`), as pure functions shared by the
// ingress (modern clients reaching MQTT-hosted servers) and the egress (2026-only servers
// published on MQTT). Rules are cited by the specification file (`basic/index` §_meta,
// `basic/transports/streamable-http` §Server Validation, `basic/patterns/mrtr`,
// `schema/2026-07-28/schema.ts`). Defined by concern: protocol.cpp (versions, envelope, headers,
// methods, results), legacy_mapping.cpp (egress), admission.cpp (ingress admission),
// param_headers.cpp (Mcp-Param-{Name}).
//
// Thread-safe (no state; ToolHeaders locks).
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <rapidjson/document.h>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "common/expected.hpp"

namespace mcpmqtt::modern {

// The modern revisions the bridge speaks, newest first.
inline constexpr std::string_view kVersion = "2026-07-28";
const std::vector<std::string>& supported_versions();
bool is_supported_version(std::string_view version);
// A revision string of the modern generation (YYYY-MM-DD, not before 2026-07-28), supported or
// not: what tells a modern request with an unknown version (-32022) from a legacy one.
bool is_modern_version_string(std::string_view version);

// `_meta` keys (basic/index §_meta).
namespace key {
inline constexpr const char* protocol_version = "io.modelcontextprotocol/protocolVersion";
inline constexpr const char* client_capabilities = "io.modelcontextprotocol/clientCapabilities";
inline constexpr const char* client_info = "io.modelcontextprotocol/clientInfo";
inline constexpr const char* log_level = "io.modelcontextprotocol/logLevel";
inline constexpr const char* subscription_id = "io.modelcontextprotocol/subscriptionId";
inline constexpr const char* server_info = "io.modelcontextprotocol/serverInfo";
}  // namespace key

// The bridge's own `_meta` keys on server→client requests that stand for one input request of
// an `input_required` round while they cross a 2025 session (MQTT): the egress sets them, the
// ingress reads them, so the keys a 2026 server chose reach a 2026 client unchanged. Other
// peers ignore unknown `_meta` members.
namespace bridge_key {
inline constexpr const char* input_key = "mcp-mqtt-bridge/inputKey";      // string
inline constexpr const char* input_round = "mcp-mqtt-bridge/inputRound";  // {"size": N}
// On an initialize's params._meta (true): the MQTT client is the bridge's own ingress serving
// 2026-07-28 clients, which reads the two keys above. An egress in front of a server that
// speaks both eras speaks 2026-07-28 to it for such a session, so the server's input keys
// reach the 2026 client; 2025 for every other session, which loses nothing that way.
inline constexpr const char* reads_input_keys = "mcp-mqtt-bridge/readsInputKeys";
}  // namespace bridge_key

// HTTP request headers (basic/transports/streamable-http §Standard Request Headers).
namespace header {
inline constexpr const char* protocol_version = "MCP-Protocol-Version";
inline constexpr const char* method = "Mcp-Method";
inline constexpr const char* name = "Mcp-Name";
}  // namespace header

// Error codes MCP owns (basic/index §Error Codes).
namespace code {
inline constexpr int header_mismatch = -32020;
inline constexpr int missing_client_capability = -32021;
inline constexpr int unsupported_version = -32022;
// Resource not found before 2026-07-28; MUST NOT be emitted by 2026 implementations (-32602).
inline constexpr int legacy_resource_not_found = -32002;
}  // namespace code

// ---- classifying and reading a request ---------------------------------------------------------

// The claim that decides the era of a request or notification: params._meta holds
// io.modelcontextprotocol/protocolVersion (of any value). Only that key decides.
bool claims_modern(const jsonrpc::Message& m);

// A request's envelope, validated. JSON members are kept as JSON text.
struct Envelope {
  std::string protocol_version;
  std::string client_capabilities_json = "{}";  // an object
  std::string client_info_json;                 // an object, or empty when absent
  std::optional<std::string> log_level;         // debug … emergency
  std::optional<jsonrpc::Id> progress_token;
};

// Reads params._meta. Missing _meta, a missing required key, or a member of the wrong type gives
// -32602 with data {"envelope": {"key": K, "problem": "missing" | "invalid"}} (basic/index §_meta:
// "MUST reject it with -32602"; on HTTP with status 400). The version is not checked here.
Expected<Envelope, jsonrpc::Error> read_envelope(const jsonrpc::Message& m);

// The log levels of the revision, lowest first; nullopt for anything else.
std::optional<int> log_level_rank(std::string_view level);

// The standard headers as received (nullopt: absent). Values are compared after decoding the
// `=?base64?…?=` form and trimming optional whitespace.
struct Headers {
  std::optional<std::string> protocol_version;
  std::optional<std::string> method;
  std::optional<std::string> name;
};
// streamable-http §Server Validation: MCP-Protocol-Version must equal the envelope's version,
// Mcp-Method the method (requests), Mcp-Name the name or URI (tools/call, prompts/get,
// resources/read). Any mismatch, missing header or malformed value: -32020 (HTTP 400) with
// data {"mismatch": {"header": …, "body": …}}.
std::optional<jsonrpc::Error> check_headers(const jsonrpc::Message& m, const Envelope& envelope,
                                            const Headers& headers);

// The value Mcp-Name carries for this request (params.name of tools/call and prompts/get,
// params.uri of resources/read), or nullopt.
std::optional<std::string> name_of(const jsonrpc::Message& m);
// A header value as sent: unchanged when it is plain visible ASCII without surrounding spaces,
// else `=?base64?{Base64 of the UTF-8}?=` (streamable-http §Value Encoding).
std::string encode_header_value(std::string_view value);
// The inverse; nullopt for a malformed `=?base64?…?=` value.
std::optional<std::string> decode_header_value(std::string_view value);
// A header value without the spaces and tabs around it (optional whitespace).
std::string_view trim_header_value(std::string_view value);

// ---- methods -----------------------------------------------------------------------------------

// Methods of the 2026-07-28 request registry (schema ClientRequest), and the SEP-1803 webhook
// registration methods (an extension the bridge serves for servers with in-band events).
bool is_modern_request_method(std::string_view method);
// Methods the revision removed (initialize, ping, logging/setLevel, resources/subscribe and
// unsubscribe, the tasks family, server→client requests): sent with the modern envelope they get
// 404 / -32601.
bool is_removed_method(std::string_view method);
// Results that carry ttlMs and cacheScope (schema CacheableResult).
bool is_cacheable_method(std::string_view method);
// Requests whose result may be input_required (basic/patterns/mrtr §Supported Requests).
bool allows_input_required(std::string_view method);
// The client capability an input request of this method needs ("elicitation", "sampling",
// "roots"), or empty.
std::string_view capability_for_input(std::string_view method);

// ---- errors ------------------------------------------------------------------------------------

// -32022 with data {"supported": […], "requested": V} (requested omitted when empty).
jsonrpc::Error unsupported_version(std::string_view requested);
// -32020 with data {"mismatch": {"header": H, "body": B}}.
jsonrpc::Error header_mismatch(std::string_view header_value, std::string_view detail);
// -32601 for a method the revision removed, naming it.
jsonrpc::Error removed_method(std::string_view method);
// The HTTP status of a modern error response: 400 for -32020, -32021, -32022 and envelope
// errors (`envelope_error`), 404 for -32601, 200 (in-band) for anything else.
unsigned http_status_for(int error_code, bool envelope_error = false);

// ---- results -----------------------------------------------------------------------------------

// A result as a modern client expects it (basic/index §ResultType, schema CacheableResult):
// resultType "complete" when absent; ttlMs 0 and cacheScope "private" on cacheable methods when
// absent; _meta[serverInfo] = `server_info_json` when given and absent. Returns the result's
// JSON text.
std::string complete_result(const rapidjson::Value& result, std::string_view method,
                            std::string_view server_info_json = {});

// ---- building requests for a modern server -----------------------------------------------------

// `params_json` (an object, or empty for none) with the envelope merged into its _meta (keys the
// request already has win, as the v2 SDK does): what a modern server expects on every request.
std::string with_envelope(std::string_view params_json, const Envelope& envelope);
// `params` with the envelope keys removed from _meta (and _meta dropped when nothing is left),
// for a 2025 server. progressToken and every other member stay.
std::string without_envelope(const rapidjson::Value* params);

// ---- egress: a 2026-07-28 server behind a 2025 session ----------------------------------------
// (The MQTT side stays a 2025 session, 004 §Initialization; the upstream speaks 2026-07-28.
// These functions translate between the two; bridge/modern/upstream.hpp uses them.)

// The 2025-era revisions a session over MQTT may name in initialize, newest first.
const std::vector<std::string>& legacy_versions();
// The version an initialize result gives a 2025 client that asked for `requested`: the same when
// the bridge knows it, else the newest legacy revision (basic/lifecycle of 2025-11-25: "the
// server MUST respond with another protocol version it supports").
std::string legacy_version_for(std::string_view requested);

// What a DiscoverResult says (schema DiscoverResult; server/discover).
struct Discovered {
  std::vector<std::string> supported_versions;
  std::string capabilities_json = "{}";  // an object
  std::optional<std::string> instructions;
  // _meta["io.modelcontextprotocol/serverInfo"], or the body's serverInfo of drafts before spec
  // PR #3002; empty when neither is there.
  std::string server_info_json;
};
// Reads a server/discover result; the error says what is malformed.
Expected<Discovered, std::string> read_discover_result(const rapidjson::Value& result);
// The newest of supported_versions() the server lists, or empty when there is none.
std::string common_modern_version(const Discovered& discovered);
// The result of a 2025 client's initialize answered from what discover said: protocolVersion
// (legacy_version_for), capabilities, serverInfo (`fallback_server_info_json` when discover gave
// none), instructions.
std::string legacy_initialize_result(const Discovered& discovered, std::string_view requested,
                                     std::string_view fallback_server_info_json);

// A result's resultType is "input_required" (basic/patterns/mrtr). Absent means "complete".
bool is_input_required(const rapidjson::Value& result);

// One entry of an input_required result's inputRequests: the server's key, the method
// (elicitation/create, sampling/createMessage, roots/list) and its params (JSON; empty: none).
struct InputRequest {
  std::string key;
  std::string method;
  std::string params_json;
};
struct InputRequired {
  std::vector<InputRequest> requests;  // in the order the server wrote them
  std::optional<std::string> request_state;
};
// Reads an input_required result (mrtr §Server Requirements; schema InputRequiredResult):
// inputRequests an object of {method: string, params?: object}, requestState a string, at least
// one of the two present, at most `max_requests` requests. The error says what is wrong.
Expected<InputRequired, std::string> read_input_required(const rapidjson::Value& result,
                                                         std::size_t max_requests);
// The params of the server→client request that stands for input request `key` on a 2025
// session: its params with the bridge keys in _meta (bridge_key::input_key = key,
// bridge_key::input_round = {"size": round_size}).
std::string input_request_params(std::string_view params_json, std::string_view key,
                                 std::size_t round_size);
// The params of a request to a modern server: `original` (the 2025 client's params; null for
// none) with the envelope merged into _meta (with_envelope). With `responses` (a retry, mrtr
// §Client Requirements 2): inputResponses = {key: the bare result}, replacing any the original
// carried, and requestState = `request_state` exactly, or removed when the round gave none.
// Without it the params go as they are (a 2026 client's own retry passes through unchanged).
struct InputResponse {
  std::string key;
  std::string result_json;  // the client's result object
};
std::string request_params(const rapidjson::Value* original, const Envelope& envelope,
                           const std::vector<InputResponse>* responses = nullptr,
                           const std::optional<std::string>& request_state = std::nullopt);

// What a subscriptions/listen asks for (schema SubscriptionFilter).
struct ListenFilter {
  bool tools_list_changed = false;
  bool prompts_list_changed = false;
  bool resources_list_changed = false;
  std::vector<std::string> resource_subscriptions;
  bool empty() const {
    return !tools_list_changed && !prompts_list_changed && !resources_list_changed &&
           resource_subscriptions.empty();
  }
  bool operator==(const ListenFilter&) const = default;
};
// The filter a server honours (its capabilities' listChanged flags; the URIs only with
// resources.subscribe), for `uris` wanted.
ListenFilter honoured_filter(std::string_view capabilities_json,
                             const std::vector<std::string>& uris);
// The params of subscriptions/listen with that filter, envelope included.
std::string listen_params(const ListenFilter& filter, const Envelope& envelope);
// A capability flag of a capabilities object: `path` such as "resources.subscribe" or
// "logging" (present as any value but false/null).
bool has_capability(std::string_view capabilities_json, std::string_view path);
// params of a notification from a listen stream without _meta subscriptionId (and without _meta
// when nothing else is in it): what a 2025 client gets. Empty when `params` is null.
std::string without_subscription_id(const rapidjson::Value* params);

// ---- the ingress: admitting modern requests ---------------------------------------------------

// A request refused before it runs: the error to send with the request's id, and the HTTP status
// of that answer (stdio carries only the error).
struct Refusal {
  jsonrpc::Error error;
  unsigned status = 400;
};

// The checks a modern request (one that claims_modern) passes before it runs, in the order the
// v2 SDK applies them (conformance server-stateless depends on it):
//   1. the envelope (basic/index §_meta): missing _meta, a missing required key or a member of
//      the wrong type → 400 / -32602;
//   2. headers that are present but disagree with the body (streamable-http §Server Validation):
//      MCP-Protocol-Version ≠ the envelope's version, Mcp-Method ≠ the method → 400 / -32020
//      (so a body naming v999.0.0 under a 2026-07-28 header is a mismatch, not -32022);
//   3. the version (basic/versioning §Protocol Version Negotiation): not one the bridge serves →
//      400 / -32022 with data.supported and data.requested;
//   4. every required header (MCP-Protocol-Version, Mcp-Method, Mcp-Name) present and valid →
//      400 / -32020;
//   5. the method is in the revision's request registry; a removed or unknown method → 404 /
//      -32601 (streamable-http §Protocol Version Header).
// `headers` is null on stdio, which has none (steps 2 and 4 are skipped).
Expected<Envelope, Refusal> admit(const jsonrpc::Message& request, const Headers* headers);

// The same for a notification that claims_modern: envelope, then the MCP-Protocol-Version header
// against it, then the version. Notifications need no Mcp-Method (streamable-http §Sending
// Messages, Note). nullopt: accepted (HTTP 202).
std::optional<Refusal> admit_notification(const jsonrpc::Message& notification,
                                          const Headers* headers);

// What one HTTP POST body is (as the v2 SDK's classifyInboundRequest decides):
//   - a batch with any element that claims modern → refused, 400 / -32600 (a batch is legacy
//     otherwise);
//   - a single message that claims modern → modern, whatever Mcp-Session-Id says;
//   - an `initialize` without the claim under a modern MCP-Protocol-Version header → 400 /
//     -32020; another request without the claim under such a header → 400 / -32602 (the
//     envelope is missing); a notification without the claim under such a header → modern (202);
//   - anything else → legacy (the 2025 session path, unchanged).
enum class PostEra { legacy, modern, refused };
struct PostClass {
  PostEra era = PostEra::legacy;
  std::optional<Refusal> refusal;  // set when refused
};
PostClass classify_post(const jsonrpc::Body& body,
                        const std::optional<std::string>& protocol_version_header);

// A JSON value with every object's members sorted by name, without whitespace: equal JSON
// values give equal texts (pool keys, digests of request params).
std::string canonical_json(const rapidjson::Value& v);
std::string canonical_json(std::string_view json);

// `caps_json` (a ClientCapabilities object) declares `capability` ("sampling", …).
bool declares_capability(std::string_view caps_json, std::string_view capability);

// -32021 (basic/index §_meta, schema MissingRequiredClientCapabilityError): data
// {"requiredCapabilities": {capability: {}}}; HTTP 400.
jsonrpc::Error missing_client_capability(std::string_view capability, std::string_view detail);
// A requestState the server cannot accept (basic/patterns/mrtr §Server Requirements 4–5): the
// v2 SDK's -32602 "Invalid or expired requestState", data {"reason": "invalid_request_state"},
// in-band (HTTP 200).
jsonrpc::Error invalid_request_state();
// A 2025-era error from an MQTT server as a 2026 client expects it: -32002 (resource not found,
// which 2026 implementations MUST NOT emit, basic/index §Error Codes) becomes -32602 with
// data.uri when `uri` is given (conformance sep-2164-resource-not-found); anything else as is.
jsonrpc::Error modern_error(const jsonrpc::Error& upstream, std::string_view uri = {});

// ---- the ingress: Mcp-Param-{Name} headers (SEP-2243) -------------------------------------------

// A tools/call argument mirrored into a header: the property of the tool's inputSchema whose
// "x-mcp-header" annotation names the header (basic/transports/streamable-http §Standard
// Request Headers, Mcp-Param-{Name}).
struct ParamHeader {
  std::string argument;
  std::string header;  // the {Name} part, lowercase (header names are case-insensitive)
};
// The annotated top-level properties of each tool of a tools/list result.
std::vector<std::pair<std::string, std::vector<ParamHeader>>> param_headers_of(
    const rapidjson::Value& tools_list_result);
// Checks a tools/call against its tool's annotations: an argument that is present and not null
// needs its header (`sent`: lowercase {Name} → value as received), whose value — after the
// `=?base64?…?=` form is decoded, strictly — equals the argument (a string as is, a number or
// boolean as its JSON text). Anything else is -32020 (HTTP 400).
std::optional<jsonrpc::Error> check_param_headers(
    const jsonrpc::Message& call, const std::vector<ParamHeader>& params,
    const std::vector<std::pair<std::string, std::string>>& sent);

// ---- the egress: Mcp-Param-{Name} headers toward a 2026-07-28 server (SEP-2243) ----------------

// The headers a client sends with a tools/call whose tool has these annotations: for each
// annotated argument present and not null, ("Mcp-Param-" {Name}, the value — a string as is, a
// number or boolean as its JSON text — encoded as encode_header_value does). Objects and arrays
// are not mirrored.
std::vector<std::pair<std::string, std::string>> param_header_values(
    const jsonrpc::Message& call, const std::vector<ParamHeader>& params);

// What a client knows of one server's x-mcp-header annotations, from its tools/list results:
// shared by the sessions the egress holds with that server (a tools/call may come on a session
// that never listed the tools). Thread-safe.
class ToolHeaders {
 public:
  // One page of a tools/list result; `complete`: the listing it belongs to has no more pages.
  void learn(const rapidjson::Value& tools_list_result, bool complete);
  // A tool's annotated arguments (none when unknown).
  std::vector<ParamHeader> of(const std::string& tool) const;
  // A whole listing was seen since the last forget().
  bool listed() const;
  // The tool list changed (notifications/tools/list_changed): learn it again.
  void forget();

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<ParamHeader>> tools_;
  bool listed_ = false;
};

}  // namespace mcpmqtt::modern

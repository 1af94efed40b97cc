#include "bridge/modern/protocol.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace mcpmqtt::modern {

namespace {

using rapidjson::Value;

constexpr std::array<std::string_view, 8> kLogLevels = {"debug", "info",     "notice", "warning",
                                                        "error", "critical", "alert",  "emergency"};

const Value* member(const Value* v, const char* name) {
  if (!v || !v->IsObject()) return nullptr;
  auto it = v->FindMember(name);
  return it == v->MemberEnd() ? nullptr : &it->value;
}

const Value* meta_of(const jsonrpc::Message& m) {
  return member(m.params(), "_meta");
}

std::string serialize(const Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return {buf.GetString(), buf.GetSize()};
}

jsonrpc::Error make_envelope_error(std::string_view key, std::string_view problem) {
  jsonrpc::Error e;
  e.code = jsonrpc::code::invalid_params;
  e.message = "Invalid _meta envelope for protocol revision " + std::string(kVersion) + ": " +
              std::string(key) + ": " + std::string(problem);
  e.data_json = R"({"envelope":{"key":)" + jsonrpc::quote(key) + R"(,"problem":)" +
                jsonrpc::quote(problem) + "}}";
  return e;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

constexpr std::string_view kSentinelOpen = "=?base64?";
constexpr std::string_view kSentinelClose = "?=";
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                       (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < in.size()) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16;
    const bool two = i + 1 < in.size();
    if (two) v |= static_cast<unsigned char>(in[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += two ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Strict: a multiple of four characters, padding only at the end, no stray bits.
std::optional<std::string> unbase64(std::string_view in) {
  if (in.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (std::size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + k];
      if (c == '=' && last && k >= 2) {
        ++pad;
        v[k] = 0;
        continue;
      }
      if (pad) return std::nullopt;  // data after padding
      v[k] = base64_value(c);
      if (v[k] < 0) return std::nullopt;
    }
    const unsigned bits = (static_cast<unsigned>(v[0]) << 18) |
                          (static_cast<unsigned>(v[1]) << 12) | (static_cast<unsigned>(v[2]) << 6) |
                          static_cast<unsigned>(v[3]);
    out += static_cast<char>((bits >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((bits >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(bits & 0xff);
    // The bits the padding leaves unused must be zero (canonical encoding).
    if ((pad == 1 && (bits & 0xff) != 0) || (pad == 2 && (bits & 0xffff) != 0)) return std::nullopt;
  }
  return out;
}

bool plain_header_value(std::string_view v) {
  if (v.empty()) return true;
  if (v.front() == ' ' || v.back() == ' ') return false;
  if (v.substr(0, kSentinelOpen.size()) == kSentinelOpen) return false;
  return std::all_of(v.begin(), v.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u <= 0x7e;
  });
}

template <std::size_t N>
bool one_of(std::string_view s, const std::array<std::string_view, N>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

}  // namespace

const std::vector<std::string>& supported_versions() {
  static const std::vector<std::string> v = {std::string(kVersion)};
  return v;
}

bool is_supported_version(std::string_view version) {
  const auto& v = supported_versions();
  return std::find(v.begin(), v.end(), version) != v.end();
}

bool is_modern_version_string(std::string_view v) {
  if (v.size() != 10 || v[4] != '-' || v[7] != '-') return false;
  for (std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (!is_digit(v[i])) return false;
  return v >= kVersion;
}

bool claims_modern(const jsonrpc::Message& m) {
  return member(meta_of(m), key::protocol_version) != nullptr;
}

std::optional<int> log_level_rank(std::string_view level) {
  for (std::size_t i = 0; i < kLogLevels.size(); ++i)
    if (kLogLevels[i] == level) return static_cast<int>(i);
  return std::nullopt;
}

Expected<Envelope, jsonrpc::Error> read_envelope(const jsonrpc::Message& m) {
  const Value* meta = meta_of(m);
  if (!meta || !meta->IsObject()) return unexpected(make_envelope_error("_meta", "missing"));
  Envelope e;
  const Value* version = member(meta, key::protocol_version);
  if (!version) return unexpected(make_envelope_error(key::protocol_version, "missing"));
  if (!version->IsString())
    return unexpected(make_envelope_error(key::protocol_version, "invalid"));
  e.protocol_version.assign(version->GetString(), version->GetStringLength());
  const Value* caps = member(meta, key::client_capabilities);
  if (!caps) return unexpected(make_envelope_error(key::client_capabilities, "missing"));
  if (!caps->IsObject())
    return unexpected(make_envelope_error(key::client_capabilities, "invalid"));
  e.client_capabilities_json = serialize(*caps);
  if (const Value* info = member(meta, key::client_info)) {
    if (!info->IsObject()) return unexpected(make_envelope_error(key::client_info, "invalid"));
    e.client_info_json = serialize(*info);
  }
  if (const Value* level = member(meta, key::log_level)) {
    if (!level->IsString() ||
        !log_level_rank(std::string_view(level->GetString(), level->GetStringLength())))
      return unexpected(make_envelope_error(key::log_level, "invalid"));
    e.log_level = std::string(level->GetString(), level->GetStringLength());
  }
  e.progress_token = m.progress_token();
  return e;
}

std::optional<std::string> name_of(const jsonrpc::Message& m) {
  const char* field = nullptr;
  if (m.method() == "tools/call" || m.method() == "prompts/get")
    field = "name";
  else if (m.method() == "resources/read")
    field = "uri";
  if (!field) return std::nullopt;
  const Value* v = member(m.params(), field);
  if (!v || !v->IsString()) return std::nullopt;
  return std::string(v->GetString(), v->GetStringLength());
}

std::string encode_header_value(std::string_view value) {
  if (plain_header_value(value)) return std::string(value);
  return std::string(kSentinelOpen) + base64(value) + std::string(kSentinelClose);
}

std::optional<std::string> decode_header_value(std::string_view raw) {
  const auto v = trim(raw);
  if (v.size() >= kSentinelOpen.size() + kSentinelClose.size() &&
      v.substr(0, kSentinelOpen.size()) == kSentinelOpen &&
      v.substr(v.size() - kSentinelClose.size()) == kSentinelClose) {
    return unbase64(
        v.substr(kSentinelOpen.size(), v.size() - kSentinelOpen.size() - kSentinelClose.size()));
  }
  return std::string(v);
}

std::optional<jsonrpc::Error> check_headers(const jsonrpc::Message& m, const Envelope& envelope,
                                            const Headers& h) {
  auto shown = [](const std::optional<std::string>& v) {
    return v ? *v : std::string("(missing)");
  };
  if (!h.protocol_version)
    return header_mismatch(shown(h.protocol_version),
                           std::string(header::protocol_version) + " is required");
  if (std::string(trim(*h.protocol_version)) != envelope.protocol_version)
    return header_mismatch(*h.protocol_version, std::string(header::protocol_version) + " " +
                                                    std::string(trim(*h.protocol_version)) +
                                                    " differs from _meta " + key::protocol_version +
                                                    " " + envelope.protocol_version);
  if (!m.is_request()) return std::nullopt;
  if (!h.method)
    return header_mismatch(shown(h.method), std::string(header::method) + " is required");
  const auto method = decode_header_value(*h.method);
  if (!method || *method != m.method())
    return header_mismatch(*h.method,
                           std::string(header::method) + " does not name the method " + m.method());
  if (auto name = name_of(m)) {
    if (!h.name)
      return header_mismatch(shown(h.name),
                             std::string(header::name) + " is required for " + m.method());
    const auto sent = decode_header_value(*h.name);
    if (!sent)
      return header_mismatch(*h.name,
                             std::string(header::name) + " is not a valid =?base64?…?= value");
    if (*sent != *name)
      return header_mismatch(*h.name, std::string(header::name) + " differs from the body's " +
                                          (m.method() == "resources/read" ? "uri" : "name"));
  }
  return std::nullopt;
}

bool is_modern_request_method(std::string_view method) {
  static constexpr std::array<std::string_view, 12> kMethods = {
      "tools/call", "tools/list", "prompts/get", "prompts/list", "resources/list",
      "resources/templates/list", "resources/read", "completion/complete", "server/discover",
      "subscriptions/listen",
      // SEP-1803 §Out-of-Band: webhook registration, an extension the server (or the bridge for
      // it, events.webhooks) answers; sessionless, like every request of the revision.
      "resources/subscriptions/register", "resources/subscriptions/deregister"};
  return one_of(method, kMethods);
}

bool is_removed_method(std::string_view method) {
  static constexpr std::array<std::string_view, 11> kRemoved = {
      "initialize",
      "notifications/initialized",
      "ping",
      "logging/setLevel",
      "resources/subscribe",
      "resources/unsubscribe",
      "notifications/roots/list_changed",
      "notifications/elicitation/complete",
      "sampling/createMessage",
      "elicitation/create",
      "roots/list"};
  return one_of(method, kRemoved) || method.substr(0, 6) == "tasks/";
}

bool is_cacheable_method(std::string_view method) {
  static constexpr std::array<std::string_view, 6> kCacheable = {
      "tools/list",     "prompts/list",   "resources/list", "resources/templates/list",
      "resources/read", "server/discover"};
  return one_of(method, kCacheable);
}

bool allows_input_required(std::string_view method) {
  return method == "tools/call" || method == "prompts/get" || method == "resources/read";
}

std::string_view capability_for_input(std::string_view method) {
  if (method == "elicitation/create") return "elicitation";
  if (method == "sampling/createMessage") return "sampling";
  if (method == "roots/list") return "roots";
  return {};
}

jsonrpc::Error unsupported_version(std::string_view requested) {
  jsonrpc::Error e;
  e.code = code::unsupported_version;
  e.message = requested.empty()
                  ? "Unsupported protocol version: the request did not name a protocol version"
                  : "Unsupported protocol version: " + std::string(requested);
  std::string supported;
  for (const auto& v : supported_versions())
    supported += (supported.empty() ? "" : ",") + jsonrpc::quote(v);
  e.data_json = R"({"supported":[)" + supported + "]" +
                (requested.empty() ? "" : R"(,"requested":)" + jsonrpc::quote(requested)) + "}";
  return e;
}

jsonrpc::Error header_mismatch(std::string_view header_value, std::string_view detail) {
  jsonrpc::Error e;
  e.code = code::header_mismatch;
  e.message = "Bad Request: the request headers and body disagree: " + std::string(detail);
  e.data_json = R"({"mismatch":{"header":)" + jsonrpc::quote(header_value) + R"(,"body":)" +
                jsonrpc::quote(detail) + "}}";
  return e;
}

jsonrpc::Error removed_method(std::string_view method) {
  return {jsonrpc::code::method_not_found,
          "Method not found: " + std::string(method) + " is not part of protocol revision " +
              std::string(kVersion),
          {}};
}

unsigned http_status_for(int error_code, bool envelope_error) {
  if (envelope_error || error_code == code::header_mismatch ||
      error_code == code::missing_client_capability || error_code == code::unsupported_version)
    return 400;
  if (error_code == jsonrpc::code::method_not_found) return 404;
  return 200;
}

std::string complete_result(const rapidjson::Value& result, std::string_view method,
                            std::string_view server_info_json) {
  if (!result.IsObject()) return jsonrpc::to_json(result);
  rapidjson::Document d;
  d.CopyFrom(result, d.GetAllocator());
  auto& a = d.GetAllocator();
  if (!d.HasMember("resultType")) d.AddMember("resultType", "complete", a);
  const bool input_required = d["resultType"].IsString() &&
                              std::string_view(d["resultType"].GetString()) == "input_required";
  if (is_cacheable_method(method) && !input_required) {
    if (!d.HasMember("ttlMs")) d.AddMember("ttlMs", 0, a);
    if (!d.HasMember("cacheScope")) d.AddMember("cacheScope", "private", a);
  }
  if (!server_info_json.empty()) {
    rapidjson::Document info;
    info.Parse(server_info_json.data(), server_info_json.size());
    if (!info.HasParseError()) {
      if (!d.HasMember("_meta")) d.AddMember("_meta", Value(rapidjson::kObjectType), a);
      auto& meta = d["_meta"];
      if (meta.IsObject() && !meta.HasMember(key::server_info))
        meta.AddMember(Value(key::server_info, a), Value(info, a), a);
    }
  }
  return serialize(d);
}

std::string with_envelope(std::string_view params_json, const Envelope& e) {
  rapidjson::Document d;
  if (params_json.empty())
    d.SetObject();
  else
    d.Parse(params_json.data(), params_json.size());
  if (d.HasParseError() || !d.IsObject()) d.SetObject();
  auto& a = d.GetAllocator();
  if (!d.HasMember("_meta") || !d["_meta"].IsObject()) {
    d.RemoveMember("_meta");
    d.AddMember("_meta", Value(rapidjson::kObjectType), a);
  }
  auto& meta = d["_meta"];
  auto add_json = [&](const char* k, const std::string& json) {
    if (json.empty() || meta.HasMember(k)) return;
    rapidjson::Document v;
    v.Parse(json.data(), json.size());
    if (v.HasParseError()) return;
    meta.AddMember(Value(k, a), Value(v, a), a);
  };
  if (!meta.HasMember(key::protocol_version))
    meta.AddMember(Value(key::protocol_version, a), Value(e.protocol_version.c_str(), a), a);
  add_json(key::client_capabilities,
           e.client_capabilities_json.empty() ? "{}" : e.client_capabilities_json);
  add_json(key::client_info, e.client_info_json);
  if (e.log_level && !meta.HasMember(key::log_level))
    meta.AddMember(Value(key::log_level, a), Value(e.log_level->c_str(), a), a);
  return serialize(d);
}

std::string without_envelope(const rapidjson::Value* params) {
  if (!params) return {};
  rapidjson::Document d;
  d.CopyFrom(*params, d.GetAllocator());
  if (!d.IsObject()) return serialize(d);
  // Every occurrence goes: a text may repeat a name (RFC 8259 §4 only says SHOULD be unique),
  // and the envelope read is the first one's; none of the others may pass on as if it were.
  for (auto m = d.MemberBegin(); m != d.MemberEnd();) {
    if (m->name == "_meta" && m->value.IsObject()) {
      for (const char* k :
           {key::protocol_version, key::client_capabilities, key::client_info, key::log_level})
        while (m->value.RemoveMember(k)) {
        }
      if (m->value.MemberCount() == 0) {
        m = d.EraseMember(m);
        continue;
      }
    }
    ++m;
  }
  return serialize(d);
}

// ---- egress: a 2026-07-28 server behind a 2025 session ----------------------------------------

namespace {

std::string string_of(const Value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

// Parses an object text; an empty or malformed text gives an empty object.
void parse_object(rapidjson::Document& d, std::string_view json) {
  if (!json.empty()) d.Parse(json.data(), json.size());
  if (json.empty() || d.HasParseError() || !d.IsObject()) d.SetObject();
}

bool truthy(const Value* v) {
  return v && !v->IsNull() && !(v->IsBool() && !v->GetBool());
}

}  // namespace

const std::vector<std::string>& legacy_versions() {
  static const std::vector<std::string> v = {"2025-11-25", "2025-06-18", "2025-03-26",
                                             "2024-11-05"};
  return v;
}

std::string legacy_version_for(std::string_view requested) {
  const auto& v = legacy_versions();
  if (std::find(v.begin(), v.end(), requested) != v.end()) return std::string(requested);
  return v.front();
}

Expected<Discovered, std::string> read_discover_result(const Value& result) {
  if (!result.IsObject()) return unexpected(std::string("the result is not an object"));
  Discovered d;
  const Value* versions = member(&result, "supportedVersions");
  if (!versions || !versions->IsArray())
    return unexpected(std::string("supportedVersions is missing or not an array"));
  for (const auto& v : versions->GetArray()) {
    if (!v.IsString()) return unexpected(std::string("supportedVersions holds a non-string"));
    d.supported_versions.push_back(string_of(v));
  }
  const Value* caps = member(&result, "capabilities");
  if (!caps || !caps->IsObject())
    return unexpected(std::string("capabilities is missing or not an object"));
  d.capabilities_json = serialize(*caps);
  if (const Value* i = member(&result, "instructions"); i && i->IsString())
    d.instructions = string_of(*i);
  const Value* info = member(member(&result, "_meta"), key::server_info);
  if (!info || !info->IsObject()) info = member(&result, "serverInfo");
  if (info && info->IsObject()) d.server_info_json = serialize(*info);
  return d;
}

std::string common_modern_version(const Discovered& discovered) {
  for (const auto& mine : supported_versions()) {
    const auto& theirs = discovered.supported_versions;
    if (std::find(theirs.begin(), theirs.end(), mine) != theirs.end()) return mine;
  }
  return {};
}

std::string legacy_initialize_result(const Discovered& discovered, std::string_view requested,
                                     std::string_view fallback_server_info_json) {
  const std::string& info = discovered.server_info_json.empty()
                                ? std::string(fallback_server_info_json)
                                : discovered.server_info_json;
  std::string out = R"({"protocolVersion":)" + jsonrpc::quote(legacy_version_for(requested)) +
                    R"(,"capabilities":)" +
                    (discovered.capabilities_json.empty() ? "{}" : discovered.capabilities_json) +
                    R"(,"serverInfo":)" + (info.empty() ? "{}" : info);
  if (discovered.instructions)
    out += R"(,"instructions":)" + jsonrpc::quote(*discovered.instructions);
  return out + "}";
}

bool is_input_required(const Value& result) {
  const Value* t = member(&result, "resultType");
  return t && t->IsString() &&
         std::string_view(t->GetString(), t->GetStringLength()) == "input_required";
}

Expected<InputRequired, std::string> read_input_required(const Value& result,
                                                         std::size_t max_requests) {
  InputRequired out;
  const Value* requests = member(&result, "inputRequests");
  const Value* state = member(&result, "requestState");
  if (requests && !requests->IsNull()) {
    if (!requests->IsObject()) return unexpected(std::string("inputRequests is not an object"));
    if (requests->MemberCount() > max_requests)
      return unexpected("inputRequests holds " + std::to_string(requests->MemberCount()) +
                        " requests, more than the " + std::to_string(max_requests) +
                        " the bridge takes in one round");
    for (auto it = requests->MemberBegin(); it != requests->MemberEnd(); ++it) {
      const std::string k = string_of(it->name);
      const Value& r = it->value;
      const Value* method = member(&r, "method");
      if (!r.IsObject() || !method || !method->IsString())
        return unexpected("inputRequests." + k + " is not a request ({method, params})");
      const Value* params = member(&r, "params");
      if (params && !params->IsNull() && !params->IsObject())
        return unexpected("inputRequests." + k + ".params is not an object");
      out.requests.push_back(
          {k, string_of(*method), params && params->IsObject() ? serialize(*params) : ""});
    }
  }
  if (state && !state->IsNull()) {
    if (!state->IsString()) return unexpected(std::string("requestState is not a string"));
    out.request_state = string_of(*state);
  }
  // mrtr §Server Requirements 6: at least one of the two.
  if (out.requests.empty() && !out.request_state)
    return unexpected(std::string("it has neither inputRequests nor requestState"));
  return out;
}

std::string input_request_params(std::string_view params_json, std::string_view key,
                                 std::size_t round_size) {
  rapidjson::Document d;
  parse_object(d, params_json);
  auto& a = d.GetAllocator();
  if (!d.HasMember("_meta") || !d["_meta"].IsObject()) {
    d.RemoveMember("_meta");
    d.AddMember("_meta", Value(rapidjson::kObjectType), a);
  }
  auto& meta = d["_meta"];
  meta.RemoveMember(bridge_key::input_key);
  meta.RemoveMember(bridge_key::input_round);
  meta.AddMember(Value(bridge_key::input_key, a),
                 Value(key.data(), static_cast<rapidjson::SizeType>(key.size()), a), a);
  Value round(rapidjson::kObjectType);
  round.AddMember("size", static_cast<std::uint64_t>(round_size), a);
  meta.AddMember(Value(bridge_key::input_round, a), round, a);
  return serialize(d);
}

std::string request_params(const Value* original, const Envelope& envelope,
                           const std::vector<InputResponse>* responses,
                           const std::optional<std::string>& request_state) {
  if (!responses) {
    return with_envelope(original && original->IsObject() ? serialize(*original) : std::string(),
                         envelope);
  }
  rapidjson::Document d;
  if (original && original->IsObject())
    d.CopyFrom(*original, d.GetAllocator());
  else
    d.SetObject();
  auto& a = d.GetAllocator();
  d.RemoveMember("inputResponses");
  d.RemoveMember("requestState");
  Value answers(rapidjson::kObjectType);
  for (const auto& r : *responses) {
    rapidjson::Document v;
    v.Parse(r.result_json.data(), r.result_json.size());
    if (v.HasParseError()) v.SetObject();
    answers.AddMember(Value(r.key.data(), static_cast<rapidjson::SizeType>(r.key.size()), a),
                      Value(v, a), a);
  }
  d.AddMember("inputResponses", answers, a);
  // mrtr §Client Requirements 2: echoed exactly; never added when the server gave none. The
  // string's value is copied, so the server reads back the very bytes it wrote.
  if (request_state)
    d.AddMember(
        "requestState",
        Value(request_state->data(), static_cast<rapidjson::SizeType>(request_state->size()), a),
        a);
  return with_envelope(serialize(d), envelope);
}

ListenFilter honoured_filter(std::string_view capabilities_json,
                             const std::vector<std::string>& uris) {
  rapidjson::Document caps;
  parse_object(caps, capabilities_json);
  auto flag = [&](const char* cap, const char* name) {
    const Value* v = member(member(&caps, cap), name);
    return v && v->IsBool() && v->GetBool();
  };
  ListenFilter f;
  f.tools_list_changed = flag("tools", "listChanged");
  f.prompts_list_changed = flag("prompts", "listChanged");
  f.resources_list_changed = flag("resources", "listChanged");
  if (flag("resources", "subscribe")) f.resource_subscriptions = uris;
  return f;
}

std::string listen_params(const ListenFilter& f, const Envelope& envelope) {
  std::string n;
  auto add = [&](const char* k, bool on) {
    if (on) n += std::string(n.empty() ? "" : ",") + "\"" + k + "\":true";
  };
  add("toolsListChanged", f.tools_list_changed);
  add("promptsListChanged", f.prompts_list_changed);
  add("resourcesListChanged", f.resources_list_changed);
  if (!f.resource_subscriptions.empty()) {
    std::string list;
    for (const auto& u : f.resource_subscriptions)
      list += (list.empty() ? "" : ",") + jsonrpc::quote(u);
    n += std::string(n.empty() ? "" : ",") + R"("resourceSubscriptions":[)" + list + "]";
  }
  return with_envelope(R"({"notifications":{)" + n + "}}", envelope);
}

bool has_capability(std::string_view capabilities_json, std::string_view path) {
  rapidjson::Document caps;
  parse_object(caps, capabilities_json);
  const Value* v = &caps;
  std::size_t start = 0;
  while (v) {
    const auto dot = path.find('.', start);
    const std::string part(
        path.substr(start, dot == std::string_view::npos ? path.npos : dot - start));
    v = member(v, part.c_str());
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return truthy(v);
}

std::string without_subscription_id(const Value* params) {
  if (!params) return {};
  rapidjson::Document d;
  d.CopyFrom(*params, d.GetAllocator());
  if (d.IsObject() && d.HasMember("_meta") && d["_meta"].IsObject()) {
    d["_meta"].RemoveMember(key::subscription_id);
    if (d["_meta"].MemberCount() == 0) d.RemoveMember("_meta");
  }
  return serialize(d);
}

// ---- the ingress: admitting modern requests --------------------------------------------------

namespace {

Refusal refusal(jsonrpc::Error e, unsigned status) {
  return Refusal{std::move(e), status};
}

// Step 2 of admit(): headers that are there and disagree with the body.
std::optional<jsonrpc::Error> present_header_mismatch(const jsonrpc::Message& m,
                                                      const Envelope& envelope, const Headers& h) {
  if (h.protocol_version) {
    const std::string sent(trim(*h.protocol_version));
    if (sent != envelope.protocol_version)
      return header_mismatch(*h.protocol_version, "the body envelope names protocol version " +
                                                      envelope.protocol_version + " but the " +
                                                      header::protocol_version + " header names " +
                                                      sent);
  }
  if (m.is_request() && h.method) {
    const auto method = decode_header_value(*h.method);
    if (!method || *method != m.method())
      return header_mismatch(*h.method, "the body names method " + m.method() + " but the " +
                                            header::method + " header names " +
                                            std::string(trim(*h.method)));
  }
  return std::nullopt;
}

void write_canonical(const Value& v, rapidjson::Writer<rapidjson::StringBuffer>& w) {
  if (v.IsObject()) {
    std::vector<const Value::Member*> members;
    members.reserve(v.MemberCount());
    for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it)
      members.push_back(&*it);
    std::sort(members.begin(), members.end(), [](const auto* a, const auto* b) {
      return std::string_view(a->name.GetString(), a->name.GetStringLength()) <
             std::string_view(b->name.GetString(), b->name.GetStringLength());
    });
    w.StartObject();
    for (const auto* m : members) {
      w.Key(m->name.GetString(), m->name.GetStringLength());
      write_canonical(m->value, w);
    }
    w.EndObject();
    return;
  }
  if (v.IsArray()) {
    w.StartArray();
    for (const auto& e : v.GetArray())
      write_canonical(e, w);
    w.EndArray();
    return;
  }
  v.Accept(w);
}

}  // namespace

Expected<Envelope, Refusal> admit(const jsonrpc::Message& m, const Headers* headers) {
  auto envelope = read_envelope(m);
  if (!envelope) return unexpected(refusal(envelope.error(), 400));
  if (headers) {
    if (auto e = present_header_mismatch(m, *envelope, *headers))
      return unexpected(refusal(*e, 400));
  }
  if (!is_supported_version(envelope->protocol_version))
    return unexpected(refusal(unsupported_version(envelope->protocol_version), 400));
  if (headers) {
    if (auto e = check_headers(m, *envelope, *headers)) return unexpected(refusal(*e, 400));
  }
  if (!is_modern_request_method(m.method()))
    return unexpected(refusal(removed_method(m.method()), 404));
  return std::move(*envelope);
}

std::optional<Refusal> admit_notification(const jsonrpc::Message& m, const Headers* headers) {
  auto envelope = read_envelope(m);
  if (!envelope) return refusal(envelope.error(), 400);
  if (headers) {
    if (auto e = present_header_mismatch(m, *envelope, *headers)) return refusal(*e, 400);
  }
  if (!is_supported_version(envelope->protocol_version))
    return refusal(unsupported_version(envelope->protocol_version), 400);
  return std::nullopt;
}

PostClass classify_post(const jsonrpc::Body& body,
                        const std::optional<std::string>& protocol_version_header) {
  PostClass out;
  if (body.batch) {
    for (const auto& m : body.messages) {
      if (claims_modern(m)) {
        out.era = PostEra::refused;
        out.refusal = refusal({jsonrpc::code::invalid_request,
                               "Bad Request: JSON-RPC batches may not contain requests for "
                               "protocol revision " +
                                   std::string(kVersion) + " or later",
                               {}},
                              400);
        return out;
      }
    }
    return out;
  }
  if (body.messages.size() != 1) return out;
  const auto& m = body.messages.front();
  if (claims_modern(m)) {
    out.era = PostEra::modern;
    return out;
  }
  const std::string header =
      protocol_version_header ? std::string(trim(*protocol_version_header)) : std::string();
  if (!is_modern_version_string(header)) return out;
  if (m.is_notification()) {
    out.era = PostEra::modern;
    return out;
  }
  if (!m.is_request()) return out;  // a response: only a 2025 session has asked anything
  out.era = PostEra::refused;
  if (m.method() == "initialize") {
    out.refusal = refusal(
        header_mismatch(header, "the " + std::string(header::protocol_version) + " header names " +
                                    header +
                                    " but initialize belongs to the 2025 revisions and carries "
                                    "no per-request envelope"),
        400);
    return out;
  }
  std::string missing;
  const Value* meta = meta_of(m);
  if (!meta || !meta->IsObject()) {
    missing = R"("_meta")";
  } else {
    for (const char* k : {key::protocol_version, key::client_capabilities})
      if (!member(meta, k)) missing += (missing.empty() ? "" : ",") + jsonrpc::quote(k);
  }
  std::string shown = missing;
  shown.erase(std::remove(shown.begin(), shown.end(), '"'), shown.end());
  out.refusal = refusal(
      {jsonrpc::code::invalid_params,
       "Invalid params: the " + std::string(header::protocol_version) +
           " header names protocol revision " + header +
           ", but the request is missing the required per-request envelope key(s): " + shown,
       R"({"envelope":{"missing":[)" + missing + "]}}"},
      400);
  return out;
}

std::string canonical_json(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  write_canonical(v, w);
  return {buf.GetString(), buf.GetSize()};
}

std::string canonical_json(std::string_view json) {
  rapidjson::Document d;
  d.Parse(json.data(), json.size());
  if (d.HasParseError()) return std::string(json);
  return canonical_json(static_cast<const Value&>(d));
}

bool declares_capability(std::string_view caps_json, std::string_view capability) {
  rapidjson::Document d;
  d.Parse(caps_json.data(), caps_json.size());
  if (d.HasParseError() || !d.IsObject()) return false;
  const auto it = d.FindMember(Value(rapidjson::StringRef(
      capability.data(), static_cast<rapidjson::SizeType>(capability.size()))));
  return it != d.MemberEnd() && it->value.IsObject();
}

jsonrpc::Error missing_client_capability(std::string_view capability, std::string_view detail) {
  jsonrpc::Error e;
  e.code = code::missing_client_capability;
  e.message =
      "Missing required client capability " + std::string(capability) + ": " + std::string(detail);
  e.data_json = R"({"requiredCapabilities":{)" + jsonrpc::quote(capability) + ":{}}}";
  return e;
}

jsonrpc::Error invalid_request_state() {
  return {jsonrpc::code::invalid_params, "Invalid or expired requestState",
          R"({"reason":"invalid_request_state"})"};
}

jsonrpc::Error modern_error(const jsonrpc::Error& upstream, std::string_view uri) {
  if (upstream.code != code::legacy_resource_not_found) return upstream;
  jsonrpc::Error e = upstream;
  e.code = jsonrpc::code::invalid_params;
  if (!uri.empty()) {
    rapidjson::Document d;
    if (!upstream.data_json.empty()) d.Parse(upstream.data_json.data(), upstream.data_json.size());
    if (upstream.data_json.empty() || d.HasParseError() || !d.IsObject()) d.SetObject();
    if (!d.HasMember("uri"))
      d.AddMember("uri",
                  Value(uri.data(), static_cast<rapidjson::SizeType>(uri.size()), d.GetAllocator()),
                  d.GetAllocator());
    e.data_json = serialize(d);
  }
  return e;
}

// ---- the ingress: Mcp-Param-{Name} headers -----------------------------------------------------

std::vector<std::pair<std::string, std::vector<ParamHeader>>> param_headers_of(
    const rapidjson::Value& result) {
  std::vector<std::pair<std::string, std::vector<ParamHeader>>> out;
  const Value* tools = member(&result, "tools");
  if (!tools || !tools->IsArray()) return out;
  for (const auto& tool : tools->GetArray()) {
    const Value* name = member(&tool, "name");
    if (!name || !name->IsString()) continue;
    std::vector<ParamHeader> params;
    const Value* props = member(member(&tool, "inputSchema"), "properties");
    if (props && props->IsObject()) {
      for (auto it = props->MemberBegin(); it != props->MemberEnd(); ++it) {
        const Value* header = member(&it->value, "x-mcp-header");
        if (!header || !header->IsString() || header->GetStringLength() == 0) continue;
        std::string lower(header->GetString(), header->GetStringLength());
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        params.push_back({std::string(it->name.GetString(), it->name.GetStringLength()), lower});
      }
    }
    out.emplace_back(std::string(name->GetString(), name->GetStringLength()), std::move(params));
  }
  return out;
}

namespace {

// The text an annotated argument is mirrored as: a string as is, a number or boolean as its JSON
// text; nullopt when absent, null, an object or an array (only primitive values are mirrored).
std::optional<std::string> mirrored_text(const Value* value) {
  if (!value || value->IsNull()) return std::nullopt;
  if (value->IsString()) return std::string(value->GetString(), value->GetStringLength());
  if (value->IsNumber() || value->IsBool()) return serialize(*value);
  return std::nullopt;
}

}  // namespace

std::optional<jsonrpc::Error> check_param_headers(
    const jsonrpc::Message& call, const std::vector<ParamHeader>& params,
    const std::vector<std::pair<std::string, std::string>>& sent) {
  const Value* args = member(call.params(), "arguments");
  for (const auto& p : params) {
    const Value* value = member(args, p.argument.c_str());
    const auto mirrored = mirrored_text(value);
    if (!mirrored) continue;
    const std::string& expected = *mirrored;
    const std::string shown = "Mcp-Param-" + p.header;
    auto it =
        std::find_if(sent.begin(), sent.end(), [&](const auto& h) { return h.first == p.header; });
    if (it == sent.end())
      return header_mismatch("(missing)",
                             shown + " is missing but arguments." + p.argument + " is present");
    const auto decoded = decode_header_value(it->second);
    if (!decoded) return header_mismatch(it->second, shown + " carries an invalid Base64 value");
    bool same = *decoded == expected;
    if (!same && value->IsNumber()) {
      // 1.0 and 1 are the same number.
      rapidjson::Document d;
      d.Parse(decoded->data(), decoded->size());
      same = !d.HasParseError() && d.IsNumber() && d.GetDouble() == value->GetDouble();
    }
    if (!same)
      return header_mismatch(it->second, shown + " value does not match arguments." + p.argument);
  }
  return std::nullopt;
}

std::vector<std::pair<std::string, std::string>> param_header_values(
    const jsonrpc::Message& call, const std::vector<ParamHeader>& params) {
  // RFC 9110 §5.6.2: a header name is a token; an annotation that is not one names no header.
  auto token = [](std::string_view name) {
    return !name.empty() && std::all_of(name.begin(), name.end(), [](unsigned char c) {
      return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) !=
                                    std::string_view::npos;
    });
  };
  std::vector<std::pair<std::string, std::string>> out;
  const Value* args = member(call.params(), "arguments");
  for (const auto& p : params) {
    if (!token(p.header)) continue;
    if (const auto text = mirrored_text(member(args, p.argument.c_str())))
      out.emplace_back("Mcp-Param-" + p.header, encode_header_value(*text));
  }
  return out;
}

void ToolHeaders::learn(const rapidjson::Value& result, bool complete) {
  auto tools = param_headers_of(result);
  std::lock_guard lock(mu_);
  for (auto& [name, params] : tools)
    tools_[name] = std::move(params);
  if (complete) listed_ = true;
}

std::vector<ParamHeader> ToolHeaders::of(const std::string& tool) const {
  std::lock_guard lock(mu_);
  auto it = tools_.find(tool);
  return it == tools_.end() ? std::vector<ParamHeader>{} : it->second;
}

bool ToolHeaders::listed() const {
  std::lock_guard lock(mu_);
  return listed_;
}

void ToolHeaders::forget() {
  std::lock_guard lock(mu_);
  tools_.clear();
  listed_ = false;
}

}  // namespace mcpmqtt::modern

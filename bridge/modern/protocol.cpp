#include "bridge/modern/protocol.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "bridge/jsonrpc/json_access.hpp"

namespace mcpmqtt::modern {

namespace {

using jsonrpc::member;
using rapidjson::Value;

constexpr std::array<std::string_view, 8> kLogLevels = {"debug", "info",     "notice", "warning",
                                                        "error", "critical", "alert",  "emergency"};

const Value* meta_of(const jsonrpc::Message& m) {
  return member(m.params(), "_meta");
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
  // On every request the ingress routes: from the classifying pass, without a document.
  if (const auto known = m.meta_has_protocol_version()) return *known;
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
  e.client_capabilities_json = jsonrpc::to_json(*caps);
  if (const Value* info = member(meta, key::client_info)) {
    if (!info->IsObject()) return unexpected(make_envelope_error(key::client_info, "invalid"));
    e.client_info_json = jsonrpc::to_json(*info);
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

std::string_view trim_header_value(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

std::string encode_header_value(std::string_view value) {
  if (plain_header_value(value)) return std::string(value);
  return std::string(kSentinelOpen) + base64(value) + std::string(kSentinelClose);
}

std::optional<std::string> decode_header_value(std::string_view raw) {
  const auto v = trim_header_value(raw);
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
  if (std::string(trim_header_value(*h.protocol_version)) != envelope.protocol_version)
    return header_mismatch(*h.protocol_version,
                           std::string(header::protocol_version) + " " +
                               std::string(trim_header_value(*h.protocol_version)) +
                               " differs from _meta " + key::protocol_version + " " +
                               envelope.protocol_version);
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
  return jsonrpc::to_json(d);
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
  return jsonrpc::to_json(d);
}

std::string without_envelope(const rapidjson::Value* params) {
  if (!params) return {};
  rapidjson::Document d;
  d.CopyFrom(*params, d.GetAllocator());
  if (!d.IsObject()) return jsonrpc::to_json(d);
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
  return jsonrpc::to_json(d);
}

}  // namespace mcpmqtt::modern

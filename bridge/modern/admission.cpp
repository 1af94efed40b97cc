#include <algorithm>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "bridge/jsonrpc/json_access.hpp"
#include "bridge/modern/protocol.hpp"

namespace mcpmqtt::modern {

using jsonrpc::member;
using rapidjson::Value;

namespace {

Refusal refusal(jsonrpc::Error e, unsigned status) {
  return Refusal{std::move(e), status};
}

// Step 2 of admit(): headers that are there and disagree with the body.
std::optional<jsonrpc::Error> present_header_mismatch(const jsonrpc::Message& m,
                                                      const Envelope& envelope, const Headers& h) {
  if (h.protocol_version) {
    const std::string sent(trim_header_value(*h.protocol_version));
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
                                            std::string(trim_header_value(*h.method)));
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
  const std::string header = protocol_version_header
                                 ? std::string(trim_header_value(*protocol_version_header))
                                 : std::string();
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
  const Value* meta = member(m.params(), "_meta");
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
    e.data_json = jsonrpc::to_json(d);
  }
  return e;
}

}  // namespace mcpmqtt::modern

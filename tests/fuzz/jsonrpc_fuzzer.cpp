// Any text as a JSON-RPC message or body from a peer (bridge/jsonrpc/jsonrpc.hpp), and the
// 2026-07-28 vocabulary built on it (bridge/modern/protocol.hpp).
//
// The input is one text. It is parsed as a message and as a body, from an owned and from a
// shared string (the two must agree), and again under tight limits (which may only refuse more).
// Every accepted message is checked against an independent reading of its own document: kind,
// id, method, error, progress token and subscription id as the JSON says them; its text has no
// line break and parses again to the same classification; with_id() changes the id and nothing
// else. Every refusal must be sendable back as an error response. Requests and notifications
// then go through the modern classification: the era claim, the envelope, the headers a client
// would send for them (which must pass check_headers), the header value encoding, and the
// result and envelope rewriting.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/modern/protocol.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace jsonrpc = mcpmqtt::jsonrpc;
namespace modern = mcpmqtt::modern;
using jsonrpc::Id;
using jsonrpc::Kind;
using jsonrpc::Message;
using mcpmqtt::fuzz::check;
using rapidjson::Value;

namespace {

std::string_view name_of(const Value& key) {
  return {key.GetString(), key.GetStringLength()};
}

// The first member named `key` of an object (the root has no duplicates: the parser refuses
// them), as RapidJSON's FindMember reads it.
const Value* member(const Value& obj, std::string_view key) {
  if (!obj.IsObject()) return nullptr;
  for (auto it = obj.MemberBegin(); it != obj.MemberEnd(); ++it)
    if (name_of(it->name) == key) return &it->value;
  return nullptr;
}

// The last member named `key`, as a streaming reader (and JavaScript's JSON.parse) reads it.
const Value* last_member(const Value& obj, std::string_view key) {
  const Value* found = nullptr;
  if (!obj.IsObject()) return nullptr;
  for (auto it = obj.MemberBegin(); it != obj.MemberEnd(); ++it)
    if (name_of(it->name) == key) found = &it->value;
  return found;
}

std::optional<Id> id_of(const Value& v) {
  if (v.IsInt64()) return Id::integer(v.GetInt64());
  if (v.IsString()) return Id::string(std::string(v.GetString(), v.GetStringLength()));
  return std::nullopt;
}

// progressToken and subscriptionId as a streaming reader meets them: in document order, the
// last string or integer wins (params.progressToken for notifications/progress,
// params._meta.progressToken and params._meta[…subscriptionId] otherwise).
void tokens_of(const Value& doc, std::optional<Id>& progress, std::optional<Id>& subscription) {
  const Value* params = member(doc, "params");
  if (!params || !params->IsObject()) return;
  for (auto it = params->MemberBegin(); it != params->MemberEnd(); ++it) {
    const auto key = name_of(it->name);
    if (key == "progressToken") {
      if (auto id = id_of(it->value)) progress = id;
    } else if (key == "_meta" && it->value.IsObject()) {
      for (auto m = it->value.MemberBegin(); m != it->value.MemberEnd(); ++m) {
        const auto k = name_of(m->name);
        if (k == "progressToken") {
          if (auto id = id_of(m->value)) progress = id;
        } else if (k == modern::key::subscription_id) {
          if (auto id = id_of(m->value)) subscription = id;
        }
      }
    }
  }
}

// The numbers of two readings of one text agree: ours (exact) and RapidJSON's default one
// (a few ulp off at worst, never a different number).
void same_numbers(const Value& ours, const Value& theirs) {
  check(ours.GetType() == theirs.GetType(), "json(): a value of another type");
  if (ours.IsObject()) {
    check(ours.MemberCount() == theirs.MemberCount(), "json(): member count");
    for (auto a = ours.MemberBegin(), b = theirs.MemberBegin(); a != ours.MemberEnd(); ++a, ++b)
      same_numbers(a->value, b->value);
  } else if (ours.IsArray()) {
    check(ours.Size() == theirs.Size(), "json(): array size");
    for (rapidjson::SizeType i = 0; i < ours.Size(); ++i)
      same_numbers(ours[i], theirs[i]);
  } else if (ours.IsNumber()) {
    check(ours.IsInt64() == theirs.IsInt64() && ours.IsUint64() == theirs.IsUint64(),
          "json(): an integer read otherwise");
    if (ours.IsInt64()) check(ours.GetInt64() == theirs.GetInt64(), "json(): an integer");
    if (ours.IsUint64()) check(ours.GetUint64() == theirs.GetUint64(), "json(): an integer");
    const double a = ours.GetDouble(), b = theirs.GetDouble();
    check(std::isfinite(a), "json(): a number that is not finite");
    if (std::isfinite(b)) {
      check(std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b)) ||
                std::fabs(a - b) < 1e-300,
            "json(): a number read as another");
    }
  }
}

bool parses_as_json(std::string_view text) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseValidateEncodingFlag>(text.data(), text.size());
  return !d.HasParseError();
}

void same_classification(const Message& a, const Message& b, const char* what) {
  check(a.kind() == b.kind(), what);
  check(a.id() == b.id(), what);
  check(a.method() == b.method(), what);
  check(a.progress_token() == b.progress_token(), what);
  check(a.subscription_id() == b.subscription_id(), what);
  if (a.kind() == Kind::error) check(a.error() == b.error(), what);
}

void same_failure(const jsonrpc::ParseFailure& a, const jsonrpc::ParseFailure& b,
                  const char* what) {
  check(a.error == b.error && a.id == b.id, what);
}

// A refusal goes back to the peer as an error response: it must build.
void check_failure(const jsonrpc::ParseFailure& f) {
  check(
      f.error.code == jsonrpc::code::parse_error || f.error.code == jsonrpc::code::invalid_request,
      "a refusal that is neither -32700 nor -32600");
  check(f.error.code != jsonrpc::code::parse_error || f.id.is_null(),
        "a parse error that names an id");
  const auto reply = Message::error(f.id, f.error);
  check(reply.kind() == Kind::error && reply.id() == f.id, "the refusal's error response");
}

void check_modern(const Message& m);

// Everything a message must satisfy once the parser accepted it.
void check_message(const Message& m) {
  const auto text = m.text();
  check(text.find_first_of("\r\n") == std::string_view::npos, "a line break in text()");
  // JSON text never holds a raw NUL: not between tokens, and not in strings (escaped there).
  check(text.find('\0') == std::string_view::npos, "a NUL byte in an accepted message");
  check(m.shared_text() && *m.shared_text() == text && m.size() == text.size(), "shared_text()");

  // The document agrees with the streaming classification.
  const rapidjson::Document& d = m.json();
  check(!d.HasParseError() && d.IsObject(), "json() of an accepted message");
  {
    rapidjson::Document theirs;
    theirs.Parse(text.data(), text.size());
    check(!theirs.HasParseError(), "an accepted message RapidJSON refuses");
    same_numbers(d, theirs);
  }
  const Value* version = member(d, "jsonrpc");
  check(version && version->IsString() && name_of(*version) == "2.0", "jsonrpc member");
  const Value* method = member(d, "method");
  const Value* id = member(d, "id");
  if (method) {
    check(method->IsString() && name_of(*method) == m.method() && !m.method().empty(), "method");
    check(m.kind() == (id ? Kind::request : Kind::notification), "request or notification");
  } else {
    check(m.method().empty(), "a response with a method");
    check(m.kind() == (member(d, "result") ? Kind::result : Kind::error), "result or error");
  }
  if (id && !id->IsNull()) {
    const auto read = id_of(*id);
    check(read && *read == m.id(), "id");
  } else {
    check(m.id().is_null(), "an id where the document has none");
  }
  if (m.kind() == Kind::error) {
    const Value* err = member(d, "error");
    const Value* code = err ? last_member(*err, "code") : nullptr;
    const Value* message = err ? last_member(*err, "message") : nullptr;
    check(code && code->IsInt() && code->GetInt() == m.error().code, "error.code");
    check(message && message->IsString() && name_of(*message) == m.error().message,
          "error.message");
    check(m.error().data_json.empty() == !member(*err, "data"), "error.data present");
    check(m.error().data_json.empty() || parses_as_json(m.error().data_json), "error.data JSON");
  }
  std::optional<Id> progress, subscription;
  tokens_of(d, progress, subscription);
  check(m.progress_token() == progress, "progress token");
  check(m.subscription_id() == (m.kind() == Kind::notification ? subscription : std::nullopt),
        "subscription id");
  if (m.params()) check(m.params() == member(d, "params"), "params()");
  if (m.kind() == Kind::result) check(m.result_value() == member(d, "result"), "result_value()");

  // The wire text parses again to the same message.
  auto again = Message::parse(std::string(text));
  check(again.has_value(), "text() does not parse again");
  same_classification(m, *again, "text() parses to another classification");

  // with_id changes the id and nothing else.
  for (const Id& fresh : {Id::integer(-7), Id::string("fresh \"id\"\n\xc3\xa9")}) {
    const Message changed = m.with_id(fresh);
    check(changed.id() == fresh, "with_id: the id");
    check(changed.kind() == (m.kind() == Kind::notification ? Kind::request : m.kind()),
          "with_id: the kind");
    check(changed.method() == m.method(), "with_id: the method");
    if (m.kind() == Kind::error) check(changed.error() == m.error(), "with_id: the error");
    rapidjson::Document expected;
    expected.CopyFrom(d, expected.GetAllocator());
    const auto fresh_json = fresh.to_json();
    rapidjson::Document fresh_value;
    fresh_value.Parse(fresh_json.data(), fresh_json.size());
    if (auto it = expected.FindMember("id"); it != expected.MemberEnd())
      it->value.CopyFrom(fresh_value, expected.GetAllocator());
    else
      expected.AddMember("id", Value(fresh_value, expected.GetAllocator()),
                         expected.GetAllocator());
    check(jsonrpc::to_json(changed.json()) == jsonrpc::to_json(expected),
          "with_id changed more than the id");
  }

  if (m.is_request() || m.is_notification()) check_modern(m);
  if (m.kind() == Kind::result) {
    for (std::string_view method_name : {"tools/list", "tools/call", "server/discover"}) {
      const auto completed = modern::complete_result(*m.result_value(), method_name,
                                                     R"({"name":"bridge","version":"1"})");
      check(parses_as_json(completed), "complete_result is not JSON");
      if (m.result_value()->IsObject()) {
        rapidjson::Document r;
        r.Parse<rapidjson::kParseFullPrecisionFlag>(completed.data(), completed.size());
        check(r.IsObject() && r.HasMember("resultType"), "complete_result without resultType");
        // Completing twice changes nothing more.
        check(modern::complete_result(r, method_name, R"({"name":"bridge","version":"1"})") ==
                  completed,
              "complete_result is not idempotent");
      }
    }
  }
}

void check_modern(const Message& m) {
  const Value* params = m.params();
  const Value* meta = params && params->IsObject() ? member(*params, "_meta") : nullptr;
  const Value* claimed = meta ? member(*meta, modern::key::protocol_version) : nullptr;
  check(modern::claims_modern(m) == (claimed != nullptr), "claims_modern");

  // The params without the envelope, and with it again.
  const auto bare = modern::without_envelope(params);
  check(params == nullptr ? bare.empty() : parses_as_json(bare), "without_envelope is not JSON");

  auto envelope = modern::read_envelope(m);
  if (!envelope) {
    check(envelope.error().code == jsonrpc::code::invalid_params, "envelope error code");
    check(parses_as_json(envelope.error().data_json), "envelope error data");
    check(Message::error(m.id(), envelope.error()).kind() == Kind::error, "envelope error reply");
    return;
  }
  check(
      claimed != nullptr && claimed->IsString() && name_of(*claimed) == envelope->protocol_version,
      "envelope protocol version");
  check(parses_as_json(envelope->client_capabilities_json), "envelope capabilities");
  check(envelope->client_info_json.empty() || parses_as_json(envelope->client_info_json),
        "envelope client info");
  check(!envelope->log_level || modern::log_level_rank(*envelope->log_level), "log level");
  check(envelope->progress_token == m.progress_token(), "envelope progress token");

  // The envelope put back on the bare params reads the same.
  const auto rebuilt = modern::with_envelope(bare, *envelope);
  check(parses_as_json(rebuilt), "with_envelope is not JSON");
  const auto again = Message::parse(
      std::string(m.is_request() ? Message::request(Id::integer(1), m.method(), rebuilt).text()
                                 : Message::notification(m.method(), rebuilt).text()));
  check(again.has_value(), "a request rebuilt with its envelope does not parse");
  auto reread = modern::read_envelope(*again);
  check(reread.has_value(), "the rebuilt envelope is refused");
  check(reread->protocol_version == envelope->protocol_version &&
            reread->client_capabilities_json == envelope->client_capabilities_json &&
            reread->client_info_json == envelope->client_info_json &&
            reread->log_level == envelope->log_level,
        "the rebuilt envelope reads differently");

  // The headers a client sends for this request pass (a version with surrounding blanks cannot
  // be sent in a header, and a method that is not visible ASCII goes encoded).
  const auto& v = envelope->protocol_version;
  if (!v.empty() && v.find_first_of(" \t\r\n") == std::string::npos &&
      std::all_of(v.begin(), v.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
    modern::Headers h;
    h.protocol_version = v;
    h.method = modern::encode_header_value(m.method());
    if (auto name = modern::name_of(m)) h.name = modern::encode_header_value(*name);
    const auto mismatch = modern::check_headers(m, *envelope, h);
    check(!mismatch.has_value(), "check_headers refuses the headers of the request itself");
    // And a missing Mcp-Method is refused on a request.
    if (m.is_request()) {
      h.method.reset();
      const auto missing = modern::check_headers(m, *envelope, h);
      check(missing && missing->code == modern::code::header_mismatch, "Mcp-Method missing");
      check(parses_as_json(missing->data_json), "header mismatch data");
    }
  }
  for (const std::string& s : {m.method(), modern::name_of(m).value_or(std::string())}) {
    const auto encoded = modern::encode_header_value(s);
    check(std::all_of(encoded.begin(), encoded.end(), [](char c) { return c >= 0x20 && c < 0x7f; }),
          "an encoded header value that is not visible ASCII");
    const auto decoded = modern::decode_header_value(encoded);
    check(decoded && *decoded == s, "encode_header_value does not decode back");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto shared = std::make_shared<const std::string>(text);

  // One message, from an owned and from a shared text.
  auto owned = Message::parse(text);
  auto from_shared = Message::parse(shared);
  check(owned.has_value() == from_shared.has_value(), "owned and shared parses disagree");
  if (owned) {
    same_classification(*owned, *from_shared, "owned and shared parses classify differently");
    check_message(*owned);
  } else {
    same_failure(owned.error(), from_shared.error(), "owned and shared parses fail differently");
    check_failure(owned.error());
  }

  // Tight limits refuse more, never less, and never classify differently.
  const jsonrpc::Limits tight{size / 2 + 1, 3};
  auto limited = Message::parse(text, tight);
  if (limited) {
    check(owned.has_value(), "accepted under tight limits only");
    same_classification(*limited, *owned, "tight limits classify differently");
  } else {
    check_failure(limited.error());
  }

  // A body: one message or a batch.
  auto body = jsonrpc::parse_body(text);
  auto body_shared = jsonrpc::parse_body(shared);
  check(body.has_value() == body_shared.has_value(), "owned and shared bodies disagree");
  if (!body) {
    same_failure(body.error(), body_shared.error(), "owned and shared bodies fail differently");
    check_failure(body.error());
    return 0;
  }
  check(!body->messages.empty() && body->messages.size() == body_shared->messages.size(),
        "body sizes");
  check(body->batch == body_shared->batch, "batch flags");
  for (std::size_t i = 0; i < body->messages.size(); ++i)
    same_classification(body->messages[i], body_shared->messages[i], "body messages differ");
  if (!body->batch) {
    check(body->messages.size() == 1 && owned.has_value(), "a single body that is no message");
    same_classification(body->messages[0], *owned, "a single body classifies differently");
    // A single message from a shared text keeps sharing it (no copy) unless it was normalised.
    if (text.find_first_of("\r\n") == std::string::npos)
      check(body_shared->messages[0].shared_text() == shared, "a single body copied its text");
    return 0;
  }
  check(!owned.has_value(), "a batch accepted as one message");
  rapidjson::Document d;
  d.Parse(text.data(), text.size());
  check(d.IsArray() && d.Size() == body->messages.size(), "batch element count");
  for (const auto& m : body->messages)
    check_message(m);
  // A batch written out reads back the same.
  const auto written = jsonrpc::serialize_batch(body->messages);
  auto reread = jsonrpc::parse_body(written);
  check(reread.has_value() && reread->batch && reread->messages.size() == body->messages.size(),
        "serialize_batch does not read back");
  for (std::size_t i = 0; i < body->messages.size(); ++i)
    same_classification(body->messages[i], reread->messages[i], "a rewritten batch differs");
  return 0;
}

// JSON-RPC 2.0 message model (no I/O).
//
// A Message is immutable and shares its state: copying one is a reference-count increment, so a
// single notification can be handed to thousands of downstream streams without copying its
// bytes. The wire text is kept as received (line breaks outside strings normalised to spaces,
// which JSON treats as the same whitespace), so ids, params, unknown members and the spelling of
// numbers survive a trip through the bridge unchanged. Classification (kind, id, method, error
// code, progress token) is done by a streaming pass that builds no document; the full document is
// built lazily, only for the few messages whose contents the bridge inspects.
//
// Thread-safety: a Message may be read from any number of threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <rapidjson/document.h>

#include "bridge/jsonrpc/json_access.hpp"
#include "common/expected.hpp"

namespace mcpmqtt::jsonrpc {

// Error codes: JSON-RPC 2.0 §5.1, and the MCP conventions used by the official SDKs.
namespace code {
inline constexpr int parse_error = -32700;
inline constexpr int invalid_request = -32600;
inline constexpr int method_not_found = -32601;
inline constexpr int invalid_params = -32602;
inline constexpr int internal_error = -32603;
// Implementation-defined server errors (-32000..-32099), as the MCP SDKs use them.
inline constexpr int connection_closed = -32000;  // peer gone, transport closed, bad header
inline constexpr int request_timeout = -32001;    // also "session not found" on Streamable HTTP
// The caller may not do this: a method, tool or resource its MCP-RBAC role does not allow
// (bridge/relay/rbac_gate.hpp). MCP defines no code for it; docs/bad-input.md lists it.
inline constexpr int forbidden = -32003;
}  // namespace code

// A JSON-RPC error object.
struct Error {
  int code = code::internal_error;
  std::string message;
  std::string data_json;  // serialized "data" member; empty when absent

  friend bool operator==(const Error&, const Error&) = default;
};

// A request id: a string or an integer; null only in an error response whose request could not
// be identified (JSON-RPC 2.0 §5).
class Id {
 public:
  Id() = default;  // null
  static Id integer(std::int64_t v) { return Id(v); }
  static Id string(std::string v) { return Id(std::move(v)); }

  bool is_null() const { return v_.index() == 0; }
  bool is_integer() const { return v_.index() == 1; }
  bool is_string() const { return v_.index() == 2; }
  std::int64_t as_integer() const { return std::get<1>(v_); }
  const std::string& as_string() const { return std::get<2>(v_); }

  // The id as JSON text: 7, "abc" or null.
  std::string to_json() const;
  // A readable form for logs: 7, "abc" or null.
  std::string to_string() const { return to_json(); }

  friend bool operator==(const Id&, const Id&) = default;
  std::size_t hash() const;

 private:
  explicit Id(std::int64_t v) : v_(v) {}
  explicit Id(std::string v) : v_(std::move(v)) {}
  std::variant<std::monostate, std::int64_t, std::string> v_;
};

struct IdHash {
  std::size_t operator()(const Id& id) const { return id.hash(); }
};

enum class Kind { request, notification, result, error };
const char* to_string(Kind k);

// Limits applied to every message the bridge accepts from a peer.
struct Limits {
  std::size_t max_bytes = 16 * 1024 * 1024;
  unsigned max_depth = 100;
};

class Message;

// Why a text was rejected: the error to send back, and the id of the offending request when it
// could still be read (JSON-RPC 2.0 §5: the id, or null if it cannot be determined).
struct ParseFailure {
  Error error;
  Id id;
};

class Message {
 public:
  // Parses one JSON-RPC message (an object). A batch is rejected; use parse_body for input
  // that may be a batch.
  static Expected<Message, ParseFailure> parse(std::string text, const Limits& limits = {});
  static Expected<Message, ParseFailure> parse(std::shared_ptr<const std::string> text,
                                               const Limits& limits = {});

  // Builders for messages the bridge originates. JSON arguments are JSON texts ("{}" when the
  // member is an empty object; an empty string omits params).
  static Message request(const Id& id, std::string_view method, std::string_view params_json = {});
  static Message notification(std::string_view method, std::string_view params_json = {});
  // The same without re-reading the text, for fan-out paths that build many copies from parts
  // that are already valid JSON (serialized by RapidJSON or quote()): `params_json` must be one
  // JSON object with no raw line break, and `subscription_id` its _meta subscriptionId.
  static Message built_notification(std::string_view method, std::string_view params_json,
                                    std::optional<Id> subscription_id);
  static Message result(const Id& id, std::string_view result_json);
  static Message error(const Id& id, const Error& err);
  static Message error(const Id& id, int code, std::string_view message);

  Kind kind() const;
  bool is_request() const { return kind() == Kind::request; }
  bool is_notification() const { return kind() == Kind::notification; }
  bool is_response() const { return kind() == Kind::result || kind() == Kind::error; }

  // The method of a request or notification; empty for responses.
  const std::string& method() const;
  // The id of a request or response; null for notifications.
  const Id& id() const;
  // params._meta.progressToken of a request, or params.progressToken of notifications/progress.
  const std::optional<Id>& progress_token() const;
  // params._meta["io.modelcontextprotocol/subscriptionId"] of a notification (000): the
  // subscriptions/listen request it belongs to.
  const std::optional<Id>& subscription_id() const;
  // Whether params._meta has "io.modelcontextprotocol/protocolVersion" (the 2026-07-28
  // envelope), as read without a document; nullopt for a built notification, which was not
  // read.
  std::optional<bool> meta_has_protocol_version() const;
  // The error of an error response (code and message; data as JSON text).
  const Error& error() const;

  // The wire form: the received bytes, or the serialization of a built message. Never contains
  // a line break, so it can be written as one line of the stdio transport.
  std::string_view text() const;
  const std::shared_ptr<const std::string>& shared_text() const;
  std::size_t size() const { return text().size(); }

  // The whole message as a document, parsed on first use.
  const rapidjson::Document& json() const;
  // Members of the document, or nullptr when absent.
  const rapidjson::Value* params() const;
  const rapidjson::Value* result_value() const;

  // A copy of this message with a different id (requests and responses), not parsed again.
  Message with_id(const Id& id) const;

 private:
  struct State;
  explicit Message(std::shared_ptr<const State> s) : s_(std::move(s)) {}
  static Message from_trusted_text(std::string text);
  std::shared_ptr<const State> s_;
};

// The body of a Streamable HTTP POST or one stdio line: a single message or a batch
// (JSON-RPC 2.0 §6). Batching left the MCP wire in 2025-06-18, but peers may still send it.
struct Body {
  std::vector<Message> messages;
  bool batch = false;
};
Expected<Body, ParseFailure> parse_body(std::string text, const Limits& limits = {});
// The same for a text that is shared (an MQTT payload): a single message keeps sharing it, so a
// large message is never copied; a batch is split into copies.
Expected<Body, ParseFailure> parse_body(std::shared_ptr<const std::string> text,
                                        const Limits& limits = {});

// Several bodies, one per line (newline-delimited JSON): what some servers answer a POST with
// under Content-Type application/json (the conformance suite's fixtures stream an elicitation's
// messages so). Blank lines are skipped; every other line must parse (the first failure is the
// result, with its line number); fewer than two bodies is a failure, since one is parse_body's.
// Read only after parse_body failed on the whole text.
Expected<Body, ParseFailure> parse_lines(std::string_view text, const Limits& limits = {});

// Serializes a batch of messages as a JSON array.
std::string serialize_batch(const std::vector<Message>& messages);

// Helpers for building JSON texts safely.
// A JSON string literal. Bytes that are not well-formed UTF-8 (a peer's header value, say)
// become U+FFFD: the result is always valid JSON.
std::string quote(std::string_view s);

}  // namespace mcpmqtt::jsonrpc

// The streaming pass that classifies a JSON-RPC message (kind, id, method, error, progress
// token, subscription id, and the first structural problem) without building a document.
// Internal to bridge/jsonrpc/.
//
// No state between calls; safe from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <rapidjson/reader.h>

#include "bridge/jsonrpc/jsonrpc.hpp"

namespace mcpmqtt::jsonrpc::detail {

// What the streaming pass learned about one message.
struct Classified {
  enum class IdState { absent, null, integer, string, invalid };
  IdState id_state = IdState::absent;
  Id id;
  bool jsonrpc_seen = false;
  bool jsonrpc_ok = false;
  std::string method;
  bool method_ok = false;
  bool result_seen = false;
  bool error_seen = false;
  bool error_is_object = false;
  bool error_code_ok = false;
  bool error_code_seen = false;
  bool error_message_ok = false;
  bool error_data_seen = false;
  Error err;
  std::optional<Id> progress_token;
  std::optional<Id> subscription_id;
  // params._meta has "io.modelcontextprotocol/protocolVersion": the 2026-07-28 envelope
  // (bridge/modern/protocol.hpp, claims_modern), known without a document.
  bool meta_protocol_version = false;
  std::string first_problem;  // a structural problem found while streaming
  bool depth_exceeded = false;
  bool lone_surrogate = false;  // a string escapes a lone UTF-16 surrogate
  bool number_too_big = false;  // a number beyond the largest double
};

// Reads `text` (whose byte after the end is a readable NUL, as a std::string's) into `out`,
// nesting at most `max_depth` deep; the parse result tells where reading stopped.
rapidjson::ParseResult classify(std::string_view text, unsigned max_depth, Classified& out);

}  // namespace mcpmqtt::jsonrpc::detail

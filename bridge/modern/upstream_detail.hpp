// Helpers shared by the files of ModernUpstream (upstream*.cpp), and by nothing else: the logger,
// the error codes it answers with, and readers of the few message fields it inspects.
// Stateless.
#pragma once

#include <optional>
#include <string>

#include "bridge/jsonrpc/json_access.hpp"
#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/modern/protocol.hpp"
#include "common/log.hpp"

namespace mcpmqtt::bridge::modern_upstream_detail {

using jsonrpc::member;
using jsonrpc::code::connection_closed;
using jsonrpc::code::internal_error;
using jsonrpc::code::invalid_params;
using jsonrpc::code::invalid_request;
using jsonrpc::code::method_not_found;

inline std::optional<std::string> string_member(const rapidjson::Value* v, const char* name) {
  const auto* m = member(v, name);
  if (!m || !m->IsString()) return std::nullopt;
  return std::string(m->GetString(), m->GetStringLength());
}

// params.requestId of notifications/cancelled.
std::optional<jsonrpc::Id> cancelled_id(const jsonrpc::Message& m);
// The modern versions a -32022 error's data.supported names that the bridge speaks.
bool names_modern_version(const jsonrpc::Message& error);
// An error answer as logs and close reasons quote it: `-32601 "Method not found"`.
std::string describe_error(const jsonrpc::Message& m);

}  // namespace mcpmqtt::bridge::modern_upstream_detail

// The MCP over MQTT topic scheme as pure functions (004 §Message Topics).
//
//   $mcp-server/{server-id}/{server-name}              control (initialize)
//   $mcp-server/capability/{server-id}/{server-name}   server list_changed, resources/updated
//   $mcp-server/presence/{server-id}/{server-name}     retained online / empty = offline
//   $mcp-client/presence/{mcp-client-id}               client disconnected (will)
//   $mcp-client/capability/{mcp-client-id}             client list_changed
//   $mcp-rpc/{mcp-client-id}/{server-id}/{server-name} everything after initialize
//
// Ids never contain '/', '+' or '#'; server-names are '/'-separated levels without '+' or '#'.
// The control topic shares its prefix with the capability and presence topics, so a server-id
// of "capability" or "presence" would be ambiguous: parse() reads those two forms first, and
// is_valid_id() rejects both words as server-ids.
//
// Thread-safe (no state).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mcpmqtt::topics {

// Why a name is not valid, or empty when it is.
std::string check_id(std::string_view id);         // server-id or mcp-client-id
std::string check_server_id(std::string_view id);  // check_id + not a reserved word
std::string check_server_name(std::string_view name);
std::string check_server_name_filter(std::string_view filter);  // MQTT filter rules for + and #

inline bool is_valid_id(std::string_view id) {
  return check_id(id).empty();
}
inline bool is_valid_server_id(std::string_view id) {
  return check_server_id(id).empty();
}
inline bool is_valid_server_name(std::string_view n) {
  return check_server_name(n).empty();
}
inline bool is_valid_server_name_filter(std::string_view f) {
  return check_server_name_filter(f).empty();
}

// MQTT topic filter matching (MQTT 5.0 §4.7): '+' matches one level, a final '#' matches the
// parent level and any number of levels below it.
bool filter_matches(std::string_view filter, std::string_view name);

std::string server_control(std::string_view server_id, std::string_view server_name);
std::string server_capability(std::string_view server_id, std::string_view server_name);
std::string server_presence(std::string_view server_id, std::string_view server_name);
// $mcp-server/presence/+/{server-name-filter}: what a client subscribes to for discovery.
std::string server_presence_filter(std::string_view server_name_filter);
std::string client_presence(std::string_view client_id);
std::string client_capability(std::string_view client_id);
std::string rpc(std::string_view client_id, std::string_view server_id,
                std::string_view server_name);

enum class Kind {
  server_control,
  server_capability,
  server_presence,
  client_presence,
  client_capability,
  rpc,
};
const char* to_string(Kind k);

struct Parsed {
  Kind kind;
  std::string server_id;    // all server_* kinds and rpc
  std::string server_name;  // all server_* kinds and rpc
  std::string client_id;    // client_* kinds and rpc
};

// Reads a topic of the scheme; nullopt for any other topic or an invalid id or name in it.
std::optional<Parsed> parse(std::string_view topic);

}  // namespace mcpmqtt::topics

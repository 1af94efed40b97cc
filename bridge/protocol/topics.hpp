// The MCP over MQTT topic scheme (004 §Message Topics), under a prefix that is `$mcp-` as 004
// defines it, or another one every participant on the broker shares (mqtt.topic_prefix: brokers
// that refuse topics beginning with `$`, MQTT 5.0 §4.7.2, or a tenant's ACL namespace):
//
//   {prefix}server/{server-id}/{server-name}              control (initialize)
//   {prefix}server/capability/{server-id}/{server-name}   server list_changed, resources/updated
//   {prefix}server/presence/{server-id}/{server-name}     retained online / empty = offline
//   {prefix}client/presence/{mcp-client-id}               client disconnected (will)
//   {prefix}client/capability/{mcp-client-id}             client list_changed
//   {prefix}rpc/{mcp-client-id}/{server-id}/{server-name} everything after initialize
//   {prefix}bridge/…                                      the bridge's own (replicas), no MCP
//                                                         participant reads it
//
// Ids never contain '/', '+' or '#'; server-names are '/'-separated levels without '+' or '#'.
// The control topic shares its prefix with the capability and presence topics, so a server-id
// of "capability" or "presence" would be ambiguous: parse() reads those two forms first, and
// is_valid_id() rejects both words as server-ids.
//
// Thread-safe (Scheme is immutable once made).
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

bool is_valid_id(std::string_view id);  // check_id(id).empty(), without building a reason
inline bool is_valid_server_id(std::string_view id) {
  return check_server_id(id).empty();
}
bool is_valid_server_name(std::string_view n);  // check_server_name(n).empty(), likewise
inline bool is_valid_server_name_filter(std::string_view f) {
  return check_server_name_filter(f).empty();
}

// MQTT topic filter matching (MQTT 5.0 §4.7): '+' matches one level, a final '#' matches the
// parent level and any number of levels below it.
bool filter_matches(std::string_view filter, std::string_view name);

// The prefix of 004 §Message Topics.
inline constexpr std::string_view kDefaultPrefix = "$mcp-";

// Why a topic prefix is not valid, or empty when it is: topic characters (UTF-8 without NUL,
// no '+' or '#'), at most 256 bytes, not empty.
std::string check_prefix(std::string_view prefix);

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

// The six topic families under one prefix. Throws std::invalid_argument for a prefix
// check_prefix refuses (the configuration has checked it before).
class Scheme {
 public:
  explicit Scheme(std::string_view prefix = kDefaultPrefix);

  const std::string& prefix() const { return prefix_; }

  std::string server_control(std::string_view server_id, std::string_view server_name) const;
  std::string server_capability(std::string_view server_id, std::string_view server_name) const;
  std::string server_presence(std::string_view server_id, std::string_view server_name) const;
  // {prefix}server/presence/+/{server-name-filter}: what a client subscribes to for discovery.
  std::string server_presence_filter(std::string_view server_name_filter) const;
  // {prefix}server/capability/+/{server-name-filter}: every instance's list-changed and
  // resource-updated notifications under a filter, heard once for all of a bridge's sessions.
  std::string server_capability_filter(std::string_view server_name_filter) const;
  std::string client_presence(std::string_view client_id) const;
  std::string client_capability(std::string_view client_id) const;
  std::string rpc(std::string_view client_id, std::string_view server_id,
                  std::string_view server_name) const;
  // {prefix}bridge/{rest}: the bridge's own family (replica presence and relays).
  std::string bridge(std::string_view rest) const;

  // Reads a topic of the scheme; nullopt for any other topic (another prefix's too) or an
  // invalid id or name in it.
  std::optional<Parsed> parse(std::string_view topic) const;

 private:
  std::string prefix_;
  std::string server_;             // {prefix}server/
  std::string server_capability_;  // {prefix}server/capability/
  std::string server_presence_;    // {prefix}server/presence/
  std::string client_presence_;    // {prefix}client/presence/
  std::string client_capability_;  // {prefix}client/capability/
  std::string rpc_;                // {prefix}rpc/
};

// The scheme under kDefaultPrefix.
const Scheme& standard();
// The scheme under `prefix`, made once per prefix and kept for the process: for objects made
// by the thousand (a session's), which would otherwise each hold a copy of its strings. Throws
// as Scheme's constructor does. Thread-safe.
const Scheme& scheme_for(std::string_view prefix);

}  // namespace mcpmqtt::topics

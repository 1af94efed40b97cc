// MCP-RBAC (004 §User Property, §Service Registration): the broker's CONNACK to an MCP client may
// carry MCP-RBAC, a JSON array of {server_name, role_name}: the roles the client holds on those
// servers; a server's presence (notifications/server/online) may list its roles in
// params.meta.rbac.roles, each with allowed_methods, allowed_tools and allowed_resources ("all"
// or a list of names). This file reads both and decides what one MCP session may do: its Policy.
//
// How a session's policy is resolved (docs/mqtt-access.md, "MCP-RBAC"):
// - no MCP-RBAC in the CONNACK: open, as without RBAC (the broker assigns no roles);
// - MCP-RBAC that cannot be read: deny (the broker meant to restrict, and we cannot tell how);
// - MCP-RBAC naming no role on this server: deny (the client holds no role there);
// - roles named for this server: enforce the union of those the presence lists; a named role the
//   presence does not list grants nothing (logged), so when none is listed: deny.
// A role's field that is absent or malformed allows nothing of its kind.
//
// Plain data and pure functions, no I/O; thread-safe as values.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/expected.hpp"

namespace mcpmqtt::bridge::rbac {

// Bounds on what a broker or a server's presence can make a session hold.
inline constexpr std::size_t kMaxAssignments = 1024;  // entries of MCP-RBAC
inline constexpr std::size_t kMaxRoles = 256;         // roles in a presence
inline constexpr std::size_t kMaxNames = 4096;        // names in one allowed_* list

// What a role allows of one kind (methods, tools, resources): everything ("all"), or these names
// (compared as exact strings).
struct Allowance {
  bool all = false;
  std::set<std::string, std::less<>> names;

  bool allows(std::string_view name) const { return all || names.count(name) > 0; }
  void merge(const Allowance& other);
  // For messages: "all", "(none)", or the names in order, the first `max` of them.
  std::string describe(std::size_t max = 16) const;
};

// One entry of MCP-RBAC.
struct Assignment {
  std::string server_name;  // a server-name (an MQTT topic filter is taken as one too)
  std::string role_name;
};
// MCP-RBAC's value; an error (a sentence) unless it is a JSON array of objects with string
// server_name and role_name, of at most kMaxAssignments entries.
Expected<std::vector<Assignment>, std::string> parse_assignments(std::string_view json);

// One role of a server's presence.
struct Role {
  std::string name;
  Allowance methods;
  Allowance tools;
  Allowance resources;
};
// The roles of a presence's meta object (params.meta: {"rbac": {"roles": [...]}}); none when it
// lists none. A role without a string name, past kMaxRoles, or with a list past kMaxNames is
// skipped, its reason added to `skipped` when given.
std::vector<Role> parse_roles(std::string_view meta_json,
                              std::vector<std::string>* skipped = nullptr);

// What one session may do.
struct Policy {
  enum class Mode {
    open,     // no MCP-RBAC: everything passes
    enforce,  // the roles' allowances apply
    deny,     // every request but initialize is refused, with `reason`
  };
  Mode mode = Mode::open;
  std::string server_name;
  std::vector<std::string> roles;  // enforce: the roles in force; deny: those named, if any
  Allowance methods;               // enforce: the union of the roles' allowances
  Allowance tools;
  Allowance resources;
  // For people: why this mode (open, deny), and what was left out (enforce: named roles the
  // presence does not list).
  std::string reason;

  // `"user"`, or `"user", "viewer"`.
  std::string role_names() const;
};

// The policy of a session with `server_name`, from its CONNACK's MCP-RBAC (nullopt: none) and
// the meta object of the server instance's presence.
Policy resolve(const std::optional<std::string>& rbac_json, std::string_view server_name,
               std::string_view presence_meta_json);

}  // namespace mcpmqtt::bridge::rbac

// One ingress session's MCP-RBAC gate (004 §User Property MCP-RBAC): applies a resolved
// rbac::Policy to what the downstream client asks of the MQTT-hosted server and to the lists the
// server answers with.
//
// - A request whose method the role does not allow, a tools/call of a tool it does not allow, a
//   resources/read or resources/subscribe of a URI it does not allow: refused here with
//   code::forbidden naming the role, the server and what was asked (never sent to the server).
//   initialize always passes (every session needs it; 004's example roles do not list it).
// - Under a deny policy every request but initialize is refused with the policy's reason.
// - tools/list, resources/list and resources/templates/list results are filtered to the tools and
//   resources the role allows (templates by their uriTemplate, as exact strings).
// - Notifications and responses from the client pass: a notification has no answer to carry a
//   refusal, and those a client sends (initialized, cancelled, progress, roots/list_changed)
//   are the session's own plumbing.
//
// One strand; not thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <unordered_map>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/protocol/rbac.hpp"

namespace mcpmqtt::bridge {

class RbacGate {
 public:
  // List requests whose answers are awaited for filtering; past this, more are refused.
  static constexpr std::size_t kMaxListsInFlight = 1024;

  explicit RbacGate(rbac::Policy policy) : policy_(std::move(policy)) {}

  const rbac::Policy& policy() const { return policy_; }
  bool open() const { return policy_.mode == rbac::Policy::Mode::open; }

  // A message from the client: the error response to send back in its place, or nullopt to let
  // it pass.
  std::optional<jsonrpc::Message> check(const jsonrpc::Message& m);
  // A response from the server: filtered in place when it answers a list request check() let
  // through.
  void filter(jsonrpc::Message& m);

 private:
  enum class List { tools, resources, templates };
  jsonrpc::Message refuse(const jsonrpc::Message& request, const std::string& what,
                          const std::string& allowed, const std::string& detail_json) const;

  rbac::Policy policy_;
  std::unordered_map<jsonrpc::Id, List, jsonrpc::IdHash> lists_;
};

}  // namespace mcpmqtt::bridge

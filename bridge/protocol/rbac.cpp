#include "bridge/protocol/rbac.hpp"

#include <algorithm>

#include <rapidjson/document.h>

#include "bridge/protocol/topics.hpp"

namespace mcpmqtt::bridge::rbac {

namespace {

std::string quoted(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

std::string str(const rapidjson::Value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

// An allowed_* field: "all", or an array of strings. Absent allows nothing; anything else is
// malformed (the role is skipped).
bool read_allowance(const rapidjson::Value& role, const char* field, Allowance& out,
                    std::string& why) {
  auto it = role.FindMember(field);
  if (it == role.MemberEnd()) return true;
  const auto& v = it->value;
  if (v.IsString()) {
    if (str(v) == "all") {
      out.all = true;
      return true;
    }
    why = std::string(field) + " is the string " + quoted(str(v)) + " (expected \"all\" or a list)";
    return false;
  }
  if (!v.IsArray()) {
    why = std::string(field) + " is neither \"all\" nor a list of names";
    return false;
  }
  if (v.Size() > kMaxNames) {
    why = std::string(field) + " lists " + std::to_string(v.Size()) + " names (at most " +
          std::to_string(kMaxNames) + ")";
    return false;
  }
  for (const auto& n : v.GetArray()) {
    if (!n.IsString()) {
      why = std::string(field) + " holds something other than a string";
      return false;
    }
    out.names.insert(str(n));
  }
  return true;
}

}  // namespace

void Allowance::merge(const Allowance& other) {
  all = all || other.all;
  names.insert(other.names.begin(), other.names.end());
}

std::string Allowance::describe(std::size_t max) const {
  if (all) return "all";
  if (names.empty()) return "(none)";
  std::string out;
  std::size_t n = 0;
  for (const auto& name : names) {
    if (n == max) {
      out += ", … (" + std::to_string(names.size() - max) + " more)";
      break;
    }
    out += (n++ ? ", " : "") + name;
  }
  return out;
}

Expected<std::vector<Assignment>, std::string> parse_assignments(std::string_view json) {
  rapidjson::Document d;
  d.Parse(json.data(), json.size());
  if (d.HasParseError()) return unexpected(std::string("it is not JSON"));
  if (!d.IsArray()) return unexpected(std::string("it is not a JSON array"));
  if (d.Size() > kMaxAssignments) {
    return unexpected("it has " + std::to_string(d.Size()) + " entries (at most " +
                      std::to_string(kMaxAssignments) + ")");
  }
  std::vector<Assignment> out;
  for (const auto& e : d.GetArray()) {
    if (!e.IsObject()) return unexpected(std::string("an entry is not an object"));
    auto s = e.FindMember("server_name");
    auto r = e.FindMember("role_name");
    if (s == e.MemberEnd() || !s->value.IsString() || r == e.MemberEnd() || !r->value.IsString())
      return unexpected(std::string("an entry lacks a string server_name or role_name"));
    out.push_back({str(s->value), str(r->value)});
  }
  return out;
}

std::vector<Role> parse_roles(std::string_view meta_json, std::vector<std::string>* skipped) {
  auto skip = [skipped](std::string why) {
    if (skipped) skipped->push_back(std::move(why));
  };
  std::vector<Role> out;
  rapidjson::Document d;
  d.Parse(meta_json.data(), meta_json.size());
  if (d.HasParseError() || !d.IsObject()) return out;
  auto rbac = d.FindMember("rbac");
  if (rbac == d.MemberEnd() || !rbac->value.IsObject()) return out;
  auto roles = rbac->value.FindMember("roles");
  if (roles == rbac->value.MemberEnd()) return out;
  if (!roles->value.IsArray()) {
    skip("rbac.roles is not a list");
    return out;
  }
  std::size_t index = 0;
  for (const auto& r : roles->value.GetArray()) {
    const std::string at = "role " + std::to_string(index++);
    if (out.size() == kMaxRoles) {
      skip("roles past the first " + std::to_string(kMaxRoles));
      break;
    }
    if (!r.IsObject()) {
      skip(at + " is not an object");
      continue;
    }
    auto name = r.FindMember("name");
    if (name == r.MemberEnd() || !name->value.IsString()) {
      skip(at + " has no string name");
      continue;
    }
    Role role;
    role.name = str(name->value);
    std::string why;
    if (!read_allowance(r, "allowed_methods", role.methods, why) ||
        !read_allowance(r, "allowed_tools", role.tools, why) ||
        !read_allowance(r, "allowed_resources", role.resources, why)) {
      skip("role " + quoted(role.name) + ": " + why);
      continue;
    }
    out.push_back(std::move(role));
  }
  return out;
}

std::string Policy::role_names() const {
  std::string out;
  for (const auto& r : roles)
    out += (out.empty() ? "" : ", ") + quoted(r);
  return out;
}

Policy resolve(const std::optional<std::string>& rbac_json, std::string_view server_name,
               std::string_view presence_meta_json) {
  Policy p;
  p.server_name = std::string(server_name);
  if (!rbac_json) {
    p.reason = "the broker's CONNACK carries no MCP-RBAC";
    return p;
  }
  p.mode = Policy::Mode::deny;
  auto assignments = parse_assignments(*rbac_json);
  if (!assignments) {
    p.reason = "the broker's MCP-RBAC cannot be read (" + assignments.error() +
               "; expected a JSON array of {\"server_name\", \"role_name\"})";
    return p;
  }
  std::vector<std::string> named;
  for (const auto& a : *assignments) {
    if (a.server_name != server_name && !topics::filter_matches(a.server_name, server_name))
      continue;
    if (std::find(named.begin(), named.end(), a.role_name) == named.end())
      named.push_back(a.role_name);
  }
  if (named.empty()) {
    p.reason = "the broker's MCP-RBAC names no role on " + quoted(server_name);
    return p;
  }
  std::vector<std::string> skipped;
  const auto roles = parse_roles(presence_meta_json, &skipped);
  std::string listed;
  for (const auto& r : roles)
    listed += (listed.empty() ? "" : ", ") + quoted(r.name);
  std::vector<std::string> unlisted;
  for (const auto& name : named) {
    auto it =
        std::find_if(roles.begin(), roles.end(), [&](const Role& r) { return r.name == name; });
    if (it == roles.end()) {
      unlisted.push_back(quoted(name));
      continue;
    }
    p.roles.push_back(name);
    p.methods.merge(it->methods);
    p.tools.merge(it->tools);
    p.resources.merge(it->resources);
  }
  std::string not_listed;
  if (!unlisted.empty()) {
    for (const auto& u : unlisted)
      not_listed += (not_listed.empty() ? "" : ", ") + u;
    not_listed = "the broker's MCP-RBAC names " +
                 std::string(unlisted.size() == 1 ? "role " : "roles ") + not_listed + " on " +
                 quoted(server_name) + ", which its presence does not list (" +
                 (listed.empty() ? std::string("it lists no roles") : "it lists " + listed) + ")";
    for (const auto& s : skipped)
      not_listed += "; skipped: " + s;
  }
  if (p.roles.empty()) {
    p.roles = named;
    p.reason = not_listed;
    return p;
  }
  p.mode = Policy::Mode::enforce;
  p.reason = not_listed;
  return p;
}

}  // namespace mcpmqtt::bridge::rbac

// MCP-RBAC (004 §User Property, §Service Registration): reading the broker's assignments and a
// presence's roles, and resolving one session's policy (bridge/protocol/rbac.hpp).
#include "bridge/protocol/rbac.hpp"

#include <catch2/catch.hpp>

namespace rbac = mcpmqtt::bridge::rbac;

namespace {

// The roles of 004 §Service Registration's example presence.
const std::string kVehicleMeta = R"({"rbac":{"roles":[
  {"name":"admin","description":"Administrator role with full access",
   "allowed_methods":["notifications/initialized","ping","tools/list","tools/call",
                      "resources/list","resources/read","resources/subscribe",
                      "resources/unsubscribe"],
   "allowed_tools":"all","allowed_resources":"all"},
  {"name":"user","description":"User role with limited access",
   "allowed_methods":["notifications/initialized","ping","tools/list","tools/call",
                      "resources/list","resources/read"],
   "allowed_tools":["get_vehicle_status","get_vehicle_location"],
   "allowed_resources":["file:///vehicle/telemetry.data"]}]}})";

std::string rbac_assign(const std::string& server, const std::string& role) {
  return R"([{"server_name":")" + server + R"(","role_name":")" + role + R"("}])";
}

}  // namespace

TEST_CASE("004 §User Property MCP-RBAC: the broker's assignments are read, or refused whole",
          "[rbac]") {
  auto ok = rbac::parse_assignments(
      R"([{"server_name":"fleet/truck","role_name":"user"},{"server_name":"x/y","role_name":"a"}])");
  REQUIRE(ok);
  REQUIRE(ok->size() == 2);
  CHECK((*ok)[0].server_name == "fleet/truck");
  CHECK((*ok)[0].role_name == "user");
  CHECK(rbac::parse_assignments("[]"));

  CHECK(rbac::parse_assignments("[broken").error() == "it is not JSON");
  CHECK(rbac::parse_assignments(R"({"server_name":"a"})").error() == "it is not a JSON array");
  CHECK(rbac::parse_assignments(R"(["user"])").error() == "an entry is not an object");
  CHECK(rbac::parse_assignments(R"([{"server_name":"a"}])").error() ==
        "an entry lacks a string server_name or role_name");
  CHECK(rbac::parse_assignments(R"([{"server_name":"a","role_name":7}])").error() ==
        "an entry lacks a string server_name or role_name");
  std::string many = "[";
  for (std::size_t i = 0; i <= rbac::kMaxAssignments; ++i)
    many += std::string(i ? "," : "") + R"({"server_name":"a","role_name":"r"})";
  CHECK(rbac::parse_assignments(many + "]").error().find("at most 1024") != std::string::npos);
}

TEST_CASE(
    "004 §Service Registration rbac.roles: the example roles are read, all or lists, and "
    "malformed roles are skipped with a reason",
    "[rbac]") {
  auto roles = rbac::parse_roles(kVehicleMeta);
  REQUIRE(roles.size() == 2);
  CHECK(roles[0].name == "admin");
  CHECK(roles[0].tools.all);
  CHECK(roles[0].resources.all);
  CHECK(roles[0].methods.allows("resources/subscribe"));
  CHECK_FALSE(roles[0].methods.allows("prompts/list"));
  CHECK(roles[1].tools.allows("get_vehicle_status"));
  CHECK_FALSE(roles[1].tools.allows("unlock_doors"));
  CHECK(roles[1].resources.allows("file:///vehicle/telemetry.data"));

  CHECK(rbac::parse_roles("{}").empty());
  CHECK(rbac::parse_roles("not json").empty());
  CHECK(rbac::parse_roles(R"({"rbac":{}})").empty());

  std::vector<std::string> skipped;
  auto some = rbac::parse_roles(
      R"({"rbac":{"roles":[7,{"description":"no name"},
          {"name":"odd","allowed_tools":"some"},
          {"name":"bad","allowed_methods":[1]},
          {"name":"bare"}]}})",
      &skipped);
  // A role with no allowed_* field allows nothing, but is a role.
  REQUIRE(some.size() == 1);
  CHECK(some[0].name == "bare");
  CHECK_FALSE(some[0].methods.allows("ping"));
  REQUIRE(skipped.size() == 4);
  CHECK(skipped[0] == "role 0 is not an object");
  CHECK(skipped[1] == "role 1 has no string name");
  CHECK(skipped[2] ==
        R"(role "odd": allowed_tools is the string "some" (expected "all" or a list))");
  CHECK(skipped[3] == R"(role "bad": allowed_methods holds something other than a string)");
}

TEST_CASE("004 §User Property MCP-RBAC: no MCP-RBAC in the CONNACK leaves the session open",
          "[rbac]") {
  auto p = rbac::resolve(std::nullopt, "fleet/truck", kVehicleMeta);
  CHECK(p.mode == rbac::Policy::Mode::open);
  CHECK(p.reason == "the broker's CONNACK carries no MCP-RBAC");
}

TEST_CASE("004 §User Property MCP-RBAC: a role the presence lists is enforced", "[rbac]") {
  auto p = rbac::resolve(rbac_assign("fleet/truck", "user"), "fleet/truck", kVehicleMeta);
  REQUIRE(p.mode == rbac::Policy::Mode::enforce);
  CHECK(p.roles == std::vector<std::string>{"user"});
  CHECK(p.methods.allows("tools/call"));
  CHECK_FALSE(p.methods.allows("resources/subscribe"));
  CHECK(p.tools.describe() == "get_vehicle_location, get_vehicle_status");
  CHECK(p.reason.empty());
  // The assignment's server_name may be a filter.
  auto f = rbac::resolve(rbac_assign("fleet/+", "admin"), "fleet/truck", kVehicleMeta);
  CHECK(f.mode == rbac::Policy::Mode::enforce);
  CHECK(f.tools.all);
}

TEST_CASE("004 §User Property MCP-RBAC: two roles on one server allow what either allows",
          "[rbac]") {
  const std::string meta = R"({"rbac":{"roles":[
      {"name":"reader","allowed_methods":["resources/read"],"allowed_resources":["a://1"]},
      {"name":"caller","allowed_methods":["tools/call"],"allowed_tools":["t"]}]}})";
  auto p = rbac::resolve(
      R"([{"server_name":"s/1","role_name":"reader"},{"server_name":"s/1","role_name":"caller"},)"
      R"({"server_name":"other","role_name":"admin"}])",
      "s/1", meta);
  REQUIRE(p.mode == rbac::Policy::Mode::enforce);
  CHECK(p.role_names() == R"("reader", "caller")");
  CHECK(p.methods.allows("resources/read"));
  CHECK(p.methods.allows("tools/call"));
  CHECK(p.tools.allows("t"));
  CHECK(p.resources.allows("a://1"));
}

TEST_CASE(
    "004 §User Property MCP-RBAC: a role the presence does not list grants nothing, so the "
    "session is refused",
    "[rbac]") {
  auto p = rbac::resolve(rbac_assign("fleet/truck", "mechanic"), "fleet/truck", kVehicleMeta);
  CHECK(p.mode == rbac::Policy::Mode::deny);
  CHECK(p.roles == std::vector<std::string>{"mechanic"});
  CHECK(p.reason ==
        R"(the broker's MCP-RBAC names role "mechanic" on "fleet/truck", which its presence )"
        R"(does not list (it lists "admin", "user"))");
  // A presence with no roles at all lists none.
  auto none = rbac::resolve(rbac_assign("fleet/truck", "user"), "fleet/truck", "{}");
  CHECK(none.mode == rbac::Policy::Mode::deny);
  CHECK(none.reason.find("(it lists no roles)") != std::string::npos);
  // One listed and one not: the listed one applies, the other is reported.
  auto mixed = rbac::resolve(R"([{"server_name":"fleet/truck","role_name":"user"},)"
                             R"({"server_name":"fleet/truck","role_name":"mechanic"}])",
                             "fleet/truck", kVehicleMeta);
  CHECK(mixed.mode == rbac::Policy::Mode::enforce);
  CHECK(mixed.roles == std::vector<std::string>{"user"});
  CHECK(mixed.reason.find(R"(role "mechanic")") != std::string::npos);
}

TEST_CASE(
    "004 §User Property MCP-RBAC: unreadable, or naming no role on this server, refuses the "
    "session",
    "[rbac]") {
  auto bad = rbac::resolve(std::string("{\"not\":\"array\"}"), "fleet/truck", kVehicleMeta);
  CHECK(bad.mode == rbac::Policy::Mode::deny);
  CHECK(bad.reason.find("cannot be read (it is not a JSON array;") != std::string::npos);
  auto elsewhere = rbac::resolve(rbac_assign("fleet/bus", "admin"), "fleet/truck", kVehicleMeta);
  CHECK(elsewhere.mode == rbac::Policy::Mode::deny);
  CHECK(elsewhere.reason == R"(the broker's MCP-RBAC names no role on "fleet/truck")");
  auto empty = rbac::resolve(std::string("[]"), "fleet/truck", kVehicleMeta);
  CHECK(empty.mode == rbac::Policy::Mode::deny);
}

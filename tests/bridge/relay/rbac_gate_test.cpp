// One session's MCP-RBAC gate (bridge/relay/rbac_gate.hpp): which requests it refuses, with
// which error, and how it filters the lists the server answers with.
#include "bridge/relay/rbac_gate.hpp"

#include <catch2/catch.hpp>
#include <rapidjson/document.h>

namespace bridge = mcpmqtt::bridge;
namespace jsonrpc = mcpmqtt::jsonrpc;
namespace rbac = mcpmqtt::bridge::rbac;

namespace {

const std::string kGateMeta = R"({"rbac":{"roles":[
  {"name":"user",
   "allowed_methods":["ping","tools/list","tools/call","resources/list","resources/read",
                      "resources/templates/list"],
   "allowed_tools":["get_vehicle_status","get_vehicle_location"],
   "allowed_resources":["file:///vehicle/telemetry.data"]},
  {"name":"admin","allowed_methods":["tools/list","tools/call"],"allowed_tools":"all",
   "allowed_resources":"all"}]}})";

bridge::RbacGate gate_for(const std::string& role) {
  return bridge::RbacGate(
      rbac::resolve(R"([{"server_name":"fleet/truck","role_name":")" + role + R"("}])",
                    "fleet/truck", kGateMeta));
}

jsonrpc::Message gate_msg(const std::string& text) {
  auto m = jsonrpc::Message::parse(text);
  REQUIRE(m);
  return *m;
}

jsonrpc::Message gate_request(int id, const std::string& method, const std::string& params = "{}") {
  return jsonrpc::Message::request(jsonrpc::Id::integer(id), method, params);
}

std::string gate_data(const jsonrpc::Message& m, const char* name) {
  rapidjson::Document d;
  d.Parse(m.error().data_json.c_str());
  REQUIRE(d.IsObject());
  auto it = d.FindMember(name);
  if (it == d.MemberEnd()) return "(absent)";
  if (it->value.IsString()) return it->value.GetString();
  if (it->value.IsArray() && it->value.Size() == 1 && it->value[0].IsString())
    return it->value[0].GetString();
  return "(other)";
}

}  // namespace

TEST_CASE(
    "004 §User Property MCP-RBAC: a method the role does not allow is refused with -32003 "
    "naming the role, the server and the method",
    "[rbac]") {
  auto gate = gate_for("user");
  CHECK_FALSE(gate.check(gate_request(1, "tools/list")));
  CHECK_FALSE(gate.check(gate_request(2, "ping")));
  auto refused = gate.check(gate_request(3, "prompts/list"));
  REQUIRE(refused);
  CHECK(refused->id() == jsonrpc::Id::integer(3));
  CHECK(refused->error().code == jsonrpc::code::forbidden);
  CHECK(refused->error().message ==
        R"(forbidden by MCP-RBAC: role "user" on server "fleet/truck" does not allow the )"
        R"(method "prompts/list" (allowed: methods ping, resources/list, resources/read, )"
        R"(resources/templates/list, tools/call, tools/list))");
  CHECK(gate_data(*refused, "reason") == "mcp-rbac");
  CHECK(gate_data(*refused, "server_name") == "fleet/truck");
  CHECK(gate_data(*refused, "roles") == "user");
  CHECK(gate_data(*refused, "method") == "prompts/list");
}

TEST_CASE(
    "004 §User Property MCP-RBAC: initialize, notifications and responses from the client "
    "always pass",
    "[rbac]") {
  auto gate = gate_for("user");
  CHECK_FALSE(gate.check(gate_request(1, "initialize", R"({"protocolVersion":"2025-06-18"})")));
  CHECK_FALSE(gate.check(gate_msg(R"({"jsonrpc":"2.0","method":"notifications/initialized"})")));
  CHECK_FALSE(gate.check(gate_msg(R"({"jsonrpc":"2.0","id":"s1","result":{}})")));
}

TEST_CASE(
    "004 §User Property MCP-RBAC: tools/call of a tool and resources/read or subscribe of a "
    "URI outside the role's lists are refused",
    "[rbac]") {
  auto gate = gate_for("user");
  CHECK_FALSE(gate.check(gate_request(1, "tools/call", R"({"name":"get_vehicle_status"})")));
  auto tool =
      gate.check(gate_request(2, "tools/call", R"({"name":"unlock_doors","arguments":{}})"));
  REQUIRE(tool);
  CHECK(tool->error().code == jsonrpc::code::forbidden);
  CHECK(tool->error().message ==
        R"(forbidden by MCP-RBAC: role "user" on server "fleet/truck" does not allow the tool )"
        R"("unlock_doors" (allowed: tools get_vehicle_location, get_vehicle_status))");
  CHECK(gate_data(*tool, "tool") == "unlock_doors");
  auto nameless = gate.check(gate_request(3, "tools/call", R"({"arguments":{}})"));
  REQUIRE(nameless);
  CHECK(gate_data(*nameless, "tool") == "(no name)");

  CHECK_FALSE(
      gate.check(gate_request(4, "resources/read", R"({"uri":"file:///vehicle/telemetry.data"})")));
  auto read = gate.check(gate_request(5, "resources/read", R"({"uri":"file:///etc/passwd"})"));
  REQUIRE(read);
  CHECK(read->error().message.find(R"(does not allow the resource "file:///etc/passwd")") !=
        std::string::npos);
  CHECK(gate_data(*read, "uri") == "file:///etc/passwd");
  // resources/subscribe is not among the user role's methods at all.
  auto sub = gate.check(
      gate_request(6, "resources/subscribe", R"({"uri":"file:///vehicle/telemetry.data"})"));
  REQUIRE(sub);
  CHECK(gate_data(*sub, "method") == "resources/subscribe");
}

TEST_CASE(
    "004 §User Property MCP-RBAC: tools/list, resources/list and resources/templates/list "
    "answers are filtered to what the role allows",
    "[rbac]") {
  auto gate = gate_for("user");
  REQUIRE_FALSE(gate.check(gate_request(1, "tools/list")));
  REQUIRE_FALSE(gate.check(gate_request(2, "resources/list")));
  REQUIRE_FALSE(gate.check(gate_request(3, "resources/templates/list")));
  auto tools = gate_msg(
      R"({"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"get_vehicle_status","inputSchema":{}},)"
      R"({"name":"unlock_doors","inputSchema":{}},{"name":"get_vehicle_location"},{"title":"x"}],)"
      R"("nextCursor":"c2"}})");
  gate.filter(tools);
  CHECK(
      tools.text() ==
      R"({"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"get_vehicle_status","inputSchema":{}},)"
      R"({"name":"get_vehicle_location"}],"nextCursor":"c2"}})");
  auto resources = gate_msg(
      R"({"jsonrpc":"2.0","id":2,"result":{"resources":[{"uri":"file:///etc/passwd","name":"p"},)"
      R"({"uri":"file:///vehicle/telemetry.data","name":"t"}]}})");
  gate.filter(resources);
  CHECK(
      resources.text() ==
      R"({"jsonrpc":"2.0","id":2,"result":{"resources":[{"uri":"file:///vehicle/telemetry.data","name":"t"}]}})");
  auto templates = gate_msg(
      R"({"jsonrpc":"2.0","id":3,"result":{"resourceTemplates":[{"uriTemplate":"file:///{path}"}]}})");
  gate.filter(templates);
  CHECK(templates.text() == R"({"jsonrpc":"2.0","id":3,"result":{"resourceTemplates":[]}})");
  // Another response with a used id is not touched again, nor is an error.
  auto again = gate_msg(R"({"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"unlock_doors"}]}})");
  gate.filter(again);
  CHECK(again.text().find("unlock_doors") != std::string::npos);
  REQUIRE_FALSE(gate.check(gate_request(4, "tools/list")));
  auto error = gate_msg(R"({"jsonrpc":"2.0","id":4,"error":{"code":-32603,"message":"boom"}})");
  gate.filter(error);
  CHECK(error.error().message == "boom");
}

TEST_CASE("004 §User Property MCP-RBAC: a role allowing all tools gets the server's list as is",
          "[rbac]") {
  auto gate = gate_for("admin");
  REQUIRE_FALSE(gate.check(gate_request(1, "tools/list")));
  auto tools = gate_msg(R"({"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"unlock_doors"}]}})");
  const std::string before(tools.text());
  gate.filter(tools);
  CHECK(tools.text() == before);
  CHECK_FALSE(gate.check(gate_request(2, "tools/call", R"({"name":"unlock_doors"})")));
  CHECK(gate.check(gate_request(3, "resources/read", R"({"uri":"a://b"})")));  // method not allowed
}

TEST_CASE(
    "004 §User Property MCP-RBAC: under a refusing policy every request but initialize gets "
    "-32003 with the reason",
    "[rbac]") {
  bridge::RbacGate gate(
      rbac::resolve(std::string(R"([{"server_name":"fleet/truck","role_name":"ghost"}])"),
                    "fleet/truck", kGateMeta));
  CHECK_FALSE(gate.check(gate_request(1, "initialize", "{}")));
  auto ping = gate.check(gate_request(2, "ping"));
  REQUIRE(ping);
  CHECK(ping->error().code == jsonrpc::code::forbidden);
  CHECK(ping->error().message ==
        R"(forbidden by MCP-RBAC: the broker's MCP-RBAC names role "ghost" on "fleet/truck", )"
        R"(which its presence does not list (it lists "user", "admin"); every request to )"
        R"("fleet/truck" but initialize is refused (ping))");
  CHECK(gate_data(*ping, "roles") == "ghost");
}

TEST_CASE(
    "004 §User Property MCP-RBAC: list requests awaiting filtering are bounded, and a "
    "cancellation forgets one",
    "[rbac]") {
  auto gate = gate_for("user");
  for (std::size_t i = 0; i < bridge::RbacGate::kMaxListsInFlight; ++i)
    REQUIRE_FALSE(gate.check(gate_request(static_cast<int>(i), "tools/list")));
  auto over = gate.check(gate_request(-1, "tools/list"));
  REQUIRE(over);
  CHECK(over->error().code == jsonrpc::code::connection_closed);
  CHECK(over->error().message.find("too many list requests in flight") != std::string::npos);
  CHECK_FALSE(gate.check(gate_msg(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}})")));
  CHECK_FALSE(gate.check(gate_request(-1, "tools/list")));
}

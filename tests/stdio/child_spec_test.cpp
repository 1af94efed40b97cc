#include <catch2/catch.hpp>

#include "stdio/child_channel.hpp"

namespace mcpmqtt::stdio {
namespace {

TEST_CASE("make_child_spec takes the server entry and the egress settings", "[stdio]") {
  config::ServerEntry server;
  server.name = "demo/everything";
  server.command = "npx";
  server.args = {"-y", "@modelcontextprotocol/server-everything"};
  server.env = {{"DEBUG", "1"}};
  server.cwd = "/srv/mcp";
  config::EgressConfig egress;
  egress.terminate_after_ms = 1500;
  egress.kill_after_ms = 2500;
  const ChildSpec spec = make_child_spec(server, egress, "[egress demo/everything C c7] ");
  CHECK(spec.name == "demo/everything");
  CHECK(spec.command == "npx");
  CHECK(spec.args == server.args);
  CHECK(spec.env == server.env);
  CHECK(spec.cwd == "/srv/mcp");
  CHECK(spec.terminate_after == std::chrono::milliseconds(1500));
  CHECK(spec.kill_after == std::chrono::milliseconds(2500));
  CHECK(spec.log_prefix == "[egress demo/everything C c7] ");
  CHECK(spec.limits.max_bytes == jsonrpc::Limits{}.max_bytes);
  CHECK(spec.exit_watch == ExitWatch::automatic);
}

}  // namespace
}  // namespace mcpmqtt::stdio

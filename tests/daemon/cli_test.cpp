#include "daemon/cli.hpp"

#include <catch2/catch.hpp>

using namespace mcpmqtt::daemon;

namespace {
ParseResult p(std::vector<std::string> args) {
  return parse_command_line(args);
}
}  // namespace

TEST_CASE("no arguments run the daemon with defaults", "[cli]") {
  auto r = p({});
  REQUIRE(r.command_line);
  CHECK(r.command_line->command == Command::run);
  CHECK(r.command_line->config_file.empty());
}

TEST_CASE("options with separate and inline values", "[cli]") {
  auto r = p({"--config", "/etc/b.jsonc", "--broker=mqtt://h:1", "--listen", "0.0.0.0:9",
              "--log-level", "debug", "--topic-prefix", "mcp-"});
  REQUIRE(r.command_line);
  const auto& cl = *r.command_line;
  CHECK(cl.overrides.topic_prefix == "mcp-");
  CHECK(cl.config_file == "/etc/b.jsonc");
  CHECK(cl.overrides.broker_url == "mqtt://h:1");
  CHECK(cl.overrides.http_listen == "0.0.0.0:9");
  CHECK(cl.overrides.log_level == "debug");
}

TEST_CASE("cli: --check-config and --help and --version", "[cli]") {
  auto r = p({"--check-config", "f.jsonc"});
  REQUIRE(r.command_line);
  CHECK(r.command_line->command == Command::check_config);
  CHECK(r.command_line->config_file == "f.jsonc");
  CHECK(p({"--help"}).command_line->command == Command::help);
  CHECK(p({"--version"}).command_line->command == Command::version);
}

TEST_CASE("bad usage says what was wrong", "[cli]") {
  CHECK(p({"--bogus"}).error == "unknown option \"--bogus\"; see --help");
  CHECK(p({"--config"}).error == "option --config needs a value (FILE)");
  CHECK(p({"--help=yes"}).error == "option --help takes no value");
  CHECK(p({"frobnicate"}).error == "unknown subcommand \"frobnicate\"; see --help");
  CHECK(p({"--", "x"}).error == "unexpected \"--\"; see --help");
}

TEST_CASE("cli: --help lists every option", "[cli]") {
  const auto u = usage();
  for (const char* opt : {"--config", "--check-config", "--broker", "--topic-prefix", "--listen",
                          "--log-level", "--help", "--version"}) {
    INFO(opt);
    CHECK(u.find(opt) != std::string::npos);
  }
  CHECK(u.find("MCPMQTT_MQTT_PASSWORD") != std::string::npos);
}

TEST_CASE("cli: expose --protocol picks the MCP era spoken to the command", "[cli]") {
  auto r = p({"expose", "--name", "a/b", "--protocol", "modern", "--", "srv"});
  REQUIRE(r.command_line);
  CHECK(r.command_line->protocol == mcpmqtt::config::ServerProtocol::modern);
  CHECK(p({"expose", "--name", "a/b", "--protocol=legacy", "--", "srv"}).command_line->protocol ==
        mcpmqtt::config::ServerProtocol::legacy);
  CHECK(p({"expose", "--name", "a/b", "--", "srv"}).command_line->protocol ==
        mcpmqtt::config::ServerProtocol::automatic);
  CHECK(p({"expose", "--name", "a/b", "--protocol", "2026", "--", "srv"}).error ==
        "option --protocol expects auto, legacy or modern, found \"2026\"");
  CHECK(p({"--protocol", "auto"}).error == "option --protocol does not apply to the daemon");
  CHECK(usage().find("--protocol ERA") != std::string::npos);
}

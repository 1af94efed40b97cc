// The command line: subcommands, options and --help, as data.
//
//   mcp-mqtt-bridge [--config FILE] [options]        the daemon
//   mcp-mqtt-bridge --check-config FILE              validate a configuration and exit
//   mcp-mqtt-bridge <subcommand> [options] [-- ...]  see usage()
//
// Not thread-safe; used once at start-up.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace mcpmqtt::daemon {

enum class Command { run, check_config, help, version, stdio, expose };

struct CommandLine {
  Command command = Command::run;
  std::string config_file;  // --config FILE, or the FILE of --check-config
  config::Overrides overrides;
  // expose
  std::string name;                                                     // --name NAME
  std::string description;                                              // --description TEXT
  std::vector<std::string> child_argv;                                  // everything after "--"
  config::ServerProtocol protocol = config::ServerProtocol::automatic;  // --protocol
};

struct ParseResult {
  std::optional<CommandLine> command_line;
  std::string error;  // set when command_line is empty: what was wrong, for stderr
};

ParseResult parse_command_line(const std::vector<std::string>& args);

// The --help text: every subcommand and option, with defaults and environment variables.
std::string usage();

// Exit statuses: 0 success, 1 runtime failure, 2 bad usage or invalid configuration.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

}  // namespace mcpmqtt::daemon

// mcp-mqtt-bridge: parse the command line, load the configuration, run.
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "daemon/cli.hpp"
#include "daemon/run.hpp"

int main(int argc, char** argv) {
  using namespace mcpmqtt;
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = daemon::parse_command_line(args);
  if (!parsed.command_line) {
    std::cerr << "mcp-mqtt-bridge: " << parsed.error << "\n";
    return daemon::kExitUsage;
  }
  return daemon::run(*parsed.command_line);
}

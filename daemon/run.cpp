#include "daemon/run.hpp"

#include <cstdlib>
#include <iostream>

#include "bridge/log.hpp"

namespace mcpmqtt::daemon {

std::optional<config::Config> load_config(const CommandLine& cl) {
  std::string file = cl.config_file;
  if (file.empty()) {
    if (const char* env = std::getenv("MCPMQTT_CONFIG"); env && *env) file = env;
  }
  config::LoadResult result = file.empty() ? config::defaults() : config::load_file(file);
  config::apply_overrides(result, cl.overrides);
  if (!result.ok()) {
    std::cerr << config::format_problems(result.problems, file.empty() ? "command line" : file);
    return std::nullopt;
  }
  return std::move(result.config);
}

int run(const CommandLine& cl) {
  switch (cl.command) {
    case Command::help:
      std::cout << usage();
      return kExitOk;
    case Command::version:
      std::cout << "mcp-mqtt-bridge " MCPMQTT_VERSION "\n";
      return kExitOk;
    case Command::check_config: {
      auto cfg = load_config(cl);
      if (!cfg) return kExitUsage;
      std::cout << cl.config_file << ": OK: " << cfg->summary() << "\n";
      return kExitOk;
    }
    case Command::run: {
      auto cfg = load_config(cl);
      if (!cfg) return kExitUsage;
      std::cerr << "mcp-mqtt-bridge: configuration OK (" << cfg->summary()
                << "), but this build has no transports yet: nothing to run\n";
      return kExitFailure;
    }
    case Command::stdio:
    case Command::expose:
      break;
  }
  std::cerr << "mcp-mqtt-bridge: this subcommand is not available in this build\n";
  return kExitUsage;
}

}  // namespace mcpmqtt::daemon

#include "daemon/run.hpp"

#include <cstdlib>
#include <iostream>

#include "bridge/log.hpp"
#include "daemon/daemon.hpp"
#include "daemon/stdio_ingress.hpp"
#include "mqtt/topics.hpp"

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

void setup_logging(const config::Config& cfg) {
  // Under systemd, stderr goes to the journal, which stamps lines itself.
  log::configure_format(std::getenv("JOURNAL_STREAM") != nullptr);
  log::set_level(cfg.log.level);
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
      setup_logging(*cfg);
      Daemon d(std::move(*cfg));
      return d.run();
    }
    case Command::expose: {
      auto cfg = load_config(cl);
      if (!cfg) return kExitUsage;
      if (const auto why = topics::check_server_name(cl.name); !why.empty()) {
        std::cerr << "mcp-mqtt-bridge: --name \"" << cl.name << "\" " << why << "\n";
        return kExitUsage;
      }
      // Exactly one server, the one on the command line; no HTTP ingress.
      config::ServerEntry entry;
      entry.name = cl.name;
      entry.description = cl.description;
      entry.command = cl.child_argv.front();
      entry.args.assign(cl.child_argv.begin() + 1, cl.child_argv.end());
      entry.max_sessions = cfg->egress.max_sessions_per_server;
      cfg->servers = {entry};
      cfg->http.enabled = false;
      setup_logging(*cfg);
      Daemon d(std::move(*cfg));
      return d.run();
    }
    case Command::stdio: {
      auto cfg = load_config(cl);
      if (!cfg) return kExitUsage;
      if (const auto why = topics::check_server_name(cl.name); !why.empty()) {
        std::cerr << "mcp-mqtt-bridge: --server \"" << cl.name << "\" " << why << "\n";
        return kExitUsage;
      }
      // A desktop host shows stderr to people: quiet unless a level was asked for.
      if (!cfg->log.level_set) cfg->log.level = "warn";
      setup_logging(*cfg);
      return run_stdio_ingress(std::move(*cfg), cl.name);
    }
  }
  std::cerr << "mcp-mqtt-bridge: this subcommand is not available in this build\n";
  return kExitUsage;
}

}  // namespace mcpmqtt::daemon

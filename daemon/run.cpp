#include "daemon/run.hpp"

#include <cstdlib>
#include <iostream>

#include "bridge/protocol/topics.hpp"
#include "common/log.hpp"
#include "daemon/daemon.hpp"
#include "directions/stdio_ingress.hpp"

namespace mcpmqtt::daemon {

namespace {

std::string config_file(const CommandLine& cl) {
  if (!cl.config_file.empty()) return cl.config_file;
  if (const char* env = std::getenv("MCPMQTT_CONFIG"); env && *env) return env;
  return {};
}

// The file (or the defaults), the environment, then the flags: at start and on every SIGHUP.
config::LoadResult read_config(const CommandLine& cl) {
  const std::string file = config_file(cl);
  config::LoadResult result = file.empty() ? config::defaults() : config::load_file(file);
  config::apply_overrides(result, cl.overrides);
  return result;
}

// `expose`: exactly one server, the one on the command line; no HTTP ingress.
void make_expose(const CommandLine& cl, config::Config& cfg) {
  config::ServerEntry entry;
  entry.name = cl.name;
  entry.description = cl.description;
  entry.command = cl.child_argv.front();
  entry.args.assign(cl.child_argv.begin() + 1, cl.child_argv.end());
  entry.max_sessions = config::default_max_sessions(entry, cfg.egress);
  entry.max_memory_mb = cfg.egress.max_memory_per_stdio_server_mb;
  entry.protocol = cl.protocol;
  cfg.servers = {entry};
  cfg.http.enabled = false;
}

}  // namespace

std::optional<config::Config> load_config(const CommandLine& cl) {
  auto result = read_config(cl);
  if (!result.ok()) {
    const std::string file = config_file(cl);
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
      Daemon d(std::move(*cfg), [cl] { return read_config(cl); });
      return d.run();
    }
    case Command::expose: {
      auto cfg = load_config(cl);
      if (!cfg) return kExitUsage;
      if (const auto why = topics::check_server_name(cl.name); !why.empty()) {
        std::cerr << "mcp-mqtt-bridge: --name \"" << cl.name << "\" " << why << "\n";
        return kExitUsage;
      }
      make_expose(cl, *cfg);
      setup_logging(*cfg);
      // A reload re-reads the file and environment (log level, limits); the server stays.
      Daemon d(std::move(*cfg), [cl] {
        auto r = read_config(cl);
        if (r.ok()) make_expose(cl, *r.config);
        return r;
      });
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
      return directions::run_stdio_ingress(std::move(*cfg), cl.name);
    }
  }
  std::cerr << "mcp-mqtt-bridge: this subcommand is not available in this build\n";
  return kExitUsage;
}

}  // namespace mcpmqtt::daemon

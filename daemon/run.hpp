// Runs one parsed command line: the daemon or one of its subcommands.
#pragma once

#include "daemon/cli.hpp"

namespace mcpmqtt::daemon {

// Returns the process exit status.
int run(const CommandLine& cl);

// Loads the configuration the command line names (file, or defaults), with environment and
// command-line overrides. Problems are printed to stderr; returns nullopt then.
std::optional<config::Config> load_config(const CommandLine& cl);

// Log format (journal or terminal) and level from the configuration.
void setup_logging(const config::Config& cfg);

}  // namespace mcpmqtt::daemon

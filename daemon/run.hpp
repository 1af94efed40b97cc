// Runs one parsed command line: the daemon or one of its subcommands.
#pragma once

#include "daemon/cli.hpp"

namespace mcpmqtt::daemon {

// Returns the process exit status.
int run(const CommandLine& cl);

// Loads the configuration the command line names (file, or defaults), with environment and
// command-line overrides. Problems are printed to stderr; returns nullopt then.
std::optional<config::Config> load_config(const CommandLine& cl);

}  // namespace mcpmqtt::daemon

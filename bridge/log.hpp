// Loggers, one per component (bridge, mqtt, http, stdio, daemon), all writing to stderr so that
// systemd's journal and `docker logs` collect them. Never pass secrets to a logger.
//
// Thread-safe: loggers are created once and shared.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace mcpmqtt::log {

// The logger of a component, created on first use with the current level.
std::shared_ptr<spdlog::logger> get(const std::string& component);

// Sets the level of every logger, existing and future. Returns false for an unknown level name.
bool set_level(const std::string& level);

// Filters what reaches stderr without changing the loggers' levels (tests keep loggers at debug
// for log captures and show only warnings on the terminal).
bool set_stderr_level(const std::string& level);

// Timestamps are left out when stderr goes to the journal, which adds its own.
void configure_format(bool journal);

}  // namespace mcpmqtt::log

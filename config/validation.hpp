// What is checked and resolved once the file is read: environment overrides, the checks that
// span sections (broker URL, TLS, listen address, log level), and secrets read from their
// files. Internal to config/.
//
// Not thread-safe; called while a configuration is loaded.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace mcpmqtt::config::detail {

// mqtt.url as one url or several separated by commas: the first into `m`'s own fields, the
// others into m.fallbacks; false with `why` when one is malformed.
bool parse_broker_urls(const std::string& urls, MqttConfig& m, std::string& why);

// Applies the environment, validates and resolves secrets: the outcome of loading `cfg`, which
// holds the configuration only when no problem was found.
LoadResult complete(Config cfg, std::vector<Problem> problems, GetEnv getenv_fn);
// `fn`, or std::getenv when it is null.
GetEnv or_default(GetEnv fn);

}  // namespace mcpmqtt::config::detail

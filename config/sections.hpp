// The readers of the configuration file's sections (mqtt, http, ingress, egress, events,
// timeouts, log, daemon, mcpServers): each reads its object into the model, checks what can be
// checked within the section, and reports its other keys as unknown. Internal to config/.
//
// Not thread-safe; called while a configuration is parsed.
#pragma once

#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "config/config.hpp"

namespace mcpmqtt::config::detail {

void read_mqtt(const rapidjson::Value& v, MqttConfig& m, std::vector<Problem>& problems);
void read_http(const rapidjson::Value& v, HttpConfig& h, std::vector<Problem>& problems);
void read_ingress(const rapidjson::Value& v, IngressConfig& in, std::vector<Problem>& problems);
void read_egress(const rapidjson::Value& v, EgressConfig& e, std::vector<Problem>& problems);
void read_events(const rapidjson::Value& v, EventsConfig& events, std::vector<Problem>& problems);
// Every key is a method name (or "default"); none is unknown.
void read_timeouts(const rapidjson::Value& v, const std::string& path, Timeouts& t,
                   std::vector<Problem>& problems);
void read_log(const rapidjson::Value& v, LogConfig& log, std::vector<Problem>& problems);
void read_daemon(const rapidjson::Value& v, DaemonConfig& daemon, std::vector<Problem>& problems);
// mcpServers: each entry, in file order, with the egress defaults of `cfg` (read before it);
// ${VAR} in header values expanded through `getenv_fn`.
void read_servers(const rapidjson::Value& v, Config& cfg, std::vector<Problem>& problems,
                  GetEnv getenv_fn);

// "native" or "paho" (mqtt.client, MCPMQTT_MQTT_CLIENT); false for anything else.
bool parse_mqtt_client(const std::string& text, MqttClient& out);
// "shared", "token" or "principal" (mqtt.session_credentials); false for anything else.
bool parse_session_credentials(const std::string& text, SessionCredentials& out);

}  // namespace mcpmqtt::config::detail

// Which MQTT engine the tests run on: mqtt.client as config::defaults() gives it, so
// MCPMQTT_MQTT_CLIENT (each CTest registration sets it) decides, for the tests' own Connections
// and for the bridge processes they start. For assertions on what goes on the wire, which differs
// between the engines.
#pragma once

#include <stdexcept>

#include "config/config.hpp"

namespace mcpmqtt::test {

inline config::MqttClient engine_under_test() {
  const auto loaded = config::defaults();
  if (!loaded.ok()) {
    throw std::runtime_error("the default configuration is invalid (check MCPMQTT_MQTT_CLIENT)");
  }
  return loaded.config->mqtt.client;
}

inline bool paho_under_test() {
  return engine_under_test() == config::MqttClient::paho;
}

inline const char* engine_name(config::MqttClient client) {
  return client == config::MqttClient::paho ? "paho" : "native";
}

}  // namespace mcpmqtt::test

// A real mcp-mqtt-bridge process with HTTP ingress on a free loopback port, for the end-to-end
// tests of the ingress.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>

#include "tests/support/bridge_process.hpp"
#include "tests/support/mosquitto.hpp"

namespace mcpmqtt::test {

// A bridge with HTTP ingress on a free loopback port; `servers` is its mcpServers block.
struct Bridge {
  std::uint16_t port = free_loopback_port();
  std::unique_ptr<BridgeProcess> proc;
  // `extra` adds top-level keys ("key": value, ...), `http_extra` and `mqtt_extra` keys of the
  // http, mqtt and ingress objects (", \"key\": value").
  Bridge(const Mosquitto& broker, const std::string& servers, const std::string& default_server,
         const std::string& extra = "", const std::string& http_extra = "",
         const std::string& mqtt_extra = "", const std::string& ingress_extra = "")
      : Bridge(broker.url(), servers, default_server, extra, http_extra, mqtt_extra, {},
               ingress_extra) {}
  // The same on any broker URL (a scripted broker, a proxy), with `env` added.
  Bridge(const std::string& broker_url, const std::string& servers,
         const std::string& default_server, const std::string& extra = "",
         const std::string& http_extra = "", const std::string& mqtt_extra = "",
         std::map<std::string, std::string> env = {}, const std::string& ingress_extra = "") {
    proc = std::make_unique<BridgeProcess>(
        std::vector<std::string>{},
        R"({"mqtt": {"url": ")" + broker_url + "\"" + mqtt_extra +
            R"(}, "http": {"listen": "127.0.0.1:)" + std::to_string(port) + "\"" + http_extra +
            R"(}, "ingress": {"default_server": ")" + default_server +
            R"(", "presence_wait_ms": 1000)" + ingress_extra + "}, " + extra + R"("mcpServers": )" +
            servers + "}",
        std::move(env));
    REQUIRE(proc->wait_for_log("HTTP ingress on http://127.0.0.1:" + std::to_string(port)));
  }
  std::string url(const std::string& path = "/mcp") const {
    return "http://127.0.0.1:" + std::to_string(port) + path;
  }
  boost::asio::ip::tcp::endpoint endpoint() const {
    return {boost::asio::ip::make_address("127.0.0.1"), port};
  }
};

}  // namespace mcpmqtt::test

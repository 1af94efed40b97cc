// The systemd unit says what the daemon and its children need: how systemd learns the daemon is
// up, how it is reloaded and stopped, where children may write, and what is locked away. Read from
// the file, no systemd needed (systemd-analyze checks it in the integration tier).
#include <algorithm>

#include <catch2/catch.hpp>

#include "config/config.hpp"
#include "tests/deploy/deploy_support.hpp"

using namespace mcpmqtt::test::deploy;

namespace {

const Unit& unit() {
  static const Unit u = parse_unit(repo_file("systemd/mcp-mqtt-bridge.service"));
  return u;
}

std::string service(const std::string& key) {
  return unit_value(unit(), "Service", key).value_or("<unset>");
}

// A systemd time span of the form "20s", "2min" or "20" (seconds), in milliseconds.
long span_ms(const std::string& text) {
  std::size_t end = 0;
  const long n = std::stol(text, &end);
  const std::string unit = text.substr(end);
  if (unit.empty() || unit == "s") return n * 1000;
  if (unit == "min") return n * 60000;
  if (unit == "ms") return n;
  FAIL("unexpected time span " << text);
  return 0;
}

}  // namespace

TEST_CASE("systemd unit: notify, reload, restart and watchdog as the daemon implements them",
          "[deploy][systemd]") {
  REQUIRE_FALSE(unit().empty());
  CHECK(service("Type") == "notify");
  // Children (configured MCP servers) must not be able to declare the service ready.
  CHECK(service("NotifyAccess") == "main");
  CHECK(service("ExecStart") ==
        "/usr/bin/mcp-mqtt-bridge --config /etc/mcp-mqtt-bridge/bridge.jsonc");
  CHECK(service("ExecReload") == "/bin/kill -HUP $MAINPID");
  CHECK(service("Restart") == "on-failure");
  // Exit status 2 is a bad configuration: restarting it in a loop helps nobody.
  CHECK(service("RestartPreventExitStatus") == "2");
  // The daemon sends WATCHDOG=1 at half of this (SystemdNotifier::watchdog_interval).
  CHECK(service("WatchdogSec") == "30s");
}

TEST_CASE("systemd unit: systemd waits longer for a stop than the daemon's own grace periods",
          "[deploy][systemd]") {
  const mcpmqtt::config::Config defaults;
  const long needed = defaults.daemon.shutdown_grace_ms + defaults.egress.terminate_after_ms +
                      defaults.egress.kill_after_ms;
  INFO("TimeoutStopSec=" << service("TimeoutStopSec") << ", the daemon may take " << needed
                         << " ms");
  CHECK(span_ms(service("TimeoutStopSec")) > needed);
  // The daemon stops its children itself; systemd's SIGTERM goes to the daemon only.
  CHECK(service("KillMode") == "mixed");
}

TEST_CASE("systemd unit: children get a writable HOME and cache under a dynamic user",
          "[deploy][systemd]") {
  CHECK(service("DynamicUser") == "yes");
  CHECK(service("StateDirectory") == "mcp-mqtt-bridge");
  CHECK(service("CacheDirectory") == "mcp-mqtt-bridge");
  // %S is /var/lib: HOME is the StateDirectory, the one place besides the cache that is writable
  // under ProtectSystem=strict; npx keeps ~/.npm there, uvx ~/.cache and ~/.local.
  const auto env = unit_values(unit(), "Service", "Environment");
  CHECK(std::count(env.begin(), env.end(), "HOME=%S/mcp-mqtt-bridge") == 1);
  CHECK(service("WorkingDirectory") == "%S/mcp-mqtt-bridge");
}

TEST_CASE(
    "systemd unit: the daemon's heap on transparent huge pages (issue 34: an ingress holding "
    "thousands of idle sessions)",
    "[deploy][systemd]") {
  const auto env = unit_values(unit(), "Service", "Environment");
  CHECK(std::count(env.begin(), env.end(), "GLIBC_TUNABLES=glibc.malloc.hugetlb=1") == 1);
}

TEST_CASE("systemd unit: hardening, and what it must leave to Node children", "[deploy][systemd]") {
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"NoNewPrivileges", "yes"},
           {"ProtectSystem", "strict"},
           {"ProtectHome", "yes"},
           {"PrivateTmp", "yes"},
           {"PrivateDevices", "yes"},
           {"ProtectKernelTunables", "yes"},
           {"ProtectKernelModules", "yes"},
           {"ProtectKernelLogs", "yes"},
           {"ProtectControlGroups", "yes"},
           {"ProtectClock", "yes"},
           {"ProtectHostname", "yes"},
           {"RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6"},
           {"RestrictNamespaces", "yes"},
           {"RestrictRealtime", "yes"},
           {"RestrictSUIDSGID", "yes"},
           {"LockPersonality", "yes"},
           {"SystemCallArchitectures", "native"},
           {"SystemCallFilter", "@system-service"},
           {"UMask", "0077"},
           {"CapabilityBoundingSet", ""},
       }) {
    INFO(key);
    CHECK(service(key) == value);
  }
  // Node's JIT needs writable and executable memory: this would kill every npx child.
  CHECK_FALSE(unit_value(unit(), "Service", "MemoryDenyWriteExecute"));
  // /proc/cpuinfo and /proc/meminfo are read by Node's os module.
  CHECK_FALSE(unit_value(unit(), "Service", "ProcSubset"));
}

TEST_CASE("systemd unit: descriptors for 10,000 sessions", "[deploy][systemd]") {
  // Each HTTP ingress session holds the client's TCP connection and its own MQTT connection.
  const long sessions = 10000;
  CHECK(std::stol(service("LimitNOFILE")) >= 2 * sessions + 1024);
}

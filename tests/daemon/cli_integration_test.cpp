// The executable's command line, run as a user would run it.
#include <fstream>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>
#include <unistd.h>

#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mcpmqtt::test;

namespace {
const std::string kExe = MCPMQTT_BRIDGE_EXE;
const std::string kSample = std::string(MCPMQTT_SOURCE_DIR) + "/config/bridge.example.jsonc";
}  // namespace

TEST_CASE("cli: --check-config accepts the sample configuration", "[cli]") {
  auto r = run_capture({kExe, "--check-config", kSample});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find(": OK: broker mqtt://127.0.0.1:1883") != std::string::npos);
  CHECK(r.out.find("demo/everything: stdio") != std::string::npos);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
}

TEST_CASE("cli: --check-config names a misspelt key and suggests the right one", "[cli]") {
  TempDir dir;
  const auto f = dir.write("bad.jsonc", R"({ "mqtt": { "ulr": "mqtt://127.0.0.1:1883" } })");
  auto r = run_capture({kExe, "--check-config", f});
  CHECK(r.exit_code == 2);
  CHECK(r.err == f + ": mqtt.ulr: unknown key; did you mean \"url\"?\n");
}

TEST_CASE("cli: --check-config reports line and column of text that is not JSON", "[cli]") {
  TempDir dir;
  const auto f = dir.write("broken.jsonc", "{\n  \"mqtt\": {\n    \"url\": mqtt://x\n  }\n}\n");
  auto r = run_capture({kExe, "--check-config", f});
  CHECK(r.exit_code == 2);
  CHECK(r.err == f + ": not valid JSON at line 3 column 12: Invalid value.\n");
}

TEST_CASE(
    "cli: the daemon refuses to start on an invalid configuration: exit 2, one line per problem "
    "on stderr",
    "[cli]") {
  TempDir dir;
  const auto f = dir.write("bad.jsonc", R"({
    "mqtt": {"url": "http://broker.example"},
    "http": {"listen": "127.0.0.1:0", "limits": {"max_sessions": 0}},
    "mcpServers": {"a/+/b": {"command": "x"}}
  })");
  auto r = run_capture({kExe, "--config", f});
  CHECK(r.exit_code == 2);
  CHECK(r.err ==
        f + ": http.limits.max_sessions: expected an integer from 1 to 1000000, found 0\n" + f +
            ": mcpServers.\"a/+/b\": the key is the MQTT server-name and must not " +
            "contain '+' or '#'\n" + f +
            ": mqtt.url: expected mqtt://HOST[:PORT], mqtts://HOST[:PORT], "
            "ws://HOST[:PORT][/PATH] or wss://HOST[:PORT][/PATH], found "
            "\"http://broker.example\"\n");
  CHECK(r.out.empty());
}

TEST_CASE("cli: --check-config of a missing file", "[cli]") {
  auto r = run_capture({kExe, "--check-config", "/nonexistent/x.jsonc"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "/nonexistent/x.jsonc: cannot read the file: No such file or directory\n");
}

TEST_CASE("cli: --help and --version and bad usage", "[cli]") {
  auto h = run_capture({kExe, "--help"});
  CHECK(h.exit_code == 0);
  CHECK(h.out.find("Usage:") != std::string::npos);
  auto v = run_capture({kExe, "--version"});
  CHECK(v.exit_code == 0);
  CHECK(v.out == "mcp-mqtt-bridge " MCPMQTT_VERSION "\n");
  auto bad = run_capture({kExe, "--frobnicate"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err == "mcp-mqtt-bridge: unknown option \"--frobnicate\"; see --help\n");
  auto flag = run_capture({kExe, "--check-config", kSample, "--broker", "localhost"});
  CHECK(flag.exit_code == 2);
  CHECK(flag.err.find("--broker: expected mqtt://HOST[:PORT]") != std::string::npos);
}

namespace {

// A configuration whose HTTP ingress listens on `listen`; the broker is never reached (the
// listener fails first).
std::string listen_config(TempDir& dir, const std::string& listen) {
  return dir.write("listen.jsonc", R"({"mqtt": {"url": "mqtt://127.0.0.1:1"},
    "http": {"listen": ")" + listen + R"("}, "mcpServers": {}})");
}

}  // namespace

TEST_CASE(
    "cli: a listen address in use exits with status 1 (a restart may find it free), naming "
    "the address and the reason",
    "[cli]") {
  TempDir dir;
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor holder(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  const std::string listen = "127.0.0.1:" + std::to_string(holder.local_endpoint().port());
  auto r = run_capture({kExe, "--config", listen_config(dir, listen)});
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("cannot listen on " + listen + " (http.listen): Address already in use") !=
        std::string::npos);
}

TEST_CASE(
    "cli: a listen port the daemon may not bind (below ip_unprivileged_port_start, without "
    "CAP_NET_BIND_SERVICE) exits with status 2, which systemd's unit does not restart",
    "[cli]") {
  int unprivileged_from = 1024;
  std::ifstream("/proc/sys/net/ipv4/ip_unprivileged_port_start") >> unprivileged_from;
  if (unprivileged_from <= 1) {
    WARN("every port is unprivileged on this machine (ip_unprivileged_port_start "
         << unprivileged_from << "): nothing to test");
    return;
  }
  TempDir dir;
  const std::string listen = "127.0.0.1:" + std::to_string(unprivileged_from - 1);
  std::vector<std::string> argv = {kExe, "--config", listen_config(dir, listen)};
  // As root, the same without the capability (setpriv from util-linux; dropping it from the
  // bounding set needs CAP_SETPCAP, which a restricted container may lack).
  if (::geteuid() == 0) {
    const std::vector<std::string> drop = {"setpriv", "--bounding-set", "-net_bind_service", "--"};
    auto probe = drop;
    probe.push_back("true");
    if (const auto p = run_capture(probe); p.exit_code != 0) {
      WARN("cannot drop CAP_NET_BIND_SERVICE here (" << p.err << "): nothing to test");
      return;
    }
    argv.insert(argv.begin(), drop.begin(), drop.end());
  }
  auto r = run_capture(argv);
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("cannot listen on " + listen + " (http.listen): Permission denied") !=
        std::string::npos);
}

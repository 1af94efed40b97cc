// The systemd unit as systemd reads it (systemd-analyze verify and security, offline), and
// `cmake --install` laying out the files the unit names.
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/deploy/deploy_support.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mcpmqtt::test;
using namespace mcpmqtt::test::deploy;
namespace fs = std::filesystem;

namespace {

const std::string kExe = MCPMQTT_BRIDGE_EXE;
const std::string kPackagedExec =
    "ExecStart=/usr/bin/mcp-mqtt-bridge --config /etc/mcp-mqtt-bridge/bridge.jsonc";

std::optional<std::string> systemd_analyze() {
  auto p = find_program("systemd-analyze");
  if (!p) {
    missing_tool(
        "systemd-analyze (scripts/install-deps.sh --test installs the systemd package): the unit "
        "was NOT verified");
  }
  return p;
}

struct Verdict {
  bool ok = false;
  std::string output;
};

// systemd-analyze verify exits 0 for many mistakes it only warns about (an unknown key, a value
// it cannot parse): a unit passes only with exit status 0 and nothing said about it.
Verdict verify(const std::string& analyze, const std::string& unit_path) {
  auto r = run_capture({analyze, "verify", unit_path}, std::chrono::seconds(60));
  return {r.exit_code == 0 && r.out.empty() && r.err.empty(),
          "exit " + std::to_string(r.exit_code) + "\n" + r.out + r.err};
}

// The repository's unit with ExecStart pointing at this build's binary (systemd-analyze checks
// that the program exists), in a directory of its own under the unit's real name.
std::string unit_for_build(const TempDir& dir, const std::string& text) {
  const auto path = dir.path() + "/mcp-mqtt-bridge.service";
  std::ofstream(path) << text;
  return path;
}

std::string unit_text_for_build() {
  return replace_once(repo_file("systemd/mcp-mqtt-bridge.service"), kPackagedExec,
                      "ExecStart=" + kExe + " --config /etc/mcp-mqtt-bridge/bridge.jsonc");
}

bool executable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

unsigned mode_of(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return st.st_mode & 07777;
}

// Splits an ExecStart value at spaces (the installed unit has no quoting).
std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string w;
  while (in >> w)
    out.push_back(w);
  return out;
}

}  // namespace

TEST_CASE("systemd-analyze verify accepts the unit", "[deploy][systemd][integration]") {
  auto analyze = systemd_analyze();
  if (!analyze) return;
  TempDir dir;
  const auto text = unit_text_for_build();
  REQUIRE_FALSE(text.empty());
  const auto v = verify(*analyze, unit_for_build(dir, text));
  INFO(v.output);
  CHECK(v.ok);
}

TEST_CASE("systemd-analyze verify, as the tests use it, rejects broken units",
          "[deploy][systemd][integration]") {
  auto analyze = systemd_analyze();
  if (!analyze) return;
  const auto good = unit_text_for_build();
  REQUIRE_FALSE(good.empty());
  struct Case {
    const char* what;
    std::string from, to;
  };
  const std::vector<Case> cases = {
      {"a program that does not exist", "ExecStart=" + kExe,
       "ExecStart=/nonexistent/mcp-mqtt-bridge"},
      {"a misspelt directive", "\nProtectSystem=strict\n", "\nProtectSytem=strict\n"},
      {"a service type that does not exist", "\nType=notify\n", "\nType=notifyy\n"},
      {"an unknown system call group", "SystemCallFilter=@system-service",
       "SystemCallFilter=@system-servic"},
      {"an address family that does not exist", "AF_INET6", "AF_INET7"},
      {"a bad time span", "WatchdogSec=30s", "WatchdogSec=30 parsecs"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    TempDir dir;
    const auto bad = replace_once(good, c.from, c.to);
    REQUIRE_FALSE(bad.empty());
    const auto v = verify(*analyze, unit_for_build(dir, bad));
    INFO(v.output);
    CHECK_FALSE(v.ok);
  }
}

TEST_CASE("systemd-analyze security rates the unit's exposure low",
          "[deploy][systemd][integration]") {
  auto analyze = systemd_analyze();
  if (!analyze) return;
  TempDir dir;
  const auto text = unit_text_for_build();
  REQUIRE_FALSE(text.empty());
  // 0 is fully locked down, 100 not at all; the unit rates 1.7 ("OK") with systemd 252.
  // --threshold makes the command fail above 2.0, so removing hardening fails this test.
  auto r = run_capture({*analyze, "security", "--offline=yes", "--threshold=20", "--no-pager",
                        unit_for_build(dir, text)},
                       std::chrono::seconds(60));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);

  // The control: the same service without its hardening is rated far above the threshold.
  TempDir bare_dir;
  const auto bare = unit_for_build(bare_dir, "[Service]\nType=notify\nExecStart=" + kExe + "\n");
  auto b =
      run_capture({*analyze, "security", "--offline=yes", "--threshold=20", "--no-pager", bare},
                  std::chrono::seconds(60));
  INFO(b.out << b.err);
  CHECK(b.exit_code != 0);
}

TEST_CASE(
    "cmake --install puts the binary, the unit and the configuration where the unit names "
    "them",
    "[deploy][systemd][integration]") {
  TempDir prefix;
  auto install = [&] {
    auto r = run_capture({"cmake", "--install", MCPMQTT_BINARY_DIR, "--prefix", prefix.path()},
                         std::chrono::seconds(120));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return r;
  };
  install();
  const auto p = prefix.path();
  const auto unit_path = p + "/lib/systemd/system/mcp-mqtt-bridge.service";
  const auto installed_text = read_file(unit_path);
  REQUIRE_FALSE(installed_text.empty());

  // ExecStart names the installed binary and the installed configuration, and nothing else in
  // the unit differs from the repository's.
  const auto exec =
      words(unit_value(parse_unit(installed_text), "Service", "ExecStart").value_or(""));
  REQUIRE(exec.size() == 3);
  CHECK(exec[0] == p + "/bin/mcp-mqtt-bridge");
  CHECK(executable(exec[0]));
  CHECK(exec[1] == "--config");
  CHECK(exec[2] == p + "/etc/mcp-mqtt-bridge/bridge.jsonc");
  CHECK(replace_once(installed_text, "ExecStart=" + exec[0] + " " + exec[1] + " " + exec[2],
                     kPackagedExec) == repo_file("systemd/mcp-mqtt-bridge.service"));

  // The configuration files: the default and the sample, readable by a dynamic user.
  const auto config = exec[2];
  const auto example = p + "/etc/mcp-mqtt-bridge/bridge.example.jsonc";
  CHECK(read_file(config) == repo_file("systemd/bridge.jsonc"));
  CHECK(read_file(example) == repo_file("config/bridge.example.jsonc"));
  CHECK(mode_of(config) == 0644);
  CHECK(mode_of(example) == 0644);
  CHECK(mode_of(unit_path) == 0644);

  // The manual pages, where man(1) looks under the prefix.
  CHECK(read_file(p + "/share/man/man8/mcp-mqtt-bridge.8") == repo_file("man/mcp-mqtt-bridge.8"));
  CHECK(read_file(p + "/share/man/man5/mcp-mqtt-bridge.conf.5") ==
        repo_file("man/mcp-mqtt-bridge.conf.5"));

  // The installed daemon accepts the installed default configuration, as it will at start.
  auto check = run_capture({exec[0], "--check-config", config});
  INFO(check.err);
  CHECK(check.exit_code == 0);

  // systemd accepts the unit as installed, with the real binary behind ExecStart.
  if (auto analyze = systemd_analyze()) {
    const auto v = verify(*analyze, unit_path);
    INFO(v.output);
    CHECK(v.ok);
  }

  // A reinstall (an upgrade) keeps the operator's configuration and refreshes the sample.
  std::ofstream(config) << "{ \"log\": { \"level\": \"debug\" } }\n";
  std::ofstream(example) << "stale\n";
  auto again = install();
  CHECK(again.out.find("Keeping: " + config) != std::string::npos);
  CHECK(read_file(config) == "{ \"log\": { \"level\": \"debug\" } }\n");
  CHECK(read_file(example) == repo_file("config/bridge.example.jsonc"));
}

TEST_CASE("cmake --install for a package (prefix /usr, DESTDIR) matches the unit and the image",
          "[deploy][systemd][integration]") {
  // The Dockerfile's build stage installs exactly like this and copies from the staging tree.
  TempDir staging;
  auto r = run_capture({"cmake", "--install", MCPMQTT_BINARY_DIR, "--prefix", "/usr"},
                       std::chrono::seconds(120), {{"DESTDIR", staging.path()}});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto s = staging.path();
  // The packaged unit is the repository's file as it is: its paths are the package's.
  CHECK(read_file(s + "/usr/lib/systemd/system/mcp-mqtt-bridge.service") ==
        repo_file("systemd/mcp-mqtt-bridge.service"));
  CHECK(executable(s + "/usr/bin/mcp-mqtt-bridge"));
  // Configuration in /etc, not /usr/etc (as GNUInstallDirs does for the /usr prefix).
  CHECK(fs::exists(s + "/etc/mcp-mqtt-bridge/bridge.jsonc"));
  CHECK(fs::exists(s + "/etc/mcp-mqtt-bridge/bridge.example.jsonc"));
  CHECK_FALSE(fs::exists(s + "/usr/etc"));
  CHECK(fs::exists(s + "/usr/share/man/man8/mcp-mqtt-bridge.8"));
  CHECK(fs::exists(s + "/usr/share/man/man5/mcp-mqtt-bridge.conf.5"));

  // Every file the image's runtime stage copies from the build stage's /staging is there.
  std::stringstream dockerfile(repo_file("docker/Dockerfile"));
  std::string line;
  int copies = 0;
  while (std::getline(dockerfile, line)) {
    const std::string from = "COPY --from=build /staging/";
    if (line.rfind(from, 0) != 0) continue;
    const auto src = line.substr(from.size(), line.find(' ', from.size()) - from.size());
    INFO(line);
    CHECK(fs::exists(s + "/" + src));
    ++copies;
  }
  CHECK(copies == 2);
}

// The container files without a Docker engine: the linter on the real files and on seeded
// mistakes, the image's health check against a real HTTP listener, the runtime package list
// against the binary's libraries, and the compose broker's configuration and health check run
// with the real Mosquitto.
#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <poll.h>
#include <rapidjson/document.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/deploy/deploy_support.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mcpmqtt::test;
using namespace mcpmqtt::test::deploy;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const std::string kLint = kSourceDir + "/scripts/lint-deploy.py";

RunResult lint(std::vector<std::string> args) {
  // Debian's interpreter when it is there (what install-deps.sh --test installs; it also starts
  // much faster than a version manager's shim), else whatever python3 is on PATH.
  static const std::string python =
      ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  args.insert(args.begin(), {python, kLint});
  return run_capture(args, 60s);
}

// ---- a one-request HTTP listener for the health check ------------------------------------------

// Accepts one connection on 127.0.0.1 (port 0), reads the request head, and answers with
// `response` (or, when it is empty, holds the connection open without answering until stopped).
class OneShotHttp {
 public:
  explicit OneShotHttp(std::string response) : response_(std::move(response)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    socklen_t len = sizeof sa;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    REQUIRE(::listen(fd_, 4) == 0);
    thread_ = std::thread([this] { serve(); });
  }
  ~OneShotHttp() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  std::uint16_t port() const { return port_; }
  // The request head as received (valid once the client is done).
  std::string request() {
    thread_done_.wait(false);
    return request_;
  }

 private:
  bool wait_readable(int fd) {
    while (!stop_) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) return true;
    }
    return false;
  }
  void serve() {
    if (wait_readable(fd_)) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      char buf[4096];
      while (c >= 0 && request_.find("\r\n\r\n") == std::string::npos && wait_readable(c)) {
        const auto n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        request_.append(buf, static_cast<std::size_t>(n));
      }
      if (c >= 0 && !response_.empty()) (void)!::write(c, response_.data(), response_.size());
      while (c >= 0 && response_.empty() && !stop_)  // hold it open, answer nothing
        std::this_thread::sleep_for(20ms);
      if (c >= 0) ::close(c);
    }
    thread_done_ = true;
    thread_done_.notify_all();
  }

  std::string response_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> thread_done_{false};
  std::string request_;
  std::thread thread_;
};

RunResult healthcheck(std::uint16_t port, std::vector<std::string> args = {},
                      std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), kSourceDir + "/docker/healthcheck.sh");
  // The image sets a listen address on all interfaces; the script connects to loopback.
  env.emplace("MCPMQTT_HTTP_LISTEN", "0.0.0.0:" + std::to_string(port));
  return run_capture(args, 30s, env);
}

// ---- compose file, as the linter reads it ------------------------------------------------------

rapidjson::Document compose_json() {
  auto r = lint({"--dump-compose"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  rapidjson::Document d;
  d.Parse(r.out.c_str());
  REQUIRE_FALSE(d.HasParseError());
  return d;
}

}  // namespace

// ---- the linter ------------------------------------------------------------------------------

TEST_CASE("container lint: the Dockerfile and compose file pass", "[deploy][docker][integration]") {
  auto r = lint({});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.empty());
}

TEST_CASE("container lint: seeded Dockerfile mistakes are each caught",
          "[deploy][docker][integration]") {
  const std::string good = repo_file("docker/Dockerfile");
  REQUIRE_FALSE(good.empty());
  struct Case {
    const char* what;
    std::string from, to;
    std::string expected;  // "RULE: start of the message"
  };
  const std::string base = "FROM debian:bookworm-20250520";
  const std::string apt_run = "RUN /tmp/install-deps.sh --runtime && rm -rf /var/lib/apt/lists/* ";
  const std::vector<Case> cases = {
      {"untagged base image", base + " AS build", "FROM debian AS build",
       "DF-pin: FROM debian has no tag"},
      {"latest base image", base + "\nLABEL", "FROM debian:latest\nLABEL",
       "DF-pin: FROM debian:latest uses the :latest tag"},
      {"runtime base differs from the build base", base + "\nLABEL",
       "FROM debian:bookworm-20240101\nLABEL", "DF-stages: the runtime stage is FROM"},
      {"shell-form ENTRYPOINT", "ENTRYPOINT [\"mcp-mqtt-bridge\"]", "ENTRYPOINT mcp-mqtt-bridge",
       "DF-exec-form: ENTRYPOINT in shell form"},
      {"CMD with single quotes (not JSON: Docker runs it through sh)",
       "CMD [\"--config\", \"/etc/mcp-mqtt-bridge/bridge.jsonc\"]",
       "CMD ['--config', '/etc/mcp-mqtt-bridge/bridge.jsonc']", "DF-exec-form: CMD in shell form"},
      {"no USER", "USER 10001:10001\n", "", "DF-user: ENTRYPOINT comes before any USER"},
      {"USER root", "USER 10001:10001", "USER root", "DF-user: USER root is root"},
      {"USER by name", "USER 10001:10001", "USER mcp", "DF-user: USER mcp: give the numeric"},
      {"USER after ENTRYPOINT", "USER 10001:10001\n", "",
       "DF-user: USER comes after ENTRYPOINT"},  // (re-added below, after ENTRYPOINT)
      {"apt-get install without --no-install-recommends or cleanup", apt_run,
       "RUN apt-get update && apt-get install -y curl\n" + apt_run,
       "DF-apt: apt-get install without --no-install-recommends"},
      {"apt-get install without update", apt_run,
       "RUN apt-get install -y --no-install-recommends curl && rm -rf /var/lib/apt/lists/*\n" +
           apt_run,
       "DF-apt: apt-get install without apt-get update before it"},
      {"install-deps.sh leaves the apt lists in the layer",
       "RUN scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*", "RUN scripts/install-deps.sh",
       "DF-apt: install-deps.sh without rm -rf /var/lib/apt/lists/*"},
      {"ADD of a local file", "COPY docker/bridge.jsonc", "ADD docker/bridge.jsonc",
       "DF-add: ADD docker/bridge.jsonc: use COPY"},
      {"no HEALTHCHECK",
       "HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \\\n  CMD "
       "[\"/usr/libexec/mcp-mqtt-bridge/healthcheck\"]\n",
       "", "DF-healthcheck: the runtime stage has no HEALTHCHECK"},
      {"HEALTHCHECK of a program the image does not have", "CMD [\"/usr/libexec/", "CMD [\"/opt/",
       "DF-healthcheck: HEALTHCHECK runs /opt/mcp-mqtt-bridge/healthcheck"},
      {"relative WORKDIR", "WORKDIR /var/lib/mcp-mqtt-bridge", "WORKDIR var/lib/mcp-mqtt-bridge",
       "DF-workdir: WORKDIR var/lib/mcp-mqtt-bridge is relative"},
      {"a build recipe of its own",
       "scripts/build.sh release -DMCPMQTT_BUILD_TESTS=OFF -DCMAKE_INSTALL_PREFIX=/usr",
       "cmake -S . -B build -DCMAKE_INSTALL_PREFIX=/usr && cmake --build build",
       "DF-scripts: the build stage does not run scripts/build.sh"},
      {"runtime packages not from the script's list", "/tmp/install-deps.sh --runtime",
       "/tmp/install-deps.sh", "DF-scripts: the runtime stage does not run install-deps.sh"},
      {"COPY of a file that is not in the repository", "COPY docker/bridge.jsonc",
       "COPY docker/bridge.json", "DF-copy: COPY docker/bridge.json: no such file"},
      {"COPY from a stage that does not exist", "COPY --from=build /staging/usr/bin",
       "COPY --from=builder /staging/usr/bin", "DF-copy: COPY --from=builder: no earlier stage"},
      {"loopback listen address in the image", "MCPMQTT_HTTP_LISTEN=0.0.0.0:8080",
       "MCPMQTT_HTTP_LISTEN=127.0.0.1:8080", "DF-expose: MCPMQTT_HTTP_LISTEN=127.0.0.1:8080 is"},
      {"listen port not exposed", "EXPOSE 8080", "EXPOSE 9090",
       "DF-expose: MCPMQTT_HTTP_LISTEN=0.0.0.0:8080 but port 8080 is not EXPOSEd"},
      {"two ENTRYPOINTs", "ENTRYPOINT [\"mcp-mqtt-bridge\"]",
       "ENTRYPOINT [\"bash\"]\nENTRYPOINT [\"mcp-mqtt-bridge\"]",
       "DF-duplicate: 2 ENTRYPOINT instructions"},
      {"a stop signal the daemon does not handle", "STOPSIGNAL SIGTERM", "STOPSIGNAL SIGKILL",
       "DF-stopsignal: STOPSIGNAL SIGKILL"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    auto bad = replace_once(good, c.from, c.to);
    REQUIRE_FALSE(bad.empty());
    if (std::string(c.what) == "USER after ENTRYPOINT")
      bad = replace_once(bad, "ENTRYPOINT [\"mcp-mqtt-bridge\"]\n",
                         "ENTRYPOINT [\"mcp-mqtt-bridge\"]\nUSER 10001:10001\n");
    REQUIRE_FALSE(bad.empty());
    TempDir dir;
    const auto path = dir.write("Dockerfile", bad);
    auto r = lint({"--dockerfile", path});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.out.find(": " + c.expected) != std::string::npos);
  }
}

TEST_CASE("container lint: a COPY that .dockerignore excludes is caught",
          "[deploy][docker][integration]") {
  TempDir dir;
  const auto ignore = dir.write(".dockerignore", repo_file(".dockerignore") + "docker/*.jsonc\n");
  auto r = lint({"--dockerignore", ignore});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("DF-copy: COPY docker/bridge.jsonc: docker/bridge.jsonc is excluded by "
                   ".dockerignore") != std::string::npos);
  // And an exception pattern lets it back in.
  const auto except =
      dir.write("ignore2", repo_file(".dockerignore") + "docker/*.jsonc\n!docker/bridge.jsonc\n");
  auto ok = lint({"--dockerignore", except});
  INFO(ok.out << ok.err);
  CHECK(ok.exit_code == 0);
}

TEST_CASE("container lint: seeded compose mistakes are each caught",
          "[deploy][docker][integration]") {
  const std::string good = repo_file("docker/compose.yaml");
  REQUIRE_FALSE(good.empty());
  struct Case {
    const char* what;
    std::string from, to;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"untagged image", "image: eclipse-mosquitto:2", "image: eclipse-mosquitto",
       "CO-image: services.mosquitto.image eclipse-mosquitto has no tag"},
      {"latest image", "image: eclipse-mosquitto:2", "image: eclipse-mosquitto:latest",
       "CO-image: services.mosquitto.image eclipse-mosquitto:latest uses the :latest tag"},
      {"port on every interface", "\"127.0.0.1:8080:8080\"", "\"8080:8080\"",
       "CO-ports: services.bridge.ports 8080:8080: published on every interface"},
      {"port on a network address", "\"127.0.0.1:8080:8080\"", "\"0.0.0.0:8080:8080\"",
       "CO-ports: services.bridge.ports 0.0.0.0:8080:8080: published on 0.0.0.0"},
      {"unquoted port", "\"127.0.0.1:8080:8080\"", "127.0.0.1:8080:8080",
       "CO-ports: services.bridge.ports: quote 127.0.0.1:8080:8080"},
      {"base-60 port", "\"127.0.0.1:8080:8080\"", "22:22",
       "CO-yaml: unquoted 22:22 means different things"},
      {"no broker healthcheck", "    healthcheck:\n      # $SYS",
       "    x-healthcheck:\n      # $SYS",
       "CO-depends: services.bridge waits for mosquitto to be healthy, but mosquitto has no "
       "healthcheck"},
      {"depends_on as a list",
       "    depends_on:\n      mosquitto:\n        condition: service_healthy",
       "    depends_on:\n      - mosquitto",
       "CO-depends: services.bridge.depends_on as a list only waits"},
      {"depends_on an unknown service", "      mosquitto:\n        condition",
       "      broker:\n        condition",
       "CO-depends: services.bridge.depends_on: no service broker"},
      {"a config file that does not exist", "./mosquitto.conf:", "./mosquito.conf:",
       "CO-file: services.mosquitto.volumes: ./mosquito.conf does not exist"},
      {"a Dockerfile that does not exist", "dockerfile: docker/Dockerfile",
       "dockerfile: docker/Dockerfile.missing",
       "CO-file: services.bridge.build.dockerfile: docker/Dockerfile.missing does not exist"},
      {"an undeclared named volume", "volumes:\n  bridge-home:\n", "",
       "CO-volume: services.bridge.volumes: named volume bridge-home is not declared"},
      {"a duplicate key", "    restart: unless-stopped\n\n  bridge:",
       "    restart: unless-stopped\n    restart: always\n\n  bridge:",
       "CO-yaml: duplicate key restart"},
      {"a tab in the indentation", "    image: mcp-mqtt-bridge:0.1.0",
       "\timage: mcp-mqtt-bridge:0.1.0", "CO-yaml: a tab in the indentation"},
      {"bad indentation", "    image: mcp-mqtt-bridge:0.1.0", "     image: mcp-mqtt-bridge:0.1.0",
       "CO-yaml: unexpected indentation"},
      {"an unescaped $ that compose would substitute", "\"$$SYS/broker/version\"",
       "\"$SYS/broker/version\"", "CO-interpolation: compose replaces $SYS"},
      {"a misspelt service key",
       "    depends_on:", "    depend_on:", "CO-structure: services.bridge: unknown key depend_on"},
      {"the obsolete version key", "name: mcp-mqtt-bridge",
       "version: \"3.8\"\nname: mcp-mqtt-bridge",
       "CO-structure: the top-level version key is obsolete"},
      {"a healthcheck argument that is a number", "        - \"1883\"", "        - 1883",
       "CO-healthcheck: services.mosquitto.healthcheck.test: 1883 is not a string"},
      {"a healthcheck of a program the image does not have",
       "[\"CMD\", \"/usr/libexec/mcp-mqtt-bridge/healthcheck\"]",
       "[\"CMD\", \"/usr/local/bin/healthcheck\"]",
       "CO-healthcheck: services.bridge.healthcheck runs /usr/local/bin/healthcheck"},
      {"host networking", "    init: true", "    init: true\n    network_mode: host",
       "CO-ports: services.bridge: network_mode host"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    const auto bad = replace_once(good, c.from, c.to);
    REQUIRE_FALSE(bad.empty());
    TempDir dir;
    const auto path = dir.write("compose.yaml", bad);
    auto r = lint({"--compose", path, "--compose-dir", kSourceDir + "/docker"});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.out.find(": " + c.expected) != std::string::npos);
  }
}

// ---- the image's health check ----------------------------------------------------------------

TEST_CASE("container healthcheck: healthy when /healthz answers 200",
          "[deploy][docker][integration]") {
  OneShotHttp server("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n");
  auto r = healthcheck(server.port());
  INFO(r.err);
  CHECK(r.exit_code == 0);
  const auto req = server.request();
  CHECK(req.rfind("GET /healthz HTTP/1.1\r\n", 0) == 0);
  // A Host the bridge accepts without allowed_hosts.
  CHECK(req.find("\r\nHost: localhost\r\n") != std::string::npos);
}

TEST_CASE("container healthcheck: unhealthy on another status", "[deploy][docker][integration]") {
  OneShotHttp server("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
  auto r = healthcheck(server.port(), {"/readyz"});
  CHECK(r.exit_code == 1);
  CHECK(r.err == "healthcheck: GET /readyz on 127.0.0.1:" + std::to_string(server.port()) +
                     " answered \"HTTP/1.1 503 Service Unavailable\"\n");
  CHECK(server.request().rfind("GET /readyz HTTP/1.1\r\n", 0) == 0);
}

TEST_CASE("container healthcheck: unhealthy when nothing listens",
          "[deploy][docker][integration]") {
  const auto port = free_loopback_port();
  auto r = healthcheck(port);
  CHECK(r.exit_code == 1);
  CHECK(r.err ==
        "healthcheck: nothing accepts connections on 127.0.0.1:" + std::to_string(port) + "\n");
}

TEST_CASE("container healthcheck: unhealthy, within its timeout, when the daemon does not answer",
          "[deploy][docker][integration]") {
  OneShotHttp server("");  // accepts, reads, never answers
  const auto start = std::chrono::steady_clock::now();
  auto r = healthcheck(server.port(), {}, {{"MCPMQTT_HEALTHCHECK_TIMEOUT_S", "1"}});
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("answered \"nothing within 1 s\"") != std::string::npos);
  CHECK(took < 10s);
}

// ---- runtime packages ------------------------------------------------------------------------

TEST_CASE("container runtime packages cover every library the daemon links",
          "[deploy][docker][integration]") {
  if (!find_program("dpkg-query") || !find_program("ldd")) {
    WARN("dpkg-query or ldd is missing (not Debian): the runtime package list was NOT checked");
    return;
  }
  auto listed = run_capture({kSourceDir + "/scripts/install-deps.sh", "--runtime", "--print"});
  REQUIRE(listed.exit_code == 0);
  std::set<std::string> runtime;
  std::stringstream ls(listed.out);
  for (std::string p; std::getline(ls, p);)
    runtime.insert(p);
  REQUIRE(runtime.count("nodejs") == 1);

  // The daemon, and the MQTT role runner, which links the MQTT transport the daemon is being
  // wired to, so the list is right before the daemon links it.
  std::vector<std::string> programs = {MCPMQTT_BRIDGE_EXE};
#ifdef MCPMQTT_ROLE_RUNNER
  programs.push_back(MCPMQTT_ROLE_RUNNER);
#endif
  // Each library the dynamic loader resolves, as ldd prints it.
  std::vector<std::pair<std::string, std::string>> libraries;  // (program, path)
  for (const auto& program : programs) {
    auto ldd = run_capture({"ldd", program});
    REQUIRE(ldd.exit_code == 0);
    std::stringstream lines(ldd.out);
    for (std::string line; std::getline(lines, line);) {
      // "\tlibfmt.so.9 => /lib/x86_64-linux-gnu/libfmt.so.9 (0x...)" or the loader's own line.
      std::string path;
      if (const auto arrow = line.find("=> /"); arrow != std::string::npos)
        path = line.substr(arrow + 3, line.find(' ', arrow + 3) - arrow - 3);
      else if (const auto slash = line.find('/'); slash != std::string::npos)
        path = line.substr(slash, line.find(' ', slash) - slash);
      if (path.empty()) continue;  // linux-vdso
      // The sanitizer runtimes only exist in the ASan build; the image is a release build.
      if (path.find("libasan") != std::string::npos || path.find("libubsan") != std::string::npos)
        continue;
      libraries.emplace_back(program, path);
    }
  }
  // dpkg knows a library under the path it shipped it at: with merged /usr that may be /lib/...
  // or /usr/lib/..., and ldd may print a symbolic link. Ask about every form at once.
  auto forms = [](const std::string& path) {
    std::vector<std::string> out = {path, fs::weakly_canonical(path).string()};
    for (const auto& c : std::vector<std::string>(out))
      out.push_back(c.rfind("/usr/", 0) == 0 ? c.substr(4) : "/usr" + c);
    return out;
  };
  std::vector<std::string> query = {"dpkg-query", "-S"};
  for (const auto& [program, path] : libraries) {
    for (const auto& f : forms(path))
      query.push_back(f);
  }
  // Exit status 1 when some forms are unknown to dpkg, which is expected; found ones are printed
  // as "package:arch: path".
  auto owners = run_capture(query, 60s);
  std::map<std::string, std::string> package_of;
  std::stringstream out(owners.out);
  for (std::string line; std::getline(out, line);) {
    const auto sep = line.find(": ");
    if (sep == std::string::npos) continue;
    package_of[line.substr(sep + 2)] = line.substr(0, line.find(':'));
  }
  for (const auto& [program, path] : libraries) {
    std::string package;
    for (const auto& f : forms(path)) {
      if (auto it = package_of.find(f); it != package_of.end()) {
        package = it->second;
        break;
      }
    }
    INFO(program << ": " << path << "\n" << owners.err);
    REQUIRE_FALSE(package.empty());
    CHECK(runtime.count(package) == 1);
  }
  CHECK(libraries.size() >= 4);  // libc, libstdc++, libgcc_s, the loader at least
}

// ---- the compose broker and the image's configuration ------------------------------------------

TEST_CASE("compose broker: mosquitto.conf runs, and the compose healthcheck sees it up and down",
          "[deploy][docker][integration]") {
  if (!find_program("mosquitto_sub")) {
    WARN("mosquitto_sub is not installed (scripts/install-deps.sh installs mosquitto-clients)");
    return;
  }
  // The compose file's broker configuration, on a free loopback port instead of 1883.
  const auto port = free_loopback_port();
  auto conf = replace_once(repo_file("docker/mosquitto.conf"), "\nlistener 1883\n",
                           "\nlistener " + std::to_string(port) + " 127.0.0.1\n");
  REQUIRE_FALSE(conf.empty());
  TempDir dir;
  const auto conf_path = dir.write("mosquitto.conf", conf);
  Process::Options o;
  o.argv = {"mosquitto", "-c", conf_path};
  o.stdout_file = dir.path() + "/mosquitto.log";
  o.stderr_file = dir.path() + "/mosquitto.log";
  auto broker = Process::start(o);
  REQUIRE(wait_for_port(port, 10s));

  // The healthcheck command exactly as compose runs it: "$$" unescaped, CMD dropped.
  auto d = compose_json();
  const auto& test = d["services"]["mosquitto"]["healthcheck"]["test"];
  REQUIRE(test.IsArray());
  REQUIRE(std::string(test[0].GetString()) == "CMD");
  std::vector<std::string> argv;
  for (rapidjson::SizeType i = 1; i < test.Size(); ++i) {
    std::string arg = test[i].GetString();
    if (arg == "1883") arg = std::to_string(port);
    for (auto at = arg.find("$$"); at != std::string::npos; at = arg.find("$$", at + 1))
      arg.erase(at, 1);
    argv.push_back(arg);
  }
  auto up = run_capture(argv, 30s);
  INFO(up.out << up.err << read_file(dir.path() + "/mosquitto.log"));
  CHECK(up.exit_code == 0);
  CHECK(up.out.rfind("mosquitto version ", 0) == 0);  // $SYS/broker/version, retained

  broker->signal(SIGTERM);
  REQUIRE(broker->wait_for(10s));
  auto down = run_capture(argv, 30s);
  CHECK(down.exit_code != 0);
}

TEST_CASE("container configuration: the image's bridge.jsonc is valid with the image's environment",
          "[deploy][docker][integration]") {
  auto r = run_capture({MCPMQTT_BRIDGE_EXE, "--check-config", kSourceDir + "/docker/bridge.jsonc"},
                       30s, {{"MCPMQTT_HTTP_LISTEN", "0.0.0.0:8080"}});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("broker mqtt://mosquitto:1883") != std::string::npos);
  CHECK(r.out.find("HTTP ingress on 0.0.0.0:8080") != std::string::npos);
  CHECK(r.out.find("demo/everything: stdio") != std::string::npos);
}

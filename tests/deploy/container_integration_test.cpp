// The container files' parts that run without a container engine: the image's health check
// against a real HTTP listener (the failure paths the container tier cannot reach cheaply), the
// runtime package list against the binary's libraries (before a five-minute image build says so),
// and the image's configuration. The image itself is built and run by the container tier
// (scripts/container.sh test, tests/deploy/container.test.mjs).
#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <poll.h>
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

}  // namespace

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
    missing_tool("dpkg-query or ldd (not Debian): the runtime package list was NOT checked");
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

// ---- the image's configuration ----------------------------------------------------------------

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

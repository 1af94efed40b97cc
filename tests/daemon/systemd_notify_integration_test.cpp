// SystemdNotifier against a real AF_UNIX datagram socket standing in for systemd's, found through
// the real $NOTIFY_SOCKET: what arrives, in which order, from which pid.
#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>

#include <catch2/catch.hpp>
#include <unistd.h>

#include "common/log.hpp"
#include "daemon/systemd_notify.hpp"
#include "tests/support/log_capture.hpp"
#include "tests/support/notify_socket.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mcpmqtt::daemon;
using namespace mcpmqtt::test;
using namespace std::chrono_literals;

namespace {

// Sets an environment variable for the lifetime of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

std::uint64_t monotonic_usec() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000u +
         static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
}

// The life of a Type=notify service, as the daemon will tell it, checked datagram by datagram.
void check_lifecycle(NotifySocket& manager) {
  ScopedEnv env("NOTIFY_SOCKET", manager.address());
  SystemdNotifier n;
  REQUIRE(n.enabled());

  CHECK(n.ready("listening on 127.0.0.1:8080, broker connected"));
  auto d = manager.receive(5s);
  REQUIRE(d);
  CHECK(d->text == "READY=1\nSTATUS=listening on 127.0.0.1:8080, broker connected");
  // What NotifyAccess=main checks: the datagram comes from this (the main) process.
  CHECK(d->sender_pid == ::getpid());

  CHECK(n.watchdog());
  d = manager.receive(5s);
  REQUIRE(d);
  CHECK(d->text == "WATCHDOG=1");

  const auto before = monotonic_usec();
  CHECK(n.reloading("reloading the configuration"));
  const auto after = monotonic_usec();
  d = manager.receive(5s);
  REQUIRE(d);
  auto f = d->fields();
  CHECK(f.size() == 3);
  CHECK(f["RELOADING"] == "1");
  CHECK(f["STATUS"] == "reloading the configuration");
  // systemd 253+ compares MONOTONIC_USEC with the time it sent SIGHUP: it must be CLOCK_MONOTONIC.
  const auto stamp = std::stoull(f["MONOTONIC_USEC"]);
  CHECK(stamp >= before);
  CHECK(stamp <= after);

  CHECK(n.ready());
  d = manager.receive(5s);
  REQUIRE(d);
  CHECK(d->text == "READY=1");

  CHECK(n.status("2 sessions"));
  d = manager.receive(5s);
  REQUIRE(d);
  CHECK(d->text == "STATUS=2 sessions");

  CHECK(n.stopping("stopping"));
  d = manager.receive(5s);
  REQUIRE(d);
  CHECK(d->text == "STOPPING=1\nSTATUS=stopping");
  CHECK(d->sender_pid == ::getpid());

  // Nothing else was sent.
  CHECK_FALSE(manager.receive(100ms));
}

}  // namespace

TEST_CASE("systemd notify: READY, WATCHDOG, RELOADING, STATUS and STOPPING reach a socket path",
          "[systemd][integration]") {
  NotifySocket manager(NotifySocket::Kind::path);
  REQUIRE(manager.address().front() == '/');
  check_lifecycle(manager);
}

TEST_CASE("systemd notify: the same through an abstract socket (@name)", "[systemd][integration]") {
  NotifySocket manager(NotifySocket::Kind::abstract);
  REQUIRE(manager.address().front() == '@');
  check_lifecycle(manager);
}

TEST_CASE("systemd notify: the watchdog interval follows WatchdogSec for this process",
          "[systemd][integration]") {
  NotifySocket manager;
  ScopedEnv socket_env("NOTIFY_SOCKET", manager.address());
  ScopedEnv usec_env("WATCHDOG_USEC", "30000000");  // WatchdogSec=30
  {
    ScopedEnv pid_env("WATCHDOG_PID", std::to_string(::getpid()));
    SystemdNotifier n;
    CHECK(n.watchdog_interval() == 15s);
  }
  {
    // Set for another process (this one would be a child that inherited the environment).
    ScopedEnv pid_env("WATCHDOG_PID", std::to_string(::getppid()));
    SystemdNotifier n;
    CHECK_FALSE(n.watchdog_interval());
  }
}

TEST_CASE("systemd notify: a manager that is not there costs one log line and no exception",
          "[systemd][integration]") {
  TempDir dir;
  const std::string path = dir.path() + "/notify";
  ScopedEnv env("NOTIFY_SOCKET", path);
  LogCapture log("daemon");
  SystemdNotifier n;
  REQUIRE(n.enabled());
  CHECK_FALSE(n.ready());
  CHECK_FALSE(n.watchdog());
  CHECK_FALSE(n.stopping());
  auto lines = log.lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("cannot send a notification to systemd at NOTIFY_SOCKET=" + path +
                      ": No such file or directory") != std::string::npos);
}

TEST_CASE("systemd notify: sending works again once the socket is there",
          "[systemd][integration]") {
  // A failed send leaves nothing broken behind: when the manager's socket appears (or comes
  // back), the same notifier's next notification arrives.
  TempDir dir;
  const std::string path = dir.path() + "/notify";
  ScopedEnv env("NOTIFY_SOCKET", path);
  SystemdNotifier n;
  CHECK_FALSE(n.watchdog());

  NotifySocket manager(path);
  CHECK(n.watchdog());
  const auto d = manager.receive(5s);
  REQUIRE(d);
  CHECK(d->text == "WATCHDOG=1");
}

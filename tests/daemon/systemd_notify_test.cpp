// The systemd notification protocol without I/O: datagram texts, $NOTIFY_SOCKET forms, the
// watchdog interval, and a notifier that has nothing to talk to.
#include "daemon/systemd_notify.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include <catch2/catch.hpp>
#include <unistd.h>

#include "common/log.hpp"
#include "tests/support/log_capture.hpp"

using namespace mcpmqtt::daemon;
using namespace std::chrono_literals;

using mcpmqtt::test::LogCapture;

namespace {

// A fake environment for SystemdNotifier (GetEnv is a plain function pointer).
std::map<std::string, std::string>& fake_env() {
  static std::map<std::string, std::string> env;
  return env;
}
const char* fake_getenv(const char* name) {
  auto it = fake_env().find(name);
  return it == fake_env().end() ? nullptr : it->second.c_str();
}

}  // namespace

TEST_CASE("sd_notify: the datagrams systemd expects", "[systemd]") {
  CHECK(sd_notify::ready_message() == "READY=1");
  CHECK(sd_notify::ready_message("listening on 127.0.0.1:8080") ==
        "READY=1\nSTATUS=listening on 127.0.0.1:8080");
  CHECK(sd_notify::stopping_message() == "STOPPING=1");
  CHECK(sd_notify::stopping_message("stopping: 3 sessions") ==
        "STOPPING=1\nSTATUS=stopping: 3 sessions");
  CHECK(sd_notify::reloading_message(1234567890123) == "RELOADING=1\nMONOTONIC_USEC=1234567890123");
  CHECK(sd_notify::reloading_message(7, "reloading /etc/x.jsonc") ==
        "RELOADING=1\nMONOTONIC_USEC=7\nSTATUS=reloading /etc/x.jsonc");
  CHECK(sd_notify::status_message("broker down, reconnecting") ==
        "STATUS=broker down, reconnecting");
  CHECK(sd_notify::watchdog_message() == "WATCHDOG=1");
}

TEST_CASE("sd_notify: a status is one assignment whatever its text", "[systemd]") {
  // A line break would let the text inject another assignment such as READY=1 or MAINPID=.
  CHECK(sd_notify::status_message("bad\nREADY=1\r\n") == "STATUS=bad READY=1  ");
  CHECK(sd_notify::ready_message(std::string("a\0b", 3)) == "READY=1\nSTATUS=a b");
}

TEST_CASE("sd_notify: a long status is cut at a character boundary", "[systemd]") {
  const std::string ascii(3000, 'x');
  CHECK(sd_notify::status_message(ascii) ==
        "STATUS=" + std::string(sd_notify::kMaxStatusBytes, 'x'));
  // "é" is two bytes; 1023 ASCII bytes put one across the limit, so it is left out whole.
  const std::string text = std::string(sd_notify::kMaxStatusBytes - 1, 'y') + "\xC3\xA9" + "zz";
  CHECK(sd_notify::status_message(text) ==
        "STATUS=" + std::string(sd_notify::kMaxStatusBytes - 1, 'y'));
  // Well under systemd's 4096-byte datagram buffer with every other assignment added.
  CHECK(sd_notify::reloading_message(UINT64_MAX, ascii).size() < 1200);
}

TEST_CASE("sd_notify: NOTIFY_SOCKET forms", "[systemd]") {
  std::string why;
  auto path = sd_notify::parse_address("/run/systemd/notify", why);
  REQUIRE(path);
  CHECK(path->name == "/run/systemd/notify");
  CHECK_FALSE(path->abstract);

  auto abstract = sd_notify::parse_address("@/org/freedesktop/systemd1/notify/123", why);
  REQUIRE(abstract);
  CHECK(abstract->name == "/org/freedesktop/systemd1/notify/123");
  CHECK(abstract->abstract);

  // sun_path holds 108 bytes: a path needs its NUL, an abstract name the leading NUL.
  CHECK(sd_notify::parse_address("/" + std::string(106, 'p'), why));
  CHECK_FALSE(sd_notify::parse_address("/" + std::string(107, 'p'), why));
  CHECK(why == "is a path longer than 107 bytes");
  CHECK(sd_notify::parse_address("@" + std::string(107, 'a'), why));
  CHECK_FALSE(sd_notify::parse_address("@" + std::string(108, 'a'), why));

  CHECK_FALSE(sd_notify::parse_address("", why));
  CHECK(why == "is empty");
  CHECK_FALSE(sd_notify::parse_address("@", why));
  CHECK_FALSE(sd_notify::parse_address("run/notify", why));
  CHECK(why == "is neither an absolute path nor an abstract name starting with '@'");
  CHECK_FALSE(sd_notify::parse_address("vsock:2:1234", why));
  CHECK(why == "is an AF_VSOCK address, which this build does not support");
}

TEST_CASE("sd_notify: the watchdog interval is half of WATCHDOG_USEC", "[systemd]") {
  const pid_t self = 4242;
  CHECK(sd_notify::watchdog_interval("30000000", nullptr, self) == 15s);
  CHECK(sd_notify::watchdog_interval("30000000", "", self) == 15s);
  CHECK(sd_notify::watchdog_interval("30000000", "4242", self) == 15s);
  CHECK(sd_notify::watchdog_interval("3", nullptr, self) == 1us);
  CHECK(sd_notify::watchdog_interval("1", nullptr, self) == 1us);
  CHECK(sd_notify::watchdog_interval("18446744073709551615", nullptr, self) ==
        std::chrono::microseconds::max());
}

TEST_CASE("sd_notify: no watchdog unless it is meant for this process", "[systemd]") {
  const pid_t self = 4242;
  CHECK_FALSE(sd_notify::watchdog_interval(nullptr, nullptr, self));
  CHECK_FALSE(sd_notify::watchdog_interval("", nullptr, self));
  CHECK_FALSE(sd_notify::watchdog_interval("0", nullptr, self));
  CHECK_FALSE(sd_notify::watchdog_interval("-30000000", nullptr, self));
  CHECK_FALSE(sd_notify::watchdog_interval("30s", nullptr, self));
  CHECK_FALSE(sd_notify::watchdog_interval(" 30000000", nullptr, self));
  CHECK_FALSE(sd_notify::watchdog_interval("18446744073709551616", nullptr, self));
  // Another process of the unit (the main one, when this is a child that inherited the env).
  CHECK_FALSE(sd_notify::watchdog_interval("30000000", "4241", self));
  CHECK_FALSE(sd_notify::watchdog_interval("30000000", "pid", self));
}

TEST_CASE("sd_notify: without NOTIFY_SOCKET the notifier does nothing", "[systemd]") {
  fake_env() = {{"WATCHDOG_USEC", "30000000"}};
  LogCapture log("daemon");
  SystemdNotifier n(fake_getenv);
  CHECK_FALSE(n.enabled());
  CHECK_FALSE(n.ready("up"));
  CHECK_FALSE(n.reloading());
  CHECK_FALSE(n.stopping());
  CHECK_FALSE(n.status("x"));
  CHECK_FALSE(n.watchdog());
  // Keep-alives would go nowhere, so the daemon is told not to schedule them.
  CHECK_FALSE(n.watchdog_interval());
  CHECK(log.lines().empty());
}

TEST_CASE("sd_notify: the watchdog interval comes from the environment", "[systemd]") {
  fake_env() = {{"NOTIFY_SOCKET", "/run/systemd/notify"},
                {"WATCHDOG_USEC", "30000000"},
                {"WATCHDOG_PID", std::to_string(::getpid())}};
  SystemdNotifier n(fake_getenv);
  CHECK(n.enabled());
  CHECK(n.watchdog_interval() == 15s);
  // Read when asked, not only at construction.
  fake_env()["WATCHDOG_PID"] = std::to_string(::getpid() + 1);
  CHECK_FALSE(n.watchdog_interval());
  fake_env().erase("WATCHDOG_PID");
  fake_env().erase("WATCHDOG_USEC");
  CHECK_FALSE(n.watchdog_interval());
}

TEST_CASE("sd_notify: a bad NOTIFY_SOCKET is reported once and notifications are off",
          "[systemd]") {
  fake_env() = {{"NOTIFY_SOCKET", "relative/notify"}};
  LogCapture log("daemon");
  SystemdNotifier n(fake_getenv);
  CHECK_FALSE(n.enabled());
  CHECK_FALSE(n.ready());
  CHECK_FALSE(n.watchdog());
  const auto lines = log.lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("NOTIFY_SOCKET is neither an absolute path nor an abstract name") !=
        std::string::npos);
  CHECK(lines[0].find("systemd notifications are off") != std::string::npos);
}

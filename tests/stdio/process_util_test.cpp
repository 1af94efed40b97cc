#include "stdio/process_util.hpp"

#include <csignal>

#include <catch2/catch.hpp>

namespace mcpmqtt::stdio {
namespace {

TEST_CASE("child environment: the minimal inherited set, then the entry's env", "[stdio]") {
  const std::vector<std::string> parent = {"HOME=/home/u",
                                           "PATH=/usr/bin:/bin",
                                           "USER=u",
                                           "LOGNAME=u",
                                           "SHELL=/bin/bash",
                                           "TERM=xterm",
                                           "LANG=C.UTF-8",
                                           "LC_ALL=C",
                                           "LC_CTYPE=C.UTF-8",
                                           "TZ=UTC",
                                           "TMPDIR=/tmp/u",
                                           "MCPMQTT_MQTT_PASSWORD=secret",
                                           "MCPMQTT_BROKER=x",
                                           "AWS_SECRET_ACCESS_KEY=k",
                                           "LD_PRELOAD=/evil.so",
                                           "LC=not-a-locale",
                                           "XDG_RUNTIME_DIR=/run/u",
                                           "NOEQUALS"};
  const auto env = child_environment(
      parent, {{"API_KEY", "abc=def"}, {"PATH", "/opt/bin"}, {"", "x"}, {"A=B", "y"}});
  const std::vector<std::string> expected = {"API_KEY=abc=def", "HOME=/home/u",     "LANG=C.UTF-8",
                                             "LC_ALL=C",        "LC_CTYPE=C.UTF-8", "LOGNAME=u",
                                             "PATH=/opt/bin",   "SHELL=/bin/bash",  "TERM=xterm",
                                             "TMPDIR=/tmp/u",   "TZ=UTC",           "USER=u"};
  CHECK(env == expected);
}

TEST_CASE("find_variable", "[stdio]") {
  const std::vector<std::string> env = {"PATHX=1", "PATH=/a:/b", "EMPTY="};
  CHECK(find_variable(env, "PATH") == std::optional<std::string>("/a:/b"));
  CHECK(find_variable(env, "EMPTY") == std::optional<std::string>(""));
  CHECK_FALSE(find_variable(env, "PAT"));
}

TEST_CASE("exec candidates follow execvp's PATH search", "[stdio]") {
  CHECK(exec_candidates("node", "/usr/local/bin:/usr/bin/:") ==
        std::vector<std::string>{"/usr/local/bin/node", "/usr/bin/node", "node"});
  CHECK(exec_candidates("./bin/server", "/usr/bin") == std::vector<std::string>{"./bin/server"});
  CHECK(exec_candidates("/opt/x", "/usr/bin") == std::vector<std::string>{"/opt/x"});
  CHECK(exec_candidates("", "/usr/bin").empty());
}

TEST_CASE("wait statuses in words", "[stdio]") {
  CHECK(describe_wait_status(3 << 8) == "exited with status 3");
  CHECK(describe_wait_status(0) == "exited with status 0");
  CHECK(describe_wait_status(SIGKILL) == "killed by signal 9 (SIGKILL)");
  CHECK(describe_wait_status(SIGSEGV | 0x80) == "killed by signal 11 (SIGSEGV), core dumped");
  CHECK(signal_name(SIGTERM) == "SIGTERM");
}

}  // namespace
}  // namespace mcpmqtt::stdio

// ChildChannel against real child processes (tests/stdio/test_child.cpp, started without a
// shell).
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <set>

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "stdio/child_channel.hpp"
#include "tests/stdio/harness.hpp"
#include "tests/support/temp_dir.hpp"

namespace mcpmqtt::stdio {
namespace {

using namespace std::chrono_literals;
using bridge::CloseReason;
using jsonrpc::Id;
using jsonrpc::Message;
using test::LogCapture;
using test::TempDir;
using test::stdio::gone;
using test::stdio::Loop;
using test::stdio::proc_stat;
using test::stdio::Recorder;
using test::stdio::zombie_children;
using Clock = std::chrono::steady_clock;

ChildSpec spec_for(std::vector<std::string> args = {}) {
  ChildSpec spec;
  spec.name = "test/x";
  spec.command = MCPMQTT_STDIO_TEST_CHILD;
  spec.args = std::move(args);
  spec.log_prefix = "[egress test/x C c1] ";
  spec.terminate_after = 2000ms;
  spec.kill_after = 2000ms;
  return spec;
}

struct Fixture {
  Recorder rec;  // declared first: outlives the loop and the channel
  LogCapture logs{"stdio"};
  Loop loop;
  std::shared_ptr<ChildRegistry> registry = std::make_shared<ChildRegistry>();
  std::shared_ptr<ChildChannel> ch;

  void create(ChildSpec spec) {
    auto c = ChildChannel::create(loop.strand, std::move(spec), registry);
    INFO((c ? std::string() : c.error().message));
    REQUIRE(c);
    ch = *c;
  }
  void start() { ch->start(rec.receiver()); }
  // A request, and the response to it.
  Message call(const Id& id, const std::string& method, const std::string& params = {}) {
    const std::size_t before = rec.messages.size();
    ch->send(Message::request(id, method, params));
    const bool answered = loop.run_until([&] {
      for (std::size_t i = before; i < rec.messages.size(); ++i) {
        if (rec.messages[i].is_response() && rec.messages[i].id() == id) return true;
      }
      return rec.closed();
    });
    INFO(logs.dump());
    REQUIRE(answered);
    for (std::size_t i = before; i < rec.messages.size(); ++i) {
      if (rec.messages[i].is_response() && rec.messages[i].id() == id) return rec.messages[i];
    }
    FAIL("closed before the response: " << rec.closes.front().detail);
    return rec.messages.back();
  }
  bool wait_all_reaped(std::chrono::milliseconds timeout = 20s) {
    return loop.run_until([&] { return registry->alive() == 0; }, timeout);
  }
  ~Fixture() {
    if (ch) {
      ch->close(CloseReason{CloseReason::Kind::shutdown, "test over"});
      ch.reset();
    }
    loop.run_until([&] { return registry->alive() == 0; });
  }
};

std::string member_string(const Message& m, const char* name) {
  const auto* r = m.result_value();
  if (!r || !r->IsObject() || !r->HasMember(name) || !(*r)[name].IsString()) return {};
  return (*r)[name].GetString();
}

TEST_CASE("child channel: requests and responses make a round trip in order",
          "[integration][stdio]") {
  Fixture f;
  f.create(spec_for());
  f.start();
  f.ch->send(Message::request(Id::integer(1), "echo", R"({"n":1})"));
  f.ch->send(Message::request(Id::string("two"), "echo", R"({"n":2,"s":"a\nb"})"));
  f.ch->send(Message::notification("notifications/initialized"));
  f.ch->send(Message::request(Id::integer(3), "nope"));
  REQUIRE(f.loop.run_until([&] { return f.rec.messages.size() == 3; }));
  REQUIRE(f.rec.messages[0].id() == Id::integer(1));
  CHECK(f.rec.messages[0].text() == R"({"jsonrpc":"2.0","id":1,"result":{"echo":{"n":1}}})");
  REQUIRE(f.rec.messages[1].id() == Id::string("two"));
  CHECK(f.rec.messages[1].text() ==
        R"({"jsonrpc":"2.0","id":"two","result":{"echo":{"n":2,"s":"a\nb"}}})");
  CHECK(f.rec.messages[2].kind() == jsonrpc::Kind::error);
  CHECK(f.rec.messages[2].error().code == jsonrpc::code::method_not_found);
  CHECK_FALSE(f.rec.closed());
  CHECK(f.ch->describe() == "[child test/x pid " + std::to_string(f.ch->pid()) + "]");
}

TEST_CASE("child channel: a batch line is delivered as its messages, in order",
          "[integration][stdio]") {
  Fixture f;
  f.create(spec_for());
  f.start();
  f.ch->send(Message::request(Id::integer(5), "batch"));
  REQUIRE(f.loop.run_until([&] { return f.rec.messages.size() == 2; }));
  CHECK(f.rec.messages[0].method() == "test/one");
  CHECK(f.rec.messages[0].is_notification());
  CHECK(f.rec.messages[1].id() == Id::integer(5));
  CHECK(f.rec.messages[1].kind() == jsonrpc::Kind::result);
}

TEST_CASE("child channel: stdout lines that are not JSON-RPC are logged, not forwarded",
          "[integration][stdio]") {
  Fixture f;
  auto spec = spec_for(
      {"--banner", "Server starting on stdio...", "--banner",
       R"({"jsonrpc":"2.0","method":"test/first"})", "--banner", R"({"hello":"world"})", "--banner",
       "", "--banner", R"([{"jsonrpc":"2.0","method":"test/in-batch"},{"bad":1}])", "--banner",
       std::string(3000, 'x'), "--banner", R"({"jsonrpc":"2.0","method":"test/last"})"});
  spec.limits.max_bytes = 1024;
  f.create(std::move(spec));
  f.start();
  REQUIRE(f.loop.run_until([&] { return f.rec.messages.size() == 3; }));
  CHECK(f.rec.messages[0].method() == "test/first");
  CHECK(f.rec.messages[1].method() == "test/in-batch");  // the valid element of the batch
  CHECK(f.rec.messages[2].method() == "test/last");
  // The channel stays up.
  CHECK(f.call(Id::integer(1), "echo").kind() == jsonrpc::Kind::result);
  CHECK(f.rec.messages.size() == 4);
  CHECK_FALSE(f.rec.closed());

  const std::string who = "[egress test/x C c1] [child test/x pid " + std::to_string(f.ch->pid());
  INFO(f.logs.dump());
  CHECK(f.logs.find({who, "protocol violation", "invalid JSON", "Server starting on stdio..."}));
  CHECK(f.logs.find({who, "protocol violation", R"({"hello":"world"})"}));
  CHECK(f.logs.find({who, "protocol violation", "batch element 1"}));
  CHECK(f.logs.find({who, "protocol violation", "3000 bytes exceeds the limit of 1024 bytes"}));
}

TEST_CASE(
    "child channel: a child flooding stdout without a newline is ended once the line runs past "
    "twice the limit, not left to the requests' timeouts (issue 20, faults 4)",
    "[integration][stdio]") {
  Fixture f;
  auto spec = spec_for({"--flood"});
  spec.limits.max_bytes = 64 * 1024;
  f.create(std::move(spec));
  f.start();
  REQUIRE(f.loop.run_until([&] { return f.rec.closed(); }));
  CHECK(f.rec.closes[0].kind == CloseReason::Kind::error);
  CHECK(f.rec.closes[0].detail ==
        "protocol violation: a stdout line ran past 131072 bytes without a newline (the limit "
        "is 65536 bytes); the server floods its output");
  REQUIRE(f.wait_all_reaped());
}

TEST_CASE("child channel: stderr lines reach the log with the session's prefix",
          "[integration][stdio]") {
  Fixture f;
  f.create(spec_for({"--stderr", "hello from stderr", "--stderr",
                     "second\x1b[31m line" + std::string(5000, 'y')}));
  f.start();
  const std::string who = "[egress test/x C c1] [child test/x pid " + std::to_string(f.ch->pid());
  REQUIRE(f.loop.run_until([&] { return f.logs.find({"second"}).has_value(); }));
  INFO(f.logs.dump());
  const auto first = f.logs.find({who, "stderr: hello from stderr"});
  REQUIRE(first);
  const auto second = *f.logs.find({"second"});
  CHECK(second.find(who) != std::string::npos);
  CHECK(second.find("\\x1b[31m") != std::string::npos);  // escaped, not passed to a terminal
  CHECK(second.find("(5016 bytes)") != std::string::npos);
  CHECK(second.size() < 1200);  // cut in the log
  // Messages written on stderr while running reach the log too.
  f.call(Id::integer(1), "stderr", R"({"line":"later line"})");
  CHECK(f.loop.run_until([&] { return f.logs.find({who, "stderr: later line"}).has_value(); }));
}

TEST_CASE("child channel: the environment is the minimal inherited set plus the entry's env",
          "[integration][stdio]") {
  ::setenv("MCPMQTT_MQTT_PASSWORD", "do-not-leak", 1);
  ::setenv("SOME_DAEMON_SETTING", "do-not-leak-either", 1);
  ::setenv("LC_TIME", "C", 1);
  ::setenv("HOME", "/home/bridge-test", 1);
  Fixture f;
  auto spec = spec_for();
  spec.env = {{"EXTRA_VAR", "extra value"}, {"TZ", "UTC"}, {"USER", "overridden"}};
  f.create(std::move(spec));
  f.start();
  const Message r = f.call(Id::integer(1), "env");
  ::unsetenv("MCPMQTT_MQTT_PASSWORD");
  ::unsetenv("SOME_DAEMON_SETTING");
  ::unsetenv("LC_TIME");
  const auto& env = (*r.result_value())["env"];
  REQUIRE(env.IsObject());
  std::map<std::string, std::string> got;
  for (auto it = env.MemberBegin(); it != env.MemberEnd(); ++it)
    got[it->name.GetString()] = it->value.GetString();
  INFO(r.text());
  CHECK(got.count("MCPMQTT_MQTT_PASSWORD") == 0);
  CHECK(got.count("SOME_DAEMON_SETTING") == 0);
  CHECK(got["EXTRA_VAR"] == "extra value");
  CHECK(got["TZ"] == "UTC");
  CHECK(got["USER"] == "overridden");
  CHECK(got["HOME"] == "/home/bridge-test");
  CHECK(got["LC_TIME"] == "C");
  CHECK(got["PATH"] == std::getenv("PATH"));
  const std::set<std::string> allowed = {"HOME", "LOGNAME", "PATH",    "SHELL",
                                         "TERM", "USER",    "LANG",    "LC_ALL",
                                         "TZ",   "TMPDIR",  "LC_TIME", "EXTRA_VAR"};
  for (const auto& [name, value] : got) {
    INFO(name);
    CHECK((allowed.count(name) == 1 || name.rfind("LC_", 0) == 0));
  }
}

TEST_CASE("child channel: cwd is honoured, and the bridge's descriptors are not inherited",
          "[integration][stdio]") {
  TempDir dir;
  // A descriptor without close-on-exec, as a careless library might leave: it must not leak.
  int leaky[2];
  REQUIRE(::pipe(leaky) == 0);
  Fixture f;
  auto spec = spec_for();
  spec.cwd = dir.path();
  f.create(std::move(spec));
  f.start();
  char real[PATH_MAX];
  REQUIRE(::realpath(dir.path().c_str(), real));
  CHECK(member_string(f.call(Id::integer(1), "cwd"), "cwd") == real);
  const Message fds = f.call(Id::integer(2), "fds");
  ::close(leaky[0]);
  ::close(leaky[1]);
  CHECK(jsonrpc::to_json((*fds.result_value())["fds"]) == "[0,1,2]");
}

TEST_CASE(
    "child channel: a child that cannot start is a clear error of its kind (not found, "
    "permission denied, not a program) and leaves nothing",
    "[integration][stdio]") {
  TempDir dir;
  const std::string not_executable = dir.write("data.txt", "not a program\n");
  Loop loop;
  auto registry = std::make_shared<ChildRegistry>();
  auto attempt = [&](ChildSpec spec) {
    auto c = ChildChannel::create(loop.strand, std::move(spec), registry);
    REQUIRE_FALSE(c);
    return c.error();
  };

  ChildSpec spec = spec_for();
  spec.command = "no-such-command-for-the-bridge";
  auto e = attempt(spec);
  CHECK(e.message.find("cannot start server \"test/x\"") != std::string::npos);
  CHECK(e.message.find("\"no-such-command-for-the-bridge\" was not found in PATH (") !=
        std::string::npos);
  CHECK(e.code == mcpmqtt::Errc::not_found);
  CHECK(e.permanent());

  spec = spec_for();
  spec.env = {{"PATH", dir.path()}};
  spec.command = "ls";  // exists in the real PATH, not in the child's
  e = attempt(spec);
  CHECK(e.message.find("\"ls\" was not found in PATH (" + dir.path() + ")") != std::string::npos);
  CHECK(e.code == mcpmqtt::Errc::not_found);

  spec = spec_for();
  spec.command = "/nonexistent/bin/server";
  e = attempt(spec);
  CHECK(e.message.find("\"/nonexistent/bin/server\": No such file or directory") !=
        std::string::npos);
  CHECK(e.code == mcpmqtt::Errc::not_found);

  spec = spec_for();
  spec.cwd = dir.path() + "/missing";
  e = attempt(spec);
  CHECK(e.message.find("cannot change to the working directory \"" + dir.path() +
                       "/missing\": No such file or directory") != std::string::npos);
  CHECK(e.message.find(MCPMQTT_STDIO_TEST_CHILD) != std::string::npos);  // names the command
  CHECK(e.code == mcpmqtt::Errc::not_found);

  spec = spec_for();
  spec.command = not_executable;
  e = attempt(spec);
  CHECK(e.message.find("permission denied") != std::string::npos);
  CHECK(e.code == mcpmqtt::Errc::permission_denied);
  CHECK(e.permanent());

  ::chmod(not_executable.c_str(), 0755);
  e = attempt(spec);
  CHECK(e.message.find("not an executable format") != std::string::npos);
  CHECK(e.code == mcpmqtt::Errc::invalid_argument);
  CHECK(e.permanent());

  spec = spec_for();
  spec.command = "";
  e = attempt(spec);
  CHECK(e.message.find("the command is empty") != std::string::npos);
  CHECK(e.code == mcpmqtt::Errc::invalid_argument);

  CHECK(registry->alive() == 0);
  CHECK(zombie_children().empty());
}

TEST_CASE(
    "child channel: out of descriptors, a child cannot start for now - a transient failure "
    "(resources exhausted) that leaves nothing, and the next start succeeds",
    "[integration][stdio]") {
  Fixture f;
  rlimit before{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &before) == 0);
  // A limit that leaves two free descriptor numbers: one pipe. spawn() needs four, so its
  // second fails with EMFILE. (Not none: UBSan's type checks on the way make a pipe of their own
  // to probe memory, and read its failure as a bad object.)
  int limit = 0;
  for (int spare = 0; spare < 2; ++limit) {
    if (::fcntl(limit, F_GETFD) == -1 && errno == EBADF) ++spare;
  }
  rlimit tight = before;
  tight.rlim_cur = static_cast<rlim_t>(limit);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &tight) == 0);
  auto refused = ChildChannel::create(f.loop.strand, spec_for(), f.registry);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &before) == 0);
  REQUIRE_FALSE(refused);
  INFO(refused.error().message);
  CHECK(refused.error().code == mcpmqtt::Errc::resources_exhausted);
  CHECK(refused.error().transient());
  CHECK(refused.error().message.find("cannot create pipes: Too many open files") !=
        std::string::npos);
  CHECK(f.registry->alive() == 0);
  CHECK(zombie_children().empty());

  // Descriptors again: the next start succeeds.
  f.create(spec_for());
  f.start();
  CHECK(f.call(Id::integer(1), "echo").kind() == jsonrpc::Kind::result);
}

// Descriptors of this process that are pidfds.
int count_pidfds() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  REQUIRE(d);
  while (const dirent* e = ::readdir(d)) {
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    if (::readlink(link.c_str(), target, sizeof target - 1) > 0 &&
        std::string(target) == "anon_inode:[pidfd]")
      ++n;
  }
  ::closedir(d);
  return n;
}

bool kernel_has_pidfd() {
#ifdef SYS_pidfd_open
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0));
  if (fd < 0) return false;
  ::close(fd);
  return true;
#else
  return false;
#endif
}

TEST_CASE("child channel: a child that exits by itself is reported after what it wrote",
          "[integration][stdio]") {
  const auto watch = GENERATE(ExitWatch::automatic, ExitWatch::polling);
  if (watch == ExitWatch::automatic && kernel_has_pidfd()) {
    // The exit is watched through a pidfd, not by polling.
    Fixture f;
    const int before = count_pidfds();
    f.create(spec_for());
    CHECK(count_pidfds() == before + 1);
  }
  if (watch == ExitWatch::polling) {
    Fixture f;
    const int before = count_pidfds();
    auto spec = spec_for();
    spec.exit_watch = ExitWatch::polling;
    f.create(std::move(spec));
    CHECK(count_pidfds() == before);
  }
  Fixture f;
  auto spec = spec_for({"--banner", R"({"jsonrpc":"2.0","method":"test/a"})", "--banner",
                        R"({"jsonrpc":"2.0","method":"test/b"})", "--banner",
                        R"({"jsonrpc":"2.0","id":9,"result":{}})", "--exit", "3"});
  spec.exit_watch = watch;
  f.create(std::move(spec));
  const pid_t pid = f.ch->pid();
  f.start();
  REQUIRE(f.loop.run_until([&] { return f.rec.closed(); }));
  REQUIRE(f.rec.events.size() == 4);
  CHECK(f.rec.events[0] == R"(message {"jsonrpc":"2.0","method":"test/a"})");
  CHECK(f.rec.events[1] == R"(message {"jsonrpc":"2.0","method":"test/b"})");
  CHECK(f.rec.events[2] == R"(message {"jsonrpc":"2.0","id":9,"result":{}})");
  CHECK(f.rec.closes[0].kind == CloseReason::Kind::exited);
  CHECK(f.rec.closes[0].detail == "child exited with status 3");
  CHECK(f.registry->alive() == 0);
  CHECK(!proc_stat(pid));  // reaped: no zombie
  // After the close nothing more is delivered and send() is ignored.
  f.ch->send(Message::request(Id::integer(1), "echo"));
  f.loop.poll();
  CHECK(f.rec.events.size() == 4);
}

TEST_CASE("child channel: a child that closes its stdout but runs on is closed with an error",
          "[integration][stdio]") {
  Fixture f;
  auto spec = spec_for({"--close-stdout"});
  spec.drain_after = 300ms;
  f.create(std::move(spec));
  const pid_t pid = f.ch->pid();
  f.start();
  const auto t0 = Clock::now();
  REQUIRE(f.loop.run_until([&] { return f.rec.closed(); }));
  CHECK(Clock::now() - t0 >= 250ms);  // it was given the time to exit instead
  CHECK(f.rec.closes[0].kind == CloseReason::Kind::error);
  CHECK(f.rec.closes[0].detail == "the child closed its stdout but is still running");
  REQUIRE(f.wait_all_reaped());  // ended by closing its stdin: it exits on EOF
  INFO(f.logs.dump());
  CHECK(f.logs.find({"pid " + std::to_string(pid), "exited with status 0"}));
}

TEST_CASE("child channel: a child that closes its stdin but runs on is closed with an error",
          "[integration][stdio]") {
  Fixture f;
  auto spec = spec_for({"--close-stdin", "--stderr", "stdin is closed"});
  spec.drain_after = 300ms;
  spec.terminate_after = 200ms;
  f.create(std::move(spec));
  f.start();
  REQUIRE(f.loop.run_until([&] { return f.logs.find({"stdin is closed"}).has_value(); }));
  f.ch->send(Message::request(Id::integer(1), "echo"));
  REQUIRE(f.loop.run_until([&] { return f.rec.closed(); }));
  CHECK(f.rec.closes[0].kind == CloseReason::Kind::error);
  CHECK(f.rec.closes[0].detail.find("cannot write to the child's stdin (Broken pipe)") == 0);
  REQUIRE(f.wait_all_reaped());
  INFO(f.logs.dump());
  CHECK(f.logs.find({"sending SIGTERM"}));
}

TEST_CASE("child channel: a child killed by a signal is reported with the signal",
          "[integration][stdio]") {
  Fixture f;
  f.create(spec_for());
  f.start();
  f.call(Id::integer(1), "echo");
  ::kill(f.ch->pid(), SIGKILL);
  REQUIRE(f.loop.run_until([&] { return f.rec.closed(); }));
  CHECK(f.rec.closes[0].kind == CloseReason::Kind::exited);
  CHECK(f.rec.closes[0].detail == "child killed by signal 9 (SIGKILL)");
}

TEST_CASE("child channel: a response written just before exiting arrives before the close",
          "[integration][stdio]") {
  Fixture f;
  f.create(spec_for());
  f.start();
  f.ch->send(Message::request(Id::integer(7), "exit", R"({"code":0})"));
  REQUIRE(f.loop.run_until([&] { return f.rec.closed(); }));
  REQUIRE(f.rec.messages.size() == 1);
  CHECK(f.rec.messages[0].id() == Id::integer(7));
  CHECK(f.rec.closes[0].detail == "child exited with status 0");
}

TEST_CASE("child channel: close() ends a well-behaved child by closing its stdin",
          "[integration][stdio]") {
  Fixture f;
  auto spec = spec_for();
  spec.terminate_after = 10s;  // a signal would show as a long wait
  f.create(std::move(spec));
  f.start();
  f.call(Id::integer(1), "echo");
  const pid_t pid = f.ch->pid();
  const auto t0 = Clock::now();
  f.ch->close(CloseReason{CloseReason::Kind::peer_gone, "client gone"});
  REQUIRE(f.wait_all_reaped());
  CHECK(Clock::now() - t0 < 5s);
  CHECK_FALSE(f.logs.find({"SIGTERM"}));
  INFO(f.logs.dump());
  CHECK(f.logs.find({"pid " + std::to_string(pid), "exited with status 0"}));
  CHECK(f.rec.closes.empty());  // no on_close for the owner's own close
  CHECK(!proc_stat(pid));
}

TEST_CASE("child channel: close() SIGKILLs a child that ignores stdin EOF and SIGTERM",
          "[integration][stdio]") {
  Fixture f;
  auto spec = spec_for({"--ignore-term", "--ignore-eof"});
  spec.terminate_after = 300ms;
  spec.kill_after = 300ms;
  f.create(std::move(spec));
  f.start();
  f.call(Id::integer(1), "echo");  // running, with SIGTERM ignored by now
  const pid_t pid = f.ch->pid();
  const auto t0 = Clock::now();
  f.ch->close(CloseReason{CloseReason::Kind::peer_gone, "client gone"});
  REQUIRE(f.wait_all_reaped(10s));
  const auto took = Clock::now() - t0;
  CHECK(took >= 550ms);  // SIGTERM was tried first, and waited for
  CHECK(took < 600ms + 2s);
  INFO(f.logs.dump());
  CHECK(f.logs.find({"still running 300 ms after its stdin was closed: sending SIGTERM"}));
  CHECK(f.logs.find({"still running 300 ms after SIGTERM: sending SIGKILL"}));
  CHECK(f.logs.find({"pid " + std::to_string(pid), "killed by signal 9 (SIGKILL)"}));
  CHECK(!proc_stat(pid));
  CHECK(f.rec.closes.empty());
}

TEST_CASE("child channel: no grandchild outlives its child", "[integration][stdio]") {
  Fixture f;
  std::vector<std::string> args = {"--grandchild"};
  const char* how = nullptr;
  SECTION("close(): the child exits on stdin EOF") {
    how = "eof";
  }
  SECTION("close(): child and grandchild ignore SIGTERM") {
    how = "kill";
    args = {"--ignore-term", "--grandchild", "--ignore-eof"};
  }
  SECTION("the child exits by itself") {
    how = "exit";
  }
  auto spec = spec_for(args);
  spec.terminate_after = 300ms;
  spec.kill_after = 300ms;
  f.create(std::move(spec));
  f.start();
  REQUIRE(f.loop.run_until([&] { return !f.rec.messages.empty(); }));
  const auto* params = f.rec.messages[0].params();
  REQUIRE(params);
  const pid_t grandchild = (*params)["pid"].GetInt();
  const pid_t child = f.ch->pid();
  REQUIRE(proc_stat(grandchild));
  CHECK(proc_stat(grandchild)->ppid == child);
  CHECK(::getpgid(grandchild) == child);

  if (std::string(how) == "exit") {
    f.ch->send(Message::request(Id::integer(1), "exit", R"({"code":4})"));
    REQUIRE(f.loop.run_until([&] { return f.rec.closed(); }));
    CHECK(f.rec.closes[0].detail == "child exited with status 4");
  } else {
    f.ch->close(CloseReason{CloseReason::Kind::peer_gone, "client gone"});
  }
  REQUIRE(f.wait_all_reaped(10s));
  CHECK(!proc_stat(child));
  CHECK(f.loop.run_until([&] { return gone(grandchild); }, 5s));
  CHECK(zombie_children().empty());
}

TEST_CASE("child channel: a child that does not read its stdin closes the channel",
          "[integration][stdio]") {
  Fixture f;
  auto spec = spec_for({"--no-read"});
  spec.max_queued_bytes = 256 * 1024;
  spec.terminate_after = 200ms;
  spec.kill_after = 200ms;
  f.create(std::move(spec));
  f.start();
  const std::string params = "{\"pad\":\"" + std::string(16 * 1024, 'p') + "\"}";
  std::size_t sent = 0;
  // One message per turn of the loop, so the pipe is given every chance to drain.
  const bool closed = f.loop.run_until([&] {
    if (f.rec.closed()) return true;
    const auto m = Message::request(Id::integer(static_cast<std::int64_t>(sent)), "echo", params);
    f.ch->send(m);
    sent += m.size() + 1;
    f.loop.poll();
    return f.rec.closed();
  });
  REQUIRE(closed);
  CHECK(f.rec.closes[0].kind == CloseReason::Kind::error);
  CHECK(f.rec.closes[0].detail.find("the child's stdin is full") != std::string::npos);
  CHECK(f.rec.closes[0].detail.find("limit of 262144 bytes") != std::string::npos);
  CHECK(sent > 256 * 1024 + 32 * 1024);  // the pipe took its share before the queue filled
  REQUIRE(f.wait_all_reaped(10s));       // and the child was ended
}

TEST_CASE(
    "child channel: the stdin queue is bounded in messages too: a flood of small messages to a "
    "child that does not read closes the channel",
    "[integration][stdio]") {
  Fixture f;
  auto spec = spec_for({"--no-read"});
  spec.max_queued_messages = 1000;  // bytes stay far below max_queued_bytes
  spec.terminate_after = 200ms;
  spec.kill_after = 200ms;
  f.create(std::move(spec));
  f.start();
  std::size_t sent = 0;
  // Sent in one go: the pipe takes what it can while the queue fills behind the write.
  while (!f.rec.closed() && sent < 200000)
    f.ch->send(Message::notification("n", "{\"i\":" + std::to_string(sent++) + "}"));
  REQUIRE(f.loop.run_until([&] { return f.rec.closed(); }));
  CHECK(f.rec.closes[0].kind == CloseReason::Kind::error);
  CHECK(f.rec.closes[0].detail ==
        "the child's stdin is full: 1000 messages wait to be written, the limit; the server is "
        "not reading its input");
  CHECK(sent < 200000);
  REQUIRE(f.wait_all_reaped(10s));
}

TEST_CASE("child channel: the stdin bound counts only bytes not yet written",
          "[integration][stdio]") {
  Fixture f;
  auto spec = spec_for();
  spec.max_queued_bytes = 256 * 1024;
  f.create(std::move(spec));
  f.start();
  // 1 MiB through a 256 KiB bound, with at most 12 requests (about 200 KiB) unanswered.
  const std::string params = "{\"pad\":\"" + std::string(16 * 1024, 'p') + "\"}";
  std::size_t sent = 0;
  const bool all = f.loop.run_until([&] {
    while (sent < 64 && sent < f.rec.messages.size() + 12)
      f.ch->send(Message::request(Id::integer(static_cast<std::int64_t>(sent++)), "echo", params));
    return f.rec.closed() || f.rec.messages.size() == 64;
  });
  REQUIRE(all);
  CHECK_FALSE(f.rec.closed());
}

TEST_CASE("child channel: output written before start() is held and delivered after it",
          "[integration][stdio]") {
  Fixture f;
  SECTION("the child is still running") {
    f.create(spec_for(
        {"--banner", R"({"jsonrpc":"2.0","method":"test/early"})", "--stderr", "banner written"}));
    // The stderr line is written after the stdout line: once it is logged, the message waits.
    REQUIRE(f.loop.run_until([&] { return f.logs.find({"stderr: banner written"}).has_value(); }));
    f.loop.poll();
    CHECK(f.rec.events.empty());
    f.start();
    REQUIRE(f.loop.run_until([&] { return f.rec.messages.size() == 1; }));
    CHECK(f.rec.messages[0].method() == "test/early");
    CHECK_FALSE(f.rec.closed());
  }
  SECTION("the child has already exited") {
    f.create(spec_for({"--banner", R"({"jsonrpc":"2.0","method":"test/early"})", "--exit", "2"}));
    REQUIRE(f.wait_all_reaped());
    f.loop.poll();
    CHECK(f.rec.events.empty());
    f.start();
    REQUIRE(f.loop.run_until([&] { return f.rec.closed(); }));
    REQUIRE(f.rec.events.size() == 2);
    CHECK(f.rec.events[0] == R"(message {"jsonrpc":"2.0","method":"test/early"})");
    CHECK(f.rec.events[1] == "close child exited with status 2");
  }
}

TEST_CASE("child channel: releasing the channel ends its child", "[integration][stdio]") {
  Fixture f;
  auto spec = spec_for({"--ignore-eof"});
  spec.terminate_after = 200ms;
  f.create(std::move(spec));
  f.start();
  const pid_t pid = f.ch->pid();
  CHECK(f.registry->alive() == 1);
  f.ch.reset();
  REQUIRE(f.wait_all_reaped(10s));
  CHECK(!proc_stat(pid));
  CHECK(f.rec.closes.empty());
}

TEST_CASE("child channel: shutdown_all tells every owner and ends every child",
          "[integration][stdio]") {
  Recorder rec2;
  Fixture f;
  f.create(spec_for());
  f.start();
  auto second = ChildChannel::create(f.loop.strand, spec_for(), f.registry);
  REQUIRE(second);
  (*second)->start(rec2.receiver());
  CHECK(f.registry->alive() == 2);
  bool none = false;
  f.registry->on_none([&] { none = true; });
  f.registry->shutdown_all("the bridge is stopping");
  REQUIRE(f.loop.run_until([&] { return f.rec.closed() && rec2.closed(); }));
  CHECK(f.rec.closes[0].kind == CloseReason::Kind::shutdown);
  CHECK(f.rec.closes[0].detail == "the bridge is stopping");
  CHECK(rec2.closes[0].kind == CloseReason::Kind::shutdown);
  REQUIRE(f.wait_all_reaped());
  CHECK(none);
  CHECK(f.registry->wait_until_none(0ms));
}

TEST_CASE("child channel: destroying the io_context with children running leaves none behind",
          "[integration][stdio]") {
  auto registry = std::make_shared<ChildRegistry>();
  pid_t pid = 0;
  {
    Loop loop;
    auto c =
        ChildChannel::create(loop.strand, spec_for({"--ignore-term", "--ignore-eof"}), registry);
    REQUIRE(c);
    pid = (*c)->pid();
    Recorder rec;
    (*c)->start(rec.receiver());
    c->reset();
    CHECK(registry->alive() == 1);
  }  // the io_context goes without running the close
  CHECK(registry->alive() == 0);
  CHECK(!proc_stat(pid));
}

}  // namespace
}  // namespace mcpmqtt::stdio

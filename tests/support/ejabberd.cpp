#include "tests/support/ejabberd.hpp"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "tests/support/mosquitto.hpp"
#include "tests/support/observer.hpp"

namespace mcpmqtt::test {

namespace {

namespace fs = std::filesystem;

// A start takes 1.5–2.5 s, 6–10 s with both cores busy and more tests starting nodes beside it.
constexpr std::chrono::seconds kStartTimeout{60};

// The full path of `name` on $PATH, or empty.
std::string on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string full = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(full.c_str(), X_OK) == 0) return full;
  }
  return {};
}

// ejabberd's Erlang applications (ejabberd-VERSION/, with ebin/ejabberd.app), installed beside
// unrelated libraries: Debian puts them in /usr/lib/<multiarch>/, which ejabberdctl passes whole
// as ERL_LIBS (the VM then probes each of its ~1,200 entries for an ebin/, 0.2 s of a start).
// Empty when not installed.
std::vector<fs::path> ejabberd_apps() {
  static const std::vector<fs::path> found = [] {
    std::error_code ec;
    std::vector<fs::path> roots{"/usr/lib/erlang/lib"};
    for (const auto& e : fs::directory_iterator("/usr/lib", ec))
      if (e.is_directory(ec)) roots.push_back(e.path());
    for (const auto& root : roots) {
      std::vector<fs::path> apps;
      for (const auto& e : fs::directory_iterator(root, ec)) {
        if (e.path().filename().string().rfind("ejabberd-", 0) == 0 &&
            fs::exists(e.path() / "ebin" / "ejabberd.app", ec))
          apps.push_back(e.path());
      }
      if (!apps.empty()) return apps;
    }
    return std::vector<fs::path>();
  }();
  return found;
}

// Appends an MQTT UTF-8 string / binary (2-byte length, then the bytes).
void put_string(std::string& out, const std::string& s) {
  out.push_back(static_cast<char>(s.size() >> 8));
  out.push_back(static_cast<char>(s.size() & 0xff));
  out += s;
}

// The CONNACK reason code of one MQTT v5 CONNECT (clean start, no session kept) with these
// credentials, or -1 when no CONNACK came back. Sent as raw bytes: no client library, no threads,
// a bounded wait.
int mqtt5_connect(std::uint16_t port, const std::string& username, const std::string& password) {
  std::string body;
  put_string(body, "MQTT");
  body.push_back(5);                        // protocol version
  body.push_back(static_cast<char>(0xC2));  // user name, password, clean start
  body.push_back(0);                        // keep alive: 10 s
  body.push_back(10);
  body.push_back(0);  // no properties
  put_string(body, random_id("mcpmqtt-probe"));
  put_string(body, username);
  put_string(body, password);
  std::string packet(1, '\x10');
  for (std::size_t n = body.size();;) {  // remaining length, variable byte integer
    const auto digit = static_cast<char>(n % 128);
    n /= 128;
    packet.push_back(n > 0 ? static_cast<char>(digit | 0x80) : digit);
    if (n == 0) break;
  }
  packet += body;

  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  int code = -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::send(fd, packet.data(), packet.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(packet.size())) {
    // CONNACK: 0x20, remaining length (small), flags, reason code, properties.
    unsigned char head[4];
    std::size_t got = 0;
    while (got < sizeof head) {
      const auto n = ::recv(fd, head + got, sizeof head - got, 0);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    if (got == sizeof head && head[0] == 0x20 && (head[1] & 0x80) == 0) code = head[3];
    if (code == 0) {
      const char disconnect[] = {static_cast<char>(0xE0), 0};
      ::send(fd, disconnect, sizeof disconnect, MSG_NOSIGNAL);
    }
  }
  ::close(fd);
  return code;
}

// The text of the file at `path` from byte `from` on.
std::string text_from(const std::string& path, std::size_t from) {
  const std::string all = read_file(path);
  return from < all.size() ? all.substr(from) : std::string();
}

// A process, named so that a later one with the same pid is not mistaken for it.
struct ProcessId {
  pid_t pid = 0;
  std::string start_time;  // /proc/PID/stat's starttime
};

// The parent and start time of a process, from /proc/PID/stat; nullopt when it is gone.
std::optional<std::pair<pid_t, std::string>> parent_and_start(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');  // the command name, in parentheses, may hold anything
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(paren + 1));
  std::vector<std::string> f;
  for (std::string x; fields >> x;)
    f.push_back(x);
  if (f.size() < 20) return std::nullopt;
  return std::make_pair(static_cast<pid_t>(std::stol(f[1])), f[19]);  // fields 4 and 22
}

// The processes below `root`: the VM's children, theirs… The VM's port programs run in sessions
// of their own (erl_child_setup calls setsid() and starts memsup and inet_gethost), out of reach
// of a signal to the VM's process group.
std::vector<ProcessId> descendants(pid_t root) {
  std::multimap<pid_t, ProcessId> children;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto pid = static_cast<pid_t>(std::stol(name));
    if (auto ps = parent_and_start(pid)) children.emplace(ps->first, ProcessId{pid, ps->second});
  }
  std::vector<ProcessId> out;
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    const pid_t parent = todo.back();
    todo.pop_back();
    for (auto [it, end] = children.equal_range(parent); it != end; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second.pid);
    }
  }
  return out;
}

// SIGKILL to each of `processes` still running (the same process: same pid and start time).
void kill_each(const std::vector<ProcessId>& processes) {
  for (const auto& p : processes) {
    const auto now = parent_and_start(p.pid);
    if (now && now->second == p.start_time) ::kill(p.pid, SIGKILL);
  }
}

}  // namespace

std::string Ejabberd::missing() {
  const std::string how =
      " (Debian's package ejabberd; scripts/install-deps.sh --test installs it)";
  if (on_path("erl").empty()) return "ejabberd: Erlang's `erl` is not on PATH" + how;
  if (ejabberd_apps().empty())
    return "ejabberd: no ejabberd-*/ebin/ejabberd.app under /usr/lib" + how;
  return {};
}

Ejabberd::Ejabberd() {
  if (const auto why = missing(); !why.empty()) throw std::runtime_error(why);
  // Another process may take the port between our probe and the node's bind: the node then
  // halts ("Failed to start ejabberd application … eaddrinuse"), and another port is tried.
  for (int attempt = 0; attempt < 3; ++attempt) {
    port_ = free_loopback_port();
    try {
      start();
      return;
    } catch (const std::exception&) {
      if (attempt == 2) throw;
    }
  }
}

Ejabberd::~Ejabberd() {
  kill();
  release_port();
}

std::string Ejabberd::url() const {
  return "mqtt://127.0.0.1:" + std::to_string(port_);
}

void Ejabberd::start() {
  const std::string dir = dir_.path();
  const std::string spool = dir + "/spool";
  // A fresh broker each time: no retained message, session or Mnesia schema of an earlier start.
  // Only the cache of translations ejabberd builds at its first start stays (0.3 s of a start).
  fs::create_directories(spool);
  for (const auto& e : fs::directory_iterator(spool)) {
    if (e.path().filename() != "translations.cache") fs::remove_all(e.path());
  }
  fs::create_directories(dir + "/logs");
  // ERL_LIBS: a directory of links to ejabberd's applications only (its dependencies are in
  // Erlang's own /usr/lib/erlang/lib).
  const std::string libs = dir + "/erl_libs";
  if (!fs::exists(libs)) {
    fs::create_directories(libs);
    for (const auto& app : ejabberd_apps())
      fs::create_directory_symlink(app, libs + "/" + app.filename().string());
  }

  // ejabberd 23.01's options (https://docs.ejabberd.im/admin/configuration/).
  const std::string config = dir_.write(
      "ejabberd.yml",
      "# A private node for one test (tests/support/ejabberd.hpp): MQTT only.\n"
      "hosts:\n"
      "  - localhost\n"
      "loglevel: info\n"
      "# mod_mqtt logs in through the auth back end: login_anon accepts any user name with a\n"
      "# non-empty password.\n"
      "auth_method: anonymous\n"
      "anonymous_protocol: login_anon\n"
      "allow_multiple_connections: true\n"
      "listen:\n"
      "  -\n"
      "    port: " +
          std::to_string(port_) +
          "\n"
          "    ip: \"127.0.0.1\"\n"
          "    module: mod_mqtt\n"
          "    backlog: 1024\n"
          "    max_payload_size: 16777216\n"
          "modules:\n"
          "  mod_mqtt:\n"
          "    max_queue: 100000\n"
          "    session_expiry: 86400\n"
          "    max_topic_depth: 64\n");

  const std::string console = dir + "/ejabberd.console";
  const std::size_t console_from = read_file(console).size();
  Process::Options o;
  // What ejabberdctl's `foreground` runs, without distribution (no -sname: no epmd, no cookie).
  o.argv = {"erl", "-noinput", "-noshell",
            // Schedulers that sleep when there is nothing to do, instead of spinning a while.
            "+sbwt", "none", "+sbwtdcpu", "none", "+sbwtdio", "none",
            // Mnesia's directory, as an Erlang string.
            "-mnesia", "dir", "\"" + spool + "\"",
            // Starts the application ejabberd (and the applications it needs).
            "-s", "ejabberd"};
  o.env = {{"HOME", dir},
           {"EJABBERD_CONFIG_PATH", config},
           {"EJABBERD_LOG_PATH", dir + "/logs/ejabberd.log"},
           {"ERL_LIBS", libs},
           {"ERL_CRASH_DUMP", dir + "/logs/erl_crash.dump"},
           {"ERL_CRASH_DUMP_BYTES", "0"},
           {"ERL_FLAGS", ""},
           {"ERL_AFLAGS", ""},
           {"ERL_ZFLAGS", ""},
           {"NOTIFY_SOCKET", ""}};
  o.cwd = dir;
  o.stdout_file = console;
  o.stderr_file = console;
  proc_ = Process::start(std::move(o));

  // Ready once ejabberd says it listens on our port (so a CONNECT cannot reach some other
  // process's broker that took the port) and a CONNECT with the credentials is accepted (the
  // auth back end and mod_mqtt are up).
  const std::string listening =
      "Start accepting TCP connections at 127.0.0.1:" + std::to_string(port_) + " for mod_mqtt";
  const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  int last_code = -1;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!proc_->running()) {
      terminate();
      throw std::runtime_error("ejabberd exited at start on port " + std::to_string(port_) + ":\n" +
                               text_from(console, console_from));
    }
    if (text_from(console, console_from).find(listening) != std::string::npos) {
      last_code = mqtt5_connect(port_, username(), password());
      if (last_code == 0) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  terminate();
  throw std::runtime_error("ejabberd did not accept an MQTT v5 CONNECT on port " +
                           std::to_string(port_) + " within " +
                           std::to_string(kStartTimeout.count()) +
                           " s (last CONNACK reason code: " + std::to_string(last_code) + "):\n" +
                           text_from(console, console_from));
}

bool Ejabberd::running() {
  return proc_ && proc_->running();
}

void Ejabberd::hold_port() {
  if (held_fd_ >= 0 || port_ == 0) return;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  // SO_REUSEADDR, as ejabberd's listener has it: the node's side of its closed connections may
  // still be in TIME_WAIT.
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port_);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return;
  }
  held_fd_ = fd;
}

void Ejabberd::release_port() {
  if (held_fd_ >= 0) ::close(held_fd_);
  held_fd_ = -1;
}

void Ejabberd::stop() {
  if (!proc_) return;
  const auto children = descendants(proc_->pid());
  proc_->signal(SIGTERM);  // the VM runs init:stop(): ejabberd stops its listener and Mnesia
  if (!proc_->wait_for(std::chrono::seconds(15))) proc_->signal_group(SIGKILL);
  proc_->wait_for(std::chrono::seconds(5));
  proc_.reset();
  kill_each(children);  // a port program that outlived the VM
  hold_port();
}

void Ejabberd::kill() {
  terminate();
  hold_port();
}

void Ejabberd::terminate() {
  if (!proc_) return;
  const auto children = descendants(proc_->pid());
  proc_->signal_group(SIGKILL);
  kill_each(children);
  proc_->wait_for(std::chrono::seconds(5));
  proc_.reset();
}

void Ejabberd::restart() {
  stop();
  release_port();
  for (int attempt = 0;; ++attempt) {
    try {
      start();
      return;
    } catch (const std::exception&) {
      if (attempt == 2) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

std::string Ejabberd::log() const {
  return read_file(dir_.path() + "/ejabberd.console");
}

}  // namespace mcpmqtt::test

#include "tests/support/mosquitto.hpp"

#include <stdexcept>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

namespace mcpmqtt::test {

namespace {
sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  return addr;
}
}  // namespace

HeldPort::HeldPort() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error("socket failed");
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr = loopback(0);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd_);
    throw std::runtime_error("bind to 127.0.0.1:0 failed");
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
}

void HeldPort::release() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::uint16_t free_loopback_port() {
  return HeldPort().port();
}

bool wait_for_port(std::uint16_t port, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = loopback(port);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

Mosquitto::Mosquitto(Options options) : options_(std::move(options)) {
  // Another process may take a port between our probe and the broker's bind: try a few.
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_loopback_port();
    if (options_.websockets) {
      do
        ws_port_ = free_loopback_port();
      while (ws_port_ == port_);
    }
    try {
      start();
      return;
    } catch (const std::exception&) {
      if (attempt == 4) throw;
    }
  }
}

Mosquitto::~Mosquitto() {
  kill();
  release_ports();
}

void Mosquitto::hold_ports() {
  if (!held_fds_.empty()) return;
  for (const std::uint16_t port : {port_, ws_port_}) {
    if (port == 0) continue;
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    // SO_REUSEADDR, as Mosquitto's listener has it: the port still has the broker's side of its
    // closed connections in TIME_WAIT. Bound, the port is out of the kernel's choice for port-0
    // binds and for the ephemeral ports of connects.
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr = loopback(port);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);
      continue;
    }
    held_fds_.push_back(fd);
  }
}

void Mosquitto::release_ports() {
  for (const int fd : held_fds_)
    ::close(fd);
  held_fds_.clear();
}

std::string Mosquitto::url() const {
  return std::string(options_.tls_cert_file.empty() ? "mqtt" : "mqtts") +
         "://127.0.0.1:" + std::to_string(port_);
}

std::string Mosquitto::ws_url() const {
  if (!options_.websockets) throw std::logic_error("Mosquitto::ws_url: no WebSocket listener");
  return std::string(options_.tls_cert_file.empty() ? "ws" : "wss") +
         "://127.0.0.1:" + std::to_string(ws_port_);
}

void Mosquitto::start() {
  // Per listener: the TLS files (listener options follow their `listener` line).
  std::string tls;
  if (!options_.tls_cert_file.empty()) {
    tls += "certfile " + options_.tls_cert_file + "\n";
    tls += "keyfile " + options_.tls_key_file + "\n";
    if (!options_.tls_ca_file.empty()) tls += "cafile " + options_.tls_ca_file + "\n";
  }
  std::string conf;
  conf += "per_listener_settings false\n";
  conf += "persistence false\n";
  // Mosquitto leaves Nagle on by default, and so do the brokers users run: only benchmarks that
  // compare latencies turn it off.
  if (options_.tuned) conf += "set_tcp_nodelay true\n";
  conf += "log_dest stderr\n";
  conf += "log_type error\nlog_type warning\nlog_type notice\nlog_type information\n";
  conf += "connection_messages true\n";
  // Started as root, Mosquitto would switch to the user "mosquitto", who cannot read this
  // test's private temp dir (its password file): stay the user the test runs as.
  if (const passwd* pw = ::getpwuid(::geteuid())) conf += std::string("user ") + pw->pw_name + "\n";
  conf += "listener " + std::to_string(port_) + " 127.0.0.1\n";
  conf += tls;
  if (options_.websockets) {
    conf += "listener " + std::to_string(ws_port_) + " 127.0.0.1\n";
    conf += "protocol websockets\n";
    conf += tls;
  }
  std::string pw;
  if (!options_.username.empty()) {
    pw = dir_.write("passwd", options_.username + ":" + options_.password + "\n");
    // mosquitto_passwd -U hashes the plain-text file in place.
    auto r = run_capture({"mosquitto_passwd", "-U", pw});
    if (r.exit_code != 0) throw std::runtime_error("mosquitto_passwd failed: " + r.err);
  }
  for (const auto& [user, password] : options_.users) {
    std::vector<std::string> argv{"mosquitto_passwd"};
    if (pw.empty()) {
      pw = dir_.path() + "/passwd";
      argv.push_back("-c");  // creates the file
    }
    argv.insert(argv.end(), {"-b", pw, user, password});
    auto r = run_capture(argv);
    if (r.exit_code != 0) throw std::runtime_error("mosquitto_passwd -b failed: " + r.err);
  }
  if (!pw.empty()) {
    conf += "allow_anonymous false\npassword_file " + pw + "\n";
  } else {
    conf += "allow_anonymous true\n";
  }
  if (!options_.acl.empty()) conf += "acl_file " + dir_.write("acl", options_.acl) + "\n";
  conf += options_.extra_config;
  const std::string conf_path = dir_.write("mosquitto.conf", conf);

  Process::Options o;
  o.argv = {"mosquitto", "-c", conf_path};
  o.stderr_file = dir_.path() + "/mosquitto.log";
  o.stdout_file = dir_.path() + "/mosquitto.log";
  proc_ = Process::start(o);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!proc_->running()) {
      throw std::runtime_error("mosquitto exited at start on port " + std::to_string(port_) +
                               ":\n" + log());
    }
    if (wait_for_port(port_, std::chrono::milliseconds(50)) &&
        (ws_port_ == 0 || wait_for_port(ws_port_, std::chrono::milliseconds(50)))) {
      return;
    }
  }
  throw std::runtime_error("mosquitto did not listen on port " + std::to_string(port_) +
                           (ws_port_ ? " and " + std::to_string(ws_port_) : std::string()) + ":\n" +
                           log());
}

bool Mosquitto::running() {
  return proc_ && proc_->running();
}

void Mosquitto::stop() {
  if (!proc_) return;
  proc_->signal(SIGTERM);
  if (!proc_->wait_for(std::chrono::seconds(10))) proc_->signal_group(SIGKILL);
  proc_->wait_for(std::chrono::seconds(5));
  proc_.reset();
  hold_ports();
}

void Mosquitto::kill() {
  if (!proc_) return;
  proc_->signal_group(SIGKILL);
  proc_->wait_for(std::chrono::seconds(5));
  proc_.reset();
  hold_ports();
}

void Mosquitto::restart() {
  stop();
  release_ports();
  // The port was ours a moment ago; mosquitto sets SO_REUSEADDR, so binding again works.
  for (int attempt = 0;; ++attempt) {
    try {
      start();
      return;
    } catch (const std::exception&) {
      if (attempt == 20) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

std::string Mosquitto::log() const {
  return read_file(dir_.path() + "/mosquitto.log");
}

}  // namespace mcpmqtt::test

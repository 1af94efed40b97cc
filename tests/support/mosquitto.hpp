// A real Mosquitto broker for one test, configured as it ships (no tuning) unless asked: a free
// loopback port, its own configuration and log in a temporary directory, stopped (and its ports
// released) when the object goes away. Supports a restart on the same ports, for reconnect tests,
// TLS / password listeners, and a second listener for MQTT over WebSocket.
//
// Not thread-safe; owned by one test.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

namespace mcpmqtt::test {

// A free TCP port on 127.0.0.1 at the time of the call.
std::uint16_t free_loopback_port();

// A free loopback port kept bound by a socket that does not listen, until release(): a client
// dialling it is refused as by a server that is down, and no other process (a parallel test's
// broker or server picking a free port) can take it meanwhile.
class HeldPort {
 public:
  HeldPort();
  ~HeldPort() { release(); }
  HeldPort(const HeldPort&) = delete;
  HeldPort& operator=(const HeldPort&) = delete;
  std::uint16_t port() const { return port_; }
  void release();  // just before the server that is to listen on it starts

 private:
  std::uint16_t port_ = 0;
  int fd_ = -1;
};

// True once a TCP connection to 127.0.0.1:port succeeds.
bool wait_for_port(std::uint16_t port, std::chrono::milliseconds timeout);

class Mosquitto {
 public:
  struct Options {
    // TLS listener: PEM files; the port then speaks TLS only.
    std::string tls_cert_file;
    std::string tls_key_file;
    std::string tls_ca_file;
    // Credentials required when set (username:password written to a password file).
    std::string username;
    std::string password;
    // More users of the password file, each added with `mosquitto_passwd -b` (anonymous clients
    // are then refused too).
    std::vector<std::pair<std::string, std::string>> users;
    // The text of an `acl_file`: `user NAME` and `topic [read|write|readwrite] FILTER` lines,
    // and `pattern …` lines where %u is a client's user name and %c its client id. Mosquitto
    // then refuses every topic no line grants.
    std::string acl;
    // Extra lines appended to the generated mosquitto.conf (after the listeners: global
    // options such as max_inflight_messages or max_packet_size).
    std::string extra_config;
    // set_tcp_nodelay true: for benchmarks that compare against a broker tuned for latency.
    // Tests run the broker as users do, with Nagle on.
    bool tuned = false;
    // A second listener on another free loopback port with `protocol websockets` (MQTT 5.0 §6),
    // with the same TLS files as the first when those are set: see ws_url().
    bool websockets = false;
  };

  Mosquitto() : Mosquitto(Options{}) {}
  explicit Mosquitto(Options options);
  ~Mosquitto();

  std::uint16_t port() const { return port_; }
  pid_t pid() const { return proc_ ? proc_->pid() : -1; }
  // mqtt://127.0.0.1:PORT, or mqtts:// for a TLS listener.
  std::string url() const;
  // The WebSocket listener (Options::websockets): its port, and ws://127.0.0.1:PORT (wss:// with
  // TLS). Mosquitto answers the upgrade on any path.
  std::uint16_t ws_port() const { return ws_port_; }
  std::string ws_url() const;
  bool running();

  // While the broker is down its ports stay bound by a socket of ours that does not listen:
  // clients are refused as by a dead broker, but the kernel hands the port to no one else
  // before restart() — not to free_loopback_port() in a parallel test (whose broker would then
  // answer for this one) and not as the ephemeral port of a client dialling it (which would
  // connect to itself).
  void stop();     // graceful (SIGTERM), waits for exit
  void kill();     // SIGKILL, waits for exit
  void restart();  // start again on the same ports

  // The broker's log so far (for failure messages).
  std::string log() const;

 private:
  void start();
  void hold_ports();
  void release_ports();
  Options options_;
  std::vector<int> held_fds_;
  TempDir dir_;
  std::uint16_t port_ = 0;
  std::uint16_t ws_port_ = 0;
  std::unique_ptr<Process> proc_;
};

}  // namespace mcpmqtt::test

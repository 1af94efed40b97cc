// A TCP proxy on a free loopback port that forwards to 127.0.0.1:upstream_port, for faults
// between a bridge and its broker: set_forwarding(false) makes it a black hole (it keeps every
// connection open and accepts new ones, but moves no byte either way: what was sent waits in
// the kernel's buffers, as on a path that drops packets); true again forwards what waited.
// close_all() resets every connection at once.
//
// Thread-safe; one thread accepts, one thread per connection pumps both ways.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mcpmqtt::test {

class TcpProxy {
 public:
  explicit TcpProxy(std::uint16_t upstream_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  std::uint16_t port() const { return port_; }
  std::string url() const { return "mqtt://127.0.0.1:" + std::to_string(port_); }
  void set_forwarding(bool on) { forwarding_ = on; }
  // Connections open now (accepted and not yet closed by either end).
  std::size_t open_connections() const { return open_; }
  std::size_t accepted() const { return accepted_; }

 private:
  void accept_loop();
  void pump(int client, int server);

  std::uint16_t upstream_;
  std::uint16_t port_ = 0;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> forwarding_{true};
  std::atomic<std::size_t> open_{0};
  std::atomic<std::size_t> accepted_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> pumps_;
};

}  // namespace mcpmqtt::test

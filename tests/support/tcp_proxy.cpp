#include "tests/support/tcp_proxy.hpp"

#include <cerrno>
#include <stdexcept>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace mcpmqtt::test {

namespace {

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// Writes all of buf (blocking); false when the peer is gone.
bool write_all(int fd, const char* buf, std::size_t n) {
  while (n > 0) {
    const auto w = ::send(fd, buf, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    buf += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

}  // namespace

TcpProxy::TcpProxy(std::uint16_t upstream_port) : upstream_(upstream_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  auto a = loopback(0);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, 64) != 0)
    throw std::runtime_error("TcpProxy: cannot listen on loopback");
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpProxy::~TcpProxy() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  std::lock_guard lock(mu_);
  for (auto& t : pumps_)
    t.join();
}

void TcpProxy::accept_loop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    auto a = loopback(upstream_);
    if (::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(server);
      ::close(client);  // the upstream refuses: so does the proxy
      continue;
    }
    ++accepted_;
    ++open_;
    std::lock_guard lock(mu_);
    pumps_.emplace_back([this, client, server] { pump(client, server); });
  }
}

void TcpProxy::pump(int client, int server) {
  char buf[65536];
  bool open = true;
  while (open && !stopping_) {
    if (!forwarding_) {
      // A black hole: nothing is read, so nothing moves and no close is seen.
      ::usleep(10000);
      continue;
    }
    pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    if (::poll(p, 2, 50) <= 0) continue;
    for (int i = 0; i < 2 && open; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const auto n = ::recv(p[i].fd, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      open = n > 0 && write_all(p[1 - i].fd, buf, static_cast<std::size_t>(n));
    }
  }
  ::close(client);
  ::close(server);
  --open_;
}

}  // namespace mcpmqtt::test

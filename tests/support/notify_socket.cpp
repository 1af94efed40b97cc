#include "tests/support/notify_socket.hpp"

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <random>
#include <stdexcept>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace mcpmqtt::test {

namespace {

using Clock = std::chrono::steady_clock;

std::string random_name() {
  std::random_device rd;
  return "mcpmqtt-test-notify-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
}

}  // namespace

NotifySocket::NotifySocket(Kind kind) {
  if (kind == Kind::path) {
    dir_ = std::make_unique<TempDir>();
    bind_address(false, dir_->path() + "/notify");
  } else {
    bind_address(true, random_name());
  }
}

NotifySocket::NotifySocket(const std::string& path) {
  bind_address(false, path);
}

void NotifySocket::bind_address(bool abstract, const std::string& name) {
  address_ = abstract ? "@" + name : name;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  // A path needs its NUL inside sun_path; an abstract name follows a leading NUL.
  if (name.size() + 1 > sizeof sa.sun_path)
    throw std::runtime_error("NotifySocket: address too long: " + address_);
  std::memcpy(sa.sun_path + (abstract ? 1 : 0), name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + 1);
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&sa), len) != 0) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error("bind " + address_ + ": " + std::strerror(e));
  }
  // Like systemd: have the kernel attach the sender's credentials to every datagram.
  const int on = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
}

NotifySocket::~NotifySocket() {
  if (fd_ >= 0) ::close(fd_);
}

std::map<std::string, std::string> NotifySocket::Datagram::fields() const {
  std::map<std::string, std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    if (const auto eq = line.find('='); eq != std::string::npos)
      out[line.substr(0, eq)] = line.substr(eq + 1);
    start = end + 1;
  }
  return out;
}

std::optional<NotifySocket::Datagram> NotifySocket::receive(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, left < 0 ? 0 : static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;
    char buf[8192];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
    iovec iov{buf, sizeof buf};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(fd_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw std::runtime_error(std::string("recvmsg: ") + std::strerror(errno));
    }
    Datagram d;
    d.text.assign(buf, static_cast<std::size_t>(n));
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
        ucred cred{};
        std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
        d.sender_pid = cred.pid;
      }
    }
    return d;
  }
}

std::optional<NotifySocket::Datagram> NotifySocket::wait_for(const std::string& key,
                                                             const std::string& value,
                                                             std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    auto d = receive(left);
    if (!d) return std::nullopt;
    const auto f = d->fields();
    if (auto it = f.find(key); it != f.end() && it->second == value) return d;
  }
}

}  // namespace mcpmqtt::test

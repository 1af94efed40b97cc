#include "mqtt/paho/tcp_nodelay.hpp"

#include <atomic>
#include <cerrno>

#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace {

std::atomic<bool> enabled{false};
std::atomic<bool> used{false};

using ConnectFn = int (*)(int, const struct sockaddr*, socklen_t);

ConnectFn real_connect() {
  static ConnectFn fn = reinterpret_cast<ConnectFn>(dlsym(RTLD_NEXT, "connect"));
  return fn;
}

}  // namespace

extern "C" int connect(int fd, const struct sockaddr* addr, socklen_t len) {
  ConnectFn fn = real_connect();
  if (!fn) {
    errno = ENOSYS;
    return -1;
  }
  if (enabled.load(std::memory_order_relaxed) && addr &&
      (addr->sa_family == AF_INET || addr->sa_family == AF_INET6)) {
    int type = 0;
    socklen_t tl = sizeof type;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_STREAM) {
      const int one = 1;
      const int saved = errno;
      if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0) {
        used.store(true, std::memory_order_relaxed);
      }
      errno = saved;
    }
  }
  return fn(fd, addr, len);
}

namespace mcpmqtt::mqtt::paho {

void use_tcp_nodelay_interposition() {
  enabled.store(true, std::memory_order_relaxed);
}

bool tcp_nodelay_active() {
  return used.load(std::memory_order_relaxed);
}

}  // namespace mcpmqtt::mqtt::paho

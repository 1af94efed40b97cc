// What the kernel says about this process's own sockets, for tests of socket options.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace mcpmqtt::test {

// The TCP_NODELAY setting of each of this process's TCP sockets connected to 127.0.0.1:port
// (the client ends of connections to a server listening there).
inline std::vector<int> nodelay_of_sockets_to(std::uint16_t port) {
  std::vector<int> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(e.path().filename().string());
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;
    if (peer.sin_family != AF_INET || ntohs(peer.sin_port) != port) continue;
    int v = -1;
    socklen_t vl = sizeof v;
    // A socket closed since getpeername() (or its descriptor reused) is not counted.
    if (::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &vl) != 0) continue;
    out.push_back(v);
  }
  return out;
}

}  // namespace mcpmqtt::test

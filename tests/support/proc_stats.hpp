// What the kernel says about another process, read from /proc: open descriptors, resident
// memory, CPU time, child processes (live and zombie) and its TCP connections to a port. For
// the fault tests and the soak, which check that these return to a baseline after a fault.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <sys/types.h>

namespace mcpmqtt::test {

// Entries of /proc/<pid>/fd (0 when the process is gone).
std::size_t open_fds(pid_t pid);
// VmRSS of /proc/<pid>/status, in KiB (0 when the process is gone).
std::size_t rss_kib(pid_t pid);
// utime + stime of /proc/<pid>/stat, in seconds.
double cpu_seconds(pid_t pid);
// Processes whose parent is `pid`: live ones and zombies (state Z) counted apart.
struct Children {
  std::size_t live = 0;
  std::size_t zombies = 0;
};
Children children_count(pid_t pid);
// The process's established TCP connections whose remote end is 127.0.0.1:port (its sockets in
// /proc/<pid>/fd matched by inode against /proc/<pid>/net/tcp).
std::size_t tcp_connections_to(pid_t pid, std::uint16_t port);

// The footprint a fault must not grow: descriptors, children, zombies, MQTT connections.
struct Footprint {
  std::size_t fds = 0;
  std::size_t children = 0;
  std::size_t zombies = 0;
  std::size_t mqtt_connections = 0;
  std::size_t rss_kib = 0;
  bool operator==(const Footprint& o) const {
    return fds == o.fds && children == o.children && zombies == o.zombies &&
           mqtt_connections == o.mqtt_connections;
  }
  std::string describe() const;
};
Footprint footprint(pid_t pid, std::uint16_t broker_port);

}  // namespace mcpmqtt::test

// A real HAProxy (Debian's haproxy) in front of bridge replicas for one test: a free loopback
// port, `balance roundrobin` over the given backends with no stickiness of any kind, and each
// request balanced on its own (HTTP mode: a keep-alive connection from the client does not pin
// its requests to one replica). Health checks on /readyz take a dead replica out of rotation
// and `option redispatch` sends a request whose connection was refused to another one;
// `option abortonclose` closes a replica's side of a stream when its client goes away (without
// it HAProxy keeps draining the stream: the replica, and a relay behind it, hold it until the
// server timeout). As in docs/replicas.md's configuration. Stopped when the object goes away.
//
// Not thread-safe; owned by one test.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

namespace mcpmqtt::test {

class Haproxy {
 public:
  // `backends`: the replicas' HTTP ports on 127.0.0.1.
  explicit Haproxy(const std::vector<std::uint16_t>& backends);
  ~Haproxy();
  Haproxy(const Haproxy&) = delete;
  Haproxy& operator=(const Haproxy&) = delete;

  std::uint16_t port() const { return port_; }
  std::string url(const std::string& path = "/mcp") const;
  // HAProxy's own output so far (its log lines go to stderr), for failure messages.
  std::string log() const;

 private:
  TempDir dir_;
  std::uint16_t port_ = 0;
  std::unique_ptr<Process> proc_;
};

}  // namespace mcpmqtt::test

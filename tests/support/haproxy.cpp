#include "tests/support/haproxy.hpp"

#include <chrono>
#include <stdexcept>

#include "tests/support/mosquitto.hpp"

namespace mcpmqtt::test {

Haproxy::Haproxy(const std::vector<std::uint16_t>& backends) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_loopback_port();
    std::string servers;
    for (std::size_t i = 0; i < backends.size(); ++i)
      servers += "  server r" + std::to_string(i + 1) +
                 " 127.0.0.1:" + std::to_string(backends[i]) + " check inter 300ms fall 2 rise 1\n";
    // Long client and server timeouts: GET streams and listens stay open between events.
    const auto cfg = dir_.write("haproxy.cfg",
                                "global\n"
                                "  log stderr format raw local0 info\n"
                                "defaults\n"
                                "  mode http\n"
                                "  log global\n"
                                "  option httplog\n"
                                "  timeout connect 2s\n"
                                "  timeout client 10m\n"
                                "  timeout server 10m\n"
                                "  retries 3\n"
                                "  option redispatch 1\n"
                                "  option abortonclose\n"
                                "frontend mcp\n"
                                "  bind 127.0.0.1:" +
                                    std::to_string(port_) +
                                    "\n"
                                    "  default_backend replicas\n"
                                    "backend replicas\n"
                                    "  balance roundrobin\n"
                                    "  option httpchk\n"
                                    "  http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host "
                                    "127.0.0.1\n" +
                                    servers);
    Process::Options o;
    o.argv = {"haproxy", "-db", "-f", cfg};
    o.stderr_file = dir_.path() + "/haproxy.log";
    o.stdout_file = dir_.path() + "/haproxy.out";
    proc_ = Process::start(std::move(o));
    // Servers start in rotation; a failed health check takes one out.
    if (wait_for_port(port_, std::chrono::seconds(10))) return;
    proc_.reset();
  }
  throw std::runtime_error("haproxy did not start: " + log());
}

Haproxy::~Haproxy() = default;

std::string Haproxy::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

std::string Haproxy::log() const {
  return read_file(dir_.path() + "/haproxy.log");
}

}  // namespace mcpmqtt::test

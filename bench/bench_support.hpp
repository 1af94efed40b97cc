// Helpers shared by the benchmarks: process memory, percentiles, a blocking MCP session opener,
// the server-id of an MQTT-hosted server from its retained presence.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <sys/types.h>

namespace mcpmqtt::bench {

// VmRSS and VmHWM (peak) of a process, in KiB; 0 when unknown.
std::size_t rss_kib(pid_t pid);
std::size_t peak_rss_kib(pid_t pid);
// CPU time (user + system) a process has used so far, in seconds (clock-tick resolution).
double cpu_seconds(pid_t pid);

// The q-quantile (0..1) of `values` by nearest rank; sorts `values`. 0 when empty.
double percentile(std::vector<double>& values, double q);

// Raises this process's open-file limit to its hard limit (inherited by the processes it
// starts), for benchmarks that hold thousands of sockets.
void raise_fd_limit();

// Initializes an MCP session over Streamable HTTP (initialize, then notifications/initialized)
// and returns its Mcp-Session-Id. Throws on failure.
std::string open_session(const boost::asio::ip::tcp::endpoint& ep, const std::string& host,
                         const std::string& path = "/mcp");

// The server-id of an instance of `server_name`, read from its retained presence. Throws when
// none appears within 20 s.
std::string find_server_id(const std::string& broker_url, const std::string& server_name);

}  // namespace mcpmqtt::bench

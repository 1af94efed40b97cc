// Helpers shared by the benchmarks: process memory, percentiles, a blocking MCP session opener,
// the server-id of an MQTT-hosted server from its retained presence.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <sys/types.h>

namespace mcpmqtt::bench {

// VmRSS and VmHWM (peak) of a process, in KiB; 0 when unknown.
std::size_t rss_kib(pid_t pid);
std::size_t peak_rss_kib(pid_t pid);
// CPU time (user + system) a process has used so far, in seconds (clock-tick resolution).
double cpu_seconds(pid_t pid);

// The share of the machine's CPU time the hypervisor gave to others (steal) since the
// object was made, from /proc/stat: on a shared virtual machine, a run with more than a few
// percent of steal measured the neighbours as much as the bridge.
class StealMeter {
 public:
  StealMeter();
  double percent() const;

 private:
  unsigned long long steal0_ = 0, total0_ = 0;
};

// The q-quantile (0..1) of `values` by nearest rank; sorts `values`. 0 when empty.
double percentile(std::vector<double>& values, double q);

// Raises this process's open-file limit to its hard limit (inherited by the processes it
// starts), for benchmarks that hold thousands of sockets. Returns the soft limit now in force.
std::size_t raise_fd_limit();
// A process's soft open-file limit ("Max open files" in /proc/PID/limits); 0 when unknown.
std::size_t open_file_limit(pid_t pid);

// Parses `--name value` pairs, calling `set(name, value)` for each; `set` returns false for a
// name it does not know. Prints `usage` and returns 0 for --help or -h, returns 2 after a
// message for an unknown option or one without a value, and -1 when the caller should go on.
int parse_options(int argc, char** argv, const char* usage,
                  const std::function<bool(const std::string&, const std::string&)>& set);

// Initializes an MCP session over Streamable HTTP (initialize, then notifications/initialized)
// and returns its Mcp-Session-Id. Throws on failure.
std::string open_session(const boost::asio::ip::tcp::endpoint& ep, const std::string& host,
                         const std::string& path = "/mcp");

// The server-id of an instance of `server_name`, read from its retained presence. Throws when
// none appears within 20 s.
std::string find_server_id(const std::string& broker_url, const std::string& server_name);

}  // namespace mcpmqtt::bench

namespace mcpmqtt::bench {

// A blocking Streamable HTTP client on one keep-alive connection (reconnecting when the server
// closed it), for benchmarks that time requests one after the other. It reads a POST's whole
// response, JSON or SSE, and returns the JSON-RPC message that answers the request.
class McpHttpClient {
 public:
  McpHttpClient(const boost::asio::ip::tcp::endpoint& ep, std::string host,
                std::string path = "/mcp");
  ~McpHttpClient();
  McpHttpClient(const McpHttpClient&) = delete;
  McpHttpClient& operator=(const McpHttpClient&) = delete;

  // initialize + notifications/initialized; the session becomes this client's current one and
  // its id is returned. Throws on failure.
  std::string open_session(const std::string& protocol_version = "2025-06-18");
  // Makes `session_id` (opened by any client) the current session.
  void use_session(std::string session_id, std::string protocol_version);
  // The Authorization header of every request from now on ("Bearer …"); empty: none.
  void set_authorization(std::string value) { authorization_ = std::move(value); }
  // POSTs one JSON-RPC request in the current session and returns the response message's
  // text. Throws on an HTTP error or when no response came.
  std::string call(const std::string& body);

 private:
  struct Reply {
    unsigned status = 0;
    std::string session_id;
    std::string body;
  };
  Reply post(const std::string& body);

  struct Io;
  std::unique_ptr<Io> io_;
  std::string host_, path_, session_id_, protocol_version_, authorization_;
};

// The JSON-RPC message in an HTTP response body: the body itself (application/json) or the
// last `data:` of an SSE body that holds a JSON object. Empty when there is none.
std::string response_message(const std::string& body);

}  // namespace mcpmqtt::bench

// Loading a configuration (config/config.hpp) from any text, with any environment and any
// command-line overrides.
//
// Input: lines before a line "---" set the scene, the rest is the configuration file (JSON with
// comments and trailing commas). A scene line "NAME=value" is an environment variable (the
// MCPMQTT_* overrides, and ${NAME} in headers), read through the GetEnv hook; a line
// "--flag value" is a command-line override (--broker, --listen, --log-level, --server,
// --presence-wait-ms). Without a "---" line the whole input is the file, with no environment.
//
// Checked: parse() and apply_overrides() never throw; a result is a configuration or problems,
// never both or neither; format_problems writes one line per problem, each naming the origin;
// parsing is deterministic; an accepted configuration holds only values validation allows
// (server-names and filters that pass topics::check_*, a broker host, a log level); overrides
// that pass are in the result, and one that does not leaves no configuration.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "bridge/protocol/topics.hpp"
#include "config/config.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace config = mcpmqtt::config;
namespace topics = mcpmqtt::topics;
using mcpmqtt::fuzz::check;

namespace {

// The fuzzed environment (GetEnv is a plain function pointer).
std::map<std::string, std::string>& environment() {
  static std::map<std::string, std::string> env;
  return env;
}

const char* fuzz_getenv(const char* name) {
  const auto& env = environment();
  const auto it = env.find(name);
  return it == env.end() ? nullptr : it->second.c_str();
}

std::size_t count_lines(const std::string& s) {
  std::size_t n = 0;
  for (char c : s)
    n += c == '\n';
  return n;
}

std::string text_of(const std::vector<config::Problem>& problems) {
  return config::format_problems(problems, "fuzz.jsonc");
}

void check_result(const config::LoadResult& r) {
  check(r.ok() == r.problems.empty(), "a configuration and problems, or neither");
  const auto text = text_of(r.problems);
  check(count_lines(text) == r.problems.size(), "format_problems: one line per problem");
  std::size_t pos = 0;
  for (std::size_t i = 0; i < r.problems.size(); ++i) {
    check(text.compare(pos, 11, "fuzz.jsonc:") == 0, "a problem line without the origin");
    check(!r.problems[i].message.empty(), "a problem without a message");
    pos = text.find('\n', pos) + 1;
  }
  if (!r.ok()) return;
  const auto& c = *r.config;
  check(!c.mqtt.host.empty(), "an accepted broker url without a host");
  check(topics::is_valid_id(c.mqtt.client_id_prefix), "client_id_prefix");
  check(c.mqtt.reconnect_min_ms <= c.mqtt.reconnect_max_ms, "reconnect bounds");
  check(config::is_log_level(c.log.level), "log level");
  check(!c.http.listen_host.empty(), "an accepted http.listen without a host");
  check(c.ingress.default_server.empty() || topics::is_valid_server_name(c.ingress.default_server),
        "default_server");
  check(!c.ingress.server_name_filters.empty(), "no server-name filter");
  for (const auto& f : c.ingress.server_name_filters)
    check(topics::is_valid_server_name_filter(f), "server_name_filters");
  for (const auto& s : c.servers) {
    check(topics::is_valid_server_name(s.name), "an mcpServers key that is no server-name");
    check(s.is_stdio() != s.is_http(), "a server that is both or neither");
    check(s.max_sessions >= 1, "max_sessions");
    check(c.find_server(s.name) != nullptr, "find_server");
  }
  check(!c.summary().empty(), "summary");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  auto& env = environment();
  env.clear();
  config::Overrides overrides;
  std::string file = in;
  if (const auto sep = in.find("---\n");
      sep != std::string::npos && (sep == 0 || in[sep - 1] == '\n')) {
    file = in.substr(sep + 4);
    std::size_t pos = 0;
    while (pos < sep) {
      auto nl = in.find('\n', pos);
      const std::string line = in.substr(pos, nl - pos);
      pos = nl + 1;
      if (line.starts_with("--")) {
        const auto space = line.find(' ');
        const std::string flag = line.substr(0, space);
        const std::string value = space == std::string::npos ? "" : line.substr(space + 1);
        if (flag == "--broker") overrides.broker_url = value;
        if (flag == "--listen") overrides.http_listen = value;
        if (flag == "--log-level") overrides.log_level = value;
        if (flag == "--server") overrides.default_server = value;
        if (flag == "--presence-wait-ms") overrides.presence_wait_ms = std::atoi(value.c_str());
      } else if (const auto eq = line.find('='); eq != std::string::npos && eq > 0) {
        env[line.substr(0, eq)] = line.substr(eq + 1);
      }
    }
  }

  auto result = config::parse(file, "fuzz.jsonc", fuzz_getenv);
  check_result(result);
  // The same text in the same environment gives the same answer.
  const auto again = config::parse(file, "fuzz.jsonc", fuzz_getenv);
  check(text_of(again.problems) == text_of(result.problems), "parse is not deterministic");
  check(again.ok() == result.ok(), "parse is not deterministic");

  const bool was_ok = result.ok();
  config::apply_overrides(result, overrides);
  check_result(result);
  if (!was_ok) return 0;
  if (result.ok()) {
    const auto& c = *result.config;
    if (overrides.broker_url) check(c.mqtt.url == *overrides.broker_url, "--broker");
    if (overrides.http_listen) check(c.http.listen == *overrides.http_listen, "--listen");
    if (overrides.log_level) check(c.log.level == *overrides.log_level, "--log-level");
    if (overrides.default_server)
      check(c.ingress.default_server == *overrides.default_server, "--server");
    if (overrides.presence_wait_ms)
      check(c.ingress.presence_wait_ms == *overrides.presence_wait_ms, "--presence-wait-ms");
  } else {
    const bool any = overrides.broker_url || overrides.http_listen || overrides.log_level ||
                     overrides.default_server;
    check(any, "overrides that refuse a configuration without a refusable override");
  }
  return 0;
}

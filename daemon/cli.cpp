#include "daemon/cli.hpp"

#include <algorithm>
#include <functional>

namespace mcpmqtt::daemon {

namespace {

struct OptionSpec {
  const char* name;  // "--broker"
  const char* arg;   // "URL", or nullptr for a flag
  const char* help;
  std::vector<Command> commands;  // where the option is accepted
  std::function<void(CommandLine&, const std::string&)> apply;
};

struct SubcommandSpec {
  const char* name;
  Command command;
  const char* synopsis;
  const char* help;
};

const std::vector<SubcommandSpec>& subcommands() {
  static const std::vector<SubcommandSpec> specs = {
      {"stdio", Command::stdio, "stdio --server NAME [--broker URL] [--config FILE]",
       "stdio: be a stdio MCP server for a host that launches commands (desktop apps, IDEs), and\n"
       "  relay its session to an instance of the MQTT-hosted server NAME. stdout carries only\n"
       "  JSON-RPC; logs go to stderr (warnings only unless --log-level says otherwise). Exits 0\n"
       "  when stdin closes or on SIGTERM, after telling the server; 1 if the session fails.\n"
       "  The client's first message picks the MCP revision: initialize serves MCP 2025 (one\n"
       "  session); a request with the 2026-07-28 _meta envelope serves MCP 2026-07-28, each\n"
       "  request on an MQTT session held for it (ingress.modern); a server/discover probe\n"
       "  is answered either way.\n"},
      {"expose", Command::expose,
       "expose --name NAME [--description TEXT] [--protocol ERA] [--broker URL] -- COMMAND "
       "[ARGS...]",
       "expose: publish one stdio MCP server on MQTT without a configuration file. Each MQTT\n"
       "  client session gets its own COMMAND process (run without a shell). Example:\n"
       "    mcp-mqtt-bridge expose --broker mqtt://127.0.0.1:1883 --name demo/everything \\\n"
       "      -- npx -y @modelcontextprotocol/server-everything\n"},
  };
  return specs;
}

const std::vector<OptionSpec>& options() {
  static const std::vector<OptionSpec> specs = {
      {"--config",
       "FILE",
       "configuration file (JSON with comments); env MCPMQTT_CONFIG",
       {Command::run, Command::stdio, Command::expose},
       [](CommandLine& c, const std::string& v) { c.config_file = v; }},
      {"--check-config",
       "FILE",
       "validate FILE, print a one-line summary, exit 0 (2 on errors)",
       {Command::run},
       [](CommandLine& c, const std::string& v) {
         c.command = Command::check_config;
         c.config_file = v;
       }},
      {"--broker",
       "URL",
       "MQTT broker: mqtt://HOST[:PORT], mqtts://HOST[:PORT] (TLS), ws://HOST[:PORT][/PATH] or "
       "wss://HOST[:PORT][/PATH] (MQTT over WebSocket, path /mqtt by default); several "
       "separated by commas fail over in order; env MCPMQTT_BROKER (default "
       "mqtt://127.0.0.1:1883)",
       {Command::run, Command::check_config, Command::stdio, Command::expose},
       [](CommandLine& c, const std::string& v) { c.overrides.broker_url = v; }},
      {"--topic-prefix",
       "PREFIX",
       "what every MCP topic begins with, the same for every participant on the broker: $mcp- "
       "as MCP over MQTT defines it, or e.g. mcp- for brokers that refuse topics beginning with "
       "$; env MCPMQTT_TOPIC_PREFIX (default $mcp-)",
       {Command::run, Command::check_config, Command::stdio, Command::expose},
       [](CommandLine& c, const std::string& v) { c.overrides.topic_prefix = v; }},
      {"--listen",
       "HOST:PORT",
       "HTTP ingress address; env MCPMQTT_HTTP_LISTEN (default 127.0.0.1:8080)",
       {Command::run, Command::check_config},
       [](CommandLine& c, const std::string& v) { c.overrides.http_listen = v; }},
      {"--log-level",
       "LEVEL",
       "trace, debug, info, warn, error, critical or off; env MCPMQTT_LOG_LEVEL (default info)",
       {Command::run, Command::check_config, Command::stdio, Command::expose},
       [](CommandLine& c, const std::string& v) { c.overrides.log_level = v; }},
      {"--server",
       "NAME",
       "stdio: the MQTT server-name to connect to",
       {Command::stdio},
       [](CommandLine& c, const std::string& v) { c.name = v; }},
      {"--presence-wait-ms",
       "MS",
       "how long a new session waits for its server to come online (default 5000)",
       {Command::stdio, Command::run},
       [](CommandLine& c, const std::string& v) {
         c.overrides.presence_wait_ms = std::atoi(v.c_str());
       }},
      {"--name",
       "NAME",
       "expose: the MQTT server-name to publish under (type/sub-type/name)",
       {Command::expose},
       [](CommandLine& c, const std::string& v) { c.name = v; }},
      {"--description",
       "TEXT",
       "expose: the description in the server's online presence",
       {Command::expose},
       [](CommandLine& c, const std::string& v) { c.description = v; }},
      {"--protocol",
       "ERA",
       "expose: the MCP era spoken to COMMAND: auto (server/discover, then initialize), legacy "
       "(initialize only: MCP 2025-11-25 and earlier) or modern (MCP 2026-07-28 only); default "
       "auto",
       {Command::expose},
       [](CommandLine& c, const std::string& v) {
         if (v == "legacy")
           c.protocol = config::ServerProtocol::legacy;
         else if (v == "modern")
           c.protocol = config::ServerProtocol::modern;
         else
           c.protocol = config::ServerProtocol::automatic;
       }},
      {"--help",
       nullptr,
       "show this help and exit",
       {Command::run, Command::check_config, Command::stdio, Command::expose},
       [](CommandLine& c, const std::string&) { c.command = Command::help; }},
      {"--version",
       nullptr,
       "print the version and exit",
       {Command::run, Command::check_config, Command::stdio, Command::expose},
       [](CommandLine& c, const std::string&) { c.command = Command::version; }},
  };
  return specs;
}

const char* command_name(Command c) {
  for (const auto& s : subcommands()) {
    if (s.command == c) return s.name;
  }
  return "the daemon";
}

}  // namespace

ParseResult parse_command_line(const std::vector<std::string>& args) {
  CommandLine cl;
  std::size_t i = 0;
  if (i < args.size() && !args[i].starts_with("-")) {
    const auto& subs = subcommands();
    auto it =
        std::find_if(subs.begin(), subs.end(), [&](const auto& s) { return args[i] == s.name; });
    if (it == subs.end()) {
      return {std::nullopt, "unknown subcommand \"" + args[i] + "\"; see --help"};
    }
    cl.command = it->command;
    ++i;
  }
  const Command mode = cl.command;
  for (; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "--") {
      if (mode != Command::expose) return {std::nullopt, "unexpected \"--\"; see --help"};
      cl.child_argv.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    std::string value;
    bool has_inline_value = false;
    if (const auto eq = arg.find('='); arg.starts_with("--") && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_inline_value = true;
    }
    const auto& opts = options();
    auto it = std::find_if(opts.begin(), opts.end(), [&](const auto& o) { return arg == o.name; });
    if (it == opts.end()) {
      return {std::nullopt, "unknown option \"" + arg + "\"; see --help"};
    }
    if (std::find(it->commands.begin(), it->commands.end(), mode) == it->commands.end()) {
      return {std::nullopt,
              std::string("option ") + it->name + " does not apply to " + command_name(mode)};
    }
    if (it->arg) {
      if (!has_inline_value) {
        if (i + 1 >= args.size()) {
          return {std::nullopt,
                  std::string("option ") + it->name + " needs a value (" + it->arg + ")"};
        }
        value = args[++i];
      }
    } else if (has_inline_value) {
      return {std::nullopt, std::string("option ") + it->name + " takes no value"};
    }
    if (std::string_view(it->name) == "--protocol" && value != "auto" && value != "legacy" &&
        value != "modern") {
      return {std::nullopt,
              "option --protocol expects auto, legacy or modern, found \"" + value + "\""};
    }
    it->apply(cl, value);
  }
  if (cl.command == Command::check_config && cl.config_file.empty()) {
    return {std::nullopt, "--check-config needs a FILE"};
  }
  if (cl.command == Command::stdio && cl.name.empty()) {
    return {std::nullopt, "stdio needs --server NAME (the MQTT server-name to connect to)"};
  }
  if (cl.command == Command::expose) {
    if (cl.name.empty()) return {std::nullopt, "expose needs --name NAME (the MQTT server-name)"};
    if (cl.child_argv.empty()) {
      return {std::nullopt,
              "expose needs the server's command after \"--\", e.g. -- npx -y "
              "@modelcontextprotocol/server-everything"};
    }
  }
  return {cl, {}};
}

std::string usage() {
  std::string out =
      "mcp-mqtt-bridge " MCPMQTT_VERSION
      " — carries MCP sessions between Streamable HTTP, stdio and MCP over MQTT\n\n"
      "Usage:\n"
      "  mcp-mqtt-bridge [--config FILE] [options]   run the daemon\n"
      "  mcp-mqtt-bridge --check-config FILE         validate a configuration and exit\n";
  for (const auto& s : subcommands())
    out += std::string("  mcp-mqtt-bridge ") + s.synopsis + "\n";
  out += "\nOptions:\n";
  for (const auto& o : options()) {
    std::string left = std::string("  ") + o.name + (o.arg ? std::string(" ") + o.arg : "");
    if (left.size() < 24)
      left.resize(24, ' ');
    else
      left += "\n" + std::string(24, ' ');
    out += left + o.help + "\n";
  }
  for (const auto& s : subcommands())
    out += std::string("\n") + s.help;
  out +=
      "\nSecrets are never taken from the command line: the MQTT password comes from\n"
      "mqtt.password_file or MCPMQTT_MQTT_PASSWORD (username: MCPMQTT_MQTT_USERNAME).\n"
      "MQTT client: the bridge's own (mqtt.client \"native\", the default) or Eclipse Paho\n"
      "(\"paho\"); env MCPMQTT_MQTT_CLIENT.\n"
      "Signals: SIGTERM/SIGINT stop gracefully (a second one stops at once); SIGHUP reloads\n"
      "the configuration (mcpServers, log.level, egress limits and timeouts; an invalid one is\n"
      "rejected and the running one stays). HTTP: /mcp, /servers/{name}/mcp, /servers,\n"
      "/healthz, /readyz (503 with the reason while not ready) and /metrics (Prometheus).\n"
      "/mcp and /servers/{name}/mcp serve MCP\n"
      "2025 sessions and MCP 2026-07-28 requests alike (ingress.modern in the configuration).\n"
      "Events (SEP-1803): resource updates reach sessions whose subscription covers the URI\n"
      "(the same URI, or it followed by '/', '?' or '#'); with events.webhooks.enabled the\n"
      "bridge serves webhooks (resources/subscriptions/register) for MQTT-hosted servers with\n"
      "in-band events, kept in the SQLite file events.webhooks.database.\n"
      "Limits: a server at its max_sessions (stdio 32, HTTP 256) or its children's memory\n"
      "bound (stdio, 4096 MiB), or the HTTP ingress at http.limits.max_sessions, first closes\n"
      "the least recently active session with nothing in flight and no open stream or\n"
      "subscription to make room, and refuses only when none can go (egress.idle_floor_ms and\n"
      "http.limits.idle_floor_ms, default 0, spare sessions active within them).\n"
      "/readyz is 200 only when the listener, the ingress's broker connection and every\n"
      "published server are up; otherwise 503 naming each part that is not, and why.\n"
      "Queues toward slow clients are bounded in messages and bytes (http.limits.*_bytes).\n"
      "Exit status: 0 success, 1 runtime failure, 2 bad usage or invalid configuration.\n"
      "Every configuration key: mcp-mqtt-bridge.conf(5), and the sample\n"
      "config/bridge.example.jsonc; the daemon: mcp-mqtt-bridge(8).\n";
  return out;
}

}  // namespace mcpmqtt::daemon

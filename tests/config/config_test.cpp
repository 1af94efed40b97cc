#include "config/config.hpp"

#include <map>

#include <catch2/catch.hpp>

#include "tests/support/temp_dir.hpp"

using namespace mcpmqtt::config;

namespace {

// A fake environment for tests: only what a test puts here is visible.
std::map<std::string, std::string>& fake_env() {
  static std::map<std::string, std::string> env;
  return env;
}
const char* fake_getenv(const char* name) {
  auto it = fake_env().find(name);
  return it == fake_env().end() ? nullptr : it->second.c_str();
}

struct EnvGuard {
  explicit EnvGuard(const std::map<std::string, std::string>& vars) { fake_env() = vars; }
  ~EnvGuard() { fake_env().clear(); }
};

LoadResult load(const std::string& text) {
  return parse(text, "test.jsonc", fake_getenv);
}

Config good(const std::string& text) {
  auto r = load(text);
  INFO(format_problems(r.problems, "test.jsonc"));
  REQUIRE(r.ok());
  return *r.config;
}

// The single problem a text has.
Problem only_problem(const std::string& text) {
  auto r = load(text);
  INFO(text);
  REQUIRE_FALSE(r.ok());
  INFO(format_problems(r.problems, "test.jsonc"));
  REQUIRE(r.problems.size() == 1);
  return r.problems[0];
}

}  // namespace

TEST_CASE("defaults are safe: loopback, random pick, recommended timeouts", "[config]") {
  auto c = good("{}");
  CHECK(c.mqtt.url == "mqtt://127.0.0.1:1883");
  CHECK(c.mqtt.host == "127.0.0.1");
  CHECK(c.mqtt.port == 1883);
  CHECK_FALSE(c.mqtt.tls.enabled);
  CHECK(c.mqtt.qos == 1);
  CHECK(c.mqtt.client == MqttClient::native);
  CHECK_FALSE(c.mqtt.websocket);
  CHECK(c.mqtt.max_packet_bytes == 16u * 1024 * 1024 + 64 * 1024);
  CHECK(c.http.listen == "127.0.0.1:8080");
  CHECK(c.http.listen_host == "127.0.0.1");
  CHECK(c.http.listen_port == 8080);
  CHECK(c.ingress.server_name_filters == std::vector<std::string>{"#"});
  CHECK(c.ingress.pick == Pick::random);
  // 004 §Timeouts
  CHECK(c.timeouts.for_method("initialize") == 30000);
  CHECK(c.timeouts.for_method("ping") == 10000);
  CHECK(c.timeouts.for_method("tools/call") == 60000);
  CHECK(c.timeouts.for_method("sampling/createMessage") == 60000);
  CHECK(c.timeouts.for_method("completion/complete") == 60000);
  CHECK(c.timeouts.for_method("resources/read") == 30000);
  CHECK(c.servers.empty());
  CHECK(c.log.level == "info");
}

TEST_CASE("the sample configuration is valid and documents a server", "[config]") {
  auto r = load_file(std::string(MCPMQTT_SOURCE_DIR) + "/config/bridge.example.jsonc", fake_getenv);
  INFO(format_problems(r.problems, "bridge.example.jsonc"));
  REQUIRE(r.ok());
  REQUIRE(r.config->servers.size() == 1);
  CHECK(r.config->servers[0].name == "demo/everything");
  CHECK(r.config->servers[0].command == "npx");
  CHECK(r.config->servers[0].args ==
        std::vector<std::string>{"-y", "@modelcontextprotocol/server-everything"});
}

TEST_CASE("comments and trailing commas are accepted", "[config]") {
  auto c = good(R"(// top comment
  {
    /* block */ "mqtt": { "url": "mqtt://broker.local:1884", },  // trailing
    "log": { "level": "debug", },
  })");
  CHECK(c.mqtt.host == "broker.local");
  CHECK(c.mqtt.port == 1884);
  CHECK(c.log.level == "debug");
}

TEST_CASE("mcpServers entries in the desktop-host form", "[config]") {
  EnvGuard env(std::map<std::string, std::string>{{"WEATHER_TOKEN", "s3cret"}});
  auto c = good(R"({
    "mcpServers": {
      "demo/everything": { "command": "npx", "args": ["-y", "pkg"], "env": {"A": "1"},
                           "cwd": "/tmp", "description": "demo", "max_sessions": 3,
                           "meta": {"rbac": {"roles": []}} },
      "tools/weather": { "type": "http", "url": "https://w.example/mcp",
                         "headers": {"Authorization": "Bearer ${WEATHER_TOKEN}"} },
      "off/one": { "command": "x", "disabled": true }
    }
  })");
  REQUIRE(c.servers.size() == 2);
  const auto& s = c.servers[0];
  CHECK(s.name == "demo/everything");
  CHECK(s.is_stdio());
  CHECK(s.env.at("A") == "1");
  CHECK(s.cwd == "/tmp");
  CHECK(s.max_sessions == 3);
  CHECK(s.meta_json == R"({"rbac":{"roles":[]}})");
  const auto& w = c.servers[1];
  CHECK(w.is_http());
  CHECK(w.headers.at("Authorization") == "Bearer s3cret");
  CHECK(w.max_sessions == 256);  // egress.max_sessions_per_http_server
  CHECK(c.find_server("tools/weather") == &c.servers[1]);
  CHECK(c.find_server("off/one") == nullptr);
}

TEST_CASE(
    "mcpServers protocol: auto by default, legacy or modern on request, anything else named "
    "with the choices: egress discover_timeout_ms and max_input_rounds",
    "[config]") {
  auto c = good(R"({
    "egress": { "discover_timeout_ms": 2500, "max_input_rounds": 3 },
    "mcpServers": {
      "a/default": { "command": "x" },
      "a/legacy": { "command": "x", "protocol": "legacy" },
      "a/modern": { "url": "http://127.0.0.1:9/mcp", "protocol": "modern" }
    }
  })");
  REQUIRE(c.servers.size() == 3);
  CHECK(c.servers[0].protocol == ServerProtocol::automatic);
  CHECK(c.servers[1].protocol == ServerProtocol::legacy);
  CHECK(c.servers[2].protocol == ServerProtocol::modern);
  CHECK(c.egress.discover_timeout_ms == 2500);
  CHECK(c.egress.max_input_rounds == 3);
  CHECK(good("{}").egress.discover_timeout_ms == 10000);
  CHECK(good("{}").egress.max_input_rounds == 10);

  auto p = only_problem(R"({"mcpServers": {"a/b": {"command": "x", "protocol": "2026-07-28"}}})");
  CHECK(p.path == R"(mcpServers."a/b".protocol)");
  CHECK(p.message ==
        R"(expected "auto" (server/discover, then initialize), "legacy" (initialize only: MCP )"
        R"(2025-11-25 and earlier) or "modern" (MCP 2026-07-28 only), found "2026-07-28")");
  auto t = only_problem(R"({"egress": {"discover_timeout_ms": 5}})");
  CHECK(t.path == "egress.discover_timeout_ms");
  auto q = only_problem(R"({"egress": {"max_input_rounds": 0}})");
  CHECK(q.path == "egress.max_input_rounds");
  auto typo = only_problem(R"({"mcpServers": {"a/b": {"command": "x", "protocl": "auto"}}})");
  CHECK(typo.message == R"(unknown key; did you mean "protocol"?)");
}

TEST_CASE("a misspelt key names its path and suggests the known key", "[config][malformed]") {
  auto p = only_problem(R"({"mqtt": {"ulr": "mqtt://x"}})");
  CHECK(p.path == "mqtt.ulr");
  CHECK(p.message == R"(unknown key; did you mean "url"?)");

  p = only_problem(R"({"htpp": {}})");
  CHECK(p.path == "htpp");
  CHECK(p.message == R"(unknown key; did you mean "http"?)");

  p = only_problem(R"({"http": {"limits": {"max_body_byte": 10000}}})");
  CHECK(p.path == "http.limits.max_body_byte");
  CHECK(p.message == R"(unknown key; did you mean "max_body_bytes"?)");

  p = only_problem(R"({"mcpServers": {"a/b": {"command": "x", "argz": []}}})");
  CHECK(p.path == R"(mcpServers."a/b".argz)");
  CHECK(p.message == R"(unknown key; did you mean "args"?)");

  // Nothing close: the known keys are listed.
  p = only_problem(R"({"log": {"zzzzzzzz": 1}})");
  CHECK(p.path == "log.zzzzzzzz");
  CHECK(p.message == "unknown key (known keys here: level)");
}

TEST_CASE("text that is not JSON reports line and column", "[config][malformed]") {
  auto p = only_problem("{\n  \"mqtt\": {\n    \"url\" \"x\"\n  }\n}");
  CHECK(p.path.empty());
  CHECK(p.message ==
        "not valid JSON at line 3 column 11: Missing a colon after a name of object member.");
  p = only_problem("");
  CHECK(p.message == "not valid JSON at line 1 column 1: The document is empty.");
  p = only_problem("[1]");
  CHECK(p.message == "the configuration must be a JSON object, found an array");
}

TEST_CASE("wrong types and values name the key, the expectation and what was found",
          "[config][malformed]") {
  struct Case {
    const char* text;
    const char* path;
    const char* message;
  };
  const Case cases[] = {
      {R"({"mqtt": 5})", "mqtt", "expected an object, found an integer"},
      {R"({"mqtt": {"url": 5}})", "mqtt.url",
       "expected a string or an array of strings, found an integer"},
      {R"({"mqtt": {"url": []}})", "mqtt.url", "must not be empty"},
      {R"({"mqtt": {"url": ["mqtt://a", 5]}})", "mqtt.url",
       "expected broker urls (strings without commas), found an integer"},
      {R"({"mqtt": {"url": ["mqtt://a", "http://b"]}})", "mqtt.url",
       R"(expected mqtt://HOST[:PORT], mqtts://HOST[:PORT], ws://HOST[:PORT][/PATH] or wss://HOST[:PORT][/PATH], found "http://b")"},
      {R"({"mqtt": {"url": "mqtt://a,,mqtt://b"}})", "mqtt.url",
       R"(an empty entry in the list "mqtt://a,,mqtt://b" (urls are separated by single commas))"},
      {R"({"mqtt": {"url": ""}})", "mqtt.url", "must not be empty"},
      {R"({"mqtt": {"url": "http://x"}})", "mqtt.url",
       R"(expected mqtt://HOST[:PORT], mqtts://HOST[:PORT], ws://HOST[:PORT][/PATH] or wss://HOST[:PORT][/PATH], found "http://x")"},
      {R"({"mqtt": {"url": "mqtt://u:p@h:1883"}})", "mqtt.url",
       R"(expected no credentials in the url (use mqtt.username and mqtt.password_file), found "mqtt://u:p@h:1883")"},
      {R"({"mqtt": {"url": "mqtt://h:1883/mqtt"}})", "mqtt.url",
       R"(expected mqtt://HOST[:PORT] with no path, found "mqtt://h:1883/mqtt")"},
      {R"({"mqtt": {"url": "ws://h/mqtt?x=1"}})", "mqtt.url",
       R"(the path of "ws://h/mqtt?x=1" has a space, '?' or '#')"},
      {R"({"mqtt": {"client": "mosquitto"}})", "mqtt.client",
       R"(expected "native" or "paho", found "mosquitto")"},
      {R"({"mqtt": {"max_packet_bytes": 100}})", "mqtt.max_packet_bytes",
       "expected an integer from 65536 to 268435460, found 100"},
      {R"({"mqtt": {"url": "mqtt://h:99999"}})", "mqtt.url",
       R"(in "mqtt://h:99999": port must be a number from 0 to 65535, found "99999")"},
      {R"({"mqtt": {"keepalive_s": 1}})", "mqtt.keepalive_s",
       "expected an integer from 5 to 3600, found 1"},
      {R"({"mqtt": {"keepalive_s": "30"}})", "mqtt.keepalive_s",
       R"(expected an integer from 5 to 3600, found "30")"},
      {R"({"mqtt": {"keepalive_s": 2.5}})", "mqtt.keepalive_s",
       "expected an integer from 5 to 3600, found a number"},
      {R"({"mqtt": {"session_keepalive_s": 3601}})", "mqtt.session_keepalive_s",
       "expected an integer from 5 to 3600, found 3601"},
      {R"({"mqtt": {"qos": 2}})", "mqtt.qos", "expected an integer from 0 to 1, found 2"},
      {R"({"mqtt": {"client_id_prefix": "a/b"}})", "mqtt.client_id_prefix",
       "is part of MQTT client ids and must not contain '/', '+' or '#'"},
      {R"({"mqtt": {"topic_prefix": "mcp/+/"}})", "mqtt.topic_prefix",
       "begins every MCP topic and must not contain '+' or '#'"},
      {R"({"mqtt": {"topic_prefix": ""}})", "mqtt.topic_prefix", "must not be empty"},
      {R"({"mqtt": {"reconnect_min_ms": 5000, "reconnect_max_ms": 1000}})", "mqtt.reconnect_min_ms",
       "must not exceed mqtt.reconnect_max_ms"},
      {R"({"mqtt": {"tls": {"ca_file": "/x"}}})", "mqtt.tls",
       R"(is set but mqtt.url "mqtt://127.0.0.1:1883" is not TLS; use mqtts://HOST[:PORT] or wss://HOST[:PORT][/PATH])"},
      {R"({"mqtt": {"url": "mqtts://h", "tls": {"cert_file": "/c"}}})", "mqtt.tls",
       "cert_file and key_file go together; set both or neither"},
      {R"({"mqtt": {"url": "mqtts://h", "tls": {"verify": "yes"}}})", "mqtt.tls.verify",
       R"(expected true or false, found "yes")"},
      {R"({"http": {"listen": "8080"}})", "http.listen",
       R"(expected HOST:PORT (IPv6 as [ADDR]:PORT), found "8080")"},
      {R"({"http": {"listen": ":8080"}})", "http.listen",
       R"(no host in ":8080" (use 127.0.0.1 for loopback, 0.0.0.0 for every interface))"},
      {R"({"http": {"listen": "[::1]8080"}})", "http.listen",
       R"(expected [IPv6]:PORT, found "[::1]8080")"},
      {R"({"http": {"allowed_origins": "x"}})", "http.allowed_origins",
       "expected an array of strings, found a string"},
      {R"({"http": {"allowed_origins": ["a", 1]}})", "http.allowed_origins[1]",
       "expected a string, found an integer"},
      {R"({"http": {"limits": {"max_body_bytes": 10}}})", "http.limits.max_body_bytes",
       "expected an integer from 1024 to 1073741824, found 10"},
      {R"({"ingress": {"pick": "first"}})", "ingress.pick",
       R"(expected "random" or "round_robin", found "first")"},
      {R"({"ingress": {"server_name_filters": []}})", "ingress.server_name_filters",
       R"(must hold at least one filter, such as "#")"},
      {R"({"ingress": {"server_name_filters": ["a/#/b"]}})", "ingress.server_name_filters",
       R"([0] "a/#/b" '#' must be a whole level and the last one)"},
      {R"({"ingress": {"default_server": "a/+"}})", "ingress.default_server",
       R"("a/+" must not contain '+' or '#')"},
      {R"({"timeouts": {"tools/call": 0}})", R"(timeouts."tools/call")",
       "expected a number of seconds greater than 0 and at most 86400"},
      {R"({"timeouts": {"ping": "10"}})", "timeouts.ping",
       R"(expected a number of seconds, found "10")"},
      {R"({"log": {"level": "loud"}})", "log.level",
       R"(expected one of trace, debug, info, warn, error, critical, off; found "loud")"},
      {R"({"mcpServers": {"a/b": 1}})", R"(mcpServers."a/b")",
       "expected an object, found an integer"},
      {R"({"mcpServers": {"a/b": {}}})", R"(mcpServers."a/b")",
       R"(needs "command" (a stdio server) or "url" (a Streamable HTTP server))"},
      {R"({"mcpServers": {"a/b": {"command": "x", "url": "http://y"}}})", R"(mcpServers."a/b")",
       R"(has both "command" and "url"; a server is either a command (stdio) or a url (Streamable HTTP))"},
      {R"({"mcpServers": {"a/#": {"command": "x"}}})", R"(mcpServers."a/#")",
       "the key is the MQTT server-name and must not contain '+' or '#'"},
      {R"({"mcpServers": {"a//b": {"command": "x"}}})", R"(mcpServers."a//b")",
       "the key is the MQTT server-name and must be levels separated by single '/', with no empty "
       "level (like type/sub-type/name)"},
      {R"({"mcpServers": {"a/b": {"command": "x", "args": "y"}}})", R"(mcpServers."a/b".args)",
       "expected an array of strings, found a string"},
      {R"({"mcpServers": {"a/b": {"command": "x", "env": {"A": 1}}}})", R"(mcpServers."a/b".env.A)",
       "expected a string, found an integer"},
      {R"({"mcpServers": {"a/b": {"url": "ftp://x"}}})", R"(mcpServers."a/b".url)",
       R"(expected an http:// or https:// URL, found "ftp://x")"},
      {R"({"mcpServers": {"a/b": {"url": "http://x", "headers": {"A": "${NOPE}"}}}})",
       R"(mcpServers."a/b".headers.A)", "environment variable NOPE is not set"},
      {R"({"mcpServers": {"a/b": {"command": "x", "headers": {"A": "b"}}}})",
       R"(mcpServers."a/b".headers)", R"(only applies to "url" servers)"},
      {R"({"mcpServers": {"a/b": {"command": "x", "type": "http"}}})", R"(mcpServers."a/b".type)",
       R"("http" does not match the entry's "command")"},
      {R"({"mcpServers": {"a/b": {"command": "x", "type": "sse"}}})", R"(mcpServers."a/b".type)",
       R"(expected "stdio", "http" or "streamable-http", found "sse")"},
      {R"({"mcpServers": {"a/b": {"command": "x", "meta": []}}})", R"(mcpServers."a/b".meta)",
       "expected an object, found an array"},
      {R"({"daemon": {"threads": 0}})", "daemon.threads",
       "expected an integer from 1 to 64, found 0"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    auto p = only_problem(c.text);
    CHECK(p.path == c.path);
    CHECK(p.message == c.message);
  }
}

TEST_CASE("every problem is reported, not only the first", "[config][malformed]") {
  auto r = load(R"({"mqtt": {"ulr": "x", "keepalive_s": 0}, "logg": {}})");
  REQUIRE_FALSE(r.ok());
  CHECK(r.problems.size() == 3);
  const auto text = format_problems(r.problems, "f.jsonc");
  CHECK(text.find("f.jsonc: mqtt.ulr: unknown key; did you mean \"url\"?\n") != std::string::npos);
  CHECK(text.find("f.jsonc: mqtt.keepalive_s: expected an integer from 5 to 3600, found 0\n") !=
        std::string::npos);
  CHECK(text.find("f.jsonc: logg: unknown key; did you mean \"log\"?\n") != std::string::npos);
}

TEST_CASE("a problem is one line, whatever characters the file's keys and values hold",
          "[config][malformed]") {
  // tests/fuzz/config_fuzzer checks that format_problems writes one line per problem (corpus
  // regression-config-newline): a value or key with a line break (JSON escapes \n) made a
  // problem span lines that read as other problems, and a terminal got control sequences raw.
  auto r = load(R"({"mqtt": {"client": "a\nb\u001b[31m"}, "x\ty\r": 1})");
  REQUIRE(r.problems.size() == 2);
  CHECK(format_problems(r.problems, "f.jsonc") ==
        "f.jsonc: mqtt.client: expected \"native\" or \"paho\", found \"a\\nb\\x1b[31m\"\n"
        "f.jsonc: \"x\\ty\\r\": unknown key (known keys here: $schema, mqtt, http, ingress, "
        "egress, events, timeouts, log, daemon, mcpServers)\n");
  // The problems themselves keep the text as it was.
  CHECK(r.problems[0].message == "expected \"native\" or \"paho\", found \"a\nb\x1b[31m\"");
}

TEST_CASE("mqtts URLs, IPv6 hosts and default ports", "[config]") {
  CHECK(good(R"({"mqtt": {"url": "mqtts://broker.example"}})").mqtt.port == 8883);
  CHECK(good(R"({"mqtt": {"url": "mqtts://broker.example"}})").mqtt.tls.enabled);
  auto c = good(R"({"mqtt": {"url": "mqtt://[::1]:1999"}})");
  CHECK(c.mqtt.host == "::1");
  CHECK(c.mqtt.port == 1999);
  c = good(R"({"mqtt": {"url": "tcp://[::1]"}})");
  CHECK(c.mqtt.host == "::1");
  CHECK(c.mqtt.port == 1883);
  c = good(R"({"http": {"listen": "[::1]:9000"}})");
  CHECK(c.http.listen_host == "::1");
  CHECK(c.http.listen_port == 9000);
  c = good(
      R"({"mqtt": {"url": "mqtts://h:8884", "tls": {"ca_file": "/ca", "cert_file": "/c", "key_file": "/k", "verify": false}}})");
  CHECK(c.mqtt.tls.ca_file == "/ca");
  CHECK_FALSE(c.mqtt.tls.verify);
}

TEST_CASE("MQTT over WebSocket URLs: ports, the default path /mqtt, TLS with wss", "[config]") {
  auto c = good(R"({"mqtt": {"url": "ws://broker.example"}})");
  CHECK(c.mqtt.websocket);
  CHECK_FALSE(c.mqtt.tls.enabled);
  CHECK(c.mqtt.host == "broker.example");
  CHECK(c.mqtt.port == 80);
  CHECK(c.mqtt.ws_path == "/mqtt");
  c = good(R"({"mqtt": {"url": "wss://broker.example:8884/ws/mqtt", "tls": {"ca_file": "/ca"}}})");
  CHECK(c.mqtt.websocket);
  CHECK(c.mqtt.tls.enabled);
  CHECK(c.mqtt.port == 8884);
  CHECK(c.mqtt.ws_path == "/ws/mqtt");
  c = good(R"({"mqtt": {"url": "wss://[::1]/"}})");
  CHECK(c.mqtt.host == "::1");
  CHECK(c.mqtt.port == 443);
  CHECK(c.mqtt.ws_path == "/");
  c = good(R"({"mqtt": {"url": "mqtt://h/"}})");
  CHECK_FALSE(c.mqtt.websocket);
  CHECK(c.mqtt.port == 1883);
}

TEST_CASE("mqtt.client chooses the MQTT engine, and MCPMQTT_MQTT_CLIENT overrides it", "[config]") {
  CHECK(good(R"({"mqtt": {"client": "paho"}})").mqtt.client == MqttClient::paho);
  CHECK(good(R"({"mqtt": {"client": "native"}})").mqtt.client == MqttClient::native);
  {
    EnvGuard env(std::map<std::string, std::string>{{"MCPMQTT_MQTT_CLIENT", "paho"}});
    CHECK(good(R"({"mqtt": {"client": "native"}})").mqtt.client == MqttClient::paho);
  }
  {
    EnvGuard env(std::map<std::string, std::string>{{"MCPMQTT_MQTT_CLIENT", "libmosquitto"}});
    auto p = only_problem("{}");
    CHECK(p.path == "MCPMQTT_MQTT_CLIENT");
    CHECK(p.message == R"(expected "native" or "paho", found "libmosquitto")");
  }
}

TEST_CASE("mqtt.session_credentials: shared by default, token or principal, nothing else",
          "[config]") {
  const auto with = [](const std::string& mode) {
    return R"({"http": {"oauth": {"issuer": "https://auth.example.com"}}, "mqtt": {)"
           R"("session_credentials": ")" +
           mode + R"("}})";
  };
  CHECK(good("{}").mqtt.session_credentials == SessionCredentials::shared);
  CHECK(good(with("token")).mqtt.session_credentials == SessionCredentials::token);
  CHECK(good(with("principal")).mqtt.session_credentials == SessionCredentials::principal);
  CHECK(good(with("shared")).mqtt.session_credentials == SessionCredentials::shared);
  CHECK(good(R"({"mqtt": {"session_credentials": "shared"}})").mqtt.session_credentials ==
        SessionCredentials::shared);
  auto p = only_problem(R"({"mqtt": {"session_credentials": "jwt"}})");
  CHECK(p.path == "mqtt.session_credentials");
  CHECK(p.message == R"(expected "shared", "token" or "principal", found "jwt")");
  CHECK(good(with("token")).summary().find("sessions as their OAuth subject and token") !=
        std::string::npos);
}

TEST_CASE(
    "mqtt.session_credentials token or principal without http.oauth is refused: no session "
    "would have a subject to present",
    "[config]") {
  for (const std::string mode : {"token", "principal"}) {
    auto p = only_problem(R"({"mqtt": {"session_credentials": ")" + mode + R"("}})");
    CHECK(p.path == "mqtt.session_credentials");
    CHECK(p.message.find("needs http.oauth.issuer") != std::string::npos);
    p = only_problem(
        R"({"mqtt": {"session_credentials": ")" + mode +
        R"("}, "http": {"enabled": false, "oauth": {"issuer": "https://a.example"}}})");
    CHECK(p.path == "mqtt.session_credentials");
  }
}

TEST_CASE(
    "mcpServers url entries get their access token by OAuth client credentials (RFC 6749 §4.4): "
    "the resource defaults to the url, the secret comes from a file",
    "[config]") {
  mcpmqtt::test::TempDir dir;
  const auto secret = dir.write("secret", "s3cret\n");
  const auto c = good(R"({"mcpServers": {"w/x": {"url": "https://w.example/mcp", "oauth": {)"
                      R"("issuer": "https://auth.example.com", "client_id": "bridge", )"
                      R"("client_secret_file": ")" +
                      secret + R"(", "scope": "mcp:tools mcp:read"}}}})");
  const auto& o = c.servers.at(0).oauth;
  CHECK(o.enabled());
  CHECK(o.issuer == "https://auth.example.com");
  CHECK(o.client_id == "bridge");
  CHECK(o.client_secret == "s3cret");
  CHECK(o.scope == "mcp:tools mcp:read");
  CHECK(o.resource == "https://w.example/mcp");
  CHECK_FALSE(o.client_secret_post);
  CHECK(o.tls_verify);

  const auto d =
      good(R"({"mcpServers": {"w/x": {"url": "http://127.0.0.1:9/mcp", "oauth": {)"
           R"("issuer": "http://127.0.0.1:8/", "client_id": "b", "client_secret_file": ")" +
           secret +
           R"(", "resource": "http://127.0.0.1:9/", "auth_method": "client_secret_post",)"
           R"( "tls_verify": false, "ca_file": "/etc/ca.pem"}}}})");
  CHECK(d.servers.at(0).oauth.resource == "http://127.0.0.1:9/");
  CHECK(d.servers.at(0).oauth.client_secret_post);
  CHECK_FALSE(d.servers.at(0).oauth.tls_verify);
  CHECK(d.servers.at(0).oauth.ca_file == "/etc/ca.pem");
  CHECK(good(R"({"mcpServers": {"w/x": {"url": "https://w.example/mcp"}}})")
            .servers.at(0)
            .oauth.enabled() == false);
}

TEST_CASE("mcpServers oauth: each refusal names its key", "[config]") {
  mcpmqtt::test::TempDir dir;
  const auto secret = dir.write("secret", "s3cret");
  const auto empty = dir.write("empty", "\n");
  const auto entry = [&](const std::string& oauth_members, const std::string& more = "") {
    return R"({"mcpServers": {"w/x": {"url": "https://w.example/mcp")" + more + R"(, "oauth": {)" +
           oauth_members + "}}}}";
  };
  const std::string base = R"("issuer": "https://auth.example.com", "client_id": "b", )";
  const std::string file = R"("client_secret_file": ")" + secret + R"(")";
  struct Case {
    std::string text, path, message;
  };
  const std::vector<Case> cases{
      {entry(R"("client_id": "b", )" + file), R"(mcpServers."w/x".oauth.issuer)", "is required"},
      {entry(R"("issuer": "https://a.example", )" + file), R"(mcpServers."w/x".oauth.client_id)",
       "is required"},
      {entry(R"("issuer": "https://a.example", "client_id": "b")"),
       R"(mcpServers."w/x".oauth.client_secret_file)", "is required"},
      {entry(base + R"("client_secret_file": "/nonexistent/secret")"),
       R"(mcpServers."w/x".oauth.client_secret_file)", "cannot read /nonexistent/secret"},
      {entry(base + R"("client_secret_file": ")" + empty + R"(")"),
       R"(mcpServers."w/x".oauth.client_secret_file)", "is empty"},
      {entry(R"("issuer": "http://auth.example.com", "client_id": "b", )" + file),
       R"(mcpServers."w/x".oauth.issuer)", "must be https://"},
      {entry(base + file + R"(, "auth_method": "private_key_jwt")"),
       R"(mcpServers."w/x".oauth.auth_method)", "expected \"client_secret_basic\""},
      {entry(base + file + R"(, "resource": "https://w.example/mcp#x")"),
       R"(mcpServers."w/x".oauth.resource)", "without a fragment"},
      {entry(base + file, R"(, "headers": {"authorization": "Bearer x"})"),
       R"(mcpServers."w/x".headers)", "sets Authorization"},
      {R"({"mcpServers": {"w/x": {"command": "x", "oauth": {)" + base + file + "}}}}",
       R"(mcpServers."w/x".oauth)", R"(only applies to "url" servers)"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    auto p = only_problem(c.text);
    CHECK(p.path == c.path);
    CHECK(p.message.find(c.message) != std::string::npos);
  }
}

TEST_CASE("secrets come from files and the environment", "[config]") {
  mcpmqtt::test::TempDir dir;
  const auto pw = dir.write("pw", "hunter2\n");
  const auto tokens = dir.write("tokens", "# comment\n  tok-a  \n\ntok-b\n");
  auto c = good(R"({"mqtt": {"username": "u", "password_file": ")" + pw +
                R"("}, "http": {"bearer_tokens_file": ")" + tokens + R"("}})");
  CHECK(c.mqtt.password == "hunter2");
  CHECK(c.http.bearer_tokens == std::vector<std::string>{"tok-a", "tok-b"});

  {
    EnvGuard env(std::map<std::string, std::string>{{"MCPMQTT_MQTT_PASSWORD", "from-env"},
                                                    {"MCPMQTT_MQTT_USERNAME", "env-user"}});
    auto e = good("{}");
    CHECK(e.mqtt.password == "from-env");
    CHECK(e.mqtt.username == "env-user");
  }

  auto p = only_problem(R"({"mqtt": {"username": "u", "password_file": "/nonexistent/pw"}})");
  CHECK(p.path == "mqtt.password_file");
  CHECK(p.message == "cannot read /nonexistent/pw: No such file or directory");

  const auto empty_tokens = dir.write("empty", "# nothing\n\n");
  p = only_problem(R"({"http": {"bearer_tokens_file": ")" + empty_tokens + R"("}})");
  CHECK(p.path == "http.bearer_tokens_file");
  CHECK(p.message == "holds no token (one per line; # starts a comment)");

  p = only_problem(R"({"mqtt": {"password_file": ")" + pw + R"("}})");
  CHECK(p.path == "mqtt.username");
}

TEST_CASE(
    "http.oauth.introspection (RFC 7662 §2.1): a client_id and a secret read from a file, "
    "cache_max_s bounded - refused without the issuer, either half of the credentials, or a "
    "readable non-empty secret",
    "[config]") {
  mcpmqtt::test::TempDir dir;
  const auto secret = dir.write("client-secret", "s3cret\n");
  const auto oauth = [](const std::string& introspection) {
    return R"({"http": {"oauth": {"issuer": "https://auth.example", "introspection": )" +
           introspection + "}}}";
  };
  auto c = good(oauth(R"({"client_id": "bridge", "client_secret_file": ")" + secret +
                      R"(", "cache_max_s": 60})"));
  const auto& in = c.http.oauth.introspection;
  CHECK(in.enabled());
  CHECK(in.client_id == "bridge");
  CHECK(in.client_secret == "s3cret");
  CHECK(in.cache_max_s == 60);
  CHECK(good(oauth(R"({"client_id": "b", "client_secret_file": ")" + secret + R"("})"))
            .http.oauth.introspection.cache_max_s == 300);
  CHECK_FALSE(good("{}").http.oauth.introspection.enabled());

  CHECK(only_problem(oauth(R"({"client_secret_file": ")" + secret + R"("})")).path ==
        "http.oauth.introspection.client_id");
  CHECK(only_problem(oauth(R"({"client_id": "b"})")).path ==
        "http.oauth.introspection.client_secret_file");
  auto p = only_problem(oauth(R"({"client_id": "b", "client_secret_file": "/nonexistent/s"})"));
  CHECK(p.path == "http.oauth.introspection.client_secret_file");
  CHECK(p.message.find("cannot read /nonexistent/s") != std::string::npos);
  const auto empty = dir.write("empty-secret", "\n");
  CHECK(only_problem(oauth(R"({"client_id": "b", "client_secret_file": ")" + empty + R"("})"))
            .message == "is empty");
  CHECK(only_problem(oauth(R"({"client_id": "b", "client_secret_file": ")" + secret +
                           R"(", "cache_max_s": 0})"))
            .path == "http.oauth.introspection.cache_max_s");
  CHECK(only_problem(oauth(R"({"client_id": "b", "client_secret_file": ")" + secret +
                           R"(", "secret": "x"})"))
            .path == "http.oauth.introspection.secret");
  CHECK(only_problem(R"({"http": {"oauth": {"introspection": {"client_id": "b", )"
                     R"("client_secret_file": ")" +
                     secret + R"("}}}})")
            .path == "http.oauth.introspection");
  // The secret is never part of what the configuration shows.
  CHECK(c.summary().find("s3cret") == std::string::npos);
}

TEST_CASE("mqtt.url: a list of brokers, tried in order (failover)", "[config]") {
  auto c = good(R"({"mqtt": {"url": ["mqtt://a:1884", "mqtts://b", "ws://[::1]:9001/m"],
                             "tls": {"verify": false}}})");
  CHECK(c.mqtt.url == "mqtt://a:1884,mqtts://b,ws://[::1]:9001/m");
  CHECK(c.mqtt.host == "a");
  CHECK(c.mqtt.port == 1884);
  CHECK_FALSE(c.mqtt.tls.enabled);
  REQUIRE(c.mqtt.fallbacks.size() == 2);
  CHECK(c.mqtt.fallbacks[0] == BrokerAddress{"b", 8883, true, false, "/mqtt"});
  CHECK(c.mqtt.fallbacks[1] == BrokerAddress{"::1", 9001, false, true, "/m"});

  // The environment and --broker give the same list separated by commas.
  EnvGuard env(
      std::map<std::string, std::string>{{"MCPMQTT_BROKER", "mqtt://e1:1000, mqtt://e2:2000"}});
  auto r = load("{}");
  REQUIRE(r.ok());
  CHECK(r.config->mqtt.host == "e1");
  REQUIRE(r.config->mqtt.fallbacks.size() == 1);
  CHECK(r.config->mqtt.fallbacks[0].host == "e2");
  CHECK(r.config->mqtt.fallbacks[0].port == 2000);
  Overrides o;
  o.broker_url = "mqtt://f1";
  apply_overrides(r, o);
  REQUIRE(r.ok());
  CHECK(r.config->mqtt.host == "f1");
  CHECK(r.config->mqtt.fallbacks.empty());
}

TEST_CASE("environment overrides the file, flags override the environment", "[config]") {
  EnvGuard env(std::map<std::string, std::string>{{"MCPMQTT_BROKER", "mqtt://env-broker:1000"},
                                                  {"MCPMQTT_HTTP_LISTEN", "127.0.0.1:9001"},
                                                  {"MCPMQTT_TOPIC_PREFIX", "env/mcp-"},
                                                  {"MCPMQTT_LOG_LEVEL", "warn"}});
  auto r = load(R"({"mqtt": {"url": "mqtt://file-broker", "topic_prefix": "file-"},
                    "log": {"level": "debug"}})");
  REQUIRE(r.ok());
  CHECK(r.config->mqtt.topic_prefix == "env/mcp-");
  CHECK(r.config->mqtt.host == "env-broker");
  CHECK(r.config->mqtt.port == 1000);
  CHECK(r.config->http.listen_port == 9001);
  CHECK(r.config->log.level == "warn");

  Overrides o;
  o.broker_url = "mqtts://flag-broker:2000";
  o.log_level = "error";
  o.topic_prefix = "mcp-";
  apply_overrides(r, o);
  REQUIRE(r.ok());
  CHECK(r.config->mqtt.topic_prefix == "mcp-");
  CHECK(r.config->mqtt.host == "flag-broker");
  CHECK(r.config->mqtt.port == 2000);
  CHECK(r.config->mqtt.tls.enabled);
  CHECK(r.config->log.level == "error");

  Overrides bad_flag;
  bad_flag.broker_url = "localhost";
  apply_overrides(r, bad_flag);
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].path == "--broker");

  auto r2 = load("{}");
  Overrides bad_prefix;
  bad_prefix.topic_prefix = "a/#";
  apply_overrides(r2, bad_prefix);
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.problems[0].path == "--topic-prefix");
}

TEST_CASE("summary says what the configuration will do", "[config]") {
  auto c = good(R"({"ingress": {"default_server": "demo/x"},
                    "mcpServers": {"demo/x": {"command": "x"}, "web/y": {"url": "http://h/mcp"}}})");
  CHECK(c.summary() ==
        "broker mqtt://127.0.0.1:1883; HTTP ingress on 127.0.0.1:8080 (/mcp → demo/x); 2 servers "
        "exposed (demo/x: stdio, web/y: http)");
}

TEST_CASE("nearest suggests only close keys", "[config]") {
  CHECK(nearest("ulr", {"url", "username"}) == "url");
  CHECK(nearest("usrname", {"url", "username"}) == "username");
  CHECK(nearest("URL", {"url"}) == "url");
  CHECK(nearest("completely", {"url", "tls"}).empty());
}

TEST_CASE(
    "ingress.modern: the gateway's bounds and timeouts, validated, the requestState secret from a "
    "file of 32 bytes or more",
    "[config][modern]") {
  auto d = good("{}");
  CHECK(d.ingress.modern.enabled);
  CHECK(d.ingress.modern.max_sessions == 256);
  CHECK(d.ingress.modern.max_sessions_per_key == 16);
  CHECK(d.ingress.modern.idle_timeout_ms == 60000);
  CHECK(d.ingress.modern.input_timeout_ms == 300000);
  CHECK(d.ingress.modern.input_round_quiet_ms == 20);
  CHECK(d.ingress.modern.state_secret.empty());

  mcpmqtt::test::TempDir dir;
  const auto secret = dir.write("secret", std::string(40, 'q') + "\n");
  auto c = good(
      R"({"ingress": {"modern": {"enabled": false, "max_sessions": 8, "max_sessions_per_key": 2,
                    "max_listens": 3, "max_waiting": 5, "queue_timeout_ms": 700, "idle_timeout_ms": 900,
                    "input_timeout_s": 30, "input_round_quiet_ms": 40, "state_secret_file": ")" +
      secret + R"("}}})");
  const auto& m = c.ingress.modern;
  CHECK_FALSE(m.enabled);
  CHECK(m.max_sessions == 8);
  CHECK(m.max_sessions_per_key == 2);
  CHECK(m.max_listens == 3);
  CHECK(m.max_waiting == 5);
  CHECK(m.queue_timeout_ms == 700);
  CHECK(m.idle_timeout_ms == 900);
  CHECK(m.input_timeout_ms == 30000);  // the older key, in seconds
  CHECK(m.input_round_quiet_ms == 40);
  CHECK(m.state_secret == std::string(40, 'q'));
  // The summary never shows the secret.
  CHECK(c.summary().find("qqqq") == std::string::npos);

  auto p = only_problem(R"({"ingress": {"modern": {"max_sesions": 3}}})");
  CHECK(p.path == "ingress.modern.max_sesions");
  CHECK(p.message == "unknown key; did you mean \"max_sessions\"?");
  p = only_problem(R"({"ingress": {"modern": {"max_sessions": 4, "max_sessions_per_key": 5}}})");
  CHECK(p.path == "ingress.modern.max_sessions_per_key");
  CHECK(p.message == "must not exceed max_sessions (4), found 5");
  p = only_problem(R"({"ingress": {"modern": {"idle_timeout_ms": 0}}})");
  CHECK(p.path == "ingress.modern.idle_timeout_ms");
  const auto short_secret = dir.write("short", "too short\n");
  p = only_problem(R"({"ingress": {"modern": {"state_secret_file": ")" + short_secret + R"("}}})");
  CHECK(p.path == "ingress.modern.state_secret_file");
  CHECK(p.message.find("holds 9 bytes; an HMAC key of at least 32 is needed") == 0);
  p = only_problem(R"({"ingress": {"modern": {"state_secret_file": "/nonexistent/s"}}})");
  CHECK(p.path == "ingress.modern.state_secret_file");
}

TEST_CASE(
    "ingress.replicas: id, the shared secret file (ingress.modern.state_secret_file is its old "
    "name and still read), relay bounds",
    "[config][replicas]") {
  auto d = good("{}");
  CHECK(d.ingress.replicas.id.empty());
  CHECK_FALSE(d.ingress.replicas.shared());
  CHECK(d.ingress.replicas.max_relays == 1024);
  CHECK(d.ingress.replicas.relay_timeout_ms == 0);

  mcpmqtt::test::TempDir dir;
  const auto secret = dir.write("secret", std::string(40, 'r') + "\n");
  auto c = good(R"({"ingress": {"replicas": {"id": "web-1_a", "secret_file": ")" + secret +
                R"(", "relay_timeout_s": 20, "max_relays": 64}}})");
  CHECK(c.ingress.replicas.id == "web-1_a");
  CHECK(c.ingress.replicas.shared());
  CHECK(c.ingress.replicas.secret == std::string(40, 'r'));
  CHECK(c.ingress.modern.state_secret == std::string(40, 'r'));  // requestState's key too
  CHECK(c.ingress.replicas.relay_timeout_ms == 20000);
  CHECK(c.ingress.replicas.max_relays == 64);
  CHECK(c.summary().find("rrrr") == std::string::npos);
  // The old name alone: the same secret, shared.
  auto old = good(R"({"ingress": {"modern": {"state_secret_file": ")" + secret + R"("}}})");
  CHECK(old.ingress.replicas.shared());
  CHECK(old.ingress.replicas.secret == std::string(40, 'r'));
  // Both naming the same file: fine; different files: refused.
  good(R"({"ingress": {"modern": {"state_secret_file": ")" + secret +
       R"("}, "replicas": {"secret_file": ")" + secret + R"("}}})");
  const auto other = dir.write("other", std::string(40, 'o'));
  auto p = only_problem(R"({"ingress": {"modern": {"state_secret_file": ")" + other +
                        R"("}, "replicas": {"secret_file": ")" + secret + R"("}}})");
  CHECK(p.path == "ingress.modern.state_secret_file");
  p = only_problem(R"({"ingress": {"replicas": {"id": "a/b"}}})");
  CHECK(p.path == "ingress.replicas.id");
  CHECK(p.message.find("may hold only letters, digits") != std::string::npos);
  p = only_problem(R"({"ingress": {"replicas": {"id": "a.b"}}})");
  CHECK(p.path == "ingress.replicas.id");
  p = only_problem(R"({"ingress": {"replicas": {"max_relays": 0}}})");
  CHECK(p.path == "ingress.replicas.max_relays");
  const auto short_secret = dir.write("short", "short\n");
  p = only_problem(R"({"ingress": {"replicas": {"secret_file": ")" + short_secret + R"("}}})");
  CHECK(p.path == "ingress.replicas.secret_file");
  CHECK(p.message.find("holds 5 bytes") == 0);
}

TEST_CASE("events.webhooks: off by default, a database required when on, bounds checked",
          "[config][webhooks]") {
  const auto d = good("{}");
  CHECK_FALSE(d.events.webhooks.enabled);
  CHECK_FALSE(d.events.webhooks.allow_http);
  CHECK(d.events.webhooks.allow_targets.empty());
  const auto c = good(
      R"({"events": {"webhooks": {"enabled": true, "database": "/tmp/w.sqlite3", "allow_http": true,
          "allow_targets": ["10.0.0.0/8"], "retry_min_ms": 50, "retry_max_ms": 100}}})");
  CHECK(c.events.webhooks.enabled);
  CHECK(c.events.webhooks.database == "/tmp/w.sqlite3");
  CHECK(c.events.webhooks.allow_targets == std::vector<std::string>{"10.0.0.0/8"});
  CHECK(d.events.webhooks.threads == 1);
  CHECK(good(R"({"events": {"webhooks": {"threads": 4}}})").events.webhooks.threads == 4);
  CHECK(only_problem(R"({"events": {"webhooks": {"threads": 0}}})").path ==
        "events.webhooks.threads");
  CHECK(only_problem(R"({"events": {"webhooks": {"enabled": true}}})").path ==
        "events.webhooks.database");
  CHECK(only_problem(R"({"events": {"webhooks": {"retry_min_ms": 10, "retry_max_ms": 5}}})").path ==
        "events.webhooks.retry_max_ms");
  CHECK(only_problem(R"({"events": {"webhooks": {"enabeld": true}}})").path ==
        "events.webhooks.enabeld");
}

TEST_CASE(
    "limits: the idle floors that spare recent sessions at max_sessions, in milliseconds (the "
    "older whole-second keys still read), and the byte bounds of the queues toward slow clients",
    "[config][limits]") {
  auto d = good("{}");
  // 0: at a limit the least recently active session makes room however recently it was used.
  CHECK(d.egress.idle_floor_ms == 0);
  CHECK(d.http.limits.idle_floor_ms == 0);
  CHECK(d.http.limits.stream_queue_bytes == 16u << 20);
  CHECK(d.http.limits.session_backlog_bytes == 4u << 20);
  CHECK(d.http.limits.replay_buffer_bytes == 4u << 20);
  CHECK(d.ingress.modern.max_waiting_bytes == 32u << 20);
  auto c = good(R"({
    "egress": { "idle_floor_ms": 250 },
    "http": { "limits": { "idle_floor_ms": 30, "stream_queue_bytes": 65536,
                          "session_backlog_bytes": 0, "replay_buffer_bytes": 1000 } },
    "ingress": { "modern": { "max_waiting_bytes": 2048 } }
  })");
  CHECK(c.egress.idle_floor_ms == 250);
  CHECK(c.http.limits.idle_floor_ms == 30);
  CHECK(c.http.limits.stream_queue_bytes == 65536);
  CHECK(c.http.limits.session_backlog_bytes == 0);
  CHECK(c.http.limits.replay_buffer_bytes == 1000);
  CHECK(c.ingress.modern.max_waiting_bytes == 2048);
  auto old = good(R"({"egress": {"idle_floor_s": 3}, "http": {"limits": {"idle_floor_s": 2}}})");
  CHECK(old.egress.idle_floor_ms == 3000);
  CHECK(old.http.limits.idle_floor_ms == 2000);
  CHECK(only_problem(R"({"egress": {"idle_floor_ms": -1}})").path == "egress.idle_floor_ms");
  CHECK(only_problem(R"({"egress": {"idle_floor_s": -1}})").path == "egress.idle_floor_s");
  const auto both = only_problem(R"({"egress": {"idle_floor_s": 1, "idle_floor_ms": 5}})");
  CHECK(both.path == "egress.idle_floor_ms");
  CHECK(both.message.find("idle_floor_s") != std::string::npos);
  CHECK(only_problem(R"({"http": {"limits": {"stream_queue_bytes": 10}}})").path ==
        "http.limits.stream_queue_bytes");
}

TEST_CASE(
    "limits: a server's max_sessions defaults by what its sessions cost (a stdio session is a "
    "process, an HTTP one an upstream session), and a stdio server's children have a memory bound",
    "[config][limits]") {
  const std::string servers =
      R"("mcpServers": {"a/stdio": {"command": "x"}, "a/http": {"url": "http://127.0.0.1:1/mcp"},
                        "a/own": {"command": "x", "max_sessions": 3, "max_memory_mb": 0}})";
  auto d = good("{" + servers + "}");
  CHECK(d.egress.max_sessions_per_stdio_server == 32);
  CHECK(d.egress.max_sessions_per_http_server == 256);
  CHECK(d.egress.max_memory_per_stdio_server_mb == 4096);
  CHECK(d.find_server("a/stdio")->max_sessions == 32);
  CHECK(d.find_server("a/stdio")->max_memory_mb == 4096);
  CHECK(d.find_server("a/http")->max_sessions == 256);
  CHECK(d.find_server("a/http")->max_memory_mb == 0);
  CHECK(d.find_server("a/own")->max_sessions == 3);
  CHECK(d.find_server("a/own")->max_memory_mb == 0);  // no bound
  // The older key sets both defaults; a kind's own key wins over it.
  auto both = good(R"({"egress": {"max_sessions_per_server": 64, "max_sessions_per_http_server": 9,
                                  "max_memory_per_stdio_server_mb": 100}, )" +
                   servers + "}");
  CHECK(both.find_server("a/stdio")->max_sessions == 64);
  CHECK(both.find_server("a/stdio")->max_memory_mb == 100);
  CHECK(both.find_server("a/http")->max_sessions == 9);
  CHECK(only_problem(
            R"({"mcpServers": {"a/http": {"url": "http://127.0.0.1:1/mcp", "max_memory_mb": 5}}})")
            .path == R"(mcpServers."a/http".max_memory_mb)");
  CHECK(only_problem(R"({"egress": {"max_sessions_per_http_server": 0}})").path ==
        "egress.max_sessions_per_http_server");
}

TEST_CASE(
    "http.oauth: the issuer is https (http only on loopback, OAuth 2.1 §1.5), scopes grant valid "
    "server-name filters, algorithms never none or HMAC, public_url is an origin",
    "[config]") {
  auto c = good(R"({"http": {"public_url": "https://bridge.example/", "oauth": {
      "issuer": "https://auth.example/tenant", "scopes": {"mcp:w": ["weather/#"], "all": ["#"]},
      "algorithms": ["ES256"], "clock_skew_s": 5}}})");
  CHECK(c.http.public_url == "https://bridge.example");
  CHECK(c.http.oauth.enabled());
  CHECK(c.http.oauth.scopes.at("mcp:w") == std::vector<std::string>{"weather/#"});
  CHECK(c.http.oauth.algorithms == std::vector<std::string>{"ES256"});
  CHECK(c.http.oauth.clock_skew_s == 5);
  CHECK(good(R"({"http": {"oauth": {"issuer": "http://127.0.0.1:9000"}}})").http.oauth.enabled());
  CHECK(only_problem(R"({"http": {"oauth": {"issuer": "http://auth.example"}}})").path ==
        "http.oauth.issuer");
  CHECK(only_problem(R"({"http": {"oauth": {"issuer": "https://a", "algorithms": ["HS256"]}}})")
            .path == "http.oauth.algorithms");
  CHECK(only_problem(R"({"http": {"oauth": {"issuer": "https://a", "scopes": {"s": ["a/#/b"]}}}})")
            .path == "http.oauth.scopes.s");
  CHECK(only_problem(R"({"http": {"oauth": {"scopes": {"s": ["#"]}}}})").path ==
        "http.oauth.scopes");
  CHECK(only_problem(R"({"http": {"public_url": "https://b.example/mcp"}})").path ==
        "http.public_url");
}

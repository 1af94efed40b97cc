#include "config/config.hpp"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include "bridge/protocol/topics.hpp"
#include "common/errno_text.hpp"
#include "config/object_reader.hpp"
#include "config/sections.hpp"
#include "config/validation.hpp"

namespace mcpmqtt::config {

using detail::ObjectReader;
using detail::Value;

std::size_t default_max_sessions(const ServerEntry& entry, const EgressConfig& egress) {
  return entry.is_stdio() ? egress.max_sessions_per_stdio_server
                          : egress.max_sessions_per_http_server;
}

const ServerEntry* Config::find_server(const std::string& name) const {
  for (const auto& s : servers) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string Config::summary() const {
  std::ostringstream out;
  out << "broker " << mqtt.url << (mqtt.tls.enabled ? " (TLS)" : "")
      << (mqtt.client == MqttClient::paho ? " (Paho client)" : "");
  if (mqtt.session_credentials == SessionCredentials::token)
    out << " (sessions as their OAuth subject and token)";
  else if (mqtt.session_credentials == SessionCredentials::principal)
    out << " (sessions as their OAuth subject)";
  if (http.enabled)
    out << "; HTTP ingress on " << http.listen;
  else
    out << "; HTTP ingress off";
  if (!ingress.default_server.empty()) out << " (/mcp → " << ingress.default_server << ")";
  out << "; " << servers.size() << (servers.size() == 1 ? " server" : " servers") << " exposed";
  if (!servers.empty()) {
    out << " (";
    for (std::size_t i = 0; i < servers.size(); ++i) {
      out << (i ? ", " : "") << servers[i].name << ": "
          << (servers[i].is_stdio() ? "stdio" : "http");
    }
    out << ")";
  }
  return out.str();
}

LoadResult parse(const std::string& text, const std::string& origin, GetEnv getenv_fn) {
  getenv_fn = detail::or_default(getenv_fn);
  (void)origin;
  std::vector<Problem> problems;
  rapidjson::Document doc;
  constexpr unsigned kFlags = rapidjson::kParseCommentsFlag | rapidjson::kParseTrailingCommasFlag |
                              rapidjson::kParseValidateEncodingFlag |
                              rapidjson::kParseIterativeFlag;
  doc.Parse<kFlags>(text.data(), text.size());
  if (doc.HasParseError()) {
    std::size_t line = 1, col = 1;
    const std::size_t off = std::min(doc.GetErrorOffset(), text.size());
    for (std::size_t i = 0; i < off; ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    problems.push_back({"", "not valid JSON at line " + std::to_string(line) + " column " +
                                std::to_string(col) + ": " +
                                rapidjson::GetParseError_En(doc.GetParseError())});
    return LoadResult{std::nullopt, std::move(problems)};
  }
  if (!doc.IsObject()) {
    problems.push_back({"", std::string("the configuration must be a JSON object, found ") +
                                detail::type_name(doc)});
    return LoadResult{std::nullopt, std::move(problems)};
  }

  Config cfg;
  ObjectReader top(doc, "", problems);
  top.get("$schema");  // editors' schema hint; ignored
  if (const Value* v = top.object("mqtt")) detail::read_mqtt(*v, cfg.mqtt, problems);
  if (const Value* v = top.object("http")) detail::read_http(*v, cfg.http, problems);
  if (const Value* v = top.object("ingress")) detail::read_ingress(*v, cfg.ingress, problems);
  if (const Value* v = top.object("egress")) detail::read_egress(*v, cfg.egress, problems);
  if (const Value* v = top.object("events")) detail::read_events(*v, cfg.events, problems);
  if (const Value* v = top.object("timeouts"))
    detail::read_timeouts(*v, "timeouts", cfg.timeouts, problems);
  if (const Value* v = top.object("log")) detail::read_log(*v, cfg.log, problems);
  if (const Value* v = top.object("daemon")) detail::read_daemon(*v, cfg.daemon, problems);
  if (const Value* v = top.object("mcpServers")) detail::read_servers(*v, cfg, problems, getenv_fn);
  top.finish();
  return detail::complete(std::move(cfg), std::move(problems), getenv_fn);
}

std::vector<std::string> key_paths() {
  // Every object of the model present (empty), so that every reader runs and asks for its keys;
  // one stdio server for the keys of an mcpServers entry.
  const std::string skeleton =
      R"({"mqtt": {"tls": {}}, "http": {"limits": {}, "oauth": {"introspection": {}}}, "ingress": {"modern": {}, "replicas": {}}, "egress": {},)"
      R"( "events": {"webhooks": {}}, "log": {}, "daemon": {}, "timeouts": {},)"
      R"( "mcpServers": {"NAME": {"command": "x", "oauth": {}}}})";
  std::vector<std::string> keys;
  detail::key_recorder = &keys;
  parse(skeleton, "key_paths");
  detail::key_recorder = nullptr;
  // timeouts: any method name, and "default".
  keys.push_back("timeouts.default");
  keys.push_back("timeouts.METHOD");
  // Paths quote keys with characters outside [A-Za-z0-9_] ("$schema"); the page names them bare.
  for (auto& k : keys)
    std::erase(k, '"');
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

LoadResult load_file(const std::string& path, GetEnv getenv_fn) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return LoadResult{std::nullopt, {{"", "cannot read the file: " + errno_text(errno)}}};
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path, getenv_fn);
}

LoadResult defaults(GetEnv getenv_fn) {
  return detail::complete(Config{}, {}, detail::or_default(getenv_fn));
}

void apply_overrides(LoadResult& result, const Overrides& o) {
  if (!result.config) return;
  Config& cfg = *result.config;
  std::vector<Problem> problems;
  if (o.broker_url) {
    cfg.mqtt.url = *o.broker_url;
    std::string why;
    if (!detail::parse_broker_urls(cfg.mqtt.url, cfg.mqtt, why))
      problems.push_back({"--broker", why});
  }
  if (o.topic_prefix) {
    cfg.mqtt.topic_prefix = *o.topic_prefix;
    if (const auto why = topics::check_prefix(cfg.mqtt.topic_prefix); !why.empty())
      problems.push_back({"--topic-prefix", why});
  }
  if (o.http_listen) {
    cfg.http.listen = *o.http_listen;
    std::string why;
    if (!parse_host_port(cfg.http.listen, cfg.http.listen_host, cfg.http.listen_port, why)) {
      problems.push_back({"--listen", why});
    }
  }
  if (o.presence_wait_ms) cfg.ingress.presence_wait_ms = *o.presence_wait_ms;
  if (o.log_level) {
    cfg.log.level = *o.log_level;
    cfg.log.level_set = true;
    if (!is_log_level(cfg.log.level)) {
      problems.push_back(
          {"--log-level",
           "expected one of trace, debug, info, warn, error, critical, off; found \"" +
               cfg.log.level + "\""});
    }
  }
  if (o.default_server) {
    cfg.ingress.default_server = *o.default_server;
    const auto why = topics::check_server_name(cfg.ingress.default_server);
    if (!why.empty())
      problems.push_back({"--server", "\"" + cfg.ingress.default_server + "\" " + why});
  }
  if (!problems.empty()) {
    result.config.reset();
    result.problems.insert(result.problems.end(), problems.begin(), problems.end());
  }
}

namespace {

// A key or a value from the file may hold any character: control characters are written as
// escapes, so that each problem stays one line of the output (and of the journal) and nothing
// reaches a terminal as a control sequence.
std::string printable(const std::string& s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace

std::string format_problems(const std::vector<Problem>& problems, const std::string& origin) {
  std::string out;
  for (const auto& p : problems) {
    out += printable(origin);
    if (!p.path.empty()) out += ": " + printable(p.path);
    out += ": " + printable(p.message) + "\n";
  }
  return out;
}

bool parse_host_port(const std::string& text, std::string& host, std::uint16_t& port,
                     std::string& why) {
  std::string h, p;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find("]:");
    if (close == std::string::npos) {
      why = "expected [IPv6]:PORT, found \"" + text + "\"";
      return false;
    }
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon) {
      why = "expected HOST:PORT (IPv6 as [ADDR]:PORT), found \"" + text + "\"";
      return false;
    }
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
  }
  if (h.empty()) {
    why = "no host in \"" + text + "\" (use 127.0.0.1 for loopback, 0.0.0.0 for every interface)";
    return false;
  }
  if (p.empty() || p.size() > 5 ||
      !std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoul(p) > 65535) {
    why = "port must be a number from 0 to 65535, found \"" + p + "\"";
    return false;
  }
  host = h;
  port = static_cast<std::uint16_t>(std::stoul(p));
  return true;
}

bool is_log_level(const std::string& level) {
  static const std::set<std::string> levels = {"trace", "debug",    "info", "warn",
                                               "error", "critical", "off"};
  return levels.count(level) != 0;
}

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  auto distance = [](const std::string& a, const std::string& b) {
    // Optimal string alignment distance: a transposition counts as one edit ("ulr" → "url").
    const std::size_t n = a.size(), m = b.size();
    std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
    for (std::size_t i = 0; i <= n; ++i)
      d[i][0] = i;
    for (std::size_t j = 0; j <= m; ++j)
      d[0][j] = j;
    for (std::size_t i = 1; i <= n; ++i) {
      for (std::size_t j = 1; j <= m; ++j) {
        const std::size_t cost = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                                         std::tolower(static_cast<unsigned char>(b[j - 1]))
                                     ? 0
                                     : 1;
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    return d[n][m];
  };
  std::string best;
  std::size_t best_d = std::numeric_limits<std::size_t>::max();
  for (const auto& c : candidates) {
    if (c == "$schema") continue;
    const std::size_t dist = distance(word, c);
    if (dist < best_d) {
      best_d = dist;
      best = c;
    }
  }
  const std::size_t allowed = std::max<std::size_t>(2, word.size() / 3);
  return best_d <= allowed ? best : std::string{};
}

}  // namespace mcpmqtt::config

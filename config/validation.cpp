#include "config/validation.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "bridge/protocol/topics.hpp"
#include "common/errno_text.hpp"
#include "config/sections.hpp"

namespace mcpmqtt::config::detail {

namespace {

bool read_secret_file(const std::string& path, std::string& out, std::string& why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "cannot read " + path + ": " + errno_text(errno);
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
    out.pop_back();
  return true;
}

void validate(Config& cfg, std::vector<Problem>& problems) {
  std::string why;
  if (!parse_broker_url(cfg.mqtt.url, cfg.mqtt, why)) problems.push_back({"mqtt.url", why});
  if (const auto w = topics::check_id(cfg.mqtt.client_id_prefix); !w.empty()) {
    problems.push_back({"mqtt.client_id_prefix", "is part of MQTT client ids and " + w});
  }
  if (cfg.mqtt.reconnect_min_ms > cfg.mqtt.reconnect_max_ms) {
    problems.push_back({"mqtt.reconnect_min_ms", "must not exceed mqtt.reconnect_max_ms"});
  }
  if (cfg.mqtt.tls.configured && !cfg.mqtt.tls.enabled) {
    problems.push_back(
        {"mqtt.tls", "is set but mqtt.url \"" + cfg.mqtt.url +
                         "\" is not TLS; use mqtts://HOST[:PORT] or wss://HOST[:PORT][/PATH]"});
  }
  if (cfg.mqtt.tls.cert_file.empty() != cfg.mqtt.tls.key_file.empty()) {
    problems.push_back({"mqtt.tls", "cert_file and key_file go together; set both or neither"});
  }
  if (!parse_host_port(cfg.http.listen, cfg.http.listen_host, cfg.http.listen_port, why)) {
    problems.push_back({"http.listen", why});
  }
  if (!is_log_level(cfg.log.level)) {
    problems.push_back(
        {"log.level", "expected one of trace, debug, info, warn, error, critical, off; found \"" +
                          cfg.log.level + "\""});
  }
}

void resolve_secrets(Config& cfg, std::vector<Problem>& problems, GetEnv getenv_fn) {
  std::string why;
  if (const char* pw = getenv_fn("MCPMQTT_MQTT_PASSWORD"); pw && *pw) {
    cfg.mqtt.password = pw;
  } else if (!cfg.mqtt.password_file.empty()) {
    if (!read_secret_file(cfg.mqtt.password_file, cfg.mqtt.password, why)) {
      problems.push_back({"mqtt.password_file", why});
    }
  }
  if (const char* user = getenv_fn("MCPMQTT_MQTT_USERNAME"); user && *user)
    cfg.mqtt.username = user;
  if (!cfg.mqtt.password.empty() && cfg.mqtt.username.empty()) {
    problems.push_back(
        {"mqtt.username", "a password is set (file or MCPMQTT_MQTT_PASSWORD) but no username"});
  }
  if (!cfg.ingress.modern.state_secret_file.empty()) {
    auto& m = cfg.ingress.modern;
    if (!read_secret_file(m.state_secret_file, m.state_secret, why)) {
      problems.push_back({"ingress.modern.state_secret_file", why});
    } else if (m.state_secret.size() < 32) {
      problems.push_back({"ingress.modern.state_secret_file",
                          "holds " + std::to_string(m.state_secret.size()) +
                              " bytes; an HMAC key of at least 32 is needed (for example the "
                              "output of `head -c 48 /dev/urandom | base64`)"});
      m.state_secret.clear();
    }
  }
  if (!cfg.http.bearer_tokens_file.empty()) {
    std::string content;
    if (!read_secret_file(cfg.http.bearer_tokens_file, content, why)) {
      problems.push_back({"http.bearer_tokens_file", why});
    } else {
      std::istringstream lines(content);
      std::string line;
      while (std::getline(lines, line)) {
        const auto b = line.find_first_not_of(" \t\r");
        if (b == std::string::npos || line[b] == '#') continue;
        const auto e = line.find_last_not_of(" \t\r");
        cfg.http.bearer_tokens.push_back(line.substr(b, e - b + 1));
      }
      if (cfg.http.bearer_tokens.empty()) {
        problems.push_back(
            {"http.bearer_tokens_file", "holds no token (one per line; # starts a comment)"});
      }
    }
  }
}

void apply_env(Config& cfg, std::vector<Problem>& problems, GetEnv getenv_fn) {
  if (const char* v = getenv_fn("MCPMQTT_BROKER"); v && *v) cfg.mqtt.url = v;
  if (const char* v = getenv_fn("MCPMQTT_MQTT_CLIENT"); v && *v) {
    if (!parse_mqtt_client(v, cfg.mqtt.client)) {
      problems.push_back({"MCPMQTT_MQTT_CLIENT",
                          std::string("expected \"native\" or \"paho\", found \"") + v + "\""});
    }
  }
  if (const char* v = getenv_fn("MCPMQTT_HTTP_LISTEN"); v && *v) cfg.http.listen = v;
  if (const char* v = getenv_fn("MCPMQTT_LOG_LEVEL"); v && *v) {
    cfg.log.level = v;
    cfg.log.level_set = true;
  }
  if (const char* v = getenv_fn("MCPMQTT_DEFAULT_SERVER"); v && *v) cfg.ingress.default_server = v;
}

}  // namespace

bool parse_broker_url(const std::string& url, MqttConfig& m, std::string& why) {
  struct Scheme {
    const char* prefix;
    bool tls;
    bool websocket;
    std::uint16_t port;
  };
  static constexpr Scheme kSchemes[] = {
      {"mqtt://", false, false, 1883}, {"tcp://", false, false, 1883},
      {"mqtts://", true, false, 8883}, {"ssl://", true, false, 8883},
      {"ws://", false, true, 80},      {"wss://", true, true, 443},
  };
  const Scheme* scheme = nullptr;
  std::string rest;
  for (const auto& s : kSchemes) {
    if (url.rfind(s.prefix, 0) == 0) {
      scheme = &s;
      rest = url.substr(std::strlen(s.prefix));
      break;
    }
  }
  if (!scheme || rest.empty()) {
    why =
        "expected mqtt://HOST[:PORT], mqtts://HOST[:PORT], ws://HOST[:PORT][/PATH] or "
        "wss://HOST[:PORT][/PATH], found \"" +
        url + "\"";
    return false;
  }
  // MQTT over WebSocket names the HTTP path of the upgrade; /mqtt when none is given (as
  // Paho and most brokers' defaults have it).
  std::string path;
  if (const auto slash = rest.find('/'); slash != std::string::npos) {
    path = rest.substr(slash);
    rest.resize(slash);
  }
  if (!scheme->websocket && !path.empty() && path != "/") {
    why = "expected " + std::string(scheme->prefix) + "HOST[:PORT] with no path, found \"" + url +
          "\"";
    return false;
  }
  if (rest.find('@') != std::string::npos) {
    why =
        "expected no credentials in the url (use mqtt.username and mqtt.password_file), found "
        "\"" +
        url + "\"";
    return false;
  }
  if (path.find_first_of(" \t\r\n?#") != std::string::npos) {
    why = "the path of \"" + url + "\" has a space, '?' or '#'";
    return false;
  }
  std::string host;
  std::uint16_t port = scheme->port;
  const bool has_port = !rest.empty() && rest.back() != ']' &&
                        rest.rfind(':') != std::string::npos &&
                        (rest.front() != '[' || rest.find("]:") != std::string::npos);
  if (has_port) {
    if (!parse_host_port(rest, host, port, why)) {
      why = "in \"" + url + "\": " + why;
      return false;
    }
  } else {
    host = rest;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) {
    why = "no host in \"" + url + "\"";
    return false;
  }
  m.host = host;
  m.port = port;
  m.tls.enabled = scheme->tls;
  m.websocket = scheme->websocket;
  m.ws_path = scheme->websocket ? (path.empty() ? "/mqtt" : path) : "/mqtt";
  return true;
}

LoadResult complete(Config cfg, std::vector<Problem> problems, GetEnv getenv_fn) {
  apply_env(cfg, problems, getenv_fn);
  validate(cfg, problems);
  resolve_secrets(cfg, problems, getenv_fn);
  LoadResult out;
  out.problems = std::move(problems);
  if (out.problems.empty()) out.config = std::move(cfg);
  return out;
}

GetEnv or_default(GetEnv fn) {
  return fn ? fn : [](const char* name) -> const char* { return std::getenv(name); };
}

}  // namespace mcpmqtt::config::detail

#include "config/validation.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "bridge/protocol/topics.hpp"
#include "common/errno_text.hpp"
#include "config/object_reader.hpp"
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

// "http" or "https", a host and an optional port; with `path_allowed` a path may follow (no
// query or fragment). Empty when the URL is fine, else why not. `host` receives the host.
std::string check_http_url(const std::string& url, bool path_allowed, std::string* scheme,
                           std::string* host) {
  const auto sep = url.find("://");
  if (sep == std::string::npos) return "expected an absolute URL such as https://host[:port]";
  *scheme = url.substr(0, sep);
  if (*scheme != "http" && *scheme != "https")
    return "expected an http:// or https:// URL, found scheme \"" + *scheme + "\"";
  const auto rest = url.substr(sep + 3);
  const auto slash = rest.find('/');
  const auto authority = rest.substr(0, slash);
  if (authority.empty()) return "has no host";
  if (authority.find('@') != std::string::npos) return "must not hold user information";
  if (url.find_first_of("?# \t") != std::string::npos)
    return "must not hold a query, a fragment or spaces";
  if (slash != std::string::npos && !path_allowed && rest.size() > slash + 1)
    return "is an origin (scheme://host[:port]) without a path";
  if (authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string::npos) return "has an unclosed IPv6 literal";
    *host = authority.substr(1, close - 1);
  } else {
    *host = authority.substr(0, authority.find(':'));
  }
  return {};
}

bool loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

void validate_oauth(Config& cfg, std::vector<Problem>& problems) {
  std::string scheme, host;
  if (!cfg.http.public_url.empty()) {
    while (cfg.http.public_url.size() > 1 && cfg.http.public_url.back() == '/')
      cfg.http.public_url.pop_back();
    if (auto why = check_http_url(cfg.http.public_url, false, &scheme, &host); !why.empty())
      problems.push_back({"http.public_url", why});
  }
  auto& o = cfg.http.oauth;
  if (!o.enabled()) {
    if (!o.scopes.empty()) problems.push_back({"http.oauth.scopes", "needs http.oauth.issuer"});
    if (o.introspection.enabled())
      problems.push_back({"http.oauth.introspection", "needs http.oauth.issuer"});
    return;
  }
  if (o.introspection.enabled()) {
    // RFC 7662 §2.1: the endpoint requires the caller to authenticate; the bridge does as a
    // confidential client (client_secret_basic).
    if (o.introspection.client_id.empty()) {
      problems.push_back({"http.oauth.introspection.client_id",
                          "is required: the client the bridge authenticates as at the "
                          "introspection endpoint"});
    }
    if (o.introspection.client_secret_file.empty()) {
      problems.push_back({"http.oauth.introspection.client_secret_file",
                          "is required: a file holding that client's secret"});
    }
  }
  if (auto why = check_http_url(o.issuer, true, &scheme, &host); !why.empty()) {
    problems.push_back({"http.oauth.issuer", why});
  } else if (scheme == "http" && !loopback_host(host)) {
    // OAuth 2.1 §1.5: the issuer's metadata and keys are trusted only over TLS.
    problems.push_back({"http.oauth.issuer",
                        "must be https:// (http:// only on a loopback address, for tests and "
                        "local development)"});
  }
  static const std::vector<std::string> known{"RS256", "PS256", "ES256", "EdDSA"};
  if (o.algorithms.empty()) problems.push_back({"http.oauth.algorithms", "lists no algorithm"});
  for (const auto& a : o.algorithms)
    if (std::find(known.begin(), known.end(), a) == known.end())
      problems.push_back(
          {"http.oauth.algorithms", "\"" + a +
                                        "\" is not one of RS256, PS256, ES256, EdDSA (no none, no "
                                        "HMAC: the bridge holds public keys only)"});
}

// mcpServers.NAME.oauth: the client credentials grant of a protected upstream.
void validate_upstream_oauth(Config& cfg, std::vector<Problem>& problems) {
  for (auto& server : cfg.servers) {
    auto& o = server.oauth;
    if (!o.enabled() || !server.is_http()) continue;
    const std::string path = child_path(child_path("mcpServers", server.name), "oauth");
    std::string scheme, host;
    if (auto why = check_http_url(o.issuer, true, &scheme, &host); !why.empty()) {
      problems.push_back({path + ".issuer", why});
    } else if (scheme == "http" && !loopback_host(host)) {
      // OAuth 2.1 §1.5: the client secret and the tokens travel only over TLS.
      problems.push_back({path + ".issuer",
                          "must be https:// (http:// only on a loopback address, for tests and "
                          "local development)"});
    }
    // RFC 8707 §2: the resource is an absolute URI without a fragment; by default the upstream.
    if (o.resource.empty()) o.resource = server.url;
    if (o.resource.find('#') != std::string::npos ||
        !(o.resource.starts_with("http://") || o.resource.starts_with("https://"))) {
      problems.push_back({path + ".resource",
                          "expected an absolute http(s) URL without a fragment (RFC 8707 §2)"});
    }
  }
  if (cfg.mqtt.session_credentials != SessionCredentials::shared &&
      (!cfg.http.enabled || !cfg.http.oauth.enabled())) {
    // Only a session of an OAuth principal has a subject (and a token) to present.
    problems.push_back(
        {"mqtt.session_credentials",
         std::string("\"") +
             (cfg.mqtt.session_credentials == SessionCredentials::token ? "token" : "principal") +
             "\" presents each HTTP session's OAuth subject, which needs http.oauth.issuer (and "
             "the HTTP ingress on); without it every session would use the shared credentials"});
  }
}

void validate(Config& cfg, std::vector<Problem>& problems) {
  std::string why;
  if (!parse_broker_urls(cfg.mqtt.url, cfg.mqtt, why)) problems.push_back({"mqtt.url", why});
  if (const auto w = topics::check_id(cfg.mqtt.client_id_prefix); !w.empty()) {
    problems.push_back({"mqtt.client_id_prefix", "is part of MQTT client ids and " + w});
  }
  if (const auto w = topics::check_prefix(cfg.mqtt.topic_prefix); !w.empty()) {
    problems.push_back({"mqtt.topic_prefix", "begins every MCP topic and " + w});
  }
  if (cfg.mqtt.reconnect_min_ms > cfg.mqtt.reconnect_max_ms) {
    problems.push_back({"mqtt.reconnect_min_ms", "must not exceed mqtt.reconnect_max_ms"});
  }
  const bool any_tls =
      cfg.mqtt.tls.enabled || std::any_of(cfg.mqtt.fallbacks.begin(), cfg.mqtt.fallbacks.end(),
                                          [](const BrokerAddress& a) { return a.tls; });
  if (cfg.mqtt.tls.configured && !any_tls) {
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
  validate_oauth(cfg, problems);
  validate_upstream_oauth(cfg, problems);
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
  {
    // ingress.replicas.secret_file, or its old name ingress.modern.state_secret_file.
    auto& rc = cfg.ingress.replicas;
    auto& m = cfg.ingress.modern;
    std::string key = "ingress.replicas.secret_file";
    if (rc.secret_file.empty() && !m.state_secret_file.empty()) {
      rc.secret_file = m.state_secret_file;
      key = "ingress.modern.state_secret_file";
    } else if (!m.state_secret_file.empty() && m.state_secret_file != rc.secret_file) {
      problems.push_back({"ingress.modern.state_secret_file",
                          "is the old name of ingress.replicas.secret_file, which names another "
                          "file; keep one of them"});
    }
    if (!rc.secret_file.empty()) {
      if (!read_secret_file(rc.secret_file, rc.secret, why)) {
        problems.push_back({key, why});
      } else if (rc.secret.size() < 32) {
        problems.push_back({key, "holds " + std::to_string(rc.secret.size()) +
                                     " bytes; an HMAC key of at least 32 is needed (for example "
                                     "the output of `head -c 48 /dev/urandom | base64`)"});
        rc.secret.clear();
      }
    }
    m.state_secret = rc.secret;
  }
  for (auto& server : cfg.servers) {
    auto& o = server.oauth;
    if (!o.enabled() || o.client_secret_file.empty()) continue;
    const std::string key =
        child_path(child_path("mcpServers", server.name), "oauth") + ".client_secret_file";
    if (!read_secret_file(o.client_secret_file, o.client_secret, why)) {
      problems.push_back({key, why});
    } else if (o.client_secret.empty()) {
      problems.push_back({key, "is empty"});
    }
  }
  if (auto& in = cfg.http.oauth.introspection; !in.client_secret_file.empty()) {
    if (!read_secret_file(in.client_secret_file, in.client_secret, why)) {
      problems.push_back({"http.oauth.introspection.client_secret_file", why});
    } else if (in.client_secret.empty()) {
      problems.push_back({"http.oauth.introspection.client_secret_file", "is empty"});
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
  if (const char* v = getenv_fn("MCPMQTT_TOPIC_PREFIX"); v && *v) cfg.mqtt.topic_prefix = v;
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

// One broker url split into its parts; false with `why` when malformed.
bool parse_broker_url(const std::string& url, BrokerAddress& a, std::string& why) {
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
  a.host = host;
  a.port = port;
  a.tls = scheme->tls;
  a.websocket = scheme->websocket;
  a.ws_path = scheme->websocket ? (path.empty() ? "/mqtt" : path) : "/mqtt";
  return true;
}

}  // namespace

bool parse_broker_urls(const std::string& urls, MqttConfig& m, std::string& why) {
  std::vector<BrokerAddress> all;
  std::size_t start = 0;
  for (;;) {
    const auto comma = urls.find(',', start);
    auto one = urls.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const auto first = one.find_first_not_of(" \t");
    const auto last = one.find_last_not_of(" \t");
    one = first == std::string::npos ? std::string() : one.substr(first, last - first + 1);
    if (one.empty()) {
      why = "an empty entry in the list \"" + urls + "\" (urls are separated by single commas)";
      return false;
    }
    if (!parse_broker_url(one, all.emplace_back(), why)) return false;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  m.host = all.front().host;
  m.port = all.front().port;
  m.tls.enabled = all.front().tls;
  m.websocket = all.front().websocket;
  m.ws_path = all.front().ws_path;
  m.fallbacks.assign(all.begin() + 1, all.end());
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

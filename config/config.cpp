#include "config/config.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "bridge/protocol/topics.hpp"

namespace mcpmqtt::config {

namespace {

using rapidjson::Value;

const char* type_name(const Value& v) {
  if (v.IsNull()) return "null";
  if (v.IsBool()) return "a boolean";
  if (v.IsObject()) return "an object";
  if (v.IsArray()) return "an array";
  if (v.IsString()) return "a string";
  if (v.IsInt64() || v.IsUint64()) return "an integer";
  return "a number";
}

std::string show(const Value& v) {
  if (v.IsString()) {
    std::string s = v.GetString();
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return "\"" + s + "\"";
  }
  return type_name(v);
}

bool is_identifier(const std::string& key) {
  if (key.empty()) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string child_path(const std::string& parent, const std::string& key) {
  const std::string k = is_identifier(key) ? key : "\"" + key + "\"";
  return parent.empty() ? k : parent + "." + k;
}

// While key_paths() runs: where every key the readers ask about is written down.
thread_local std::vector<std::string>* key_recorder = nullptr;

// Reads one JSON object of the configuration. Every key the code asks about is a known key;
// finish() reports the others, with the nearest known key as a suggestion.
class ObjectReader {
 public:
  ObjectReader(const Value& obj, std::string path, std::vector<Problem>& problems)
      : obj_(obj), path_(std::move(path)), problems_(problems) {}

  const std::string& path() const { return path_; }
  std::string path_of(const std::string& key) const { return child_path(path_, key); }

  const Value* get(const char* key) {
    known_.push_back(key);
    if (key_recorder) key_recorder->push_back(path_of(key));
    auto it = obj_.FindMember(key);
    return it == obj_.MemberEnd() ? nullptr : &it->value;
  }

  void problem(const std::string& key, std::string message) {
    problems_.push_back({path_of(key), std::move(message)});
  }

  bool string(const char* key, std::string& out, bool allow_empty = true) {
    const Value* v = get(key);
    if (!v) return false;
    if (!v->IsString()) {
      problem(key, std::string("expected a string, found ") + type_name(*v));
      return false;
    }
    if (!allow_empty && v->GetStringLength() == 0) {
      problem(key, "must not be empty");
      return false;
    }
    out.assign(v->GetString(), v->GetStringLength());
    return true;
  }

  bool boolean(const char* key, bool& out) {
    const Value* v = get(key);
    if (!v) return false;
    if (!v->IsBool()) {
      problem(key, std::string("expected true or false, found ") + show(*v));
      return false;
    }
    out = v->GetBool();
    return true;
  }

  template <typename T>
  bool integer(const char* key, T& out, long long min, long long max) {
    const Value* v = get(key);
    if (!v) return false;
    if (!v->IsInt64()) {
      problem(key, std::string("expected an integer from ") + std::to_string(min) + " to " +
                       std::to_string(max) + ", found " + show(*v));
      return false;
    }
    const long long n = v->GetInt64();
    if (n < min || n > max) {
      problem(key, "expected an integer from " + std::to_string(min) + " to " +
                       std::to_string(max) + ", found " + std::to_string(n));
      return false;
    }
    out = static_cast<T>(n);
    return true;
  }

  // A duration in milliseconds under `<base>_ms`, or in whole seconds under the older
  // `<base>_s` (kept working); both at once is a problem. True when one was given.
  bool millis(const std::string& base, int& out_ms, long long min_ms, long long max_ms) {
    const std::string ms_key = base + "_ms", s_key = base + "_s";
    const bool has_ms = obj_.HasMember(ms_key.c_str()), has_s = obj_.HasMember(s_key.c_str());
    if (has_ms && has_s) {
      get(ms_key.c_str());
      get(s_key.c_str());
      problem(ms_key,
              "is also given as " + s_key + "; keep one (" + ms_key + " takes milliseconds)");
      return false;
    }
    if (has_s) {
      long long s = 0;
      if (!integer(s_key.c_str(), s, (min_ms + 999) / 1000, max_ms / 1000)) return false;
      out_ms = static_cast<int>(s * 1000);
      return true;
    }
    return integer(ms_key.c_str(), out_ms, min_ms, max_ms);
  }

  // A duration written in seconds (fractions allowed), stored in milliseconds.
  bool seconds_as_ms(const Value& v, const std::string& key, int& out_ms, double max_s) {
    if (!v.IsNumber()) {
      problem(key, std::string("expected a number of seconds, found ") + show(v));
      return false;
    }
    const double s = v.GetDouble();
    if (!(s > 0) || s > max_s) {
      problem(key, "expected a number of seconds greater than 0 and at most " +
                       std::to_string(static_cast<long long>(max_s)));
      return false;
    }
    out_ms = static_cast<int>(s * 1000.0 + 0.5);
    if (out_ms == 0) out_ms = 1;
    return true;
  }

  bool string_list(const char* key, std::vector<std::string>& out) {
    const Value* v = get(key);
    if (!v) return false;
    if (!v->IsArray()) {
      problem(key, std::string("expected an array of strings, found ") + type_name(*v));
      return false;
    }
    std::vector<std::string> items;
    for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
      const Value& e = (*v)[i];
      if (!e.IsString()) {
        problems_.push_back({path_of(key) + "[" + std::to_string(i) + "]",
                             std::string("expected a string, found ") + type_name(e)});
        return false;
      }
      items.emplace_back(e.GetString(), e.GetStringLength());
    }
    out = std::move(items);
    return true;
  }

  bool string_map(const char* key, std::map<std::string, std::string>& out) {
    const Value* v = get(key);
    if (!v) return false;
    if (!v->IsObject()) {
      problem(key, std::string("expected an object of strings, found ") + type_name(*v));
      return false;
    }
    std::map<std::string, std::string> items;
    for (auto it = v->MemberBegin(); it != v->MemberEnd(); ++it) {
      const std::string name(it->name.GetString(), it->name.GetStringLength());
      if (!it->value.IsString()) {
        problems_.push_back({child_path(path_of(key), name),
                             std::string("expected a string, found ") + type_name(it->value)});
        return false;
      }
      items[name] = std::string(it->value.GetString(), it->value.GetStringLength());
    }
    out = std::move(items);
    return true;
  }

  // A nested object, or nullptr when absent or not an object (the latter is reported).
  const Value* object(const char* key) {
    const Value* v = get(key);
    if (!v) return nullptr;
    if (!v->IsObject()) {
      problem(key, std::string("expected an object, found ") + type_name(*v));
      return nullptr;
    }
    return v;
  }

  // Reports keys nobody asked about, and keys given twice (JSON parsers keep only one of them,
  // so the other would be silently ignored).
  void finish() {
    std::set<std::string> seen;
    for (auto it = obj_.MemberBegin(); it != obj_.MemberEnd(); ++it) {
      const std::string key(it->name.GetString(), it->name.GetStringLength());
      if (!seen.insert(key).second) {
        problems_.push_back({path_of(key), "appears more than once; only one would be used"});
        continue;
      }
      if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
      std::string msg = "unknown key";
      const std::string suggestion = nearest(key, known_);
      if (!suggestion.empty()) {
        msg += "; did you mean \"" + suggestion + "\"?";
      } else {
        std::string list;
        for (const auto& k : known_)
          list += (list.empty() ? "" : ", ") + k;
        msg += " (known keys here: " + list + ")";
      }
      problems_.push_back({path_of(key), msg});
    }
  }

 private:
  const Value& obj_;
  std::string path_;
  std::vector<Problem>& problems_;
  std::vector<std::string> known_;
};

bool read_secret_file(const std::string& path, std::string& out, std::string& why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "cannot read " + path + ": " + std::strerror(errno);
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
    out.pop_back();
  return true;
}

// Expands ${VAR} from the environment; a missing variable is reported.
bool expand_env(const std::string& in, std::string& out, GetEnv getenv_fn, std::string& why) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '$' && i + 1 < in.size() && in[i + 1] == '{') {
      const auto close = in.find('}', i + 2);
      if (close == std::string::npos) {
        why = "unterminated ${ in value";
        return false;
      }
      const std::string var = in.substr(i + 2, close - i - 2);
      const char* val = getenv_fn(var.c_str());
      if (!val) {
        why = "environment variable " + var + " is not set";
        return false;
      }
      out += val;
      i = close;
    } else {
      out.push_back(in[i]);
    }
  }
  return true;
}

bool parse_mqtt_client(const std::string& text, MqttClient& out) {
  if (text == "native")
    out = MqttClient::native;
  else if (text == "paho")
    out = MqttClient::paho;
  else
    return false;
  return true;
}

void read_mqtt(ObjectReader& r, MqttConfig& m, std::vector<Problem>& problems) {
  r.string("url", m.url, false);
  std::string client;
  if (r.string("client", client) && !parse_mqtt_client(client, m.client)) {
    r.problem("client", "expected \"native\" or \"paho\", found \"" + client + "\"");
  }
  r.string("client_id_prefix", m.client_id_prefix, false);
  r.string("username", m.username);
  r.string("password_file", m.password_file, false);
  r.integer("keepalive_s", m.keepalive_s, 5, 3600);
  r.integer("qos", m.qos, 0, 1);
  r.millis("connect_timeout", m.connect_timeout_ms, 100, 300000);
  r.integer("reconnect_min_ms", m.reconnect_min_ms, 10, 600000);
  r.integer("reconnect_max_ms", m.reconnect_max_ms, 10, 3600000);
  // MQTT 5.0 §2.1.4: a packet is at most 268,435,455 + 5 bytes; below 64 KiB nothing fits.
  r.integer("max_packet_bytes", m.max_packet_bytes, 65536, 268435460);
  if (const Value* t = r.object("tls")) {
    ObjectReader tr(*t, r.path_of("tls"), problems);
    m.tls.configured = true;
    tr.string("ca_file", m.tls.ca_file, false);
    tr.string("cert_file", m.tls.cert_file, false);
    tr.string("key_file", m.tls.key_file, false);
    tr.boolean("verify", m.tls.verify);
    tr.finish();
  }
}

void read_http(ObjectReader& r, HttpConfig& h, std::vector<Problem>& problems) {
  r.boolean("enabled", h.enabled);
  r.string("listen", h.listen, false);
  r.string_list("allowed_origins", h.allowed_origins);
  r.string_list("allowed_hosts", h.allowed_hosts);
  r.string("bearer_tokens_file", h.bearer_tokens_file, false);
  r.boolean("json_response", h.json_response);
  if (const Value* l = r.object("limits")) {
    ObjectReader lr(*l, r.path_of("limits"), problems);
    auto& L = h.limits;
    lr.integer("max_body_bytes", L.max_body_bytes, 1024, 1LL << 30);
    lr.integer("max_sessions", L.max_sessions, 1, 1000000);
    lr.integer("max_connections", L.max_connections, 1, 1000000);
    lr.millis("session_idle_timeout", L.session_idle_timeout_ms, 100, 7LL * 24 * 3600 * 1000);
    lr.millis("idle_floor", L.idle_floor_ms, 0, 7LL * 24 * 3600 * 1000);
    lr.millis("request_header_timeout", L.request_header_timeout_ms, 100, 3600 * 1000);
    lr.integer("stream_queue_messages", L.stream_queue_messages, 1, 1000000);
    lr.integer("session_backlog_messages", L.session_backlog_messages, 0, 1000000);
    lr.integer("replay_buffer_events", L.replay_buffer_events, 0, 1000000);
    lr.integer("stream_queue_bytes", L.stream_queue_bytes, 1024, 1LL << 32);
    lr.integer("session_backlog_bytes", L.session_backlog_bytes, 0, 1LL << 32);
    lr.integer("replay_buffer_bytes", L.replay_buffer_bytes, 0, 1LL << 32);
    lr.millis("keepalive_interval", L.keepalive_interval_ms, 100, 3600 * 1000);
    lr.finish();
  }
}

void read_modern(ObjectReader& r, ModernIngressConfig& m) {
  r.boolean("enabled", m.enabled);
  r.integer("max_sessions", m.max_sessions, 1, 100000);
  r.integer("max_sessions_per_key", m.max_sessions_per_key, 1, 100000);
  const bool listens_set = r.integer("max_listens", m.max_listens, 0, 100000);
  r.integer("max_waiting", m.max_waiting, 0, 1000000);
  r.integer("max_waiting_bytes", m.max_waiting_bytes, 0, 1LL << 32);
  r.integer("queue_timeout_ms", m.queue_timeout_ms, 1, 600000);
  r.millis("idle_timeout", m.idle_timeout_ms, 100, 86400 * 1000);
  r.millis("input_timeout", m.input_timeout_ms, 100, 86400 * 1000);
  r.integer("input_round_quiet_ms", m.input_round_quiet_ms, 1, 10000);
  r.string("state_secret_file", m.state_secret_file, false);
  if (m.max_sessions_per_key > m.max_sessions)
    r.problem("max_sessions_per_key", "must not exceed max_sessions (" +
                                          std::to_string(m.max_sessions) + "), found " +
                                          std::to_string(m.max_sessions_per_key));
  if (!listens_set) m.max_listens = std::min(m.max_listens, m.max_sessions);
  if (m.max_listens > m.max_sessions)
    r.problem("max_listens", "must not exceed max_sessions (" + std::to_string(m.max_sessions) +
                                 "): each listen holds a session, found " +
                                 std::to_string(m.max_listens));
}

void read_ingress(ObjectReader& r, IngressConfig& in, std::vector<Problem>& problems) {
  r.string("default_server", in.default_server);
  if (r.string_list("server_name_filters", in.server_name_filters)) {
    if (in.server_name_filters.empty())
      r.problem("server_name_filters", "must hold at least one filter, such as \"#\"");
    for (std::size_t i = 0; i < in.server_name_filters.size(); ++i) {
      const auto why = topics::check_server_name_filter(in.server_name_filters[i]);
      if (!why.empty())
        r.problem("server_name_filters",
                  "[" + std::to_string(i) + "] \"" + in.server_name_filters[i] + "\" " + why);
    }
  }
  std::string pick;
  if (r.string("pick", pick)) {
    if (pick == "random")
      in.pick = Pick::random;
    else if (pick == "round_robin")
      in.pick = Pick::round_robin;
    else
      r.problem("pick", "expected \"random\" or \"round_robin\", found \"" + pick + "\"");
  }
  r.integer("presence_wait_ms", in.presence_wait_ms, 0, 600000);
  if (const Value* m = r.object("modern")) {
    ObjectReader mr(*m, r.path_of("modern"), problems);
    read_modern(mr, in.modern);
    mr.finish();
  }
  if (!in.default_server.empty()) {
    const auto why = topics::check_server_name(in.default_server);
    if (!why.empty()) r.problem("default_server", "\"" + in.default_server + "\" " + why);
  }
}

void read_timeouts(const Value& v, const std::string& path, Timeouts& t,
                   std::vector<Problem>& problems) {
  ObjectReader r(v, path, problems);
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    const std::string key(it->name.GetString(), it->name.GetStringLength());
    r.get(key.c_str());  // every key is a method name; none is unknown
    int ms = 0;
    if (!r.seconds_as_ms(it->value, key, ms, 86400)) continue;
    if (key == "default")
      t.default_ms = ms;
    else
      t.method_ms[key] = ms;
  }
}

}  // namespace

std::size_t default_max_sessions(const ServerEntry& entry, const EgressConfig& egress) {
  return entry.is_stdio() ? egress.max_sessions_per_stdio_server
                          : egress.max_sessions_per_http_server;
}

namespace {

void read_server(const std::string& name, const Value& v, const std::string& path,
                 const Config& cfg, ServerEntry& s, std::vector<Problem>& problems,
                 GetEnv getenv_fn) {
  ObjectReader r(v, path, problems);
  s.name = name;
  r.string("description", s.description);
  std::string type;
  r.string("type", type);
  r.string("command", s.command, false);
  r.string_list("args", s.args);
  r.string_map("env", s.env);
  r.string("cwd", s.cwd, false);
  r.string("url", s.url, false);
  std::map<std::string, std::string> raw_headers;
  if (r.string_map("headers", raw_headers)) {
    for (const auto& [k, val] : raw_headers) {
      std::string why, expanded;
      if (!expand_env(val, expanded, getenv_fn, why)) {
        problems.push_back({child_path(r.path_of("headers"), k), why});
      } else {
        s.headers[k] = std::move(expanded);
      }
    }
  }
  r.boolean("tls_verify", s.tls_verify);
  r.integer("max_sessions", s.max_sessions, 1, 100000);
  const bool memory_set = r.integer("max_memory_mb", s.max_memory_mb, 0, 1 << 24);
  std::string protocol;
  if (r.string("protocol", protocol)) {
    if (protocol == "auto")
      s.protocol = ServerProtocol::automatic;
    else if (protocol == "legacy")
      s.protocol = ServerProtocol::legacy;
    else if (protocol == "modern")
      s.protocol = ServerProtocol::modern;
    else
      r.problem("protocol",
                "expected \"auto\" (server/discover, then initialize), \"legacy\" (initialize "
                "only: MCP 2025-11-25 and earlier) or \"modern\" (MCP 2026-07-28 only), found \"" +
                    protocol + "\"");
  }
  if (const Value* meta = r.get("meta")) {
    if (!meta->IsObject()) {
      r.problem("meta", std::string("expected an object, found ") + type_name(*meta));
    } else {
      rapidjson::StringBuffer buf;
      rapidjson::Writer<rapidjson::StringBuffer> w(buf);
      meta->Accept(w);
      s.meta_json.assign(buf.GetString(), buf.GetSize());
    }
  }
  bool disabled = false;
  r.boolean("disabled", disabled);
  r.finish();

  const auto why = topics::check_server_name(name);
  if (!why.empty()) {
    problems.push_back({path, "the key is the MQTT server-name and " + why});
  }
  const bool has_cmd = !s.command.empty(), has_url = !s.url.empty();
  if (has_cmd == has_url) {
    problems.push_back(
        {path, has_cmd
                   ? "has both \"command\" and \"url\"; a server is either a command (stdio) or a "
                     "url (Streamable HTTP)"
                   : "needs \"command\" (a stdio server) or \"url\" (a Streamable HTTP server)"});
  }
  if (!type.empty()) {
    const bool stdio_type = type == "stdio";
    const bool http_type = type == "http" || type == "streamable-http" || type == "streamableHttp";
    if (!stdio_type && !http_type) {
      r.problem("type",
                "expected \"stdio\", \"http\" or \"streamable-http\", found \"" + type + "\"");
    } else if ((stdio_type && has_url) || (http_type && has_cmd)) {
      r.problem("type", "\"" + type + "\" does not match the entry's " +
                            (has_cmd ? "\"command\"" : "\"url\""));
    }
  }
  if (has_url) {
    if (!(s.url.starts_with("http://") || s.url.starts_with("https://"))) {
      r.problem("url", "expected an http:// or https:// URL, found \"" + s.url + "\"");
    }
    if (!s.args.empty()) r.problem("args", "only applies to \"command\" servers");
  } else {
    if (!s.headers.empty()) r.problem("headers", "only applies to \"url\" servers");
  }
  if (has_url && memory_set && s.max_memory_mb)
    r.problem("max_memory_mb", "only applies to \"command\" servers (the children's memory)");
  if (!memory_set && has_cmd) s.max_memory_mb = cfg.egress.max_memory_per_stdio_server_mb;
  if (!s.max_sessions) s.max_sessions = default_max_sessions(s, cfg.egress);
  if (disabled) s.name.clear();  // marks the entry to be skipped
}

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

LoadResult finish(Config cfg, std::vector<Problem> problems, GetEnv getenv_fn) {
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

}  // namespace

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
  getenv_fn = or_default(getenv_fn);
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
    problems.push_back(
        {"", std::string("the configuration must be a JSON object, found ") + type_name(doc)});
    return LoadResult{std::nullopt, std::move(problems)};
  }

  Config cfg;
  ObjectReader top(doc, "", problems);
  top.get("$schema");  // editors' schema hint; ignored
  if (const Value* v = top.object("mqtt")) {
    ObjectReader r(*v, "mqtt", problems);
    read_mqtt(r, cfg.mqtt, problems);
    r.finish();
  }
  if (const Value* v = top.object("http")) {
    ObjectReader r(*v, "http", problems);
    read_http(r, cfg.http, problems);
    r.finish();
  }
  if (const Value* v = top.object("ingress")) {
    ObjectReader r(*v, "ingress", problems);
    read_ingress(r, cfg.ingress, problems);
    r.finish();
  }
  if (const Value* v = top.object("egress")) {
    ObjectReader r(*v, "egress", problems);
    auto& E = cfg.egress;
    // The older key sets both kinds' default; a kind's own key wins over it.
    std::size_t both = 0;
    if (r.integer("max_sessions_per_server", both, 1, 100000))
      E.max_sessions_per_stdio_server = E.max_sessions_per_http_server = both;
    r.integer("max_sessions_per_stdio_server", E.max_sessions_per_stdio_server, 1, 100000);
    r.integer("max_sessions_per_http_server", E.max_sessions_per_http_server, 1, 100000);
    r.integer("max_memory_per_stdio_server_mb", E.max_memory_per_stdio_server_mb, 0, 1 << 24);
    r.millis("idle_floor", E.idle_floor_ms, 0, 7LL * 24 * 3600 * 1000);
    r.integer("terminate_after_ms", cfg.egress.terminate_after_ms, 0, 600000);
    r.integer("kill_after_ms", cfg.egress.kill_after_ms, 0, 600000);
    r.integer("discover_timeout_ms", cfg.egress.discover_timeout_ms, 100, 600000);
    r.integer("max_input_rounds", cfg.egress.max_input_rounds, 1, 100);
    r.finish();
  }
  if (const Value* v = top.object("events")) {
    ObjectReader r(*v, "events", problems);
    if (const Value* w = r.object("webhooks")) {
      ObjectReader wr(*w, r.path_of("webhooks"), problems);
      auto& W = cfg.events.webhooks;
      wr.boolean("enabled", W.enabled);
      wr.string("database", W.database);
      wr.boolean("allow_http", W.allow_http);
      wr.string_list("allow_targets", W.allow_targets);
      wr.integer("timeout_ms", W.timeout_ms, 100, 600000);
      wr.integer("retry_min_ms", W.retry_min_ms, 1, 3600000);
      wr.integer("retry_max_ms", W.retry_max_ms, 1, 24 * 3600000);
      wr.integer("retry_window_s", W.retry_window_s, 1, 30 * 86400);
      wr.integer("max_in_flight", W.max_in_flight, 1, 100000);
      wr.integer("threads", W.threads, 1, 64);
      wr.integer("max_outbox", W.max_outbox, 1, 100000000);
      wr.integer("max_registrations", W.max_registrations, 1, 10000000);
      wr.integer("max_uris", W.max_uris, 1, 100000);
      if (W.retry_max_ms < W.retry_min_ms)
        wr.problem("retry_max_ms", "must not be below retry_min_ms (" +
                                       std::to_string(W.retry_min_ms) + "), found " +
                                       std::to_string(W.retry_max_ms));
      if (W.enabled && W.database.empty())
        wr.problem("database",
                   "is required when webhooks are enabled: the SQLite file that keeps "
                   "registrations and the outbox, such as "
                   "\"/var/lib/mcp-mqtt-bridge/webhooks.sqlite3\"");
      wr.finish();
    }
    r.finish();
  }
  if (const Value* v = top.object("timeouts"))
    read_timeouts(*v, "timeouts", cfg.timeouts, problems);
  if (const Value* v = top.object("log")) {
    ObjectReader r(*v, "log", problems);
    cfg.log.level_set = r.string("level", cfg.log.level, false);
    r.finish();
  }
  if (const Value* v = top.object("daemon")) {
    ObjectReader r(*v, "daemon", problems);
    r.integer("threads", cfg.daemon.threads, 1, 64);
    r.integer("shutdown_grace_ms", cfg.daemon.shutdown_grace_ms, 0, 600000);
    r.finish();
  }
  if (const Value* v = top.object("mcpServers")) {
    for (auto it = v->MemberBegin(); it != v->MemberEnd(); ++it) {
      const std::string name(it->name.GetString(), it->name.GetStringLength());
      const std::string path = child_path("mcpServers", name);
      if (!it->value.IsObject()) {
        problems.push_back(
            {path, std::string("expected an object, found ") + type_name(it->value)});
        continue;
      }
      ServerEntry s;
      read_server(name, it->value, path, cfg, s, problems, getenv_fn);
      if (!s.name.empty()) cfg.servers.push_back(std::move(s));
    }
  }
  top.finish();
  return finish(std::move(cfg), std::move(problems), getenv_fn);
}

std::vector<std::string> key_paths() {
  // Every object of the model present (empty), so that every reader runs and asks for its keys;
  // one stdio server for the keys of an mcpServers entry.
  const std::string skeleton =
      R"({"mqtt": {"tls": {}}, "http": {"limits": {}}, "ingress": {"modern": {}}, "egress": {},)"
      R"( "events": {"webhooks": {}}, "log": {}, "daemon": {}, "timeouts": {},)"
      R"( "mcpServers": {"NAME": {"command": "x"}}})";
  std::vector<std::string> keys;
  key_recorder = &keys;
  parse(skeleton, "key_paths");
  key_recorder = nullptr;
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
    return LoadResult{std::nullopt,
                      {{"", "cannot read the file: " + std::string(std::strerror(errno))}}};
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path, getenv_fn);
}

LoadResult defaults(GetEnv getenv_fn) {
  return finish(Config{}, {}, or_default(getenv_fn));
}

void apply_overrides(LoadResult& result, const Overrides& o) {
  if (!result.config) return;
  Config& cfg = *result.config;
  std::vector<Problem> problems;
  if (o.broker_url) {
    cfg.mqtt.url = *o.broker_url;
    std::string why;
    if (!parse_broker_url(cfg.mqtt.url, cfg.mqtt, why)) problems.push_back({"--broker", why});
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

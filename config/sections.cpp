#include "config/sections.hpp"

#include <algorithm>
#include <cctype>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "bridge/protocol/topics.hpp"
#include "config/object_reader.hpp"

namespace mcpmqtt::config::detail {

namespace {

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

void read_mqtt_members(ObjectReader& r, MqttConfig& m, std::vector<Problem>& problems) {
  // One url, or an array of them (failover, in order): kept as one comma-separated string, as
  // MCPMQTT_BROKER and --broker give it.
  if (const Value* u = r.get("url")) {
    if ((u->IsString() && u->GetStringLength() == 0) || (u->IsArray() && u->Empty())) {
      r.problem("url", "must not be empty");
    } else if (u->IsString()) {
      m.url.assign(u->GetString(), u->GetStringLength());
    } else if (u->IsArray()) {
      std::string joined;
      for (const auto& e : u->GetArray()) {
        if (!e.IsString() || e.GetStringLength() == 0 ||
            std::string_view(e.GetString(), e.GetStringLength()).find(',') !=
                std::string_view::npos) {
          r.problem("url", "expected broker urls (strings without commas), found " + show(e));
          joined.clear();
          break;
        }
        if (!joined.empty()) joined += ',';
        joined.append(e.GetString(), e.GetStringLength());
      }
      if (!joined.empty()) m.url = joined;
    } else {
      r.problem("url",
                std::string("expected a string or an array of strings, found ") + type_name(*u));
    }
  }
  std::string client;
  if (r.string("client", client) && !parse_mqtt_client(client, m.client)) {
    r.problem("client", "expected \"native\" or \"paho\", found \"" + client + "\"");
  }
  r.string("client_id_prefix", m.client_id_prefix, false);
  r.string("topic_prefix", m.topic_prefix, false);
  r.string("username", m.username);
  r.string("password_file", m.password_file, false);
  std::string credentials;
  if (r.string("session_credentials", credentials) &&
      !parse_session_credentials(credentials, m.session_credentials)) {
    r.problem("session_credentials",
              "expected \"shared\", \"token\" or \"principal\", found \"" + credentials + "\"");
  }
  r.integer("keepalive_s", m.keepalive_s, 5, 3600);
  r.integer("session_keepalive_s", m.session_keepalive_s, 5, 3600);
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

void read_http_members(ObjectReader& r, HttpConfig& h, std::vector<Problem>& problems) {
  r.boolean("enabled", h.enabled);
  r.string("listen", h.listen, false);
  r.string_list("allowed_origins", h.allowed_origins);
  r.string_list("allowed_hosts", h.allowed_hosts);
  r.string("bearer_tokens_file", h.bearer_tokens_file, false);
  r.boolean("json_response", h.json_response);
  r.string("public_url", h.public_url, false);
  if (const Value* o = r.object("oauth")) {
    ObjectReader orr(*o, r.path_of("oauth"), problems);
    auto& O = h.oauth;
    orr.string("issuer", O.issuer, false);
    if (const Value* s = orr.object("scopes")) {
      for (auto it = s->MemberBegin(); it != s->MemberEnd(); ++it) {
        const std::string scope(it->name.GetString(), it->name.GetStringLength());
        const auto key = orr.path_of("scopes") + "." + scope;
        if (scope.empty() || scope.find_first_of(" \"") != std::string::npos) {
          problems.push_back({key, "a scope is a non-empty token without spaces or quotes"});
          continue;
        }
        auto& filters = O.scopes[scope];
        if (!it->value.IsArray()) {
          problems.push_back({key, std::string("expected an array of server-name filters, found ") +
                                       type_name(it->value)});
          continue;
        }
        for (const auto& f : it->value.GetArray()) {
          if (!f.IsString()) {
            problems.push_back(
                {key, std::string("expected a server-name filter string, found ") + type_name(f)});
            continue;
          }
          std::string filter(f.GetString(), f.GetStringLength());
          if (auto why = topics::check_server_name_filter(filter); !why.empty())
            problems.push_back({key, "\"" + filter + "\": " + why});
          else
            filters.push_back(std::move(filter));
        }
      }
    }
    orr.string_list("algorithms", O.algorithms);
    orr.integer("clock_skew_s", O.clock_skew_s, 0, 3600);
    orr.boolean("require_at_jwt", O.require_at_jwt);
    orr.integer("jwks_max_stale_s", O.jwks_max_stale_s, 0, 30LL * 24 * 3600);
    orr.string("ca_file", O.ca_file, false);
    orr.boolean("tls_verify", O.tls_verify);
    if (const Value* i = orr.object("introspection")) {
      ObjectReader ir(*i, orr.path_of("introspection"), problems);
      auto& I = O.introspection;
      ir.string("client_id", I.client_id, false);
      ir.string("client_secret_file", I.client_secret_file, false);
      ir.integer("cache_max_s", I.cache_max_s, 1, 24 * 3600);
      ir.finish();
    }
    orr.finish();
  }
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

// A replica's name goes into topic names and session ids: letters, digits, '-' and '_'.
std::string check_replica_id(const std::string& id) {
  if (id.empty() || id.size() > 64) return "must be 1 to 64 characters";
  for (unsigned char c : id)
    if (!std::isalnum(c) && c != '-' && c != '_')
      return "may hold only letters, digits, '-' and '_' (it names MQTT topics and session ids)";
  return {};
}

void read_replicas(ObjectReader& r, ReplicasConfig& rc) {
  if (r.string("id", rc.id)) {
    const auto why = check_replica_id(rc.id);
    if (!why.empty()) r.problem("id", "\"" + rc.id + "\" " + why);
  }
  r.string("secret_file", rc.secret_file, false);
  r.millis("relay_timeout", rc.relay_timeout_ms, 0, 3600 * 1000);
  r.integer("max_relays", rc.max_relays, 1, 1000000);
}

void read_ingress_members(ObjectReader& r, IngressConfig& in, std::vector<Problem>& problems) {
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
  if (const Value* rv = r.object("replicas")) {
    ObjectReader rr(*rv, r.path_of("replicas"), problems);
    read_replicas(rr, in.replicas);
    rr.finish();
  }
  if (!in.default_server.empty()) {
    const auto why = topics::check_server_name(in.default_server);
    if (!why.empty()) r.problem("default_server", "\"" + in.default_server + "\" " + why);
  }
}

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
  if (const Value* o = r.object("oauth")) {
    ObjectReader orr(*o, r.path_of("oauth"), problems);
    auto& O = s.oauth;
    orr.string("issuer", O.issuer, false);
    orr.string("client_id", O.client_id, false);
    orr.string("client_secret_file", O.client_secret_file, false);
    orr.string("scope", O.scope);
    orr.string("resource", O.resource, false);
    std::string method;
    if (orr.string("auth_method", method)) {
      if (method == "client_secret_post")
        O.client_secret_post = true;
      else if (method != "client_secret_basic")
        orr.problem("auth_method",
                    "expected \"client_secret_basic\" (HTTP Basic, RFC 6749 §2.3.1) or "
                    "\"client_secret_post\", found \"" +
                        method + "\"");
    }
    orr.string("ca_file", O.ca_file, false);
    orr.boolean("tls_verify", O.tls_verify);
    orr.finish();
    if (O.issuer.empty()) orr.problem("issuer", "is required (the authorization server)");
    if (O.client_id.empty()) orr.problem("client_id", "is required");
    if (O.client_secret_file.empty())
      orr.problem("client_secret_file", "is required (a file holding the client secret)");
  }
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
    if (s.oauth.enabled()) r.problem("oauth", "only applies to \"url\" servers");
  }
  if (s.oauth.enabled()) {
    const auto is_authorization = [](const std::string& k) {
      static constexpr std::string_view kName = "authorization";
      return k.size() == kName.size() &&
             std::equal(k.begin(), k.end(), kName.begin(), [](char a, char b) {
               return std::tolower(static_cast<unsigned char>(a)) == b;
             });
    };
    for (const auto& [k, val] : s.headers)
      if (is_authorization(k))
        r.problem("headers", "sets Authorization, which \"oauth\" sets; use one or the other");
  }
  if (has_url && memory_set && s.max_memory_mb)
    r.problem("max_memory_mb", "only applies to \"command\" servers (the children's memory)");
  if (!memory_set && has_cmd) s.max_memory_mb = cfg.egress.max_memory_per_stdio_server_mb;
  if (!s.max_sessions) s.max_sessions = default_max_sessions(s, cfg.egress);
  if (disabled) s.name.clear();  // marks the entry to be skipped
}

}  // namespace

bool parse_mqtt_client(const std::string& text, MqttClient& out) {
  if (text == "native")
    out = MqttClient::native;
  else if (text == "paho")
    out = MqttClient::paho;
  else
    return false;
  return true;
}

bool parse_session_credentials(const std::string& text, SessionCredentials& out) {
  if (text == "shared")
    out = SessionCredentials::shared;
  else if (text == "token")
    out = SessionCredentials::token;
  else if (text == "principal")
    out = SessionCredentials::principal;
  else
    return false;
  return true;
}

void read_mqtt(const Value& v, MqttConfig& m, std::vector<Problem>& problems) {
  ObjectReader r(v, "mqtt", problems);
  read_mqtt_members(r, m, problems);
  r.finish();
}

void read_http(const Value& v, HttpConfig& h, std::vector<Problem>& problems) {
  ObjectReader r(v, "http", problems);
  read_http_members(r, h, problems);
  r.finish();
}

void read_ingress(const Value& v, IngressConfig& in, std::vector<Problem>& problems) {
  ObjectReader r(v, "ingress", problems);
  read_ingress_members(r, in, problems);
  r.finish();
}

void read_egress(const Value& v, EgressConfig& e, std::vector<Problem>& problems) {
  ObjectReader r(v, "egress", problems);
  // The older key sets both kinds' default; a kind's own key wins over it.
  std::size_t both = 0;
  if (r.integer("max_sessions_per_server", both, 1, 100000))
    e.max_sessions_per_stdio_server = e.max_sessions_per_http_server = both;
  r.integer("max_sessions_per_stdio_server", e.max_sessions_per_stdio_server, 1, 100000);
  r.integer("max_sessions_per_http_server", e.max_sessions_per_http_server, 1, 100000);
  r.integer("max_memory_per_stdio_server_mb", e.max_memory_per_stdio_server_mb, 0, 1 << 24);
  r.millis("idle_floor", e.idle_floor_ms, 0, 7LL * 24 * 3600 * 1000);
  r.integer("terminate_after_ms", e.terminate_after_ms, 0, 600000);
  r.integer("kill_after_ms", e.kill_after_ms, 0, 600000);
  r.integer("discover_timeout_ms", e.discover_timeout_ms, 100, 600000);
  r.integer("max_input_rounds", e.max_input_rounds, 1, 100);
  r.finish();
}

void read_events(const Value& v, EventsConfig& events, std::vector<Problem>& problems) {
  ObjectReader r(v, "events", problems);
  if (const Value* w = r.object("webhooks")) {
    ObjectReader wr(*w, r.path_of("webhooks"), problems);
    auto& W = events.webhooks;
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

void read_log(const Value& v, LogConfig& log, std::vector<Problem>& problems) {
  ObjectReader r(v, "log", problems);
  log.level_set = r.string("level", log.level, false);
  r.finish();
}

void read_daemon(const Value& v, DaemonConfig& daemon, std::vector<Problem>& problems) {
  ObjectReader r(v, "daemon", problems);
  r.integer("threads", daemon.threads, 1, 64);
  r.integer("shutdown_grace_ms", daemon.shutdown_grace_ms, 0, 600000);
  r.finish();
}

void read_servers(const Value& v, Config& cfg, std::vector<Problem>& problems, GetEnv getenv_fn) {
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    const std::string name(it->name.GetString(), it->name.GetStringLength());
    const std::string path = child_path("mcpServers", name);
    if (!it->value.IsObject()) {
      problems.push_back({path, std::string("expected an object, found ") + type_name(it->value)});
      continue;
    }
    ServerEntry s;
    read_server(name, it->value, path, cfg, s, problems, getenv_fn);
    if (!s.name.empty()) cfg.servers.push_back(std::move(s));
  }
}

}  // namespace mcpmqtt::config::detail

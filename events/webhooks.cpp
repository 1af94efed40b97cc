#include "events/webhooks.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <rapidjson/document.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bridge/jsonrpc/json_access.hpp"
#include "bridge/jsonrpc/raw_json.hpp"
#include "bridge/modern/request_state.hpp"
#include "bridge/protocol/events.hpp"
#include "common/log.hpp"
#include "common/metrics.hpp"

namespace mcpmqtt::bridge {

namespace {

auto logger() {
  static auto l = log::get("bridge");
  return l;
}

constexpr std::string_view kSubscriptionScheme = "subscription://";
constexpr std::string_view kEventScheme = "event://";

using jsonrpc::member;

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string iso8601(std::int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms % 1000));
  return out;
}

jsonrpc::Error invalid(std::string message) {
  return {jsonrpc::code::invalid_params, std::move(message), {}};
}

metrics::Counter& delivery_counter(const char* outcome) {
  return metrics::registry().counter(
      "mcpmqtt_webhook_deliveries_total",
      "Webhook events by final outcome: delivered (2xx), gone (410: the registration was "
      "deregistered), dead_letter (not delivered within events.webhooks.retry_window_s, or the "
      "outbox was full), dropped (its registration was deregistered first).",
      {"outcome"}, {outcome});
}
metrics::Counter& attempts_counter(const char* result) {
  return metrics::registry().counter(
      "mcpmqtt_webhook_attempts_total",
      "Webhook POSTs by result: 2xx, 410, 4xx, 5xx, error (no response).", {"result"}, {result});
}

// The counters, looked up once: a delivery must not cost a registry lookup (with its strings)
// per outcome.
struct Meters {
  metrics::Counter& delivered = delivery_counter("delivered");
  metrics::Counter& gone = delivery_counter("gone");
  metrics::Counter& dead_letter = delivery_counter("dead_letter");
  metrics::Counter& dropped = delivery_counter("dropped");
  metrics::Counter& attempt_2xx = attempts_counter("2xx");
  metrics::Counter& attempt_410 = attempts_counter("410");
  metrics::Counter& attempt_4xx = attempts_counter("4xx");
  metrics::Counter& attempt_5xx = attempts_counter("5xx");
  metrics::Counter& attempt_error = attempts_counter("error");
  metrics::Counter& retries = metrics::registry().counter(
      "mcpmqtt_webhook_retries_total", "Webhook POSTs scheduled again after a failed attempt.");
  metrics::Counter& dead_letters = metrics::registry().counter(
      "mcpmqtt_webhook_dead_letters_total",
      "Webhook events moved to the dead letters (table dead_letters of the database).");

  metrics::Counter& attempt(unsigned status) const {
    if (status == 0) return attempt_error;
    if (status >= 200 && status < 300) return attempt_2xx;
    if (status == 410) return attempt_410;
    return status >= 400 && status < 500 ? attempt_4xx : attempt_5xx;
  }
};

const Meters& meters() {
  static const Meters m;
  return m;
}

// A statement, finalized with its scope.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { sqlite3_prepare_v2(db, sql, -1, &st_, nullptr); }
  ~Statement() { sqlite3_finalize(st_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return st_ != nullptr; }
  Statement& bind(int i, std::string_view text) {
    sqlite3_bind_text(st_, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind(int i, std::int64_t v) {
    sqlite3_bind_int64(st_, i, v);
    return *this;
  }
  int step() { return sqlite3_step(st_); }
  void reset() {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
  }
  std::string text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, col));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, col)))
             : std::string();
  }
  std::int64_t integer(int col) const { return sqlite3_column_int64(st_, col); }

 private:
  sqlite3_stmt* st_ = nullptr;
};

// A target for logs: without its query, which may carry a token.
std::string shown(const std::string& target) {
  return target.substr(0, target.find('?'));
}

std::string uris_json(const std::vector<std::string>& uris) {
  std::string out = "[";
  for (const auto& u : uris)
    out += (out.size() > 1 ? "," : "") + jsonrpc::quote(u);
  return out + "]";
}

std::vector<std::string> parse_uris(const std::string& json) {
  std::vector<std::string> out;
  rapidjson::Document d;
  d.Parse(json.data(), json.size());
  if (d.HasParseError() || !d.IsArray()) return out;
  for (const auto& v : d.GetArray())
    if (v.IsString()) out.emplace_back(v.GetString(), v.GetStringLength());
  return out;
}

}  // namespace

std::string base64(std::string_view data) {
  std::string out(4 * ((data.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(data.data()),
                                static_cast<int>(data.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::optional<std::string> unbase64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out(3 * text.size() / 4, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  std::size_t len = static_cast<std::size_t>(n);
  // EVP_DecodeBlock counts the padding as zero bytes.
  if (!text.empty() && text.back() == '=') --len;
  if (text.size() > 1 && text[text.size() - 2] == '=') --len;
  out.resize(len);
  return out;
}

namespace {

// The signature with the secret's key already decoded (once per registration, not per POST).
std::string sign_with_key(std::string_view key, std::string_view id, std::string_view timestamp,
                          std::string_view body) {
  std::string signed_content;
  signed_content.reserve(id.size() + timestamp.size() + body.size() + 2);
  signed_content.append(id).append(".").append(timestamp).append(".").append(body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(signed_content.data()), signed_content.size(), mac,
       &len);
  return "v1," + base64(std::string_view(reinterpret_cast<const char*>(mac), len));
}

// The key of a `whsec_…` secret, or nullopt.
std::optional<std::string> secret_key(std::string_view secret) {
  constexpr std::string_view prefix = "whsec_";
  if (secret.substr(0, prefix.size()) != prefix) return std::nullopt;
  return unbase64(secret.substr(prefix.size()));
}

}  // namespace

std::string webhook_signature(std::string_view secret, std::string_view id,
                              std::string_view timestamp, std::string_view body) {
  const auto key = secret_key(secret);
  return key ? sign_with_key(*key, id, timestamp, body) : std::string();
}

// ---- opening ---------------------------------------------------------------------------------

Webhooks::Webhooks(Options options, Scheduler& scheduler, WebhookSender& sender,
                   InterestChanged on_interest)
    : options_(std::move(options)),
      scheduler_(scheduler),
      sender_(sender),
      on_interest_(std::move(on_interest)) {
  if (auto seed = random_bytes(8)) std::memcpy(&rng_, seed->data(), 8);
  rng_ |= 1;
}

Webhooks::~Webhooks() {
  close();
  if (db_) sqlite3_close(db_);
}

Expected<std::unique_ptr<Webhooks>, std::string> Webhooks::open(Options options,
                                                                Scheduler& scheduler,
                                                                WebhookSender& sender,
                                                                InterestChanged on_interest) {
  std::unique_ptr<Webhooks> w(
      new Webhooks(std::move(options), scheduler, sender, std::move(on_interest)));
  if (auto error = w->init()) return unexpected(std::move(*error));
  return w;
}

bool Webhooks::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) == SQLITE_OK) return true;
  logger()->error("[webhooks] SQLite: {} ({})", err ? err : "?", sql);
  sqlite3_free(err);
  return false;
}

std::optional<std::string> Webhooks::init() {
  const auto& path = options_.database;
  // The file holds the webhook secrets: only the daemon's user may read it.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return "events.webhooks.database: cannot open " + path + ": " + std::strerror(errno);
  ::fchmod(fd, 0600);
  ::close(fd);
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, nullptr) !=
      SQLITE_OK) {
    return "events.webhooks.database: SQLite cannot open " + path + ": " +
           (db_ ? sqlite3_errmsg(db_) : "out of memory");
  }
  sqlite3_busy_timeout(db_, 5000);
  // WAL with synchronous=NORMAL: a committed transaction survives the process being killed
  // (the outbox's promise); a power cut may lose the last few.
  if (!exec("PRAGMA journal_mode=WAL") || !exec("PRAGMA synchronous=NORMAL") ||
      !exec("CREATE TABLE IF NOT EXISTS registrations(id TEXT PRIMARY KEY, principal TEXT NOT "
            "NULL, server TEXT NOT NULL, target TEXT NOT NULL, secret TEXT NOT NULL, uris TEXT "
            "NOT NULL, created_ms INTEGER NOT NULL, last_status TEXT NOT NULL DEFAULT 'never', "
            "last_ms INTEGER NOT NULL DEFAULT 0)") ||
      !exec("CREATE TABLE IF NOT EXISTS outbox(seq INTEGER PRIMARY KEY AUTOINCREMENT, msg_id "
            "TEXT NOT NULL, registration TEXT NOT NULL, body TEXT NOT NULL, created_ms INTEGER "
            "NOT NULL)") ||
      !exec("CREATE TABLE IF NOT EXISTS dead_letters(seq INTEGER PRIMARY KEY, msg_id TEXT NOT "
            "NULL, registration TEXT NOT NULL, body TEXT NOT NULL, created_ms INTEGER NOT NULL, "
            "dead_ms INTEGER NOT NULL, reason TEXT NOT NULL)")) {
    return "events.webhooks.database: cannot set up " + path + ": " + sqlite3_errmsg(db_);
  }
  for (const char* suffix : {"-wal", "-shm"})
    ::chmod((path + suffix).c_str(), 0600);
  {
    Statement st(db_,
                 "SELECT id, principal, server, target, secret, uris, created_ms, last_status, "
                 "last_ms FROM registrations");
    while (st.ok() && st.step() == SQLITE_ROW) {
      Registration r;
      r.id = st.text(0);
      r.principal = st.text(1);
      r.server = st.text(2);
      r.target = st.text(3);
      r.secret = st.text(4);
      r.key = secret_key(r.secret).value_or(std::string());
      r.uris = parse_uris(st.text(5));
      r.created_ms = st.integer(6);
      r.last_status = st.text(7);
      r.last_ms = st.integer(8);
      registrations_[r.id] = std::move(r);
    }
  }
  {
    Statement st(db_,
                 "SELECT seq, msg_id, registration, body, created_ms FROM outbox ORDER BY seq");
    while (st.ok() && st.step() == SQLITE_ROW) {
      Item it;
      it.seq = st.integer(0);
      it.msg_id = st.text(1);
      it.registration = st.text(2);
      it.body = st.text(3);
      it.created_ms = st.integer(4);
      if (!registrations_.count(it.registration)) {
        done_.push_back(it.seq);
        continue;
      }
      ready_.push_back(it.seq);
      outbox_bytes_ += it.body.size();
      items_.emplace(it.seq, std::move(it));
    }
  }
  if (!registrations_.empty() || !items_.empty())
    logger()->info("[webhooks] {} registrations, {} events waiting in {}", registrations_.size(),
                   items_.size(), path);
  if (!done_.empty()) schedule_flush();
  pump();
  return std::nullopt;
}

std::map<std::string, std::set<std::string>> Webhooks::interest() const {
  std::map<std::string, std::set<std::string>> out;
  for (const auto& [id, r] : registrations_)
    out[r.server].insert(r.uris.begin(), r.uris.end());
  return out;
}

void Webhooks::interest_changed(const std::string& server) {
  std::set<std::string> uris;
  for (const auto& [id, r] : registrations_)
    if (r.server == server) uris.insert(r.uris.begin(), r.uris.end());
  if (on_interest_) on_interest_(server, uris);
}

// ---- registration ----------------------------------------------------------------------------

Expected<std::string, jsonrpc::Error> Webhooks::register_subscription(
    const std::string& principal, const std::string& server_name, const jsonrpc::Message& request,
    const std::string& target) {
  const auto* params = request.params();
  const auto* uris_v = member(params, "uris");
  if (!uris_v || !uris_v->IsArray() || uris_v->Empty())
    return unexpected(invalid(
        "resources/subscriptions/register needs params.uris, a non-empty array of event:// URIs"));
  if (uris_v->Size() > options_.max_uris)
    return unexpected(invalid("resources/subscriptions/register: " +
                              std::to_string(uris_v->Size()) + " URIs; the bridge takes at most " +
                              std::to_string(options_.max_uris) + " per registration"));
  std::vector<std::string> uris;
  for (const auto& u : uris_v->GetArray()) {
    if (!u.IsString() ||
        std::string_view(u.GetString(), u.GetStringLength()).substr(0, kEventScheme.size()) !=
            kEventScheme)
      return unexpected(invalid(
          "resources/subscriptions/register: every entry of params.uris must be an event:// URI "
          "(SEP-1803 §Out-of-Band)"));
    std::string s(u.GetString(), u.GetStringLength());
    if (std::find(uris.begin(), uris.end(), s) == uris.end()) uris.push_back(std::move(s));
  }
  if (registrations_.size() >= options_.max_registrations)
    return unexpected(jsonrpc::Error{
        jsonrpc::code::connection_closed,
        "the bridge holds the maximum of " + std::to_string(options_.max_registrations) +
            " webhook registrations (events.webhooks.max_registrations); deregister one first",
        {}});
  const auto id_bytes = random_bytes(16);
  const auto key = random_bytes(32);
  if (!id_bytes || !key)
    return unexpected(jsonrpc::Error{
        jsonrpc::code::internal_error, "no random source for the webhook secret", {}});
  Registration r;
  r.id = hex(*id_bytes);
  r.principal = principal;
  r.server = server_name;
  r.target = target;
  r.secret = "whsec_" + base64(*key);
  r.key = *key;
  r.uris = std::move(uris);
  r.created_ms = wall_ms();
  r.last_status = "never";
  Statement st(db_,
               "INSERT INTO registrations(id, principal, server, target, secret, uris, "
               "created_ms) VALUES(?,?,?,?,?,?,?)");
  st.bind(1, r.id).bind(2, r.principal).bind(3, r.server).bind(4, r.target).bind(5, r.secret);
  st.bind(6, uris_json(r.uris)).bind(7, r.created_ms);
  if (!st.ok() || st.step() != SQLITE_DONE)
    return unexpected(jsonrpc::Error{
        jsonrpc::code::internal_error,
        std::string("the bridge could not store the registration: ") + sqlite3_errmsg(db_),
        {}});
  const std::string result =
      R"({"subscription":{"uri":)" + jsonrpc::quote(std::string(kSubscriptionScheme) + r.id) +
      R"(,"eventUris":)" + uris_json(r.uris) + R"(,"targetUri":)" + jsonrpc::quote(r.target) +
      R"(,"webhookSecret":{"type":"standard","key":)" + jsonrpc::quote(r.secret) + "}}}";
  logger()->info("[webhooks] registered {}{} for {} on {} → {}", kSubscriptionScheme, r.id,
                 uris_json(r.uris), server_name, shown(r.target));
  const std::string server = r.server;
  registrations_[r.id] = std::move(r);
  interest_changed(server);
  return result;
}

Expected<std::string, jsonrpc::Error> Webhooks::deregister(const std::string& principal,
                                                           const std::string& server_name,
                                                           const jsonrpc::Message& request) {
  const auto* uri = member(request.params(), "uri");
  if (!uri || !uri->IsString())
    return unexpected(
        invalid("resources/subscriptions/deregister needs params.uri, the subscription:// URI that "
                "register returned"));
  const std::string_view u(uri->GetString(), uri->GetStringLength());
  const std::string id(u.substr(0, kSubscriptionScheme.size()) == kSubscriptionScheme
                           ? u.substr(kSubscriptionScheme.size())
                           : std::string_view());
  auto it = registrations_.find(id);
  // Someone else's registration is reported as unknown: others cannot learn it exists.
  if (it == registrations_.end() || it->second.principal != principal ||
      it->second.server != server_name)
    return unexpected(invalid("no webhook subscription " + std::string(u) + " of yours"));
  logger()->info("[webhooks] deregistered {}", u);
  remove_registration(id);
  return std::string("{}");
}

Expected<std::string, jsonrpc::Error> Webhooks::read(const std::string& principal,
                                                     const std::string& server_name,
                                                     const std::string& uri) {
  const std::string id = uri.substr(std::min(uri.size(), kSubscriptionScheme.size()));
  auto it = registrations_.find(id);
  if (it == registrations_.end() || it->second.principal != principal ||
      it->second.server != server_name)
    return unexpected(jsonrpc::Error{-32002, "Resource not found: " + uri,
                                     R"({"uri":)" + jsonrpc::quote(uri) + "}"});
  const auto& r = it->second;
  std::size_t waiting = 0;
  for (const auto& [seq, item] : items_)
    waiting += item.registration == id;
  const std::string text = R"({"uri":)" + jsonrpc::quote(uri) + R"(,"eventUris":)" +
                           uris_json(r.uris) + R"(,"targetUri":)" + jsonrpc::quote(r.target) +
                           R"(,"lastDelivery":{"status":)" + jsonrpc::quote(r.last_status) +
                           R"(,"at":)" +
                           (r.last_ms ? jsonrpc::quote(iso8601(r.last_ms)) : std::string("null")) +
                           R"(},"waiting":)" + std::to_string(waiting) + "}";
  return R"({"contents":[{"uri":)" + jsonrpc::quote(uri) +
         R"(,"mimeType":"application/json","text":)" + jsonrpc::quote(text) + "}]}";
}

std::string Webhooks::list(const std::string& principal, const std::string& server_name) const {
  std::string out;
  for (const auto& [id, r] : registrations_) {
    if (r.principal != principal || r.server != server_name) continue;
    if (!out.empty()) out += ',';
    const std::string uri = std::string(kSubscriptionScheme) + id;
    out += R"({"uri":)" + jsonrpc::quote(uri) + R"(,"name":)" +
           jsonrpc::quote("webhook " + id.substr(0, 8)) + R"(,"title":)" +
           jsonrpc::quote("Webhook to " + shown(r.target)) + R"(,"description":)" +
           jsonrpc::quote("Out-of-band subscription of " + uris_json(r.uris) +
                          ", served by mcp-mqtt-bridge; read it for its last delivery") +
           R"(,"mimeType":"application/json"})";
  }
  return out;
}

void Webhooks::remove_registration(const std::string& id) {
  auto it = registrations_.find(id);
  if (it == registrations_.end()) return;
  const std::string server = it->second.server;
  registrations_.erase(it);
  Statement st(db_, "DELETE FROM registrations WHERE id = ?");
  st.bind(1, id);
  st.step();
  Statement ob(db_, "DELETE FROM outbox WHERE registration = ?");
  ob.bind(1, id);
  ob.step();
  for (auto i = items_.begin(); i != items_.end();) {
    if (i->second.registration != id) {
      ++i;
      continue;
    }
    if (i->second.timer) scheduler_.cancel(i->second.timer);
    if (i->second.in_flight) --in_flight_;
    meters().dropped.inc();
    outbox_bytes_ -= i->second.body.size();
    i = items_.erase(i);
  }
  std::erase_if(ready_, [&](std::int64_t seq) { return !items_.count(seq); });
  interest_changed(server);
  pump();
}

// ---- events ----------------------------------------------------------------------------------

void Webhooks::set_event_types(const std::string& server_name, std::vector<EventType> types) {
  if (types.empty()) {
    event_types_.erase(server_name);
  } else {
    event_types_[server_name] = std::move(types);
  }
}

void Webhooks::on_event(const std::string& server_name, const jsonrpc::Message& updated) {
  if (closed_) return;
  const auto raw_params = raw_json::member(updated.text(), "params");
  if (!raw_params) return;
  const auto uri_raw = raw_json::member(*raw_params, "uri");
  const auto* uri_v = member(updated.params(), "uri");
  if (!uri_raw || !uri_v || !uri_v->IsString()) return;
  const std::string_view uri(uri_v->GetString(), uri_v->GetStringLength());
  const auto payload = raw_json::member(*raw_params, "payload");
  std::vector<Registration*> hit;
  for (auto& [id, r] : registrations_) {
    if (r.server != server_name) continue;
    for (const auto& s : r.uris) {
      if (events::covers(s, uri)) {
        hit.push_back(&r);
        break;
      }
    }
  }
  if (hit.empty()) return;
  const std::int64_t now = wall_ms();
  const std::string timestamp = jsonrpc::quote(iso8601(now));
  std::string type = "\"notifications/resources/updated\"";
  if (auto t = event_types_.find(server_name); t != event_types_.end()) {
    for (const auto& et : t->second) {
      if (events::template_matches(et.uri_template, uri)) {
        type = jsonrpc::quote(et.type);
        break;
      }
    }
  }
  const auto event_bytes = random_bytes(16);
  const std::string msg_prefix =
      "msg_" +
      (event_bytes ? hex(*event_bytes) : std::to_string(now) + "_" + std::to_string(rng_)) + "_";
  std::size_t n_in_event = 0;
  // Committed in chunks, each before its POSTs start (an event accepted here survives the
  // process): the first deliveries leave while the rest are written, on the delivery threads.
  constexpr std::size_t kChunk = 64;
  std::size_t in_chunk = 0;
  exec("BEGIN");
  Statement st(db_, "INSERT INTO outbox(msg_id, registration, body, created_ms) VALUES(?,?,?,?)");
  for (auto* r : hit) {
    if (in_chunk == kChunk) {
      exec("COMMIT");
      pump();
      exec("BEGIN");
      in_chunk = 0;
    }
    // Bounded in events and in bytes: past either, the event is dead-lettered at once.
    if (items_.size() >= options_.max_outbox ||
        outbox_bytes_ + updated.size() + 256 > options_.max_outbox_bytes) {
      meters().dead_letter.inc();
      meters().dead_letters.inc();
      logger()->warn(
          "[webhooks] outbox full ({} events, {} bytes; events.webhooks.max_outbox): an event "
          "of {} for {}{} is dropped",
          items_.size(), outbox_bytes_, std::string(uri), kSubscriptionScheme, r->id);
      continue;
    }
    Item item;
    // webhook-id: the event's random part and the delivery's number within it — unique, and
    // one call to the random source per event rather than per registration.
    item.msg_id = msg_prefix + std::to_string(++n_in_event);
    item.registration = r->id;
    item.created_ms = now;
    // Standard Webhooks payload: type, timestamp, data (the event as the server wrote it).
    item.body = R"({"type":)" + type + R"(,"timestamp":)" + timestamp +
                R"(,"data":{"subscription":)" +
                jsonrpc::quote(std::string(kSubscriptionScheme) + r->id) + R"(,"uri":)" +
                std::string(*uri_raw) +
                (payload ? R"(,"payload":)" + std::string(*payload) : std::string()) + "}}";
    st.bind(1, item.msg_id).bind(2, item.registration).bind(3, item.body).bind(4, now);
    if (st.step() != SQLITE_DONE) {
      logger()->error("[webhooks] SQLite cannot write the outbox: {}", sqlite3_errmsg(db_));
      st.reset();
      continue;
    }
    st.reset();
    item.seq = sqlite3_last_insert_rowid(db_);
    ++in_chunk;
    ready_.push_back(item.seq);
    outbox_bytes_ += item.body.size();
    items_.emplace(item.seq, std::move(item));
  }
  exec("COMMIT");
  pump();
}

// ---- delivery --------------------------------------------------------------------------------

std::chrono::milliseconds Webhooks::backoff(unsigned attempts) {
  auto d = options_.retry_min;
  for (unsigned i = 1; i < attempts && d < options_.retry_max; ++i)
    d *= 2;
  d = std::min(d, options_.retry_max);
  // ±25 % jitter (xorshift: not for secrets).
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  const double f = 0.75 + static_cast<double>(rng_ % 1000) / 2000.0;
  return std::chrono::milliseconds(
      std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(d.count()) * f)));
}

void Webhooks::pump() {
  while (!closed_ && in_flight_ < options_.max_in_flight && !ready_.empty()) {
    const auto seq = ready_.front();
    ready_.pop_front();
    auto it = items_.find(seq);
    if (it == items_.end() || it->second.in_flight) continue;
    attempt(it->second);
  }
}

void Webhooks::attempt(Item& item) {
  auto r = registrations_.find(item.registration);
  if (r == registrations_.end()) return;
  item.in_flight = true;
  item.timer = 0;
  ++item.attempts;
  ++in_flight_;
  WebhookDelivery d;
  d.target = r->second.target;
  d.id = item.msg_id;
  d.timestamp = std::to_string(wall_ms() / 1000);
  d.signature = sign_with_key(r->second.key, d.id, d.timestamp, item.body);
  d.body = item.body;
  sender_.post(std::move(d), [this, seq = item.seq, gen = generation_](WebhookOutcome o) {
    on_outcome(seq, gen, o);
  });
}

void Webhooks::set_status(Registration& r, std::string status) {
  r.last_status = std::move(status);
  r.last_ms = wall_ms();
  if (!r.status_dirty) ++statuses_dirty_;
  r.status_dirty = true;
}

void Webhooks::on_outcome(std::int64_t seq, std::uint64_t generation,
                          const WebhookOutcome& outcome) {
  if (generation != generation_ || closed_) return;
  auto it = items_.find(seq);
  if (it == items_.end() || !it->second.in_flight) return;  // deregistered meanwhile
  Item& item = it->second;
  item.in_flight = false;
  --in_flight_;
  auto r = registrations_.find(item.registration);
  const unsigned s = outcome.status;
  meters().attempt(s).inc();
  if (s >= 200 && s < 300) {
    if (r != registrations_.end()) set_status(r->second, "delivered (" + std::to_string(s) + ")");
    finish_item(seq);
  } else if (s == 410) {
    // Standard Webhooks: 410 Gone means the endpoint is gone for good.
    logger()->info("[webhooks] {} answered 410 Gone: {}{} is deregistered",
                   r != registrations_.end() ? shown(r->second.target) : std::string("?"),
                   kSubscriptionScheme, item.registration);
    meters().gone.inc();
    const std::string id = item.registration;
    outbox_bytes_ -= item.body.size();
    items_.erase(it);
    done_.push_back(seq);
    schedule_flush();
    remove_registration(id);
  } else {
    const std::string why =
        s ? "HTTP " + std::to_string(s) : (outcome.error.empty() ? "no response" : outcome.error);
    auto delay = backoff(item.attempts);
    if (outcome.retry_after && *outcome.retry_after > delay) delay = *outcome.retry_after;
    const std::int64_t deadline =
        item.created_ms +
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.retry_window).count();
    if (wall_ms() + delay.count() > deadline) {
      if (r != registrations_.end()) set_status(r->second, "failed (" + why + "), dead-lettered");
      logger()->warn("[webhooks] {} for {}{} dead-lettered after {} attempts: {}", item.msg_id,
                     kSubscriptionScheme, item.registration, item.attempts, why);
      finish_item(seq, why);
    } else {
      if (r != registrations_.end()) set_status(r->second, "failed (" + why + "), retrying");
      logger()->debug("[webhooks] {} to {}: {}; retry {} in {} ms", item.msg_id,
                      r != registrations_.end() ? shown(r->second.target) : std::string("?"), why,
                      item.attempts, delay.count());
      meters().retries.inc();
      item.timer = scheduler_.schedule(delay, [this, seq] {
        auto i = items_.find(seq);
        if (i == items_.end()) return;
        i->second.timer = 0;
        ready_.push_back(seq);
        pump();
      });
    }
  }
  schedule_flush();
  pump();
}

void Webhooks::finish_item(std::int64_t seq, const std::string& dead_reason) {
  if (!dead_reason.empty()) {
    meters().dead_letter.inc();
    meters().dead_letters.inc();
    dead_.emplace_back(seq, dead_reason);
  } else {
    meters().delivered.inc();
    done_.push_back(seq);
    erase_item(seq);
  }
  schedule_flush();
}

void Webhooks::erase_item(std::int64_t seq) {
  auto it = items_.find(seq);
  if (it == items_.end()) return;
  outbox_bytes_ -= it->second.body.size();
  items_.erase(it);
}

void Webhooks::schedule_flush() {
  if (flush_timer_ || closed_) return;
  flush_timer_ = scheduler_.schedule(options_.flush_interval, [this] {
    flush_timer_ = 0;
    flush();
  });
}

void Webhooks::flush() {
  if (db_ && (!done_.empty() || !dead_.empty())) {
    exec("BEGIN");
    {
      // Delivered rows, in runs of consecutive sequence numbers: a burst's deliveries finish
      // roughly in order, and one range costs what one row does.
      std::sort(done_.begin(), done_.end());
      Statement del(db_, "DELETE FROM outbox WHERE seq BETWEEN ? AND ?");
      for (std::size_t i = 0; i < done_.size();) {
        std::size_t j = i;
        while (j + 1 < done_.size() && done_[j + 1] == done_[j] + 1)
          ++j;
        del.bind(1, done_[i]).bind(2, done_[j]);
        del.step();
        del.reset();
        i = j + 1;
      }
    }
    {
      Statement move(db_,
                     "INSERT OR REPLACE INTO dead_letters(seq, msg_id, registration, body, "
                     "created_ms, dead_ms, reason) SELECT seq, msg_id, registration, body, "
                     "created_ms, ?, ? FROM outbox WHERE seq = ?");
      Statement del(db_, "DELETE FROM outbox WHERE seq = ?");
      const auto now = wall_ms();
      for (const auto& [seq, reason] : dead_) {
        move.bind(1, now).bind(2, reason).bind(3, seq);
        move.step();
        move.reset();
        del.bind(1, seq);
        del.step();
        del.reset();
        erase_item(seq);
      }
    }
    exec("COMMIT");
    done_.clear();
    dead_.clear();
  }
  if (statuses_dirty_ && !status_timer_) {
    if (closed_) return flush_statuses();
    status_timer_ = scheduler_.schedule(options_.status_interval, [this] {
      status_timer_ = 0;
      flush_statuses();
    });
  }
}

void Webhooks::flush_statuses() {
  if (!db_ || !statuses_dirty_) return;
  exec("BEGIN");
  Statement up(db_, "UPDATE registrations SET last_status = ?, last_ms = ? WHERE id = ?");
  for (auto& [id, r] : registrations_) {
    if (!r.status_dirty) continue;
    r.status_dirty = false;
    up.bind(1, r.last_status).bind(2, r.last_ms).bind(3, id);
    up.step();
    up.reset();
  }
  exec("COMMIT");
  statuses_dirty_ = 0;
}

Webhooks::Stats Webhooks::stats() const {
  Stats s;
  s.registrations = registrations_.size();
  s.outbox = items_.size();
  s.outbox_bytes = outbox_bytes_;
  s.in_flight = in_flight_;
  if (!items_.empty()) {
    std::int64_t oldest = items_.begin()->second.created_ms;
    for (const auto& [seq, it] : items_)
      oldest = std::min(oldest, it.created_ms);
    s.oldest_seconds = static_cast<double>(wall_ms() - oldest) / 1000.0;
  }
  return s;
}

void Webhooks::close() {
  if (closed_) return;
  if (flush_timer_) scheduler_.cancel(flush_timer_);
  flush_timer_ = 0;
  if (status_timer_) scheduler_.cancel(status_timer_);
  status_timer_ = 0;
  for (auto& [seq, it] : items_)
    if (it.timer) scheduler_.cancel(it.timer);
  closed_ = true;
  flush();  // statuses too, at once: nothing is scheduled after close
  ++generation_;
}

}  // namespace mcpmqtt::bridge

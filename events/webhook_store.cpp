#include "events/webhook_store.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>

#include <fcntl.h>
#include <rapidjson/document.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "common/errno_text.hpp"
#include "common/log.hpp"
#include "events/webhook_signing.hpp"

namespace mcpmqtt::bridge {

namespace {

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

// A statement, finalized with its scope.
class WebhookStore::Statement {
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

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string webhook_uris_json(const std::vector<std::string>& uris) {
  std::string out = "[";
  for (const auto& u : uris)
    out += (out.size() > 1 ? "," : "") + jsonrpc::quote(u);
  return out + "]";
}

Expected<std::unique_ptr<WebhookStore>, std::string> WebhookStore::open(const std::string& path) {
  std::unique_ptr<WebhookStore> store(new WebhookStore());
  // The file holds the webhook secrets: only the daemon's user may read it.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return unexpected("events.webhooks.database: cannot open " + path + ": " + errno_text(errno));
  ::fchmod(fd, 0600);
  ::close(fd);
  sqlite3*& db = store->db_;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, nullptr) !=
      SQLITE_OK) {
    return unexpected("events.webhooks.database: SQLite cannot open " + path + ": " +
                      (db ? sqlite3_errmsg(db) : "out of memory"));
  }
  sqlite3_busy_timeout(db, 5000);
  // WAL with synchronous=NORMAL: a committed transaction survives the process being killed
  // (the outbox's promise); a power cut may lose the last few.
  if (!store->exec("PRAGMA journal_mode=WAL") || !store->exec("PRAGMA synchronous=NORMAL") ||
      !store->exec(
          "CREATE TABLE IF NOT EXISTS registrations(id TEXT PRIMARY KEY, principal TEXT NOT "
          "NULL, server TEXT NOT NULL, target TEXT NOT NULL, secret TEXT NOT NULL, uris TEXT "
          "NOT NULL, created_ms INTEGER NOT NULL, last_status TEXT NOT NULL DEFAULT 'never', "
          "last_ms INTEGER NOT NULL DEFAULT 0)") ||
      !store->exec(
          "CREATE TABLE IF NOT EXISTS outbox(seq INTEGER PRIMARY KEY AUTOINCREMENT, msg_id "
          "TEXT NOT NULL, registration TEXT NOT NULL, body TEXT NOT NULL, created_ms INTEGER "
          "NOT NULL)") ||
      !store->exec(
          "CREATE TABLE IF NOT EXISTS dead_letters(seq INTEGER PRIMARY KEY, msg_id TEXT NOT "
          "NULL, registration TEXT NOT NULL, body TEXT NOT NULL, created_ms INTEGER NOT NULL, "
          "dead_ms INTEGER NOT NULL, reason TEXT NOT NULL)")) {
    return unexpected("events.webhooks.database: cannot set up " + path + ": " +
                      sqlite3_errmsg(db));
  }
  for (const char* suffix : {"-wal", "-shm"})
    ::chmod((path + suffix).c_str(), 0600);
  return store;
}

WebhookStore::~WebhookStore() {
  insert_event_.reset();  // every statement is finalized before the database closes
  if (db_) sqlite3_close(db_);
}

bool WebhookStore::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) == SQLITE_OK) return true;
  log::bridge()->error("[webhooks] SQLite: {} ({})", err ? err : "?", sql);
  sqlite3_free(err);
  return false;
}

std::vector<WebhookRegistration> WebhookStore::load_registrations() {
  std::vector<WebhookRegistration> out;
  Statement st(db_,
               "SELECT id, principal, server, target, secret, uris, created_ms, last_status, "
               "last_ms FROM registrations");
  while (st.ok() && st.step() == SQLITE_ROW) {
    WebhookRegistration r;
    r.id = st.text(0);
    r.principal = st.text(1);
    r.server = st.text(2);
    r.target = st.text(3);
    r.secret = st.text(4);
    r.key = webhook_secret_key(r.secret).value_or(std::string());
    r.uris = parse_uris(st.text(5));
    r.created_ms = st.integer(6);
    r.last_status = st.text(7);
    r.last_ms = st.integer(8);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<WebhookEvent> WebhookStore::load_outbox() {
  std::vector<WebhookEvent> out;
  Statement st(db_, "SELECT seq, msg_id, registration, body, created_ms FROM outbox ORDER BY seq");
  while (st.ok() && st.step() == SQLITE_ROW) {
    WebhookEvent e;
    e.seq = st.integer(0);
    e.msg_id = st.text(1);
    e.registration = st.text(2);
    e.body = st.text(3);
    e.created_ms = st.integer(4);
    out.push_back(std::move(e));
  }
  return out;
}

std::optional<std::string> WebhookStore::insert_registration(const WebhookRegistration& r) {
  Statement st(db_,
               "INSERT INTO registrations(id, principal, server, target, secret, uris, "
               "created_ms) VALUES(?,?,?,?,?,?,?)");
  st.bind(1, r.id).bind(2, r.principal).bind(3, r.server).bind(4, r.target).bind(5, r.secret);
  st.bind(6, webhook_uris_json(r.uris)).bind(7, r.created_ms);
  if (!st.ok() || st.step() != SQLITE_DONE) return std::string(sqlite3_errmsg(db_));
  return std::nullopt;
}

void WebhookStore::delete_registration(const std::string& id) {
  Statement st(db_, "DELETE FROM registrations WHERE id = ?");
  st.bind(1, id);
  st.step();
  Statement ob(db_, "DELETE FROM outbox WHERE registration = ?");
  ob.bind(1, id);
  ob.step();
}

void WebhookStore::begin() {
  exec("BEGIN");
}

void WebhookStore::commit() {
  exec("COMMIT");
}

Expected<std::int64_t, std::string> WebhookStore::insert_event(std::string_view msg_id,
                                                               std::string_view registration,
                                                               std::string_view body,
                                                               std::int64_t created_ms) {
  if (!insert_event_)
    insert_event_ = std::make_unique<Statement>(
        db_, "INSERT INTO outbox(msg_id, registration, body, created_ms) VALUES(?,?,?,?)");
  Statement& st = *insert_event_;
  st.bind(1, msg_id).bind(2, registration).bind(3, body).bind(4, created_ms);
  if (st.step() != SQLITE_DONE) {
    std::string why = sqlite3_errmsg(db_);
    st.reset();
    return unexpected(std::move(why));
  }
  st.reset();
  return static_cast<std::int64_t>(sqlite3_last_insert_rowid(db_));
}

void WebhookStore::remove_events(std::vector<std::int64_t>& delivered,
                                 const std::vector<std::pair<std::int64_t, std::string>>& dead,
                                 std::int64_t now_ms) {
  exec("BEGIN");
  {
    // Delivered rows, in runs of consecutive sequence numbers: a burst's deliveries finish
    // roughly in order, and one range costs what one row does.
    std::sort(delivered.begin(), delivered.end());
    Statement del(db_, "DELETE FROM outbox WHERE seq BETWEEN ? AND ?");
    for (std::size_t i = 0; i < delivered.size();) {
      std::size_t j = i;
      while (j + 1 < delivered.size() && delivered[j + 1] == delivered[j] + 1)
        ++j;
      del.bind(1, delivered[i]).bind(2, delivered[j]);
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
    for (const auto& [seq, reason] : dead) {
      move.bind(1, now_ms).bind(2, reason).bind(3, seq);
      move.step();
      move.reset();
      del.bind(1, seq);
      del.step();
      del.reset();
    }
  }
  exec("COMMIT");
}

void WebhookStore::save_statuses(const std::vector<const WebhookRegistration*>& registrations) {
  exec("BEGIN");
  Statement up(db_, "UPDATE registrations SET last_status = ?, last_ms = ? WHERE id = ?");
  for (const auto* r : registrations) {
    up.bind(1, r->last_status).bind(2, r->last_ms).bind(3, r->id);
    up.step();
    up.reset();
  }
  exec("COMMIT");
}

}  // namespace mcpmqtt::bridge

// The SQLite database of the webhooks (events.webhooks.database, file mode 0600): the
// registrations, the outbox of events waiting for delivery, and the dead letters. Writes are
// synchronous; WAL with synchronous=NORMAL, so a committed transaction survives the process.
//
// Its owner's strand; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/expected.hpp"

struct sqlite3;

namespace mcpmqtt::bridge {

// `subscription://` + a registration's id is the URI that names it.
inline constexpr std::string_view kSubscriptionScheme = "subscription://";

// Milliseconds of the wall clock since the Unix epoch, as the database's timestamps are.
std::int64_t wall_ms();

struct WebhookRegistration {
  std::string id;
  std::string principal;
  std::string server;
  std::string target;
  std::string secret;  // whsec_…
  std::string key;     // the secret's decoded bytes, the HMAC key
  std::vector<std::string> uris;
  std::int64_t created_ms = 0;
  std::string last_status;  // "never", "delivered (200)", "failed (503), retrying", …
  std::int64_t last_ms = 0;
  bool status_dirty = false;  // last_status changed since it was last written

  // The target for logs: without its query, which may carry a token.
  std::string shown_target() const { return target.substr(0, target.find('?')); }
};

// One event for one registration, as the outbox keeps it.
struct WebhookEvent {
  std::int64_t seq = 0;
  std::string msg_id;  // webhook-id
  std::string registration;
  std::string body;
  std::int64_t created_ms = 0;  // wall clock
};

// A list of URIs as a JSON array of strings.
std::string webhook_uris_json(const std::vector<std::string>& uris);

class WebhookStore {
 public:
  // Opens (creating, mode 0600) the database at `path` and its tables; the error names
  // events.webhooks.database and the file.
  static Expected<std::unique_ptr<WebhookStore>, std::string> open(const std::string& path);
  ~WebhookStore();
  WebhookStore(const WebhookStore&) = delete;
  WebhookStore& operator=(const WebhookStore&) = delete;

  std::vector<WebhookRegistration> load_registrations();
  // The outbox, oldest first.
  std::vector<WebhookEvent> load_outbox();

  // SQLite's error when the row could not be written.
  std::optional<std::string> insert_registration(const WebhookRegistration& r);
  // The registration and its rows in the outbox.
  void delete_registration(const std::string& id);

  // Around insert_event: the rows written between them are committed together.
  void begin();
  void commit();
  // The new row's sequence number, or SQLite's error.
  Expected<std::int64_t, std::string> insert_event(std::string_view msg_id,
                                                   std::string_view registration,
                                                   std::string_view body, std::int64_t created_ms);
  // In one transaction: removes `delivered` (sorted here) and moves `dead` (sequence number,
  // reason) to the dead letters at `now_ms`.
  void remove_events(std::vector<std::int64_t>& delivered,
                     const std::vector<std::pair<std::int64_t, std::string>>& dead,
                     std::int64_t now_ms);
  // In one transaction: each registration's last_status and last_ms.
  void save_statuses(const std::vector<const WebhookRegistration*>& registrations);

 private:
  class Statement;
  WebhookStore() = default;
  bool exec(const char* sql);

  sqlite3* db_ = nullptr;
  std::unique_ptr<Statement> insert_event_;  // prepared once: events are written in bursts
};

}  // namespace mcpmqtt::bridge

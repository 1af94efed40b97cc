// SEP-1803 out-of-band event subscriptions (webhooks) served by the bridge for MQTT-hosted
// servers that only deliver events in-band: the registrations, their durable outbox and the
// delivery schedule. No network I/O: POSTs go through a WebhookSender, timers through a
// Scheduler; state lives in SQLite (events.webhooks.database, file mode 0600).
//
// - register (SEP-1803 §Out-of-Band, `resources/subscriptions/register`): `uris` (event://, at
//   most `max_uris`) and a `targetUri` the caller has checked already (directions: https, no
//   private address unless allow-listed). A Standard Webhooks secret (`whsec_` + base64 of 32
//   bytes from OpenSSL's CSPRNG) is made, stored, and returned once as {type:"standard",key}.
//   The registration belongs to the principal that made it (a digest of the bearer token, never
//   the token): others can neither read nor deregister it, and are told it does not exist.
// - The owner holds the in-band subscription of every registered URI at the server (it is told
//   through InterestChanged, and at start by interest()); each update it hears is handed to
//   on_event(), which writes one outbox row per covering registration (events::covers) in one
//   transaction before anything is sent.
// - Delivery (Standard Webhooks): POST of
//   {"type":…,"timestamp":…,"data":{"subscription":…,"uri":…,"payload":…}} (the payload as the
//   server wrote it; the type the webhookType of the event's template, else
//   "notifications/resources/updated") with webhook-id (made when the event is
//   written, so stable across retries and restarts), webhook-timestamp (seconds) and
//   webhook-signature `v1,<base64 HMAC-SHA256(key, id.timestamp.body)>`. 2xx: delivered
//   (removed). 410: the registration is deregistered. Anything else (or no response): retried
//   after retry_min doubling to retry_max, with ±25 % jitter, or after Retry-After when that is
//   longer; an event that cannot be delivered within `retry_window` of its creation is moved to
//   the dead letters (counted). At most `max_in_flight` POSTs at once.
// - Durability: at-least-once. An event's rows are committed in chunks, each before its POSTs
//   start. The removal of delivered rows is batched (every 20 ms): a crash may deliver an event
//   again, with the same webhook-id, which receivers dedupe on.
//
// One strand; not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/relay/scheduler.hpp"
#include "common/expected.hpp"

struct sqlite3;

namespace mcpmqtt::bridge {

struct WebhookOptions {
  std::string database;  // SQLite file, created 0600
  std::chrono::milliseconds retry_min{1000};
  std::chrono::milliseconds retry_max{300000};
  std::chrono::seconds retry_window{86400};
  std::size_t max_in_flight = 64;
  std::size_t max_outbox = 100000;  // events waiting (all registrations); past it new ones are
                                    // dead-lettered at once
  std::size_t max_outbox_bytes = std::size_t(256) << 20;  // their bodies, likewise
  std::size_t max_registrations = 10000;
  std::size_t max_uris = 64;  // per registration
  std::chrono::milliseconds flush_interval{20};
  // Each registration's last delivery status (what resources/read shows) is kept in memory at
  // once and written to the database at most this often: it is worth a restart, not a write
  // per delivery.
  std::chrono::milliseconds status_interval{1000};
};

struct WebhookDelivery {
  std::string target;     // targetUri
  std::string id;         // webhook-id
  std::string timestamp;  // webhook-timestamp (Unix seconds)
  std::string signature;  // webhook-signature
  std::string body;
};

struct WebhookOutcome {
  unsigned status = 0;  // HTTP status; 0 when no response came (unreachable, timeout, refused)
  std::optional<std::chrono::milliseconds> retry_after;
  std::string error;  // why, when status is 0 (for logs and the registration's status)
};

class WebhookSender {
 public:
  virtual ~WebhookSender() = default;
  // Sends one POST; `done` runs once, on the Webhooks' strand.
  virtual void post(WebhookDelivery delivery, std::function<void(WebhookOutcome)> done) = 0;
};

// Standard Webhooks signature of one message: `v1,` + base64(HMAC-SHA256(key, id.ts.body)),
// `secret` being the `whsec_…` form. Empty for a malformed secret.
std::string webhook_signature(std::string_view secret, std::string_view id,
                              std::string_view timestamp, std::string_view body);
// Standard base64 with padding (RFC 4648 §4), and its inverse.
std::string base64(std::string_view data);
std::optional<std::string> unbase64(std::string_view text);

class Webhooks {
 public:
  using Options = WebhookOptions;
  // The URIs the bridge must hold subscribed at `server_name` now (empty: none).
  using InterestChanged =
      std::function<void(const std::string& server_name, const std::set<std::string>& uris)>;

  struct Stats {
    std::size_t registrations = 0;
    std::size_t outbox = 0;
    std::size_t outbox_bytes = 0;  // the bodies waiting (held in memory as on disk)
    double oldest_seconds = 0;     // age of the oldest event waiting
    std::size_t in_flight = 0;
  };

  // Opens (creating) the database and loads registrations and the outbox; delivery of what was
  // waiting starts at once.
  static Expected<std::unique_ptr<Webhooks>, std::string> open(Options options,
                                                               Scheduler& scheduler,
                                                               WebhookSender& sender,
                                                               InterestChanged on_interest);
  ~Webhooks();
  Webhooks(const Webhooks&) = delete;
  Webhooks& operator=(const Webhooks&) = delete;

  // Every server-name with registrations, and the URIs to hold subscribed there.
  std::map<std::string, std::set<std::string>> interest() const;

  // resources/subscriptions/register for `server_name` with a checked target: the result JSON,
  // or the error to answer with.
  Expected<std::string, jsonrpc::Error> register_subscription(const std::string& principal,
                                                              const std::string& server_name,
                                                              const jsonrpc::Message& request,
                                                              const std::string& target);
  // resources/subscriptions/deregister: "{}" or the error.
  Expected<std::string, jsonrpc::Error> deregister(const std::string& principal,
                                                   const std::string& server_name,
                                                   const jsonrpc::Message& request);
  // resources/read of a subscription:// URI: the result JSON, or the error.
  Expected<std::string, jsonrpc::Error> read(const std::string& principal,
                                             const std::string& server_name,
                                             const std::string& uri);
  // The registrations of `principal` at `server_name` as resources/list entries (SEP-1803:
  // out-of-band subscriptions "can further be listed in subscription:// resources"): JSON
  // objects separated by commas, empty when there are none.
  std::string list(const std::string& principal, const std::string& server_name) const;
  // SEP-1803 §Event Resources: an event template's `_meta.webhookType` is the `type` of the
  // webhooks of the events it describes.
  struct EventType {
    std::string uri_template;
    std::string type;
  };
  // The event templates of `server_name` that name a webhook type (the owner lists them); an
  // event takes the type of the first that matches its URI, else
  // "notifications/resources/updated".
  void set_event_types(const std::string& server_name, std::vector<EventType> types);
  // A notifications/resources/updated the bridge heard from `server_name`.
  void on_event(const std::string& server_name, const jsonrpc::Message& updated);

  Stats stats() const;
  // Writes what is batched; no delivery starts after it.
  void close();

 private:
  struct Registration {
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
    bool status_dirty = false;
  };
  struct Item {
    std::int64_t seq = 0;
    std::string msg_id;
    std::string registration;
    std::string body;
    std::int64_t created_ms = 0;  // wall clock
    unsigned attempts = 0;
    bool in_flight = false;
    Scheduler::TimerId timer = 0;
  };

  Webhooks(Options options, Scheduler& scheduler, WebhookSender& sender,
           InterestChanged on_interest);
  std::optional<std::string> init();
  bool exec(const char* sql);
  void interest_changed(const std::string& server);
  void pump();
  void attempt(Item& item);
  void on_outcome(std::int64_t seq, std::uint64_t generation, const WebhookOutcome& outcome);
  // Delivered (no reason) or dead-lettered (why).
  void finish_item(std::int64_t seq, const std::string& dead_reason = {});
  void erase_item(std::int64_t seq);
  void remove_registration(const std::string& id);
  void schedule_flush();
  void flush();
  void flush_statuses();
  void set_status(Registration& r, std::string status);
  std::chrono::milliseconds backoff(unsigned attempts);

  Options options_;
  Scheduler& scheduler_;
  WebhookSender& sender_;
  InterestChanged on_interest_;
  sqlite3* db_ = nullptr;
  std::map<std::string, Registration> registrations_;          // by id
  std::map<std::string, std::vector<EventType>> event_types_;  // by server-name
  std::map<std::int64_t, Item> items_;                         // the outbox, by sequence
  std::deque<std::int64_t> ready_;                             // due now, in order
  std::size_t outbox_bytes_ = 0;                               // bodies in items_
  std::size_t in_flight_ = 0;
  std::uint64_t generation_ = 1;    // outcomes of an earlier close() are ignored
  std::vector<std::int64_t> done_;  // delivered or dropped: to delete
  std::vector<std::pair<std::int64_t, std::string>> dead_;  // to move to dead_letters
  Scheduler::TimerId flush_timer_ = 0;
  Scheduler::TimerId status_timer_ = 0;
  std::size_t statuses_dirty_ = 0;
  bool closed_ = false;
  std::uint64_t rng_ = 0;
};

}  // namespace mcpmqtt::bridge

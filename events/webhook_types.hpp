// The options of the webhooks (events.webhooks) and the interface their POSTs go through: what
// the registrations, the store and the outbox share.
//
// Plain data and an interface; no state of their own.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>

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

}  // namespace mcpmqtt::bridge

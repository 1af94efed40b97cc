// SEP-1803 out-of-band event subscriptions (webhooks) served by the bridge for MQTT-hosted
// servers that only deliver events in-band: the registrations, and the events they are owed.
// No network I/O: the registrations and the outbox are kept by a WebhookStore (SQLite), the
// events delivered by a WebhookOutbox (POSTs through a WebhookSender, timers through a
// Scheduler).
//
// - register (SEP-1803 §Out-of-Band, `resources/subscriptions/register`): `uris` (event://, at
//   most `max_uris`) and a `targetUri` the caller has checked already (directions: https, no
//   private address unless allow-listed). A Standard Webhooks secret (`whsec_` + base64 of 32
//   bytes from OpenSSL's CSPRNG) is made, stored, and returned once as {type:"standard",key}.
//   The registration belongs to the principal that made it (a digest of the bearer token, never
//   the token): others can neither read nor deregister it, and are told it does not exist.
// - The owner holds the in-band subscription of every registered URI at the server (it is told
//   through InterestChanged, and at start by interest()); each update it hears is handed to
//   on_event(), which writes one outbox row per covering registration (events::covers) before
//   anything is sent: a POST of {"type":…,"timestamp":…,"data":{"subscription":…,"uri":…,
//   "payload":…}} (the payload as the server wrote it; the type the webhookType of the event's
//   template, else "notifications/resources/updated"). At-least-once: a crash may deliver an
//   event again, with the same webhook-id, which receivers dedupe on.
//
// One strand; not thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/relay/scheduler.hpp"
#include "common/expected.hpp"
#include "events/webhook_outbox.hpp"
#include "events/webhook_signing.hpp"
#include "events/webhook_store.hpp"
#include "events/webhook_types.hpp"

namespace mcpmqtt::bridge {

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
  Webhooks(Options options, Scheduler& scheduler, WebhookSender& sender,
           InterestChanged on_interest, std::unique_ptr<WebhookStore> store);
  void interest_changed(const std::string& server);
  void remove_registration(const std::string& id);

  Options options_;
  InterestChanged on_interest_;
  std::unique_ptr<WebhookStore> store_;
  std::map<std::string, WebhookRegistration> registrations_;   // by id
  std::map<std::string, std::vector<EventType>> event_types_;  // by server-name
  WebhookOutbox outbox_;
};

}  // namespace mcpmqtt::bridge

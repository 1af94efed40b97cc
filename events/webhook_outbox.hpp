// The outbox of the webhooks: the events waiting for delivery, oldest first, at most
// max_in_flight POSTs at once, each signed and sent through a WebhookSender; retried after
// retry_min doubling to retry_max (±25 % jitter, or Retry-After when longer) until
// retry_window after the event, then dead-lettered. Delivered rows are removed from the store
// in batches, and the registrations' last delivery status written at most every
// status_interval.
//
// One strand (its Webhooks'); not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bridge/relay/scheduler.hpp"
#include "events/webhook_store.hpp"
#include "events/webhook_types.hpp"

namespace mcpmqtt::bridge {

class WebhookOutbox {
 public:
  // The registration `id` answered 410 Gone: its owner deregisters it.
  using Gone = std::function<void(const std::string& id)>;

  // `registrations` (by id) belong to the owner; the outbox reads their targets and keys and
  // sets their last delivery status.
  WebhookOutbox(const WebhookOptions& options, Scheduler& scheduler, WebhookSender& sender,
                WebhookStore& store, std::map<std::string, WebhookRegistration>& registrations,
                Gone on_gone);
  WebhookOutbox(const WebhookOutbox&) = delete;
  WebhookOutbox& operator=(const WebhookOutbox&) = delete;

  // What the store held at start: queued for delivery, except the rows of registrations that
  // are gone, which are removed. Delivery starts at once.
  void load(std::vector<WebhookEvent> rows);
  // One event for each registration of `hit`, `body_for` making its body: written in chunks,
  // each committed before its POSTs start. `size` is the event's size, for the outbox's bound
  // in bytes; `uri` names it in logs.
  void add(const std::vector<const WebhookRegistration*>& hit, std::int64_t now_ms,
           std::size_t size, std::string_view uri,
           const std::function<std::string(const WebhookRegistration&)>& body_for);
  // Drops the events of a registration that is gone (counted as dropped).
  void drop_registration(const std::string& id);
  // Starts the POSTs that are due, within max_in_flight.
  void pump();
  // Writes what is batched; no delivery starts after it.
  void close();
  bool closed() const { return closed_; }

  std::size_t size() const { return items_.size(); }
  std::size_t bytes() const { return outbox_bytes_; }
  std::size_t in_flight() const { return in_flight_; }
  // Events waiting for `registration`.
  std::size_t waiting_for(const std::string& registration) const;
  // The creation time of the oldest event waiting; 0 when none is.
  std::int64_t oldest_ms() const;

 private:
  struct Item : WebhookEvent {
    unsigned attempts = 0;
    bool in_flight = false;
    Scheduler::TimerId timer = 0;
  };

  void queue(Item item);
  void attempt(Item& item);
  void on_outcome(std::int64_t seq, std::uint64_t generation, const WebhookOutcome& outcome);
  // Delivered (no reason) or dead-lettered (why).
  void finish_item(std::int64_t seq, const std::string& dead_reason = {});
  void erase_item(std::int64_t seq);
  void set_status(WebhookRegistration& r, std::string status);
  void schedule_flush();
  void flush();
  void flush_statuses();
  std::chrono::milliseconds backoff(unsigned attempts);

  const WebhookOptions& options_;
  Scheduler& scheduler_;
  WebhookSender& sender_;
  WebhookStore& store_;
  std::map<std::string, WebhookRegistration>& registrations_;
  Gone on_gone_;
  std::map<std::int64_t, Item> items_;  // by sequence
  std::deque<std::int64_t> ready_;      // due now, in order
  std::size_t outbox_bytes_ = 0;        // bodies in items_
  std::size_t in_flight_ = 0;
  std::uint64_t generation_ = 1;    // outcomes of an earlier close() are ignored
  std::vector<std::int64_t> done_;  // delivered or dropped: to delete
  std::vector<std::pair<std::int64_t, std::string>> dead_;  // to move to dead_letters
  Scheduler::TimerId flush_timer_ = 0;
  Scheduler::TimerId status_timer_ = 0;
  std::size_t statuses_dirty_ = 0;
  bool closed_ = false;
  std::uint64_t rng_ = 0;  // xorshift state of the retry jitter and of fallback event ids
};

}  // namespace mcpmqtt::bridge

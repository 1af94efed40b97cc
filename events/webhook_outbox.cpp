#include "events/webhook_outbox.hpp"

#include <algorithm>
#include <cstring>

#include "bridge/modern/request_state.hpp"
#include "common/hex.hpp"
#include "common/log.hpp"
#include "common/metrics.hpp"
#include "events/webhook_signing.hpp"

namespace mcpmqtt::bridge {

namespace {

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

}  // namespace

WebhookOutbox::WebhookOutbox(const WebhookOptions& options, Scheduler& scheduler,
                             WebhookSender& sender, WebhookStore& store,
                             std::map<std::string, WebhookRegistration>& registrations,
                             Gone on_gone)
    : options_(options),
      scheduler_(scheduler),
      sender_(sender),
      store_(store),
      registrations_(registrations),
      on_gone_(std::move(on_gone)) {
  if (auto seed = random_bytes(8)) std::memcpy(&rng_, seed->data(), 8);
  rng_ |= 1;
}

void WebhookOutbox::load(std::vector<WebhookEvent> rows) {
  for (auto& row : rows) {
    if (!registrations_.count(row.registration)) {
      done_.push_back(row.seq);
      continue;
    }
    Item item;
    static_cast<WebhookEvent&>(item) = std::move(row);
    queue(std::move(item));
  }
  if (!done_.empty()) schedule_flush();
}

void WebhookOutbox::queue(Item item) {
  ready_.push_back(item.seq);
  outbox_bytes_ += item.body.size();
  const auto seq = item.seq;
  items_.emplace(seq, std::move(item));
}

void WebhookOutbox::add(const std::vector<const WebhookRegistration*>& hit, std::int64_t now_ms,
                        std::size_t size, std::string_view uri,
                        const std::function<std::string(const WebhookRegistration&)>& body_for) {
  const auto event_bytes = random_bytes(16);
  const std::string msg_prefix =
      "msg_" +
      (event_bytes ? hex_encode(*event_bytes)
                   : std::to_string(now_ms) + "_" + std::to_string(rng_)) +
      "_";
  std::size_t n_in_event = 0;
  // Committed in chunks, each before its POSTs start (an event accepted here survives the
  // process): the first deliveries leave while the rest are written, on the delivery threads.
  constexpr std::size_t kChunk = 64;
  std::size_t in_chunk = 0;
  store_.begin();
  for (const auto* r : hit) {
    if (in_chunk == kChunk) {
      store_.commit();
      pump();
      store_.begin();
      in_chunk = 0;
    }
    // Bounded in events and in bytes: past either, the event is dead-lettered at once.
    if (items_.size() >= options_.max_outbox ||
        outbox_bytes_ + size + 256 > options_.max_outbox_bytes) {
      meters().dead_letter.inc();
      meters().dead_letters.inc();
      log::bridge()->warn(
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
    item.created_ms = now_ms;
    item.body = body_for(*r);
    auto seq = store_.insert_event(item.msg_id, item.registration, item.body, now_ms);
    if (!seq) {
      log::bridge()->error("[webhooks] SQLite cannot write the outbox: {}", seq.error());
      continue;
    }
    item.seq = *seq;
    ++in_chunk;
    queue(std::move(item));
  }
  store_.commit();
  pump();
}

void WebhookOutbox::drop_registration(const std::string& id) {
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
}

std::size_t WebhookOutbox::waiting_for(const std::string& registration) const {
  std::size_t waiting = 0;
  for (const auto& [seq, item] : items_)
    waiting += item.registration == registration;
  return waiting;
}

std::int64_t WebhookOutbox::oldest_ms() const {
  if (items_.empty()) return 0;
  std::int64_t oldest = items_.begin()->second.created_ms;
  for (const auto& [seq, it] : items_)
    oldest = std::min(oldest, it.created_ms);
  return oldest;
}

std::chrono::milliseconds WebhookOutbox::backoff(unsigned attempts) {
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

void WebhookOutbox::pump() {
  while (!closed_ && in_flight_ < options_.max_in_flight && !ready_.empty()) {
    const auto seq = ready_.front();
    ready_.pop_front();
    auto it = items_.find(seq);
    if (it == items_.end() || it->second.in_flight) continue;
    attempt(it->second);
  }
}

void WebhookOutbox::attempt(Item& item) {
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
  d.signature = sign_webhook(r->second.key, d.id, d.timestamp, item.body);
  d.body = item.body;
  sender_.post(std::move(d), [this, seq = item.seq, gen = generation_](WebhookOutcome o) {
    on_outcome(seq, gen, o);
  });
}

void WebhookOutbox::set_status(WebhookRegistration& r, std::string status) {
  r.last_status = std::move(status);
  r.last_ms = wall_ms();
  if (!r.status_dirty) ++statuses_dirty_;
  r.status_dirty = true;
}

void WebhookOutbox::on_outcome(std::int64_t seq, std::uint64_t generation,
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
    log::bridge()->info("[webhooks] {} answered 410 Gone: {}{} is deregistered",
                        r != registrations_.end() ? r->second.shown_target() : std::string("?"),
                        kSubscriptionScheme, item.registration);
    meters().gone.inc();
    const std::string id = item.registration;
    outbox_bytes_ -= item.body.size();
    items_.erase(it);
    done_.push_back(seq);
    schedule_flush();
    on_gone_(id);
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
      log::bridge()->warn("[webhooks] {} for {}{} dead-lettered after {} attempts: {}", item.msg_id,
                          kSubscriptionScheme, item.registration, item.attempts, why);
      finish_item(seq, why);
    } else {
      if (r != registrations_.end()) set_status(r->second, "failed (" + why + "), retrying");
      log::bridge()->debug("[webhooks] {} to {}: {}; retry {} in {} ms", item.msg_id,
                           r != registrations_.end() ? r->second.shown_target() : std::string("?"),
                           why, item.attempts, delay.count());
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

void WebhookOutbox::finish_item(std::int64_t seq, const std::string& dead_reason) {
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

void WebhookOutbox::erase_item(std::int64_t seq) {
  auto it = items_.find(seq);
  if (it == items_.end()) return;
  outbox_bytes_ -= it->second.body.size();
  items_.erase(it);
}

void WebhookOutbox::schedule_flush() {
  if (flush_timer_ || closed_) return;
  flush_timer_ = scheduler_.schedule(options_.flush_interval, [this] {
    flush_timer_ = 0;
    flush();
  });
}

void WebhookOutbox::flush() {
  if (!done_.empty() || !dead_.empty()) {
    store_.remove_events(done_, dead_, wall_ms());
    for (const auto& [seq, reason] : dead_)
      erase_item(seq);
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

void WebhookOutbox::flush_statuses() {
  if (!statuses_dirty_) return;
  std::vector<const WebhookRegistration*> dirty;
  for (auto& [id, r] : registrations_) {
    if (!r.status_dirty) continue;
    r.status_dirty = false;
    dirty.push_back(&r);
  }
  store_.save_statuses(dirty);
  statuses_dirty_ = 0;
}

void WebhookOutbox::close() {
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

#include "bridge/relay/request_meters.hpp"

#include <map>
#include <memory>
#include <mutex>

namespace mcpmqtt::bridge {

const char* to_string(RequestMeters::Outcome outcome) {
  switch (outcome) {
    case RequestMeters::Outcome::result:
      return "result";
    case RequestMeters::Outcome::error:
      return "error";
    case RequestMeters::Outcome::timeout:
      return "timeout";
    case RequestMeters::Outcome::cancelled:
      return "cancelled";
    case RequestMeters::Outcome::closed:
      return "closed";
    case RequestMeters::Outcome::refused:
      return "refused";
    case RequestMeters::Outcome::interrupted:
      return "interrupted";
  }
  return "?";
}

RequestMeters& RequestMeters::of(const std::string& direction) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<RequestMeters>, std::less<>> all;
  std::lock_guard lock(mu);
  auto& slot = all[direction];
  if (!slot) slot = std::make_unique<RequestMeters>(direction);
  return *slot;
}

void RequestMeters::count(Origin origin, std::string_view method, Outcome outcome) {
  const std::size_t m = metrics::method_index(method);
  auto& slot =
      counters_[(static_cast<std::size_t>(origin) * metrics::kMethodLabels + m) * kOutcomes +
                static_cast<std::size_t>(outcome)];
  metrics::Counter* c = slot.load(std::memory_order_acquire);
  if (!c) {
    // First use of this series: the registry's lookup, once (a race makes it twice, harmlessly:
    // the registry returns the same series).
    c = &metrics::registry().counter(
        "mcpmqtt_requests_total",
        "JSON-RPC requests relayed, by direction, origin (the side that sent it), method and "
        "outcome (result, error, timeout, cancelled, closed, refused, interrupted).",
        {"direction", "origin", "method", "outcome"},
        {direction_, origin == Origin::client ? "client" : "server",
         std::string(metrics::method_label_at(m)), to_string(outcome)});
    slot.store(c, std::memory_order_release);
  }
  c->inc();
}

void RequestMeters::observe(std::string_view method, double seconds) {
  const std::size_t m = metrics::method_index(method);
  metrics::Histogram* h = histograms_[m].load(std::memory_order_acquire);
  if (!h) {
    h = &metrics::registry().histogram(
        "mcpmqtt_request_duration_seconds",
        "Time from a client's request to the server's response through the bridge, by "
        "direction and method.",
        {"direction", "method"}, {direction_, std::string(metrics::method_label_at(m))});
    histograms_[m].store(h, std::memory_order_release);
  }
  h->observe(seconds);
}

}  // namespace mcpmqtt::bridge

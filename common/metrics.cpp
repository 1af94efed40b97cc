#include "common/metrics.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace mcpmqtt::metrics {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      buckets_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1)) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::observe(double seconds) {
  if (!(seconds >= 0)) seconds = 0;  // also NaN
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), seconds);
  buckets_[static_cast<std::size_t>(it - bounds_.begin())].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_us_.fetch_add(static_cast<std::uint64_t>(std::llround(seconds * 1e6)),
                    std::memory_order_relaxed);
}

std::vector<std::uint64_t> Histogram::bucket_counts() const {
  std::vector<std::uint64_t> out(bounds_.size() + 1);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = buckets_[i].load(std::memory_order_relaxed);
  return out;
}

const std::vector<double>& latency_buckets() {
  static const std::vector<double> b{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                     0.5,   1,      2.5,   5,    10,    30,   60};
  return b;
}

Registry::Family& Registry::family(const std::string& name, Type type, const std::string& help,
                                   const std::vector<std::string>& label_names,
                                   const Labels& values) {
  // Programming errors, not input: every call site passes literals.
  if (values.size() != label_names.size())
    throw std::logic_error("metric " + name + ": label values do not match label names");
  auto [it, inserted] = families_.try_emplace(name);
  Family& f = it->second;
  if (inserted) {
    f.type = type;
    f.help = help;
    f.label_names = label_names;
  } else if (f.type != type || f.label_names != label_names) {
    throw std::logic_error("metric " + name + " declared twice with different shapes");
  }
  return f;
}

Counter& Registry::counter(const std::string& name, const std::string& help,
                           const std::vector<std::string>& label_names, const Labels& values) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, Type::counter, help, label_names, values).counters[values];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& Registry::gauge(const std::string& name, const std::string& help,
                       const std::vector<std::string>& label_names, const Labels& values) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, Type::gauge, help, label_names, values).gauges[values];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& Registry::histogram(const std::string& name, const std::string& help,
                               const std::vector<std::string>& label_names, const Labels& values,
                               const std::vector<double>& bounds) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, Type::histogram, help, label_names, values).histograms[values];
  if (!slot) slot = std::make_unique<Histogram>(bounds);
  return *slot;
}

std::shared_ptr<Registry::CallbackHandle> Registry::gauge_callback(
    const std::string& name, const std::string& help, std::function<double()> read,
    const std::vector<std::string>& label_names, const Labels& values) {
  std::lock_guard lock(mu_);
  const auto token = next_token_++;
  family(name, Type::gauge, help, label_names, values).callbacks[values] = {token, std::move(read)};
  return std::make_shared<CallbackHandle>(*this, name, values, token);
}

void Registry::remove_callback(const std::string& name, const Labels& values, std::uint64_t token) {
  std::lock_guard lock(mu_);
  auto f = families_.find(name);
  if (f == families_.end()) return;
  auto it = f->second.callbacks.find(values);
  // Replaced by a newer registration: that one stays.
  if (it != f->second.callbacks.end() && it->second.first == token) f->second.callbacks.erase(it);
}

namespace {

std::string format_double(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  // Shortest form that reads back the same.
  for (int p = 1; p <= 17; ++p) {
    char shorter[32];
    std::snprintf(shorter, sizeof shorter, "%.*g", p, v);
    if (std::strtod(shorter, nullptr) == v) return shorter;
  }
  return buf;
}

std::string escape_help(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

// {a="x",b="y"} plus an optional extra pair (le for buckets); empty when there are none.
std::string label_set(const std::vector<std::string>& names, const Labels& values,
                      const std::string& extra_name = {}, const std::string& extra_value = {}) {
  if (names.empty() && extra_name.empty()) return {};
  std::string out = "{";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) out += ',';
    out += names[i] + "=\"" + escape_label_value(values[i]) + '"';
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out += ',';
    out += extra_name + "=\"" + extra_value + '"';
  }
  return out + "}";
}

}  // namespace

std::string Registry::text() const {
  std::lock_guard lock(mu_);
  std::string out;
  out.reserve(4096);
  for (const auto& [name, f] : families_) {
    const bool empty =
        f.counters.empty() && f.gauges.empty() && f.histograms.empty() && f.callbacks.empty();
    if (empty) continue;
    out += "# HELP " + name + " " + escape_help(f.help) + "\n# TYPE " + name + " ";
    out += f.type == Type::counter ? "counter\n"
           : f.type == Type::gauge ? "gauge\n"
                                   : "histogram\n";
    for (const auto& [values, c] : f.counters)
      out += name + label_set(f.label_names, values) + " " + std::to_string(c->value()) + "\n";
    // Gauges held as values and gauges read by callback share one family, sorted together.
    std::map<Labels, double> gauges;
    for (const auto& [values, g] : f.gauges)
      gauges[values] = static_cast<double>(g->value());
    for (const auto& [values, cb] : f.callbacks)
      gauges[values] = cb.second();
    for (const auto& [values, v] : gauges)
      out += name + label_set(f.label_names, values) + " " + format_double(v) + "\n";
    for (const auto& [values, h] : f.histograms) {
      const auto counts = h->bucket_counts();
      std::uint64_t cumulative = 0;
      for (std::size_t i = 0; i < counts.size(); ++i) {
        cumulative += counts[i];
        const auto le = i < h->bounds().size() ? format_double(h->bounds()[i]) : "+Inf";
        out += name + "_bucket" + label_set(f.label_names, values, "le", le) + " " +
               std::to_string(cumulative) + "\n";
      }
      // _count equals the +Inf bucket by construction: both read from the same snapshot.
      out += name + "_sum" + label_set(f.label_names, values) + " " +
             format_double(h->sum_seconds()) + "\n";
      out += name + "_count" + label_set(f.label_names, values) + " " + std::to_string(cumulative) +
             "\n";
    }
  }
  return out;
}

Registry& registry() {
  static Registry r;
  return r;
}

namespace {

constexpr std::array<std::string_view, kMethodLabels> kMethodNames{"initialize",
                                                                   "ping",
                                                                   "tools/list",
                                                                   "tools/call",
                                                                   "resources/list",
                                                                   "resources/read",
                                                                   "resources/templates/list",
                                                                   "resources/subscribe",
                                                                   "resources/unsubscribe",
                                                                   "prompts/list",
                                                                   "prompts/get",
                                                                   "completion/complete",
                                                                   "logging/setLevel",
                                                                   "sampling/createMessage",
                                                                   "elicitation/create",
                                                                   "roots/list",
                                                                   "subscriptions/listen",
                                                                   "tasks/get",
                                                                   "tasks/result",
                                                                   "tasks/list",
                                                                   "tasks/cancel",
                                                                   "notifications/cancelled",
                                                                   "notifications/initialized",
                                                                   "notifications/progress",
                                                                   "other"};

}  // namespace

std::size_t method_index(std::string_view method) {
  for (std::size_t i = 0; i + 1 < kMethodNames.size(); ++i)
    if (kMethodNames[i] == method) return i;
  return kMethodLabels - 1;
}

std::string_view method_label_at(std::size_t index) {
  return index < kMethodLabels ? kMethodNames[index] : kMethodNames.back();
}

std::string_view method_label(std::string_view method) {
  return kMethodNames[method_index(method)];
}

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

Counter& bytes_counter(std::string_view transport, std::string_view direction) {
  return registry().counter("mcpmqtt_bytes_total",
                            "Bytes of MCP traffic carried by the bridge, by transport and "
                            "direction (in: received by the bridge, out: sent by it).",
                            {"transport", "direction"},
                            {std::string(transport), std::string(direction)});
}

}  // namespace mcpmqtt::metrics

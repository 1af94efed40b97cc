// Process-wide metrics in the Prometheus text exposition format (version 0.0.4), for GET /metrics.
//
// A Registry holds metric families (counter, gauge, histogram), each with a fixed list of label
// names; a series is found (or made) by its label values once, and the reference it returns stays
// valid for the registry's life, so hot paths keep the reference and pay one relaxed atomic add.
// Gauges may also be read from a callback at scrape time (children alive, open connections).
//
// Label values must come from bounded sets (directions, known method names, outcomes): the
// registry never drops series, so callers map unbounded input to a bounded value first (see
// method_label()).
//
// Thread-safe: series lookup and registration under a mutex, values are atomics.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace mcpmqtt::metrics {

class Counter {
 public:
  void inc(std::uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
};

class Gauge {
 public:
  void inc(std::int64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  void dec(std::int64_t n = 1) { v_.fetch_sub(n, std::memory_order_relaxed); }
  void set(std::int64_t v) { v_.store(v, std::memory_order_relaxed); }
  std::int64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> v_{0};
};

// Cumulative buckets with fixed upper bounds (seconds, for latencies); the sum is kept in
// microseconds so it can be an integer atomic.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double seconds);
  const std::vector<double>& bounds() const { return bounds_; }
  // Per-bucket counts (not cumulative), one more than bounds: the last is +Inf.
  std::vector<std::uint64_t> bucket_counts() const;
  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum_seconds() const { return sum_us_.load(std::memory_order_relaxed) / 1e6; }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_us_{0};
};

// Bounds for request latencies: 1 ms … 60 s.
const std::vector<double>& latency_buckets();

using Labels = std::vector<std::string>;  // values, in the family's label-name order

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Finds or makes the series; the family is declared by its first use (later uses must give
  // the same type and label names). Names follow [a-zA-Z_:][a-zA-Z0-9_:]*.
  Counter& counter(const std::string& name, const std::string& help,
                   const std::vector<std::string>& label_names = {}, const Labels& values = {});
  Gauge& gauge(const std::string& name, const std::string& help,
               const std::vector<std::string>& label_names = {}, const Labels& values = {});
  Histogram& histogram(const std::string& name, const std::string& help,
                       const std::vector<std::string>& label_names, const Labels& values,
                       const std::vector<double>& bounds = latency_buckets());
  // A gauge series read at scrape time. Registering the same series again replaces the
  // callback (a reloaded part re-registers); the returned handle removes it when destroyed.
  class CallbackHandle;
  [[nodiscard]] std::shared_ptr<CallbackHandle> gauge_callback(
      const std::string& name, const std::string& help, std::function<double()> read,
      const std::vector<std::string>& label_names = {}, const Labels& values = {});

  // Every family, sorted by name; series sorted by label values.
  std::string text() const;

 private:
  enum class Type { counter, gauge, histogram };
  struct Family {
    Type type = Type::counter;
    std::string help;
    std::vector<std::string> label_names;
    std::map<Labels, std::unique_ptr<Counter>> counters;
    std::map<Labels, std::unique_ptr<Gauge>> gauges;
    std::map<Labels, std::unique_ptr<Histogram>> histograms;
    std::map<Labels, std::pair<std::uint64_t, std::function<double()>>> callbacks;
  };
  Family& family(const std::string& name, Type type, const std::string& help,
                 const std::vector<std::string>& label_names, const Labels& values);
  void remove_callback(const std::string& name, const Labels& values, std::uint64_t token);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
  std::uint64_t next_token_ = 1;
};

class Registry::CallbackHandle {
 public:
  CallbackHandle(Registry& r, std::string name, Labels values, std::uint64_t token)
      : r_(r), name_(std::move(name)), values_(std::move(values)), token_(token) {}
  ~CallbackHandle() { r_.remove_callback(name_, values_, token_); }
  CallbackHandle(const CallbackHandle&) = delete;
  CallbackHandle& operator=(const CallbackHandle&) = delete;

 private:
  Registry& r_;
  std::string name_;
  Labels values_;
  std::uint64_t token_;
};

// The daemon's registry, behind GET /metrics.
Registry& registry();

// A JSON-RPC method name as a label value: the MCP methods as they are, anything else "other",
// so a client cannot grow the registry without bound.
std::string_view method_label(std::string_view method);
// The same as an index, for tables of series resolved once: 0 to kMethodLabels - 1, the last
// being "other"; method_label_at() gives the label back.
inline constexpr std::size_t kMethodLabels = 25;
std::size_t method_index(std::string_view method);
std::string_view method_label_at(std::size_t index);

// Escapes a label value for the text format (backslash, double quote, newline).
std::string escape_label_value(std::string_view v);

// Bytes carried, by transport ("mqtt", "http", "stdio") and direction ("in" = received by the
// bridge, "out" = sent by it): mcpmqtt_bytes_total.
Counter& bytes_counter(std::string_view transport, std::string_view direction);

}  // namespace mcpmqtt::metrics

// The series a splice counts its requests in (mcpmqtt_requests_total and
// mcpmqtt_request_duration_seconds), for one direction label: each origin, method and outcome
// is resolved in the registry once, on first use, and counted lock-free after that.
//
// Thread-safe: one instance per direction lives for the process, shared by every splice.
#pragma once

#include <array>
#include <atomic>
#include <string>
#include <string_view>

#include "common/metrics.hpp"

namespace mcpmqtt::bridge {

class RequestMeters {
 public:
  enum class Origin { client, server };
  enum class Outcome { result, error, timeout, cancelled, closed, refused, interrupted };

  // The meters of a direction ("http_ingress", "stdio_egress", …).
  static RequestMeters& of(const std::string& direction);

  void count(Origin origin, std::string_view method, Outcome outcome);
  // A client's request answered after `seconds`.
  void observe(std::string_view method, double seconds);

  explicit RequestMeters(std::string direction) : direction_(std::move(direction)) {}
  RequestMeters(const RequestMeters&) = delete;
  RequestMeters& operator=(const RequestMeters&) = delete;

 private:
  static constexpr std::size_t kOrigins = 2, kOutcomes = 7;
  std::string direction_;
  std::array<std::atomic<metrics::Counter*>, kOrigins * metrics::kMethodLabels * kOutcomes>
      counters_{};
  std::array<std::atomic<metrics::Histogram*>, metrics::kMethodLabels> histograms_{};
};

const char* to_string(RequestMeters::Outcome outcome);

}  // namespace mcpmqtt::bridge

// The records ModernGateway keeps (a request, a run, an MQTT session) and the helpers its files
// share; included by gateway*.cpp only.
// One strand; not thread-safe (the gateway's).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bridge/jsonrpc/json_access.hpp"
#include "bridge/modern/gateway.hpp"
#include "common/log.hpp"
#include "common/metrics.hpp"

namespace mcpmqtt::bridge {

// A downstream request, from handle() to its final answer.
struct ModernGateway::Pending {
  Pending(Call c, Responder r) : call(std::move(c)), responder(std::move(r)) {}
  CallId id = 0;
  Call call;
  Responder responder;
  modern::Envelope envelope;
  std::string key;  // the pool key
  enum class Kind { run, discover, listen } kind = Kind::run;
  enum class Where { admitted, waiting, opening, running, listening } where = Where::admitted;
  std::uint64_t session = 0;
  std::uint64_t run = 0;
  Scheduler::TimerId wait_timer = 0;
};

// One upstream request and the downstream requests (the first, then its retries) it answers.
struct ModernGateway::Run {
  std::uint64_t id = 0;
  RunState state = RunState::running;
  std::uint64_t session = 0;  // 0 once the session is released or gone
  CallId call = 0;            // the downstream request answered next; 0 unless running
  std::string method;
  std::string key;
  std::string server_name;
  std::string principal;
  std::string params_digest;                 // computed when a round first needs it
  std::optional<jsonrpc::Message> original;  // the first request, for that digest
  std::string server_info_json;
  std::string uri;  // resources/read: for -32002 → -32602 data.uri
  jsonrpc::Id upstream_id;
  std::optional<jsonrpc::Id> upstream_token;  // the progressToken sent upstream
  std::optional<jsonrpc::Id> progress_token;  // the current downstream request's
  std::optional<int> log_rank;                // the current downstream request's logLevel
  bool allows_input = false;
  std::vector<InputRequest> gathering;  // this round, not yet asked
  std::vector<InputRequest> asked;      // the round the client was asked (parked)
  std::vector<InputRequest> late;       // arrived while parked: asked in the next round
  std::optional<std::size_t> round_size;
  Scheduler::TimerId round_timer = 0;
  Scheduler::TimerId park_timer = 0;
  std::uint32_t round = 0;
  std::string nonce;
  std::optional<jsonrpc::Message> outcome;   // settled: the answer kept for the retry
  std::map<std::string, unsigned> counters;  // invented keys per kind
};

// One MQTT session the gateway holds (pooled, or a listen's).
struct ModernGateway::Session {
  std::uint64_t serial = 0;
  std::string key;
  std::string server_name;
  std::string caps_json;
  std::string client_info_json;
  std::shared_ptr<LocalChannel> channel;
  enum class State { opening, idle, busy, listening } state = State::opening;
  DiscoverInfo info;
  std::optional<std::string> log_level;  // as set with logging/setLevel
  std::int64_t next_id = 1;
  std::vector<jsonrpc::Id> own;  // the gateway's own requests (logging/setLevel)
  std::uint64_t run = 0;
  CallId reserved = 0;  // the request an opening session is for
  CallId listen_call = 0;
  std::optional<jsonrpc::Id> listen_id;
  bool listen_acked = false;
  Scheduler::TimerId idle_timer = 0;
};

namespace gateway_detail {

using jsonrpc::member;
using rapidjson::Value;

// The id of the initialize the gateway sends on each session.
const jsonrpc::Id& init_id();

inline std::int64_t to_ms(Scheduler::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// A close that means the server cannot be reached (rather than the gateway's own choice).
bool unavailable(CloseReason::Kind k);

metrics::Counter& requests_counter(const std::string& direction, const std::string& method,
                                   const char* outcome);

}  // namespace gateway_detail

}  // namespace mcpmqtt::bridge

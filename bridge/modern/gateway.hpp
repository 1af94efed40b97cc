// The modern gateway: MCP 2026-07-28 clients (no sessions, a `_meta` envelope on every request)
// served by MQTT-hosted servers, whose transport stays session-based (004: initialize on the
// control topic, per-client RPC topics, server→client requests). No I/O: the transports hand it
// admitted-or-not requests with a Responder, and it opens MQTT sessions through an Opener that
// gives it a bridge::LocalChannel to play the 2025 client on (the daemon joins that channel to
// an MQTT client session with directions::Ingress::attach, so presence wait, instance pick and
// the splice's timeouts apply as for any ingress session).
//
// What it does (sources: /work/notes digest of revision 2026-07-28, cited per rule):
// - admission: modern::admit (envelope -32602, header mismatch -32020, version -32022, missing
//   headers -32020, removed methods 404/-32601), the request's id echoed in every error;
// - the pool: a request runs on an MQTT session checked out for it alone, keyed by (server-name,
//   principal, canonical JSON of the declared clientCapabilities) and initialized with exactly
//   those capabilities (basic/index §Statelessness: capabilities are never inferred from other
//   requests); bounded per key and in all, with a bounded FIFO of requests waiting for one;
//   idle sessions close after `idle_timeout`; when the pool is full an idle session of another
//   key, or else the oldest parked one, makes room;
// - `server/discover`: answered from the MQTT server's initialize result (cached per
//   server-name until a session of it ends because the server went away), supportedVersions =
//   modern::supported_versions(), capabilities without `tasks`, instructions, serverInfo in
//   `_meta`, ttlMs/cacheScope (schema DiscoverResult);
// - results: resultType, cache fields and serverInfo added (modern::complete_result); -32002 →
//   -32602 (with data.uri); -32601 → HTTP 404; -32021 → 400; other errors in-band;
// - progress (its token restored to the current request's) and `notifications/message` at or
//   above the request's logLevel, none without one (basic/utilities/logging), go to the request's
//   own stream; list-changed and resource updates never do;
// - MRTR (basic/patterns/mrtr): server→client requests (elicitation/create,
//   sampling/createMessage, roots/list) arriving while a tools/call, prompts/get or
//   resources/read runs are gathered into one round — its size from the bridge's
//   `mcp-mqtt-bridge/inputRound` _meta key when the egress set it, else a quiet window after the
//   last one — and answered downstream as `input_required` with `inputRequests` (keys from
//   `mcp-mqtt-bridge/inputKey`, else invented) and a `requestState` minted by a
//   RequestStateCodec; the session is parked, the upstream request still pending. The retry
//   (a new request id) with `inputResponses` and that state resumes it: the state must verify
//   (MAC, expiry, principal, server-name and capabilities, method, digest of the params) or the
//   retry gets -32602 "Invalid or expired requestState"; present answers go to the server,
//   missing ones are asked again in a new round, extra ones are ignored, malformed ones get
//   -32602. A parked run whose retry does not come within `input_timeout` is cancelled upstream;
//   a run whose upstream request ends while parked keeps that answer for the retry;
// - `subscriptions/listen` (final form, 000 and schema SubscriptionsListenRequest): a dedicated
//   MQTT session per listen, initialized with the request's capabilities, on which the ingress's
//   SubscriptionHub answers the listen: the acknowledgement first with the honoured subset, every
//   notification tagged with the listen's id as its JSON value; an empty honoured set ends at
//   once; the session's end (server gone, shutdown) is the graceful listen result
//   `{"resultType":"complete","_meta":{subscriptionId, serverInfo}}`; cancel() (stream closed,
//   notifications/cancelled on stdio) ends it without one.
// A session whose request was cancelled (client gone, timeout, parked too long) is closed, not
// reused: a 2025 server may still send messages of the cancelled request.
//
// One strand; not thread-safe: every call, every Responder call and every channel runs on it.
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
#include "bridge/modern/protocol.hpp"
#include "bridge/modern/request_state.hpp"
#include "bridge/relay/channel.hpp"
#include "bridge/relay/local_channel.hpp"
#include "bridge/relay/scheduler.hpp"
#include "common/log.hpp"

namespace mcpmqtt::bridge {

class ModernGateway : public std::enable_shared_from_this<ModernGateway> {
 public:
  struct Options {
    std::size_t max_sessions = 256;             // MQTT sessions held for modern requests, in all
    std::size_t max_sessions_per_key = 16;      // per (server-name, principal, capabilities)
    std::size_t max_listens = 64;               // open subscriptions/listen (each its own session)
    std::size_t max_waiting = 256;              // requests waiting for a session
    std::size_t max_waiting_bytes = 32u << 20;  // ... and their bytes (JSON of the requests)
    std::chrono::milliseconds queue_timeout{10000};   // how long one waits
    std::chrono::milliseconds idle_timeout{60000};    // an idle session closes after this
    std::chrono::milliseconds input_timeout{300000};  // requestState lifetime; parked runs end
    std::chrono::milliseconds round_quiet{20};        // a round closes this long after its last
    std::string state_secret;  // HMAC key of requestState (≥ 32 bytes); never logged
    // clientInfo of sessions whose request has none (basic/index §_meta: clientInfo optional).
    std::string client_info_json = R"({"name":"mcp-mqtt-bridge","version":"0"})";
    // The 2025 revision the gateway offers in initialize.
    std::string legacy_version = "2025-11-25";
    std::string metrics_direction;  // "http_ingress" or "stdio_ingress"; empty: not counted
    std::string log_prefix = "[modern]";
  };

  // Where a modern request's answer goes.
  struct Responder {
    // A notification related to the request (progress, log, a listen's notifications): on HTTP
    // the first one turns the response into an SSE stream (streamable-http §Sending Messages).
    std::function<void(const jsonrpc::Message&)> notify;
    // The final message (result or error) with its HTTP status; nothing follows it.
    std::function<void(const jsonrpc::Message&, unsigned status)> finish;
  };

  struct Call {
    std::string server_name;
    std::string principal;     // a digest of the bearer token, "stdio"; never a secret
    std::uint64_t origin = 0;  // the connection, for cancel_request() (stdio)
    jsonrpc::Message message;  // a request that claims_modern
    std::optional<modern::Headers> headers;  // HTTP; nullopt on stdio
    // HTTP: the Mcp-Param-{Name} headers, {Name} in lowercase → value (SEP-2243).
    std::vector<std::pair<std::string, std::string>> param_headers;
  };
  using CallId = std::uint64_t;

  // Opens an MQTT session to an instance of `server_name` with `downstream` as its client side,
  // on behalf of `principal` (the sessions are keyed by it: the bridge's own services, such as
  // webhooks, answer for that principal); the channel tells the gateway the outcome (an error to
  // its initialize, a close).
  using Opener = std::function<void(const std::string& server_name, const std::string& principal,
                                    std::shared_ptr<Channel> downstream)>;

  struct Stats {
    std::size_t opening = 0, idle = 0, busy = 0, parked = 0, listening = 0, waiting = 0;
  };

  static std::shared_ptr<ModernGateway> create(Options options, Scheduler& scheduler,
                                               Opener opener);
  ~ModernGateway();
  ModernGateway(const ModernGateway&) = delete;
  ModernGateway& operator=(const ModernGateway&) = delete;

  // Admits and runs one modern request; its answer goes to `responder`. The id is for cancel().
  CallId handle(Call call, Responder responder);
  // The client gave up on a request (its HTTP stream closed): cancelled upstream, nothing more
  // is sent to its responder.
  void cancel(CallId id);
  // notifications/cancelled {requestId} from the client of connection `origin` (stdio).
  void cancel_request(std::uint64_t origin, const jsonrpc::Id& request_id);
  // Ends every request (pending ones get an error, listens their graceful result) and session;
  // later calls are refused with 503.
  void close_all(const CloseReason& why);

  Stats stats() const;
  std::size_t session_count() const { return sessions_.size(); }

 private:
  struct Pending;
  struct Run;
  struct Session;
  struct InputRequest {
    std::string key;
    jsonrpc::Id server_id;
    std::string method;
    std::string params_json;  // without the bridge's _meta keys; empty: none
  };
  struct DiscoverInfo {
    std::string capabilities_json = "{}";
    std::string instructions_json;  // a JSON string, or empty
    std::string server_info_json;
  };

  ModernGateway(Options options, Scheduler& scheduler, Opener opener);

  void finish(Pending& p, const jsonrpc::Message& m, unsigned status, const char* outcome);
  void refuse(Pending& p, const jsonrpc::Error& e, unsigned status,
              const char* outcome = "refused");
  void forget(CallId id);

  // The pool.
  bool acquire(CallId id);
  void enqueue(CallId id);
  void pump_waiting();
  Session* find_idle(const std::string& key);
  std::size_t count_key(const std::string& key) const;
  void unindex(const Session& s);
  std::size_t pooled_count() const;
  bool evict_idle_other_than(const std::string& key);
  bool evict_oldest_parked(const std::string* key);
  void open_session(Pending& p);
  void start_on(Session& s, Pending& p);
  void release(Session& s);
  void make_idle(Session& s);
  void drop_session(std::uint64_t serial, const CloseReason& why);
  void deliver(Session& s, jsonrpc::Message m);
  static std::int64_t s_next_id(Session& s);

  // Messages from sessions.
  void on_upstream(std::uint64_t serial, jsonrpc::Message m);
  void on_session_closed(std::uint64_t serial, const CloseReason& why);
  void on_initialized(Session& s, const jsonrpc::Message& m);
  void on_server_request(Session& s, const jsonrpc::Message& m);
  void on_server_notification(Session& s, const jsonrpc::Message& m);
  void on_listen_message(Session& s, const jsonrpc::Message& m);

  // Requests.
  void start_run(Session& s, Pending& p);
  void answer_discover(Session& s, Pending& p);
  void answer_discover(const DiscoverInfo& info, Pending& p);
  void start_listen(Session& s, Pending& p);
  void end_listen_gracefully(Session& s);
  void on_final(Session& s, Run& run, const jsonrpc::Message& m);
  jsonrpc::Message to_downstream(const Run& run, const jsonrpc::Id& id,
                                 const jsonrpc::Message& upstream, unsigned& status) const;
  void set_log_level(Session& s, const std::optional<std::string>& level);

  // MRTR.
  void gather(Session& s, Run& run, const jsonrpc::Message& request);
  void close_round(std::uint64_t run_id);
  void ask(Run& run, Pending& p);
  void resume(CallId id, const std::string& state);
  void answer_inputs_with_error(Session* s, Run& run, const std::string& why);
  void cancel_run(std::uint64_t run_id, const std::string& why);
  void on_park_timeout(std::uint64_t run_id, std::uint32_t round);
  std::string mint_state(Run& run) const;

  Options options_;
  Scheduler& scheduler_;
  Opener opener_;
  RequestStateCodec codec_;
  std::unordered_map<CallId, std::unique_ptr<Pending>> calls_;
  std::deque<CallId> waiting_;
  std::map<std::uint64_t, std::unique_ptr<Session>> sessions_;  // by serial (opening order)
  // The pool's sessions (not listens') of each key, by serial: what counts against
  // max_sessions_per_key and where an idle one is found.
  std::unordered_map<std::string, std::set<std::uint64_t>> by_key_;
  std::unordered_map<std::uint64_t, std::unique_ptr<Run>> runs_;
  std::map<std::string, DiscoverInfo> discover_cache_;  // by server-name
  // The x-mcp-header annotations of the tools each server listed (tools/list results seen), to
  // check tools/call's Mcp-Param-{Name} headers: server-name → tool → annotated arguments.
  std::map<std::string, std::map<std::string, std::vector<modern::ParamHeader>>> param_headers_;
  void learn_param_headers(const std::string& server_name, const rapidjson::Value& result);
  std::unordered_map<std::uint64_t, std::vector<CallId>> by_origin_;
  CallId next_call_ = 1;
  std::uint64_t next_serial_ = 1;
  std::uint64_t next_run_ = 1;
  bool closed_ = false;
  log::Throttle waiting_log_;
};

}  // namespace mcpmqtt::bridge

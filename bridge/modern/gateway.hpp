// The modern gateway: serves MCP 2026-07-28 requests (no sessions, a `_meta` envelope on each)
// from MQTT-hosted servers, whose transport stays session-based (004 §Initialization). It admits
// each request, runs it on an MQTT session of a bounded pool keyed by server-name, principal and
// declared capabilities, answers server/discover, turns server→client requests into
// input_required rounds (basic/patterns/mrtr) and serves subscriptions/listen on a session of its
// own. No I/O: sessions are opened through an Opener that gets a LocalChannel to play the 2025
// client on. The rules it follows are written beside them, in gateway*.cpp.
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
#include "bridge/modern/discover_cache.hpp"
#include "bridge/modern/protocol.hpp"
#include "bridge/modern/request_state.hpp"
#include "bridge/modern/run_state.hpp"
#include "bridge/modern/server_param_headers.hpp"
#include "bridge/protocol/principal.hpp"
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
    std::string replica;       // the ingress replica's name, in each requestState it mints
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
    Principal principal;                     // pools and requestState are keyed by principal.key
    std::uint64_t origin = 0;                // the connection, for cancel_request() (stdio)
    jsonrpc::Message message;                // a request that claims_modern
    std::optional<modern::Headers> headers;  // HTTP; nullopt on stdio
    // HTTP: the Mcp-Param-{Name} headers, {Name} in lowercase → value (SEP-2243).
    std::vector<std::pair<std::string, std::string>> param_headers;
  };
  using CallId = std::uint64_t;

  // Opens an MQTT session to an instance of `server_name` with `downstream` as its client side,
  // on behalf of `principal` (the sessions are keyed by it: the bridge's own services, such as
  // webhooks, answer for that principal); the channel tells the gateway the outcome (an error to
  // its initialize, a close).
  using Opener = std::function<void(const std::string& server_name, const Principal& principal,
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
  // How a session's end came: the gateway closes it (its channel is hung up), or it ended.
  enum class SessionEnd { dropped, ended };

  ModernGateway(Options options, Scheduler& scheduler, Opener opener);

  // Requests (gateway.cpp).
  void finish(Pending& p, const jsonrpc::Message& m, unsigned status, const char* outcome);
  void refuse(Pending& p, const jsonrpc::Error& e, unsigned status,
              const char* outcome = "refused");
  void forget(CallId id);

  // The pool (gateway_pool.cpp).
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
  // The one teardown of a session, whichever end closed it: its timers, its reserved request,
  // its run (and the run's timers), its listen.
  void end_session(std::uint64_t serial, const CloseReason& why, SessionEnd how);
  void drop_session(std::uint64_t serial, const CloseReason& why) {
    end_session(serial, why, SessionEnd::dropped);
  }
  void deliver(Session& s, jsonrpc::Message m);
  static std::int64_t s_next_id(Session& s);

  // Messages from sessions (gateway_sessions.cpp).
  void on_upstream(std::uint64_t serial, jsonrpc::Message m);
  void on_session_closed(std::uint64_t serial, const CloseReason& why) {
    end_session(serial, why, SessionEnd::ended);
  }
  void on_initialized(Session& s, const jsonrpc::Message& m);
  void on_server_request(Session& s, const jsonrpc::Message& m);
  void on_server_notification(Session& s, const jsonrpc::Message& m);

  // Running a request (gateway_runs.cpp).
  void start_run(Session& s, Pending& p);
  void answer_discover(const DiscoverInfo& info, Pending& p);
  void on_final(Session& s, Run& run, const jsonrpc::Message& m);
  jsonrpc::Message to_downstream(const Run& run, const jsonrpc::Id& id,
                                 const jsonrpc::Message& upstream, unsigned& status) const;
  void set_log_level(Session& s, const std::optional<std::string>& level);
  // Moves a run by `event` (run_state.hpp); an event its state does not allow is logged and
  // ignored. False then.
  bool transition(Run& run, RunEvent event);
  // The run's round and park timers, cancelled.
  void cancel_timers(Run& run);
  // Forgets a run (its timers cancelled).
  void erase_run(std::uint64_t run_id);

  // MRTR (gateway_input.cpp).
  void gather(Run& run, const jsonrpc::Message& request);
  void close_round(std::uint64_t run_id);
  void ask(Run& run, Pending& p);
  void resume(CallId id, const std::string& state);
  void answer_inputs_with_error(Session* s, Run& run, const std::string& why);
  void cancel_run(std::uint64_t run_id, const std::string& why);
  void on_park_timeout(std::uint64_t run_id, std::uint32_t round);

  // subscriptions/listen (gateway_listen.cpp).
  void start_listen(Session& s, Pending& p);
  void on_listen_message(Session& s, const jsonrpc::Message& m);
  void end_listen_gracefully(Session& s);

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
  DiscoverCache discover_cache_;
  ServerParamHeaders param_headers_;
  std::unordered_map<std::uint64_t, std::vector<CallId>> by_origin_;
  CallId next_call_ = 1;
  std::uint64_t next_serial_ = 1;
  std::uint64_t next_run_ = 1;
  bool closed_ = false;
  log::Throttle waiting_log_;
};

}  // namespace mcpmqtt::bridge

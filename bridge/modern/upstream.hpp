// The upstream end of one egress session when the server may speak only MCP 2026-07-28: a
// channel between the splice and the real upstream channel (a child process, an upstream HTTP
// client). It speaks 2025 to the MQTT side, which stays a session (004 §Initialization), finds
// out the server's era at the client's initialize (server/discover first; the verdict kept in
// the exposed server's EraMemory), and then either passes every message unchanged (2025) or
// translates the session into 2026-07-28 requests: envelopes, input_required rounds as
// server→client requests, resources/subscribe as subscriptions/listen. Every request the MQTT
// client sends gets one answer. The negotiation and the mapping, rule by rule:
// docs/design/modern-upstream.md.
//
// One strand; not thread-safe (the strand of both channels and the scheduler). EraMemory is the
// exception: shared by the sessions of one exposed server, on their own strands.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "bridge/modern/protocol.hpp"
#include "bridge/relay/channel.hpp"
#include "bridge/relay/scheduler.hpp"

namespace mcpmqtt::bridge {

class ModernUpstream : public Channel, public std::enable_shared_from_this<ModernUpstream> {
 public:
  // What a session speaks to the server (legacy or modern), and what a server speaks (the
  // EraMemory: legacy, modern or both).
  enum class Era { unknown, legacy, modern, both };

  // What the sessions of one exposed server learnt about its era, and why. Thread-safe.
  class EraMemory {
   public:
    Era get() const { return era_.load(std::memory_order_relaxed); }
    std::string why() const;
    void set(Era e, std::string why = {});
    void forget() { set(Era::unknown); }
    // Called on the thread that set a new era (not under any lock of this class).
    void on_change(std::function<void(Era, const std::string& why)> fn);

   private:
    std::atomic<Era> era_{Era::unknown};
    mutable std::mutex mu_;
    std::string why_;
    std::function<void(Era, const std::string&)> listener_;
  };

  enum class Mode {
    automatic,  // discover first, initialize as the fallback
    modern,     // 2026-07-28 only: no initialize ever goes upstream
  };

  struct Options {
    Mode mode = Mode::automatic;
    std::shared_ptr<EraMemory> memory;  // null: nothing is remembered
    std::chrono::milliseconds discover_timeout{10'000};
    std::size_t max_input_rounds = 10;     // per request
    std::size_t max_input_requests = 64;   // per round
    std::size_t max_subscriptions = 1024;  // URIs per session
    std::size_t max_held = 256;            // messages from the client while negotiating
    // A round with requestState and no inputRequests asks the client to come back later.
    std::chrono::milliseconds empty_round_pause{250};
    std::chrono::milliseconds listen_retry_min{500};
    std::chrono::milliseconds listen_retry_max{30'000};
    std::string server_name;  // the MQTT server-name: fallback serverInfo name, messages
    std::string log_prefix;
    // Where the first server/discover goes when the era is not known yet; null: the upstream.
    std::function<std::shared_ptr<Channel>()> probe_channel;
    // The server's x-mcp-header annotations (SEP-2243), shared with the HTTP client that sends
    // the Mcp-Param-{Name} headers: learnt from tools/list results; a tools/call before any
    // listing waits for one the adapter makes (at most `max_tool_pages` pages). Null: none.
    std::shared_ptr<modern::ToolHeaders> tool_headers;
    std::size_t max_tool_pages = 16;
  };

  static std::shared_ptr<ModernUpstream> create(std::shared_ptr<Channel> upstream,
                                                Scheduler& scheduler, Options options);
  ~ModernUpstream() override;

  void start(Receiver receiver) override;
  void send(jsonrpc::Message message) override;
  void close(const CloseReason& why) override;
  std::string describe() const override;

  Era era() const { return era_; }
  // Requests of the MQTT client being served upstream (for tests and logs).
  std::size_t calls_in_flight() const { return calls_.size(); }
  // The resource URIs the session has subscribed (modern).
  const std::set<std::string>& subscriptions() const { return uris_; }

 private:
  enum class Phase {
    waiting_initialize,  // nothing from the client yet
    probing,             // server/discover in flight (before any initialize went upstream)
    confirming,          // discover listed 2026-07-28; does initialize work too (both eras)?
    initializing,        // the client's initialize is upstream (legacy, may still switch)
    rediscovering,       // -32022 on initialize: server/discover on the upstream
    legacy,
    modern,
    closed,
  };
  enum class Own { probe, discover, attempt, listen, tools };
  struct OwnRequest {
    Own kind = Own::attempt;
    jsonrpc::Id client_id;  // attempt: the client's request
    std::uint64_t listen = 0;
  };
  // One request of the client served upstream, through its input rounds.
  struct Call {
    explicit Call(jsonrpc::Message m) : request(std::move(m)) {}
    jsonrpc::Message request;            // the client's, as received
    std::optional<jsonrpc::Id> attempt;  // upstream id of the attempt in flight
    std::size_t rounds = 0;
    // The round waiting at the client: input request id → (key, method); the answers so far.
    std::unordered_map<jsonrpc::Id, std::pair<std::string, std::string>, jsonrpc::IdHash> waiting;
    std::vector<modern::InputResponse> answers;
    std::size_t round_size = 0;
    std::optional<std::string> request_state;
    Scheduler::TimerId pause = 0;
  };
  struct Listen {
    std::uint64_t seq = 0;
    jsonrpc::Id id;
    modern::ListenFilter filter;
    bool acknowledged = false;
    Scheduler::Clock::time_point acknowledged_at{};
    Scheduler::TimerId ack_timer = 0;
  };
  struct SubscribeWaiter {
    jsonrpc::Id client_id;
    std::uint64_t listen_seq = 0;
  };

  ModernUpstream(std::shared_ptr<Channel> upstream, Scheduler& scheduler, Options options);

  // From the MQTT side (the splice).
  void on_initialize(jsonrpc::Message m);
  void on_client_message(jsonrpc::Message m);
  void on_client_request(jsonrpc::Message m);
  void on_client_response(jsonrpc::Message m);
  void on_client_cancel(const jsonrpc::Message& m);
  void hold(jsonrpc::Message m);
  void release_held();

  // From the upstream (or the probe channel).
  void on_upstream_message(jsonrpc::Message m);
  void on_upstream_close(const CloseReason& why);
  void on_probe_message(jsonrpc::Message m);
  void on_own_response(const OwnRequest& own, jsonrpc::Message m);

  // Negotiation.
  void start_probe(bool on_upstream);
  void on_probe_answer(const jsonrpc::Message* answer, const std::string& why_not);
  // The bound on the probe's answers (discover_timeout): `handler` gets "no answer to <what>".
  using AnswerHandler = void (ModernUpstream::*)(const jsonrpc::Message*, const std::string&);
  void arm_probe_timer(const char* what, AnswerHandler handler);
  void start_confirm(const modern::Discovered& discovered);
  void on_confirm_answer(const jsonrpc::Message* answer, const std::string& why_not);
  void end_probe_channel();
  void send_initialize_upstream();
  void on_initialize_answer(jsonrpc::Message m);
  // `remember_as`: what the server is known to speak now (unknown: nothing new is known).
  void become_modern(modern::Discovered discovered, const std::string& why, Era remember_as);
  void become_legacy();
  void remember(Era era, const std::string& why);
  void fail_initialize(const std::string& message);

  // Modern requests.
  void start_call(jsonrpc::Message m);
  // tools/list of the adapter's own, page by page, before the calls waiting in tool_waiters_.
  void list_tools(const std::string& cursor);
  void on_tools_page(const jsonrpc::Message& m);
  void release_tool_waiters();
  void send_attempt(Call& call, const jsonrpc::Id& client_id);
  void on_attempt_answer(const jsonrpc::Id& client_id, jsonrpc::Message m);
  void start_round(Call& call, const jsonrpc::Id& client_id, modern::InputRequired input);
  void on_input_answer(const jsonrpc::Id& input_id, jsonrpc::Message m);
  void cancel_inputs(Call& call, const std::string& reason);
  void cancel_upstream(const jsonrpc::Id& upstream_id, const std::string& reason);
  void finish_call(const jsonrpc::Id& client_id, jsonrpc::Message answer);
  void fail_call(const jsonrpc::Id& client_id, int code, const std::string& message);
  jsonrpc::Id next_upstream_id(Own kind, const jsonrpc::Id& client_id = {},
                               std::uint64_t listen = 0);

  // Modern local answers.
  void answer(const jsonrpc::Id& id, std::string result_json);
  void answer_error(const jsonrpc::Id& id, int code, const std::string& message);
  void on_set_level(const jsonrpc::Message& m);
  void on_subscribe(const jsonrpc::Message& m, bool subscribe);

  // Listen.
  void update_listen();
  void open_listen();
  void on_listen_ack(const Listen& l);
  void on_listen_end(const jsonrpc::Id& id, const std::string& why, bool refused);
  void close_listen(const Listen& l, const std::string& reason);
  void schedule_listen_retry(bool at_once);
  void on_listen_notification(jsonrpc::Message m);
  Listen* find_listen(const jsonrpc::Id& id);

  void to_client(jsonrpc::Message m);
  void to_upstream(jsonrpc::Message m);
  // The session's envelope; with the log level for requests that may log.
  modern::Envelope envelope(bool with_log_level) const;
  std::string fallback_server_info() const;
  void cancel_timers();

  std::shared_ptr<Channel> upstream_;
  std::shared_ptr<Channel> probe_;
  Scheduler& scheduler_;
  Options options_;
  Receiver receiver_;
  bool started_ = false;
  Phase phase_ = Phase::waiting_initialize;
  Era era_ = Era::unknown;

  // The client's initialize, held while negotiating, and what it said.
  std::optional<jsonrpc::Message> initialize_;
  std::string requested_version_;
  std::string client_capabilities_json_ = "{}";
  std::string client_info_json_;
  std::deque<jsonrpc::Message> held_;  // client messages that came while negotiating
  std::optional<jsonrpc::Message> refused_initialize_;  // the -32022 that made us rediscover
  Scheduler::TimerId probe_timer_ = 0;
  std::optional<jsonrpc::Id> probe_id_;
  bool confirm_both_eras_ = false;  // "auto" with nothing known: a modern verdict is confirmed
  bool wants_modern_ = false;       // the MQTT client reads input keys (the bridge's ingress)
  Era known_ = Era::unknown;        // the memory at the session's initialize

  // Modern state.
  modern::Discovered discovered_;
  std::string version_;  // the modern revision spoken upstream
  std::optional<std::string> log_level_;
  bool logging_ = false;    // the server declares logging
  bool subscribe_ = false;  // the server declares resources.subscribe
  std::uint64_t next_id_ = 1;
  std::unordered_map<jsonrpc::Id, OwnRequest, jsonrpc::IdHash> own_;      // by upstream id
  std::unordered_map<jsonrpc::Id, Call, jsonrpc::IdHash> calls_;          // by client id
  std::unordered_map<jsonrpc::Id, jsonrpc::Id, jsonrpc::IdHash> inputs_;  // input id → client id
  std::uint64_t next_input_ = 1;

  std::vector<jsonrpc::Id> tool_waiters_;  // client ids of calls waiting for the tool list
  std::size_t tool_pages_ = 0;             // pages of the adapter's listing so far; 0: none

  std::set<std::string> uris_;
  std::vector<Listen> listens_;  // at most two: the active one and the newest
  std::optional<std::uint64_t> active_listen_;
  std::uint64_t next_listen_seq_ = 1;
  std::vector<SubscribeWaiter> subscribe_waiters_;
  unsigned listen_failures_ = 0;
  bool listen_unsupported_ = false;
  Scheduler::TimerId listen_retry_timer_ = 0;
};

const char* to_string(ModernUpstream::Era era);

}  // namespace mcpmqtt::bridge

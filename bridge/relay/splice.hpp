// Joins the two channels of one MCP session and adds only what the pairing needs.
//
// `client` is the side that started the session (an HTTP client, the stdio host, an MQTT client
// of an exposed server); `server` is the side that serves it (an MQTT-hosted server, a child
// process, an upstream HTTP server). Messages pass through unchanged, plus:
// - every request is remembered until its response comes back; duplicate ids in flight are
//   refused, and the number in flight is bounded;
// - a request that gets no response in time (per method, 004 §Timeouts) is answered with a
//   -32001 error and the other side gets notifications/cancelled; progress notifications
//   restart the clock (002 §Timeouts allows it), up to ten times the method's timeout;
// - notifications/cancelled from the requester is passed on and the late response dropped;
// - when either side closes, every request still pending gets an error naming the reason, on
//   the side that sent it, and the other side is closed with the reason;
// - when a side says its transport was interrupted (Channel::Receiver::on_interrupted), every
//   request pending toward it is answered at once with a retriable error (code -32000, data
//   {"retriable":true}) and that side gets notifications/cancelled for it: waiting for its
//   timeout would only delay the same answer;
// - the bridge itself can send requests to either side (ids "mcpmqtt-bridge-N") and get their
//   responses, and can watch or rewrite messages through hooks.
//
// One strand; not thread-safe. Both channels and the scheduler live on the same strand.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/relay/channel.hpp"
#include "bridge/relay/request_meters.hpp"
#include "bridge/relay/scheduler.hpp"

namespace mcpmqtt::bridge {

class Splice : public std::enable_shared_from_this<Splice> {
 public:
  enum class Side { client, server };

  struct Options {
    // The timeout of a request by method; zero means none.
    std::function<std::chrono::milliseconds(const std::string& method)> timeout_for;
    std::size_t max_pending = 4096;        // per direction
    std::string log_prefix;                // "[http S 1a2b]"
    std::string name = "mcp-mqtt-bridge";  // how the bridge names itself in error messages
    // The session's direction as a metrics label ("http_ingress", "stdio_egress", …): the splice
    // counts itself in mcpmqtt_sessions and its requests by method and outcome, with their
    // latency. Empty: not counted.
    std::string metrics_direction;
  };

  // What a hook decides about a message.
  enum class Verdict { pass, drop };
  struct Hooks {
    // A message on its way from one side to the other; may replace it (same kind and id).
    std::function<Verdict(Side from, jsonrpc::Message& m)> on_message;
    // The session is ending and the client side is still open: last messages of the bridge's
    // own for the client (final responses to requests the bridge answers itself, such as
    // subscriptions/listen), sent before the pending requests are answered and it is closed.
    std::function<std::vector<jsonrpc::Message>(const CloseReason& why)> on_closing;
    // Both sides are closed; `why` is the first reason.
    std::function<void(const CloseReason& why)> on_closed;
  };

  using ResponseFn = std::function<void(const jsonrpc::Message& response)>;

  static std::shared_ptr<Splice> create(std::shared_ptr<Channel> client,
                                        std::shared_ptr<Channel> server, Scheduler& scheduler,
                                        Options options, Hooks hooks = {});
  ~Splice();

  void start();
  // Ends the session from outside (shutdown, idle timeout, HTTP DELETE handled by the owner):
  // pending requests are answered on both sides, then both channels are closed.
  void close(const CloseReason& why);

  // Sends a message of the bridge's own to one side (a notification, typically).
  void send_to(Side to, jsonrpc::Message m);
  // A message from `from` that a hook held back (Verdict::drop) to finish it asynchronously,
  // handled now as any message from that side is; hooks do not see it again. A response answers
  // its request (a request that timed out meanwhile got its error already, and this is
  // dropped); a request is relayed and awaited; a notification is passed on.
  void deliver_held(Side from, jsonrpc::Message m);
  // Sends a request of the bridge's own to one side; `done` gets the response, or an error
  // response made by the splice: -32001 on timeout (the method's, unless `timeout` says
  // otherwise), -32000 when the session closes or the side is interrupted.
  void request_to(Side to, const std::string& method, const std::string& params_json,
                  ResponseFn done, std::optional<std::chrono::milliseconds> timeout = {});
  void request_to_server(const std::string& method, const std::string& params_json,
                         ResponseFn done) {
    request_to(Side::server, method, params_json, std::move(done));
  }

  bool closed() const { return closed_; }
  std::size_t pending(Side requester) const;
  const std::string& prefix() const { return options_.log_prefix; }

 private:
  struct PendingRequest {
    std::string method;
    Scheduler::TimerId timer = 0;  // bridge-originated requests only
    std::chrono::milliseconds timeout{0};
    // Relayed requests with a timeout: when it falls due (progress moves it, up to the cap),
    // and the order it was set in, for requests that fall due together.
    Scheduler::Clock::time_point deadline{};
    std::uint64_t deadline_seq = 0;
    Scheduler::Clock::time_point deadline_cap{};
    std::optional<jsonrpc::Id> progress_token;
    ResponseFn done;         // bridge-originated requests only
    Side to = Side::server;  // bridge-originated requests only
    Scheduler::Clock::time_point started{};
  };
  using PendingMap = std::unordered_map<jsonrpc::Id, PendingRequest, jsonrpc::IdHash>;

  Splice(std::shared_ptr<Channel> client, std::shared_ptr<Channel> server, Scheduler& scheduler,
         Options options, Hooks hooks);
  Channel& channel(Side s) { return s == Side::client ? *client_ : *server_; }
  static Side other(Side s) { return s == Side::client ? Side::server : Side::client; }
  PendingMap& pending_from(Side requester) {
    return requester == Side::client ? from_client_ : from_server_;
  }
  void on_message(Side from, jsonrpc::Message m);
  // A message past the hooks, by kind.
  void dispatch(Side from, jsonrpc::Message m);
  void on_request(Side from, jsonrpc::Message m);
  void on_response(Side from, jsonrpc::Message m);
  void on_notification(Side from, jsonrpc::Message m);
  // Relayed requests' timeouts share one timer, armed for the earliest deadline: a request
  // costs no timer of its own; when nothing is left in flight the timer goes, unless the
  // session's requests come one after another.
  void arm(PendingRequest& p, Scheduler::Clock::time_point deadline);
  void arm_deadline_timer(Scheduler::Clock::time_point at);
  void on_deadline();
  void cancel_deadline_timer();
  void drop_idle_deadline_timer();
  void on_timeout(Side requester, const jsonrpc::Id& id);
  void on_bridge_timeout(const jsonrpc::Id& id);
  void on_side_closed(Side side, const CloseReason& why);
  void on_interrupted(Side side, const std::string& detail);
  void answer_all(Side requester, const CloseReason& why, bool send);
  void finish(const CloseReason& why);
  void last_words(const CloseReason& why);
  const char* side_name(Side s) const { return s == Side::client ? "client" : "server"; }
  // Counts a request of `requester` that ended with `outcome` (result, error, timeout,
  // cancelled, closed, refused); the latency of answered client requests goes in the histogram.
  void count(Side requester, const std::string& method, RequestMeters::Outcome outcome,
             const PendingRequest* p = nullptr);
  void count_session_end();

  std::shared_ptr<Channel> client_;
  std::shared_ptr<Channel> server_;
  Scheduler& scheduler_;
  Options options_;
  Hooks hooks_;
  PendingMap from_client_;  // requests the client sent to the server
  PendingMap from_server_;  // requests the server sent to the client
  PendingMap from_bridge_;  // requests the bridge sent to either side
  std::uint64_t next_bridge_id_ = 1;
  RequestMeters* meters_ = nullptr;  // null: not counted
  Scheduler::TimerId deadline_timer_ = 0;
  Scheduler::Clock::time_point deadline_timer_at_{};
  // Since when nothing has been in flight, and whether the last request came soon after such a
  // moment (drop_idle_deadline_timer).
  std::optional<Scheduler::Clock::time_point> idle_since_;
  bool quick_return_ = false;
  std::uint64_t next_deadline_seq_ = 1;
  bool started_ = false;
  bool closed_ = false;
  bool counted_ = false;  // in mcpmqtt_sessions
};

}  // namespace mcpmqtt::bridge

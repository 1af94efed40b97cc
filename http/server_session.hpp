// One MCP session of the Streamable HTTP server (002 §Session Management), as a
// bridge::Channel: messages POSTed by the HTTP client come out of it; messages sent into it go
// to the client on the stream bridge::StreamRouter picks.
//
// Life: created by an initialize POST and handed to Backend::attach; visible to requests once
// the initialize response is a success; ended by DELETE (on_close normal), the idle timeout
// (on_close timeout), Server::stop (on_close shutdown) or the owner's close(). After the end,
// requests with its id get 404 and every stream still open is ended after what it was sent
// (pending requests on open streams get a -32000 error first, so no client waits in vain).
//
// Every method runs on the session's own strand; the request handlers and the Channel methods
// post there when called from elsewhere. Thread-safe through that strand.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/strand.hpp>

#include "bridge/protocol/principal.hpp"
#include "bridge/relay/channel.hpp"
#include "bridge/relay/stream_router.hpp"
#include "common/lazy_deque.hpp"
#include "common/log.hpp"
#include "http/server_exchange.hpp"
#include "http/server_state.hpp"
#include "loop/timer_list.hpp"

namespace mcpmqtt::http {

class ServerSession : public bridge::Channel,
                      public std::enable_shared_from_this<ServerSession>,
                      private loop::TimerList::Target {
 public:
  ServerSession(std::shared_ptr<ServerState> state, std::string id, std::string server_name);
  ~ServerSession() override;

  const std::string& id() const { return id_; }
  const std::string& server_name() const { return server_name_; }
  // Who opened the session (the initialize POST's principal); set before begin().
  void set_principal(bridge::Principal principal) { principal_ = std::move(principal); }
  const bridge::Principal& principal() const { return principal_; }

  // Request handlers, called by connections (any strand). `protocol_version` is the
  // MCP-Protocol-Version header, already checked, or empty.
  void begin(std::shared_ptr<Exchange> exchange, jsonrpc::Message initialize);
  void handle_post(std::shared_ptr<Exchange> exchange, jsonrpc::Body body,
                   std::string protocol_version);
  void handle_get(std::shared_ptr<Exchange> exchange, std::string last_event_id,
                  std::string protocol_version);
  void handle_delete(std::shared_ptr<Exchange> exchange);
  // Server::stop: ends the session with on_close(shutdown).
  void shutdown(std::string why);
  // SessionRegistry, to make room (http.limits.max_sessions): ends the session with
  // on_close(timeout); its id gets 404 afterwards, so SDK clients initialize again.
  void evict(std::string why);
  // Since when the session has been idle (established, no request pending, no stream or JSON
  // wait open, no initialize in progress); nullopt while it is not. Any thread.
  std::optional<std::chrono::steady_clock::time_point> idle_since() const;

  // bridge::Channel
  void start(Receiver receiver) override;
  void send(jsonrpc::Message message) override;
  void close(const bridge::CloseReason& why) override;
  std::string describe() const override { return label_; }

 private:
  using StreamId = bridge::StreamRouter::StreamId;
  enum class Phase { initializing, established, closed };

  void do_begin(std::shared_ptr<Exchange> exchange, jsonrpc::Message initialize);
  void do_post(std::shared_ptr<Exchange> exchange, jsonrpc::Body body,
               std::string protocol_version);
  void do_get(std::shared_ptr<Exchange> exchange, std::string last_event_id,
              std::string protocol_version);
  void do_delete(std::shared_ptr<Exchange> exchange);
  void do_send(jsonrpc::Message message);
  void do_close(bridge::CloseReason why);

  // Initialize outcome.
  void on_initialize_response(const jsonrpc::Message& response,
                              const bridge::StreamRouter::Routed& routed);
  void check_initialize_failure();
  void finish_initialize_failure();

  void deliver(const bridge::StreamRouter::Routed& routed, const jsonrpc::Message& message);
  void attach(StreamId stream, std::shared_ptr<Exchange> exchange);
  // Starts an SSE response: `first` (a priming event or a replay), then the backlog.
  void open_sse(StreamId stream, const std::shared_ptr<Exchange>& exchange, std::string first);
  void write_event(StreamId stream, const bridge::StreamRouter::Event& event, bool last = false);
  void end_stream(StreamId stream);
  void reply_json(StreamId stream, const std::vector<jsonrpc::Message>& body, bool batch);
  void on_exchange_gone(const std::weak_ptr<Exchange>& gone);
  void end_listens(StreamId stream, const std::vector<jsonrpc::Id>& listens);
  void to_receiver(const jsonrpc::Message& message);
  void refuse_request(const jsonrpc::Message& request, const std::string& why);
  void log_evicted(const std::vector<jsonrpc::Message>& evicted);
  // Counts a message that could not be delivered and logs it, at most once a second.
  void warn_dropped(const std::string& what);

  // Ends the session; tells the receiver unless the owner asked for the end.
  void terminate(const bridge::CloseReason& why, bool tell_receiver);
  void touch() {
    last_activity_ = std::chrono::steady_clock::now();
    publish_idle();
  }
  // Updates idle_since_ from what the strand knows.
  void publish_idle();
  void arm_idle_timer(std::chrono::steady_clock::duration after);
  void on_idle_timer();
  // loop::TimerList::Target: the idle check is due.
  void on_due(std::uint64_t generation) override;

  Response head(unsigned status) const;
  void reply_error(const std::shared_ptr<Exchange>& exchange, unsigned status, int code,
                   const std::string& message, const jsonrpc::Id& id = {});
  std::string version_for(const std::string& header) const;

  std::shared_ptr<ServerState> state_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  // The idle check is an entry of the io_context's TimerList, not a timer of its own: thousands
  // of idle sessions' checks stay off Asio's heap (issue 34).
  loop::TimerList& timers_;
  std::uint64_t idle_generation_ = 0;
  const std::string id_;
  const std::string server_name_;
  const std::string label_;
  bridge::Principal principal_;

  Phase phase_ = Phase::initializing;
  std::shared_ptr<Receiver> receiver_;
  LazyDeque<jsonrpc::Message> inbox_;  // client messages before start()
  bridge::StreamRouter router_;
  std::unordered_map<StreamId, std::shared_ptr<Exchange>> exchanges_;  // streams, JSON waits
  // POST streams that carry subscriptions/listen requests (000), with those requests' ids.
  std::map<StreamId, std::vector<jsonrpc::Id>> listen_streams_;
  std::string negotiated_version_;
  std::chrono::steady_clock::time_point last_activity_;
  static constexpr std::int64_t kBusy = INT64_MAX;
  std::atomic<std::int64_t> idle_since_{kBusy};  // steady_clock ticks, or kBusy
  log::Throttle drop_log_;

  // Initialize in progress.
  StreamId init_stream_ = 0;
  jsonrpc::Id init_id_;
  std::string requested_version_;
  std::shared_ptr<Exchange> init_exchange_;
  std::optional<jsonrpc::Message> init_error_;
  std::optional<bridge::CloseReason> owner_close_;
};

}  // namespace mcpmqtt::http

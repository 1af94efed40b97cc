// ClientChannel's implementation, in three files by concern: client_channel.cpp sends (the
// queue, connections, failures of an exchange), client_channel_responses.cpp reads what the
// server answers (JSON, SSE streams, HTTP errors, resuming a cut stream), and
// client_channel_session.cpp keeps the session (initialize, the GET stream and its reconnects,
// expiry, teardown and DELETE). Internal to http/.
//
// One strand (the channel's executor); not thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/logger.h>

#include "http/client_channel.hpp"
#include "http/client_connection.hpp"
#include "http/client_pool.hpp"
#include "http/client_request.hpp"
#include "http/client_send_queue.hpp"
#include "http/client_sse_parser.hpp"

namespace mcpmqtt::http {

// What is kept of an HTTP error body: enough for an excerpt.
inline constexpr std::size_t kErrorBodyLimit = 4096;

// params.requestId of notifications/cancelled.
std::optional<jsonrpc::Id> cancelled_request(const jsonrpc::Message& m);
// A message of protocol revision 2026-07-28 (its params._meta holds the protocol version claim,
// basic/versioning): sent without the session, with the standard headers of its own.
bool is_modern(const jsonrpc::Message& m);
bool blank(std::string_view s);

class ClientChannelImpl final : public ClientChannel,
                                public std::enable_shared_from_this<ClientChannelImpl> {
 public:
  ClientChannelImpl(boost::asio::any_io_executor executor, UpstreamSpec spec);

  void start(Receiver receiver) override;
  void send(jsonrpc::Message message) override;
  void close(const bridge::CloseReason& why) override;
  std::string describe() const override { return label_; }
  const std::string& session_id() const override { return session_id_; }
  const std::string& protocol_version() const override { return protocol_version_; }

 private:
  // One HTTP request and its response on one connection.
  struct Exchange {
    enum class Kind { post, listen, resume };
    using Slot = SendQueue::Slot;
    enum class Body { ignore, json, sse, error };

    Kind kind = Kind::post;
    std::optional<jsonrpc::Message> message;  // what a post carries
    std::optional<jsonrpc::Id> request_id;    // the request a post carries or a resume continues
    std::uint64_t request_seq = 0;
    std::string method;  // of that request, or of the posted message
    Slot slot = Slot::none;
    bool holds_barrier = false;
    bool carried_session = false;  // sent with Mcp-Session-Id
    ClientRequest request;
    std::shared_ptr<ClientConnection> conn;
    bool retried = false;
    std::string bearer;           // the access token it carries (a secret), with spec_.bearer
    bool bearer_renewed = false;  // sent again with another token after a 401
    bool modern = false;  // a 2026-07-28 message: no session, per-request headers, no resuming

    unsigned status = 0;
    std::string content_type;
    Body body = Body::ignore;
    std::string text;  // a JSON body, or the start of an error body
    std::size_t ignored_bytes = 0;
    std::optional<SseParser> sse;
    std::size_t delivered = 0;

    std::string resume_from;  // Last-Event-ID sent
    unsigned resume_attempts = 0;
    std::shared_ptr<boost::asio::steady_timer> delay;
    bool done = false;
  };
  using ExchangePtr = std::shared_ptr<Exchange>;

  struct OpenRequest {
    std::uint64_t seq = 0;
    std::string method;
  };

  RequestContext context() const {
    return RequestContext{&spec_.url, &spec_.headers, session_id_, protocol_version_};
  }
  std::string upstream() const { return "upstream " + spec_.url.display(); }
  std::string quoted_method(const ExchangePtr& ex) const { return "\"" + ex->method + "\""; }
  bool is_initialize(const ExchangePtr& ex) const {
    return ex->request_id && init_seq_ && *init_seq_ == ex->request_seq;
  }
  bool request_pending(const ExchangePtr& ex) const;

  void deliver(jsonrpc::Message m);
  void pump();
  void start_post(jsonrpc::Message m);
  void start_exchange(const ExchangePtr& ex);
  void authorize(const ExchangePtr& ex);
  void on_no_token(const ExchangePtr& ex, const std::string& reason);
  bool renew_bearer(const ExchangePtr& ex);
  void do_connect(const ExchangePtr& ex);
  void do_write(const ExchangePtr& ex);
  void do_read_header(const ExchangePtr& ex);
  void do_read_body(const ExchangePtr& ex);
  void on_header(const ExchangePtr& ex);
  void on_body(const ExchangePtr& ex, std::string_view data, bool complete);
  void on_complete(const ExchangePtr& ex);
  void on_failure(const ExchangePtr& ex, const ClientConnection::Failure& f);
  bool retry_on_fresh_connection(const ExchangePtr& ex, const ClientConnection::Failure& f);
  void on_sse_data(const ExchangePtr& ex, std::string_view data);
  void on_event(const ExchangePtr& ex, const SseParser::Event& event);
  void on_upstream_message(const ExchangePtr& ex, jsonrpc::Message m);
  void on_initialize_response(jsonrpc::Message m);
  void on_http_error(const ExchangePtr& ex);
  bool deliver_error_body(const ExchangePtr& ex);
  void on_initialize_refused(jsonrpc::Message m);
  void on_stream_end(const ExchangePtr& ex);
  void fail_request(const ExchangePtr& ex, int code, const std::string& message);
  // What the upstream cannot answer: initialize ends the session (-32603), a request gets
  // -32603, a posted notification or response is logged as lost.
  void fail_exchange(const ExchangePtr& ex, const std::string& message);
  void finish(ExchangePtr ex);  // by value: `ex` may be the set element it erases
  void release_barrier(const ExchangePtr& ex);
  void abandon_request(const jsonrpc::Id& id, std::uint64_t seq);

  void open_listen();
  void on_listen_end(const ExchangePtr& ex, bool failed);
  void session_expired();
  void fail_session(bridge::CloseReason::Kind kind, const std::string& detail, int code,
                    const std::string& message, bool send_delete);
  void teardown(bool send_delete);
  void do_delete();

  boost::asio::any_io_executor executor_;
  UpstreamSpec spec_;
  std::shared_ptr<spdlog::logger> log_;
  std::string label_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::string setup_error_;  // the spec cannot be used; every request fails with this
  bool setup_failure_posted_ = false;
  Receiver receiver_;
  bool started_ = false;
  bool closed_ = false;
  bool failing_ = false;
  std::optional<bridge::CloseReason> close_before_start_;

  std::string session_id_;
  std::string protocol_version_;
  std::string last_bearer_;  // the access token last obtained, for DELETE (a secret)
  std::optional<std::uint64_t> init_seq_;

  std::uint64_t next_seq_ = 1;
  std::unordered_map<jsonrpc::Id, OpenRequest, jsonrpc::IdHash> pending_;
  SendQueue queue_;
  std::unordered_set<ExchangePtr> exchanges_;
  ConnectionPool pool_;

  ExchangePtr listen_;
  bool listen_unsupported_ = false;
  std::string listen_last_id_;
  std::optional<std::chrono::milliseconds> listen_retry_;
  unsigned listen_failures_ = 0;
  unsigned listen_connect_failures_ = 0;
  std::shared_ptr<boost::asio::steady_timer> listen_timer_;
};

}  // namespace mcpmqtt::http

// One TCP connection of the HTTP server: reads requests (HTTP/1.1, keep-alive) under a deadline
// and a size limit, has them checked (precheck), answers the discovery routes itself, and hands
// MCP requests to dispatch_mcp, which answers them or hands them to their ServerSession through
// an Exchange, whose response or SSE stream the connection then writes.
//
// While a session prepares a response or streams one, a read stays open on the socket so a
// client that goes away is noticed at once (the session detaches the stream); bytes a client
// pipelines meanwhile are kept, up to a bound, for the next request.
//
// One strand (the socket's executor); Exchange calls from sessions are posted onto it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>

#include "common/log.hpp"
#include "http/server_exchange.hpp"
#include "http/server_mcp_dispatch.hpp"
#include "http/server_push_queue.hpp"
#include "http/server_rules.hpp"
#include "http/server_state.hpp"

namespace mcpmqtt::http {

class ServerConnection : public std::enable_shared_from_this<ServerConnection>,
                         private RequestSink {
 public:
  ServerConnection(boost::asio::ip::tcp::socket socket, std::shared_ptr<ServerState> state,
                   std::uint64_t number);
  ~ServerConnection();
  ServerConnection(const ServerConnection&) = delete;
  ServerConnection& operator=(const ServerConnection&) = delete;

  void start();
  // Closes the connection (any thread).
  void stop();

  // Exchange operations for the request numbered `serial`; on the strand.
  void ex_watch(std::uint64_t serial, std::function<void()> on_gone);
  void ex_reply(std::uint64_t serial, Response response);
  void ex_open(std::uint64_t serial, Response head);
  void ex_write_pushes(std::uint64_t serial);
  void ex_overflow(std::uint64_t serial, std::size_t queued, std::size_t bytes);
  void ex_end(std::uint64_t serial);
  void ex_abort(std::uint64_t serial);
  boost::asio::any_io_executor executor() { return stream_.get_executor(); }

 private:
  // What the connection is doing. A request's answer is one of: a whole response (writing), or
  // a session's answer (waiting) that is then a whole response (writing) or an SSE stream
  // (streaming); after it, the next request (reading) or, when the connection ends, lingering.
  enum class Phase {
    reading,    // a request: header, then body (one deadline for both)
    waiting,    // the request is with its session, which has not answered yet
    writing,    // a whole response is being written
    streaming,  // an SSE response: the writer below says where it is
    lingering,  // the last response is out and the send side shut: what the client still
                // sends is read and dropped (kLingerTime), so it reads that response, not a reset
    closed,
  };
  // Where the writer of an SSE response is (Phase::streaming).
  enum class Writer {
    head_waits,    // the head waits (at most kHeadDelay) for the first event, to go out with it
    head_due,      // no event came in time: the head goes out alone on the next turn
    idle,          // nothing in flight: pushes are sent on the lent socket or wait for a turn
    writing,       // a write of the rest of a send is in flight
    writing_last,  // ... and it ends the body
  };
  // The read kept open while a request is with its session (and while lingering).
  enum class Watch {
    off,
    on,            // a read is in flight: a client that goes away is noticed at once
    on_then_read,  // ... and the next request is to be read once it is cancelled
  };
  bool head_pending() const { return writer_ == Writer::head_waits || writer_ == Writer::head_due; }
  bool write_in_flight() const {
    return writer_ == Writer::writing || writer_ == Writer::writing_last;
  }

  void do_read();
  void on_header(boost::beast::error_code ec);
  // Answers a request refused before its body was read.
  void reject(Response rejection);
  // Who sent the request (Authenticator), then the route's own checks; `retried`: the issuer's
  // keys were fetched again for its unknown kid, or its opaque token introspected;
  // `unavailable`: why that introspection failed (a 503).
  void authenticate(bool retried, std::string unavailable = {});
  void on_body(boost::beast::error_code ec);
  void on_read_error(boost::beast::error_code ec);
  void on_request();
  // RequestSink: the MCP request is answered at once, or handed over to its session.
  void respond(Response response) override { write_response(std::move(response), false); }
  std::shared_ptr<Exchange> hand_over() override { return new_exchange(); }
  std::shared_ptr<Exchange> new_exchange();

  void write_response(Response res, bool close_after);
  void on_write(boost::beast::error_code ec);
  void finish_response(Response& res, bool streaming);
  void next_request();

  void pump();
  void on_chunk(boost::beast::error_code ec);
  void finish_stream();
  void after_chunk();
  std::chrono::steady_clock::duration keepalive() const;
  std::chrono::steady_clock::duration write_limit(std::size_t bytes) const;
  void arm_stream_tick(std::chrono::steady_clock::time_point at);
  void on_stream_tick();
  void arm_write_timer(std::size_t bytes);

  void start_watch();
  void on_watch(boost::beast::error_code ec, std::size_t n);
  // Ends the current stream's pushes and takes the socket back if it is lent; with
  // `release_buffers`, also frees what the pushes queued.
  void stop_pushes(bool release_buffers);
  void linger_close();
  void close();

  boost::beast::tcp_stream stream_;
  std::shared_ptr<ServerState> state_;
  const std::uint64_t number_;
  const std::string label_;
  boost::asio::ip::address local_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;

  Phase phase_ = Phase::reading;
  // Per request.
  Route route_;
  bridge::Principal principal_;  // of the request being served
  // /readyz says why it is not ready only to a caller the authenticator allows.
  bool readiness_detail_ = true;
  bool expects_continue_ = false;
  bool keep_alive_ = true;
  bool head_request_ = false;
  std::string cors_origin_;  // the request's Origin when it is listed in http.allowed_origins
  std::string request_line_;

  // The request handed to a session, and what its exchange needs.
  std::uint64_t serial_ = 0;
  std::function<void()> gone_;

  // Whole responses.
  std::shared_ptr<Response> response_;
  // Streams.
  // The head of a stream waits (at most kHeadDelay) for the first event, to go out with it.
  std::string head_bytes_;
  std::chrono::steady_clock::time_point head_deadline_{};
  Writer writer_ = Writer::idle;
  bool ending_ = false;  // the session ended the stream: the body ends once what it sent is out
  std::shared_ptr<PushQueue> pushes_;
  log::Throttle overflow_log_;
  std::string out_;      // the bytes being written (swapped with PushQueue::bytes)
  char chunk_head_[24];  // the chunk-size line of the chunk being written
  std::chrono::steady_clock::time_point last_chunk_at_{};   // the last chunk write began
  std::chrono::steady_clock::time_point chunk_deadline_{};  // it must be done by then

  boost::asio::steady_timer write_timer_;
  boost::asio::steady_timer keepalive_timer_;  // streams: keep-alive and write stalls
  boost::asio::steady_timer linger_timer_;

  Watch watch_ = Watch::off;
  bool dispatching_ = false;  // in dispatch_mcp: an exchange's watch starts after it (watch_due_)
  bool watch_due_ = false;
};

}  // namespace mcpmqtt::http

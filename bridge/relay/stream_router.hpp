// Where each server→client message of one Streamable HTTP session goes (no I/O).
//
// A session has streams: one per POST that carried requests (SSE or a JSON body) and one GET
// stream. The router decides which stream a message travels on, gives SSE events their ids,
// keeps a bounded replay buffer per SSE stream for Last-Event-ID, and holds a bounded backlog
// of server-initiated messages while no stream can take them. The caller (the HTTP session)
// performs the writes the router asks for and tells it when a connection goes away.
//
// Rules (design.md "Routing rules"; 002 §Streamable HTTP):
// - A response goes to the stream of the POST that carried its request (ids are per session).
//   When a stream has had every response, it is finished: the caller ends it after the write.
// - notifications/progress goes to the stream of the request that carried its progressToken.
// - Other server-initiated requests and notifications go to the oldest attached POST stream that
//   still waits for a response, else the attached GET stream, else the backlog. A full backlog
//   drops its oldest notification; when it holds only requests, a new notification is dropped
//   and a new request is refused (the caller answers it with an error), never lost silently.
// - Event ids are "<stream>-<seq>": unique in the session and naming their stream, so a resume
//   replays only that stream (002 §Resumability and Redelivery). The GET stream is stream 0 and
//   keeps its numbering across connections; POST streams count from 1; sequence 0 of a POST
//   stream is its priming event.
// - A client disconnect is not cancellation (002): a detached stream keeps collecting its
//   responses in its replay buffer; finished SSE streams are kept (a bounded number) so a
//   client can still resume them.
//
// - A notification tagged with a subscriptionId (000 §Receiving Notifications) goes to the
//   stream of that subscriptions/listen request while it is pending, else nowhere. A listen
//   stream (StreamOptions::listen) takes nothing else unsolicited, and keeps no replay buffer
//   once attached (a few events while detached): closing it cancels the listen
//   (000 §Cancellation), so nothing resumes it.
//
// One strand; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "common/expected.hpp"
#include "common/lazy_deque.hpp"

namespace mcpmqtt::bridge {

class StreamRouter {
 public:
  using StreamId = std::uint64_t;
  static constexpr StreamId kGetStream = 0;

  struct Limits {
    std::size_t backlog_messages = 256;  // server-initiated messages held while no stream is open
    std::size_t replay_events = 256;     // per SSE stream
    std::size_t retained_streams = 8;    // finished POST streams kept for Last-Event-ID
    // ... and the bytes of their events, older ones first (a session answering 1 MiB results
    // must not keep eight of them for ever). Only a stream whose client has not been given
    // all of it (it finished while detached) is kept beyond this.
    std::size_t retained_bytes = 1 << 20;
    // The backlog and each replay buffer in bytes too (the newest message is always kept).
    // A response a replay buffer must give up before its client was given it is replaced by a
    // small JSON-RPC error for the same id: the request is answered, never silently lost.
    std::size_t backlog_bytes = 4u << 20;
    std::size_t replay_bytes = 4u << 20;
  };

  enum class Format { sse, json };

  struct StreamOptions {
    Format format = Format::sse;
    bool attached = true;  // a connection is waiting on it now
    bool batch = false;    // the POST body was a batch (JSON streams answer with an array)
    // A subscriptions/listen stream: only the notifications tagged for its requests.
    bool listen = false;
  };

  struct Event {
    std::string id;  // "<stream>-<seq>"; empty on JSON streams
    jsonrpc::Message message;
  };

  // What to do with one server→client message.
  struct Routed {
    enum class To { stream, backlog, nowhere };
    To to = To::nowhere;
    StreamId stream = 0;
    std::optional<Event> event;  // SSE: the event (already in the replay buffer)
    bool write = false;          // the stream is attached: write the event (or JSON body) now
    bool finished = false;       // the stream had its last response: end it after the write
    std::vector<jsonrpc::Message> json_body;  // JSON stream finished: responses in request order
    bool json_batch = false;                  // ... to be sent as an array
    // Messages the router gave up to make room and that no connection had been given: a
    // backlogged notification, or an unwritten event evicted from a replay buffer.
    std::vector<jsonrpc::Message> evicted;
    // to == nowhere:
    std::string why;
    bool refuse_request = false;  // a server→client request that must be answered with an error
    bool expected = false;        // a response to a cancelled request: nothing is wrong
  };

  struct Resumed {
    StreamId stream = 0;
    std::vector<Event> events;  // to write, in order
    bool finished = false;      // nothing more will come: end the stream after `events`
    bool replaced = false;      // it was attached to another connection, which must be closed
    bool incomplete = false;    // some events after the cursor are no longer held
  };

  explicit StreamRouter(Limits limits);

  // Opens a stream for the requests of one POST body (other messages in `body` are ignored).
  // Fails, with a message for the client, when a request id is already pending in the session
  // or repeated in the body, or when the body has no request.
  Expected<StreamId, std::string> open_post(const std::vector<jsonrpc::Message>& body,
                                            StreamOptions options);
  // Attaches the GET stream; false when it is already attached (002: one per session → 409).
  bool open_get();
  // Re-attaches the stream named by a Last-Event-ID: the events that followed it.
  Expected<Resumed, std::string> resume(std::string_view last_event_id);
  // Attaches a stream that was opened detached and replays everything it holds.
  Resumed attach_from_start(StreamId stream);
  // Moves the backlog onto an attached SSE stream that can carry unsolicited messages.
  std::vector<Event> drain_backlog(StreamId stream);
  // The id for a priming event at the start of a fresh attachment of `stream`.
  std::string priming_event_id(StreamId stream);

  Routed route(const jsonrpc::Message& message);
  // The client cancelled a request (notifications/cancelled): it needs no response any more.
  // nullopt when the request is not pending; else what to do with its stream (a JSON stream
  // gets an error response in place of the cancelled one).
  std::optional<Routed> cancel(const jsonrpc::Id& request);
  // The connection of a stream went away (client disconnected, too slow, write failed).
  void detach(StreamId stream);

  bool pending(const jsonrpc::Id& request) const { return pending_.count(request) != 0; }
  std::size_t pending_count() const { return pending_.size(); }
  // RequestRoute requests, optionally only those whose stream is attached.
  std::vector<jsonrpc::Id> pending_requests(bool attached_only) const;
  bool holds(StreamId stream) const { return streams_.count(stream) != 0; }
  bool attached(StreamId stream) const;
  bool finished(StreamId stream) const;
  bool accepts_unsolicited(StreamId stream) const;
  std::size_t attached_count() const;
  std::size_t backlog_size() const { return backlog_.size(); }
  std::size_t backlog_bytes() const { return backlog_bytes_; }
  // Bytes held in replay buffers and the backlog, for tests and metrics.
  std::size_t held_bytes() const;
  std::size_t stream_count() const { return streams_.size(); }

  static std::string event_id(StreamId stream, std::uint64_t seq);
  static std::optional<std::pair<StreamId, std::uint64_t>> parse_event_id(std::string_view id);

 private:
  struct Entry {
    std::uint64_t seq;
    jsonrpc::Message message;
    bool written;  // given to a connection (not necessarily received)
  };
  struct Stream {
    StreamOptions options;
    bool attached = false;
    bool finished = false;
    std::uint64_t next_seq = 1;
    std::uint64_t max_evicted_seq = 0;
    LazyDeque<Entry> replay;
    std::size_t replay_bytes = 0;
    std::vector<jsonrpc::Id> requests;  // in body order
    std::size_t open_requests = 0;
    std::unordered_map<jsonrpc::Id, jsonrpc::Message, jsonrpc::IdHash> json_responses;
  };
  struct RequestRoute {
    StreamId stream;
    std::optional<jsonrpc::Id> progress_token;
  };

  Routed append(StreamId id, Stream& s, const jsonrpc::Message& m);
  Routed route_response(const jsonrpc::Message& m);
  Routed to_backlog(const jsonrpc::Message& m);
  // A request of stream `id` is done (answered or cancelled); finishes the stream when last.
  void request_done(StreamId id, Stream& s, Routed& r);
  void evict(Stream& s, std::vector<jsonrpc::Message>& out);
  void retain(StreamId id);
  Resumed replay_after(StreamId id, Stream& s, std::uint64_t seq);
  void remember_cancelled(const jsonrpc::Id& id);

  Limits limits_;
  StreamId next_stream_ = 1;
  std::map<StreamId, Stream> streams_;  // ordered: the oldest POST stream first
  std::unordered_map<jsonrpc::Id, RequestRoute, jsonrpc::IdHash> pending_;
  std::unordered_map<jsonrpc::Id, StreamId, jsonrpc::IdHash> progress_;
  LazyDeque<jsonrpc::Message> backlog_;
  std::size_t backlog_bytes_ = 0;
  // Retained finished POST streams, oldest first: a few (Limits::retained_streams), where a
  // deque would take 512 bytes for the first.
  std::vector<StreamId> finished_;
  LazyDeque<jsonrpc::Id> cancelled_order_;
  std::unordered_set<jsonrpc::Id, jsonrpc::IdHash> cancelled_;
};

}  // namespace mcpmqtt::bridge

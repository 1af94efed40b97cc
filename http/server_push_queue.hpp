// The SSE events a session pushed on a stream that the connection's writer has not written yet,
// and the socket the writer lends the pushers while it is idle: a push then sends its event
// itself, one non-blocking send framed as one chunk (RFC 9112 §7.1), with no post to the
// connection's strand. The writer takes the socket back before any write, shutdown or close of
// its own; a lent send that does not complete gives it back with the framed tail left over.
//
// Shared by the session's strand (push) and the connection's strand (everything else); every
// member takes the queue's mutex.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>

namespace mcpmqtt::http {

class PushQueue {
 public:
  enum class State {
    held,        // the writer holds the socket: pushes queue their bytes for it
    lent,        // the writer is idle and lent the socket: a push sends its event itself
    ending,      // the last event waits for the writer: no more pushes
    terminated,  // the body's last chunk is framed (sent, or in the tail): no more pushes
    closed,      // no more pushes: overflow, the stream done, the connection gone
  };
  enum class Event {
    lend,          // the writer is idle and nothing is queued
    take_back,     // the writer's turn
    last_queued,   // the last event of the stream waits for the writer
    last_framed,   // a lent send framed the last event and the end of the body
    send_stalled,  // a lent send did not complete: the socket goes back to the writer
    close,         // no more pushes
  };
  // The state after `event`; an event that does not apply to `state` leaves it as it is.
  static State next(State state, Event event);

  // What became of a push.
  enum class Pushed {
    dropped,       // the queue no longer takes pushes
    sent,          // sent on the lent socket
    queued,        // queued; the writer has been told already
    queued_first,  // queued, the first since the writer's last turn: tell it
    overflow,      // over a bound: the queue is now closed (the connection closes the stream)
  };
  struct PushResult {
    Pushed what = Pushed::dropped;
    std::size_t items = 0;  // overflow: the pushes waiting, and their bytes
    std::size_t bytes = 0;
  };

  // What the writer took on its turn.
  struct Taken {
    bool framed = false;      // the bytes are the tail of a lent send: chunks already
    bool ending = false;      // the last event was pushed: the stream ends after these bytes
    bool terminated = false;  // the end of the body is framed (in the bytes, or already sent)
    bool closed = false;      // no more pushes will come
    bool lent = false;        // nothing was queued: the socket is lent again
    std::chrono::steady_clock::time_point lent_write_at{};  // the last lent send
  };

  // At most `limit` pushes and `byte_limit` bytes wait for the writer (one event alone may
  // exceed the bytes).
  PushQueue(std::size_t limit, std::size_t byte_limit) : limit_(limit), byte_limit_(byte_limit) {}
  PushQueue(const PushQueue&) = delete;
  PushQueue& operator=(const PushQueue&) = delete;

  // The session's side. `write(std::string&)` appends the event's bytes (`size` of them, for
  // the bound); `last`: the stream ends with it.
  template <typename Write>
  PushResult push(Write&& write, std::size_t size, bool last) {
    std::lock_guard lock(mu_);
    if (!accepting()) return {};
    if (items_ >= limit_ || (items_ > 0 && bytes_.size() + size > byte_limit_)) {
      PushResult overflow{Pushed::overflow, items_, bytes_.size()};
      state_ = next(state_, Event::close);
      return overflow;
    }
    write(bytes_);
    if (state_ == State::lent && send_lent(last)) return {Pushed::sent};
    if (last) state_ = next(state_, Event::last_queued);
    return {items_++ == 0 ? Pushed::queued_first : Pushed::queued};
  }

  // The writer's side. Takes the socket back and swaps into `out` what waits: the tail of a lent
  // send, else the queued events. When nothing waits, the stream is not ending (here or by
  // `writer_ending`) and `lend_fd` is a descriptor, lends it.
  Taken take(std::string& out, int lend_fd, bool writer_ending);
  // No more pushes; the socket is taken back. `release_buffers`: frees what was queued.
  void close(bool release_buffers);
  // Appends `text` when nothing waits (a keep-alive comment).
  void add_if_idle(std::string_view text);
  std::chrono::steady_clock::time_point lent_write_at();
  State state();

 private:
  bool accepting() const { return state_ == State::held || state_ == State::lent; }
  // With the socket lent and bytes_ holding exactly one event: sends it as one chunk; true when
  // all of it went. Otherwise the socket goes back to the writer with what did not go: the framed
  // tail in unsent_ when part went, else the event in bytes_ (the writer's own send then waits
  // for room, or reports the error and closes).
  bool send_lent(bool last);

  std::mutex mu_;
  State state_ = State::held;
  std::string bytes_;      // what the pushes since the writer's last turn added
  std::size_t items_ = 0;  // how many pushes that is
  std::string unsent_;     // the framed tail of a lent send that did not complete
  int fd_ = -1;            // the socket, while lent
  std::chrono::steady_clock::time_point lent_write_at_{};
  const std::size_t limit_;
  const std::size_t byte_limit_;
};

}  // namespace mcpmqtt::http

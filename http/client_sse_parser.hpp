// An incremental parser for a text/event-stream body (WHATWG HTML §9.2.6 "Interpreting an event
// stream"), fed with whatever pieces the network delivers (no I/O).
//
// Lines end with CRLF, LF or CR, also when a CRLF pair is split between two pieces. Comments
// (":…") are skipped; `data` lines are joined with LF; `id` sets the last event id, which is
// kept across events and committed when an event is dispatched, also for an event without data
// (the MCP priming event carries an id and no message); `retry` sets the reconnection delay.
// An event that is never completed by an empty line (the stream was cut) is discarded.
//
// Bounded: a line or an event's data larger than the limit fails the parser for good.
// Not thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mcpmqtt::http {

class SseParser {
 public:
  struct Event {
    std::string type = "message";  // the `event` field, "message" when absent
    std::string data;              // `data` lines joined with LF; may be empty
    std::string id;                // the last event id in force when the event was dispatched
  };

  explicit SseParser(std::size_t max_event_bytes);

  // Consumes `bytes` and appends every event dispatched by them to `out`. Returns false when a
  // line or an event exceeds the limit; the parser then ignores further input.
  bool feed(std::string_view bytes, std::vector<Event>& out);

  bool failed() const { return failed_; }
  // The last event id committed by a dispatched event (empty: none, or the server reset it).
  const std::string& last_event_id() const { return last_event_id_; }
  // The reconnection delay the server asked for with `retry`, if any.
  std::optional<std::chrono::milliseconds> retry() const { return retry_; }
  // Whether any byte other than a byte-order mark has been consumed.
  bool got_bytes() const { return got_bytes_; }
  std::size_t max_event_bytes() const { return max_; }

 private:
  void on_line();
  void dispatch(std::vector<Event>& out);

  std::size_t max_;
  std::string line_;
  std::string data_;
  std::string type_;
  std::string id_buffer_;
  std::string last_event_id_;
  std::optional<std::chrono::milliseconds> retry_;
  bool after_cr_ = false;
  bool at_start_ = true;
  std::size_t bom_matched_ = 0;
  bool got_bytes_ = false;
  bool failed_ = false;
};

}  // namespace mcpmqtt::http

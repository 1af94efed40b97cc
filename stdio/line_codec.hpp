// One line of the stdio transport to JSON-RPC messages, and log excerpts of lines (no I/O).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "bridge/jsonrpc/jsonrpc.hpp"

namespace mcpmqtt::stdio {

struct ParsedLine {
  struct Rejection {
    jsonrpc::ParseFailure failure;  // the error to answer with; its id when it could be read
    // JSON-RPC 2.0 §5: a response is never answered, so nothing is owed to a line that has the
    // shape of a response ("result" or "error", no "method"). Everything else that failed
    // (invalid JSON, invalid request, a bad notification) gets an error response.
    bool answer = true;
  };
  std::vector<jsonrpc::Message> messages;  // in line order
  std::vector<Rejection> rejected;
  bool batch = false;
  std::string line;  // the line, kept only when something was rejected (for the log)
};

// Parses one line: a message or a batch (002 §stdio allows batches). In a batch whose elements
// are not all valid, the valid ones are kept and each invalid one is rejected on its own
// (JSON-RPC 2.0 §6); invalid JSON and an empty batch are rejected as a whole.
ParsedLine parse_line(std::string line, const jsonrpc::Limits& limits);

// True when the text has only JSON whitespace.
bool is_blank(std::string_view text);

// The top-level elements of a JSON array text, without surrounding whitespace. Strings and
// nesting are respected; the text need not be valid JSON (garbage yields garbage elements).
std::vector<std::string_view> split_array_elements(std::string_view text);

// A one-line, printable excerpt for logs: control bytes escaped as \xNN, at most `max` bytes of
// the text (cut at a UTF-8 boundary), and "… (N bytes)" when cut. `total_size` is the size of
// the whole line when `text` is only its beginning.
std::string excerpt(std::string_view text, std::size_t max = 200, std::size_t total_size = 0);

// The queue of lines toward a peer's input (a child's stdin, the host's stdout) is bounded in
// bytes and in messages (each message waits parsed: a flood of small ones costs more than its
// bytes). Why a line of `incoming` bytes may not join it — "`whom` is full: …; `why`" — or
// empty when it may. A line larger than the byte bound still goes when the queue is empty.
struct QueueBound {
  std::size_t max_bytes = 0;
  std::size_t max_messages = 0;
};
std::string queue_full(std::string_view whom, std::string_view why, const QueueBound& bound,
                       std::size_t queued_bytes, std::size_t queued_messages, std::size_t incoming);

}  // namespace mcpmqtt::stdio

// Server-Sent Events framing for Streamable HTTP streams (HTML Living Standard §9.2, as 002
// §Streamable HTTP uses it). No I/O. Thread-safe (no state).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mcpmqtt::http {

// How long a client should wait before reconnecting a broken stream, sent in priming events.
inline constexpr int kSseRetryMs = 1000;

// One JSON-RPC message as an event: "event: message", the id, and the data. A line break in
// `data` (JSON-RPC texts from the bridge have none) would start a new "data:" line, which the
// receiver joins back with "\n".
std::string sse_event(std::string_view id, std::string_view data);
// The same, appended to `out` (whose capacity the caller may reuse).
void append_sse_event(std::string& out, std::string_view id, std::string_view data);
// The priming event for clients of 2025-11-25 and later: an id (a resume cursor from the very
// start of the stream), the retry interval and empty data.
std::string sse_priming(std::string_view id, int retry_ms = kSseRetryMs);
// A comment line that keeps idle connections and proxies from timing out.
std::string_view sse_keepalive();

// Chunked transfer coding (RFC 9112 §7.1), as the streams write it themselves: each write is
// one chunk, its size line, the data and CRLF.
//
// The size line of a chunk of `size` bytes ("1a\r\n"); returns its length.
std::size_t chunk_head(char (&head)[24], std::size_t size);
// Turns `data`, written as one chunk (the size line `head`, `data`, CRLF) of which `sent` bytes
// went, into what is left of that chunk, in the same buffer: an event as large as a 1 MiB tool
// result is moved within its buffer, never copied into a second one.
void keep_chunk_tail(std::string& data, const char* head, std::size_t head_len, std::size_t sent);

}  // namespace mcpmqtt::http

// Server-Sent Events framing for Streamable HTTP streams (HTML Living Standard §9.2, as 002
// §Streamable HTTP uses it). No I/O. Thread-safe (no state).
#pragma once

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

}  // namespace mcpmqtt::http

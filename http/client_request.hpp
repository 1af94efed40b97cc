// Pure helpers of the Streamable HTTP client: the requests it sends (POST, GET, DELETE with the
// headers 002 §Streamable HTTP requires), checks of configured headers and of values taken from
// the server, and the texts of the errors a client sees. No I/O.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "common/expected.hpp"
#include "http/client_url.hpp"

namespace mcpmqtt::http {

using Header = std::pair<std::string, std::string>;
using ClientRequest = boost::beast::http::request<boost::beast::http::string_body>;

// What every request of one upstream session carries.
struct RequestContext {
  const Url* url = nullptr;
  const std::vector<Header>* extra_headers = nullptr;  // configured; values are secrets
  std::string session_id;                              // Mcp-Session-Id, once known
  std::string protocol_version;                        // MCP-Protocol-Version, once negotiated
};

// POST of one JSON-RPC message (002 §Sending Messages to the Server).
ClientRequest build_post(const RequestContext& ctx, std::string body);
// The standard headers of a request of protocol revision 2026-07-28 (streamable-http §Standard
// Request Headers): values as sent, Mcp-Name already encoded (§Value Encoding); empty: absent.
struct ModernHeaders {
  std::string protocol_version;  // MCP-Protocol-Version, the envelope's version
  std::string method;            // Mcp-Method: requests only
  std::string name;              // Mcp-Name: tools/call, prompts/get, resources/read
  std::vector<Header> params;    // Mcp-Param-{Name}: tools/call (SEP-2243), values encoded
};
// POST of one 2026-07-28 message: no Mcp-Session-Id, whatever the context holds; the headers
// above instead of the session's protocol version.
ClientRequest build_modern_post(const RequestContext& ctx, std::string body,
                                const ModernHeaders& headers);
// GET for the server's stream, or to resume a stream after `last_event_id` (002 §Listening for
// Messages from the Server, §Resumability and Redelivery).
ClientRequest build_get(const RequestContext& ctx, std::string_view last_event_id);
// DELETE ending the session (002 §Session Management).
ClientRequest build_delete(const RequestContext& ctx);

// Checks configured headers: names must be HTTP tokens, values must not hold line breaks or
// other control characters, and the headers the transport sets itself cannot be configured.
// The error names the header and never its value.
Expected<std::vector<Header>, std::string> check_extra_headers(const std::vector<Header>& headers);
// "Authorization, X-Api-Key": header names only, for logs.
std::string header_names(const std::vector<Header>& headers);

// 002 §Session Management: a session id is 1 to 1024 visible ASCII characters (0x21..0x7E).
bool is_valid_session_id(std::string_view id);
// A protocol version such as "2025-06-18": 1 to 64 visible ASCII characters.
bool is_valid_protocol_version(std::string_view version);

// Text taken from the network made safe to show: valid UTF-8 only (invalid bytes become '?'),
// control characters and runs of white space become one space, trimmed, at most `max_bytes`
// bytes (cut at a character boundary, "..." appended when cut).
std::string sanitize_excerpt(std::string_view text, std::size_t max_bytes = 200);
// A short description of an HTTP error body: the message of a JSON-RPC error when the body is
// one, else the sanitized text.
std::string describe_error_body(std::string_view content_type, std::string_view body);

// The media type of a Content-Type value, lower case, without parameters.
std::string media_type(std::string_view content_type);

}  // namespace mcpmqtt::http

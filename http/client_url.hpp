// The URL of a remote Streamable HTTP MCP endpoint, parsed and checked (no I/O).
//
// Only what an MCP endpoint needs: http or https, a host name or an IP literal (IPv6 in
// brackets), an optional port, a path with an optional query. Credentials in the URL are refused
// (they belong in configured headers, which are never logged); a fragment is dropped, as HTTP
// never sends it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/expected.hpp"

namespace mcpmqtt::http {

struct Url {
  bool tls = false;  // https
  std::string host;  // lower case; an IPv6 literal without its brackets
  bool ip_literal = false;
  std::uint16_t port = 80;
  std::string target = "/";  // path and query, as sent in the request line

  // The Host header: host (bracketed when IPv6) and the port when it is not the default.
  std::string host_header() const;
  // For logs and error messages: scheme, host, port and path, never the query (which may carry
  // a token).
  std::string display() const;
  // The port as text, for the resolver.
  std::string service() const { return std::to_string(port); }
};

// Parses an absolute http:// or https:// URL. The error says what is wrong and what to write.
Expected<Url, std::string> parse_url(std::string_view text);

}  // namespace mcpmqtt::http

// Pure rules of the Streamable HTTP server: routes, Host/Origin checks, media types, bearer
// tokens, session ids, protocol versions and error bodies. No I/O.
//
// Thread-safe (no state, or immutable after construction).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ip/address.hpp>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/protocol/principal.hpp"

namespace mcpmqtt::http {

// ---- routes ------------------------------------------------------------------------------------
//
//   POST|GET|DELETE /mcp                         the default server (ingress.default_server)
//   POST|GET|DELETE /servers/{server-name}/mcp   a server by name, written either with encoded
//                                                slashes (/servers/demo%2Feverything/mcp) or as
//                                                path segments (/servers/demo/everything/mcp)
//   GET /servers, /healthz, /readyz, /metrics
//   GET /.well-known/oauth-protected-resource[/{path}]   with http.oauth (RFC 9728 §3.1)
//
// The part between "/servers/" and the final "/mcp" is percent-decoded as a whole, so both
// spellings name the same server; a server-name whose last level is "mcp" is written
// /servers/a/mcp/mcp. The query string is ignored.
struct Route {
  enum class Kind {
    mcp,
    servers,
    healthz,
    readyz,
    metrics,
    resource_metadata,
    not_found,
    bad_server_name
  };
  Kind kind = Kind::not_found;
  std::string server_name;    // mcp: the decoded name; empty for /mcp (the default server)
  std::string problem;        // bad_server_name: why, for the client
  std::string resource_path;  // resource_metadata: the path after the well-known one, or ""
};
inline constexpr std::string_view kResourceMetadataPath = "/.well-known/oauth-protected-resource";
Route parse_route(std::string_view target);

// Percent-decoding of a path; nullopt for a malformed escape.
std::optional<std::string> percent_decode(std::string_view s);

// ---- requests ----------------------------------------------------------------------------------

// ASCII case-insensitive equality (header values such as 100-continue, auth schemes).
bool iequals(std::string_view a, std::string_view b);

// The request parser's bound on the request line and header fields together (a request past it
// gets 431); the body's bound is http.limits.max_body_bytes.
inline constexpr std::uint32_t kRequestHeaderLimit = 32 * 1024;

// ---- DNS rebinding protection (002 §Security Warning) ------------------------------------------
//
// `local` is the address the connection arrived on (the bound address, or for a wildcard bind
// the address the client used). Host is accepted when it names that address (any port), when
// it is listed in `allowed_hosts` ("name" for any port or "name:port"), or when the connection
// arrived over loopback and it is localhost, 127.0.0.1 or [::1] (any port). A DNS rebinding
// attack always carries the attacker's host name, never one of these.
bool host_allowed(std::string_view host, const boost::asio::ip::address& local,
                  const std::vector<std::string>& allowed_hosts);
// Origin: absent is fine (not a browser); a listed origin is fine; localhost origins
// (http or https, any port) are fine when the connection arrived over loopback.
bool origin_allowed(std::string_view origin, const boost::asio::ip::address& local,
                    const std::vector<std::string>& allowed_origins);
// The origin is listed in `allowed_origins` (only those get CORS headers).
bool origin_listed(std::string_view origin, const std::vector<std::string>& allowed_origins);

// ---- media types -------------------------------------------------------------------------------

// The Accept header lists `type` explicitly with a non-zero quality (wildcards do not count,
// as in the MCP SDKs: 002 requires both types to be listed).
bool accept_lists(std::string_view accept, std::string_view type);
// The Content-Type is application/json (parameters allowed).
bool is_json_content_type(std::string_view content_type);

// ---- bearer tokens -----------------------------------------------------------------------------

// Equality that takes the same time whatever the inputs: both are hashed (SHA-256) and the
// digests compared with CRYPTO_memcmp, so neither the position of the first difference nor
// the length of the secret shows in the timing.
bool constant_time_equal(std::string_view a, std::string_view b);

// The configured tokens, kept as SHA-256 digests. check() compares against every token without
// stopping at a match.
class BearerTokens {
 public:
  explicit BearerTokens(const std::vector<std::string>& tokens);
  bool enabled() const { return !digests_.empty(); }
  enum class Result { ok, missing, invalid };
  Result check(std::string_view authorization) const;

 private:
  std::vector<std::array<unsigned char, 32>> digests_;
};

// Who sent a request authorized by a static token or by nothing: keyed "token:" and the SHA-256
// digest (hex) of the bearer token when tokens are configured (the check passed already), else
// "anonymous"; unrestricted. The token itself is never kept or logged.
bridge::Principal principal_of(std::string_view authorization, bool tokens_enabled);

// ---- sessions and versions ---------------------------------------------------------------------

// 128 bits from OpenSSL's CSPRNG (getrandom as a fallback) as 32 lowercase hex characters
// (visible ASCII, 002 §Session Management); empty if no random source works.
std::string new_session_id();
// A short form for log prefixes.
inline std::string short_id(std::string_view id) {
  // A replica's ids ({replica}.{random}.{MAC}, http/server_relay.hpp): the start of the random.
  const auto dot = id.find('.');
  return std::string(id.substr(dot == std::string_view::npos ? 0 : dot + 1, 8));
}

// MCP revisions accepted in MCP-Protocol-Version, oldest first.
const std::vector<std::string>& supported_protocol_versions();
bool is_supported_protocol_version(std::string_view v);
std::string supported_protocol_versions_text();  // "2024-11-05, 2025-03-26, ..."
// Revisions from this one on understand an SSE priming event (an id with empty data).
inline constexpr std::string_view kPrimingVersion = "2025-11-25";
inline bool wants_priming(std::string_view version) {
  return !version.empty() && version >= kPrimingVersion;
}

// ---- error bodies ------------------------------------------------------------------------------

// The id an error about a POST body answers (JSON-RPC 2.0 §5): its request's when the body is
// one request; null for a batch (it is refused as a whole) or a body without a request.
jsonrpc::Id reply_id(const jsonrpc::Body& body);

// A JSON-RPC error response as a body: {"jsonrpc":"2.0","id":null,"error":{...}}.
std::string error_body(int code, std::string_view message, const jsonrpc::Id& id = {});

}  // namespace mcpmqtt::http

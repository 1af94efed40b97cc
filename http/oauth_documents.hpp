// The documents an OAuth 2.1 resource server and client read and write, without I/O: the issuer
// identifier and the well-known URLs derived from it, authorization server metadata (RFC 8414,
// OpenID Connect Discovery 1.0), the freshness an HTTP response grants (RFC 9111), token
// responses (RFC 6749 §5) and the client's form-encoded credentials (RFC 6749 §2.3.1).
//
// Pure functions; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/expected.hpp"
#include "http/client_url.hpp"

namespace mcpmqtt::http::oauth {

// An issuer identifier (RFC 8414 §2): an https URL without query or fragment; http only when the
// host is a loopback address (127.0.0.0/8, ::1 or "localhost"), for tests and local development.
// The error says what is wrong and what to write.
Expected<Url, std::string> check_issuer(std::string_view issuer);
// 127.0.0.0/8, ::1, or the name "localhost" (RFC 6761 §6.3).
bool is_loopback_host(const Url& url);

// RFC 8414 §3.1: "/.well-known/oauth-authorization-server" inserted between the host and the
// issuer's path, any terminating "/" of the path removed first.
std::string authorization_server_metadata_url(std::string_view issuer);
// OpenID Connect Discovery 1.0 §4: the issuer, any terminating "/" removed, then
// "/.well-known/openid-configuration".
std::string openid_configuration_url(std::string_view issuer);

// What the bridge reads of an authorization server's metadata.
struct AuthServerMetadata {
  std::string issuer;
  std::string jwks_uri;
  std::string token_endpoint;
  std::string introspection_endpoint;
  std::string authorization_endpoint;
  std::string registration_endpoint;
  std::vector<std::string> scopes_supported;
  std::string source;  // the URL it was read from
};
// Reads a metadata document. RFC 8414 §3.3: `issuer` must equal `expected_issuer` exactly.
// Endpoints present must be absolute URLs, https unless the issuer is an http loopback one. The
// error names the field and what is wrong with it.
Expected<AuthServerMetadata, std::string> parse_metadata(std::string_view document,
                                                         std::string_view expected_issuer);

// RFC 9110 §5.6.7: an HTTP date (IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT"), as seconds since
// the epoch.
std::optional<std::int64_t> parse_http_date(std::string_view text);

// How long a response may be used without asking again (RFC 9111 §4.2.1): Cache-Control max-age
// (less Age), else Expires less Date (or less `now` without Date); no-store and no-cache give 0,
// as does an Expires that is not a valid date (§5.3). nullopt: the response says nothing.
std::optional<std::chrono::seconds> freshness_lifetime(std::string_view cache_control,
                                                       std::string_view expires,
                                                       std::string_view date, std::string_view age,
                                                       std::int64_t now);
// When to fetch again: `lifetime` (or `fallback` when the response said nothing) clamped to
// [min, max].
std::chrono::milliseconds refresh_interval(std::optional<std::chrono::seconds> lifetime,
                                           std::chrono::milliseconds fallback,
                                           std::chrono::milliseconds min,
                                           std::chrono::milliseconds max);

// A successful token response (RFC 6749 §5.1).
struct TokenResponse {
  std::string access_token;  // a secret: never logged
  std::string token_type;
  std::optional<std::int64_t> expires_in;  // seconds
  std::string scope;
};
// The error names what is missing or wrong, never the token. token_type must be Bearer (any
// case; RFC 6749 §5.1): nothing else can be sent as `Authorization: Bearer`.
Expected<TokenResponse, std::string> parse_token_response(std::string_view body);
// An error response (RFC 6749 §5.2): `error` and `error_description`, cleaned for display
// (sanitize_excerpt); nullopt when the body is not one.
struct TokenErrorResponse {
  std::string error;
  std::string description;
};
std::optional<TokenErrorResponse> parse_token_error(std::string_view body);

// application/x-www-form-urlencoded (RFC 6749 Appendix B): bytes other than ALPHA, DIGIT and
// "*-._" percent-encoded, space as "+".
std::string form_urlencode(std::string_view text);
// RFC 6749 §2.3.1: `Basic` + base64(form-encoded id ":" form-encoded secret).
std::string basic_authorization(std::string_view client_id, std::string_view client_secret);

}  // namespace mcpmqtt::http::oauth

// Who is calling through an ingress: the identity the HTTP ingress established for a request
// (anonymous, a static bearer token, or an OAuth access token's issuer and subject) and what it
// may reach. Carried from the HTTP server to the ingress's sessions, to the modern gateway's pool
// and requestState, to webhook registrations and onto MQTT (mqtt.session_credentials, MCP-META).
//
// Plain data, copied freely; thread-safe as a value.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mcpmqtt::bridge {

struct Principal {
  // The identity pools, requestState and webhook registrations are keyed by: "anonymous";
  // "token:" and the SHA-256 digest (hex) of a static bearer token; "oauth:" issuer "|" subject.
  // Never a token.
  std::string key = "anonymous";
  std::string issuer;     // OAuth: iss; else empty
  std::string subject;    // OAuth: sub; else empty
  std::string client_id;  // OAuth: client_id when the token names one
  std::vector<std::string> scopes;
  // Server-name filters (MQTT topic filter syntax) the principal may reach; `unrestricted` when
  // no scope mapping applies (anonymous, static tokens, or OAuth without http.oauth.scopes).
  bool unrestricted = true;
  std::vector<std::string> server_filters;
  // The access token itself: the single place it is kept, and only when the ingress asks for it
  // (http::OAuthOptions::keep_access_token, set when mqtt.session_credentials is "token": the
  // MQTT password of the principal's sessions). Null otherwise. A secret: never logged, never in
  // MCP-META, requestState or a pool key.
  std::shared_ptr<const std::string> access_token;
  std::int64_t expires_at = 0;  // OAuth: exp; 0 otherwise, or an introspection answer without it

  // An unrestricted principal known only by its key ("stdio", tests).
  static Principal keyed(std::string key) {
    Principal p;
    p.key = std::move(key);
    return p;
  }

  bool is_oauth() const { return !subject.empty(); }
  // The filters allow `server_name` (bridge/protocol/topics.hpp filter_matches).
  bool may_reach(std::string_view server_name) const;
};

// MCP-META on CONNECT (004 §User Property) of an MQTT session opened for `principal`: `meta_json`
// (a JSON object) with "principal": {"iss", "sub", "client_id"} merged in for an OAuth principal,
// so the broker knows whom the session serves; never the token. Anyone else (anonymous, a static
// bearer token, stdio) adds nothing: their key names no one a broker knows. `meta_json` that is
// not a JSON object comes back unchanged.
std::string connect_meta_with(std::string_view meta_json, const Principal& principal);

}  // namespace mcpmqtt::bridge

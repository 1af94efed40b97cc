// Who may call the HTTP server, and what they may reach: static bearer tokens
// (http.bearer_tokens_file) and OAuth 2.1 access tokens of one issuer (http.oauth; MCP
// authorization 2025-06-18 onward: the bridge is a resource server). Decides from the request
// and the keys it is given; fetching the keys is a KeySource's business (http/oauth_issuer.hpp).
//
//   no token, or an invalid one      401, WWW-Authenticate: Bearer resource_metadata="…"
//                                    (RFC 9728 §5.1), error="invalid_token" (RFC 6750 §3.1)
//   a token whose scopes do not      403, error="insufficient_scope" and the scopes that would
//   reach the route's server         (RFC 6750 §3.1)
//   no usable keys yet               503 with the reason, Retry-After
//   an opaque token (not a JWS) with introspected at the issuer (RFC 7662 §2.1), the answer
//   http.oauth.introspection         cached; "active": false is 401 invalid_token, the issuer
//                                    unreachable or failing 503 with the reason, Retry-After
//   a valid token                    a Principal: "oauth:" issuer "|" subject, its scopes and
//                                    the server-name filters they grant (http.oauth.scopes)
//
// Thread-safe: immutable after construction but for the key source and the introspector, which
// are thread-safe, and the cache of tokens checked, behind its mutex.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "auth/token.hpp"
#include "bridge/protocol/principal.hpp"
#include "common/expected.hpp"
#include "http/server_exchange.hpp"
#include "http/server_options.hpp"
#include "http/server_rules.hpp"

namespace mcpmqtt::http {

// Where the issuer's keys come from (IssuerKeys in the daemon, a fixed set in tests).
class KeySource {
 public:
  virtual ~KeySource() = default;
  // The keys to verify with; null while none are usable (not fetched yet, or stale too long).
  virtual std::shared_ptr<const auth::KeySet> keys() const = 0;
  // Why keys() is null, in the words of the failure ("cannot fetch …: Connection refused").
  virtual std::string problem() const = 0;
  // A token names a kid the keys lack: fetch them again (rate-limited); `done` runs once that
  // fetch ended or was not made, on any thread.
  virtual void refresh_for_unknown_kid(std::function<void()> done) = 0;
};

// Asks the issuer about an opaque token (RFC 7662; TokenIntrospection in the daemon, a script in
// tests).
class Introspector {
 public:
  using Done = std::function<void(Expected<std::string, std::string>)>;
  virtual ~Introspector() = default;
  // POSTs `token` to the introspection endpoint; `done` gets the body of its 200 answer, or why
  // there is none (a sentence for a 503, naming the endpoint), once, on any thread. Calls with
  // the same `key` (the token's digest) while one is under way share it.
  virtual void introspect(std::string token, std::string key, Done done) = 0;
  // Why no token can be introspected (the metadata has no introspection_endpoint), or "".
  virtual std::string problem() const = 0;
};

class Authenticator {
 public:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;

  // `default_server`: the server /mcp reaches (ingress.default_server).
  Authenticator(const ServerOptions& options, std::string default_server);

  // Before the server starts; required when http.oauth is set.
  void set_key_source(std::shared_ptr<KeySource> source) { keys_ = std::move(source); }
  // Before the server starts; required when http.oauth.introspection is set.
  void set_introspector(std::shared_ptr<Introspector> introspector) {
    introspector_ = std::move(introspector);
  }
  bool oauth() const { return options_.enabled(); }
  bool required() const { return oauth() || tokens_.enabled(); }

  struct Outcome {
    // introspect: an opaque token not answered for yet: introspect(), then check again.
    enum class Kind { allowed, refused, unknown_kid, introspect };
    Kind kind = Kind::allowed;
    bridge::Principal principal;      // allowed
    std::optional<Response> refusal;  // refused
    std::string log_reason;           // refused: for the log (never the token)
  };
  // The request to `route` (the server-name it reaches: `server`, empty for a route without
  // one). `retried`: the keys were fetched again for this request's unknown kid already, so an
  // unknown kid now is final; or its opaque token was introspected already.
  Outcome check(const Request& req, const Route& route, std::string_view server,
                bool retried) const;
  // After Kind::introspect: asks the issuer about the request's token and keeps the answer for
  // check(). `done` runs once, on any thread, with "" or why the token could not be checked.
  void introspect(const Request& req, std::function<void(std::string)> done) const;
  // A 503 with Retry-After: tokens cannot be checked now, because `why`.
  Outcome unavailable(const std::string& why) const;

  // RFC 9728 §3.2: the protected resource metadata of `resource_path` ("" for the root document,
  // "/mcp", "/servers/{name}/mcp"), as seen through `host` (the request's Host header).
  std::string resource_metadata(std::string_view resource_path, std::string_view host) const;
  // A route's resource URI: what a token's audience names (RFC 8707 §2).
  std::string resource_uri(std::string_view path, std::string_view host) const;

  // Why tokens cannot be checked now (no keys), or empty.
  std::string problem() const;
  KeySource* key_source() const { return keys_.get(); }

 private:
  std::string base(std::string_view host) const;
  Response challenge(unsigned status, std::string_view error, std::string_view description,
                     std::string_view path, std::string_view host, std::string_view scope,
                     std::string body_message) const;
  std::vector<std::string> audiences(const Route& route, std::string_view path,
                                     std::string_view server, std::string_view host) const;
  std::string scopes_reaching(std::string_view server) const;

  // Tokens checked before, by the SHA-256 of their text: a request with one skips the signature
  // (tens of µs) or the introspection (a round trip) and checks again only its audience, exp and
  // nbf. A JWT's entry is tied to the key set that verified it; an introspected token's answer,
  // its claims or why it is refused, holds until valid_until. Bounded; thread-safe.
  struct Verified {
    std::shared_ptr<const auth::KeySet> keys;  // null: introspected
    std::optional<auth::Claims> claims;        // nullopt: introspected and refused, for `refusal`
    std::string refusal;
    std::int64_t valid_until = 0;  // seconds since the epoch: then useless (exp, or ask again)
  };
  class TokenCache {
   public:
    static constexpr std::size_t kEntries = 4096;
    std::shared_ptr<const Verified> find(const std::string& digest) const;
    void remember(const std::string& digest, Verified entry);

   private:
    mutable std::mutex mu_;
    std::unordered_map<std::string, std::shared_ptr<const Verified>> entries_;
  };
  // RFC 7662 answers that refuse a token are kept this long (at most cache_max_s): a flood of
  // bad tokens reaches the issuer once per token and half-minute, not once per request.
  static constexpr std::int64_t kRefusalCacheSeconds = 30;
  static std::string token_digest(std::string_view token);
  static std::string recheck(const auth::Claims& claims, const auth::Rules& rules,
                             std::int64_t now);
  static void keep_answer(TokenCache& cache, const std::string& digest,
                          const Expected<auth::Claims, auth::Rejection>& answer, std::int64_t now,
                          std::int64_t cache_max_s);

  const OAuthOptions options_;
  const std::string public_url_;
  const std::string default_server_;
  const BearerTokens tokens_;
  auth::Rules rules_;
  std::shared_ptr<KeySource> keys_;
  std::shared_ptr<Introspector> introspector_;
  // Shared with introspections under way, which may finish after a request is gone.
  const std::shared_ptr<TokenCache> cache_ = std::make_shared<TokenCache>();
};

}  // namespace mcpmqtt::http

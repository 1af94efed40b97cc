#include "http/server_auth.hpp"

#include <algorithm>
#include <ctime>

#include <boost/beast/http/field.hpp>
#include <openssl/evp.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "bridge/protocol/topics.hpp"
#include "http/server_precheck.hpp"

namespace mcpmqtt::http {

namespace bhttp = boost::beast::http;

namespace {

std::vector<auth::Alg> algorithms_of(const std::vector<std::string>& names) {
  std::vector<auth::Alg> out;
  for (const auto& n : names)
    if (auto a = auth::alg_from_name(n)) out.push_back(*a);
  return out;
}

// A quoted-string of an auth-param (RFC 9110 §11.2) holding text of ours or of a token's claims:
// no quote, backslash or control character survives.
std::string param_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s)
    out.push_back(c == '"' || c == '\\' || c < 0x20 || c == 0x7f ? '\'' : static_cast<char>(c));
  return out;
}

std::string_view path_of(std::string_view target) {
  return target.substr(0, target.find_first_of("?#"));
}

// The bearer token of an Authorization header (RFC 6750 §2.1), or nullopt.
std::optional<std::string_view> bearer_of(std::string_view authorization) {
  while (!authorization.empty() && (authorization.front() == ' ' || authorization.front() == '\t'))
    authorization.remove_prefix(1);
  constexpr std::string_view scheme = "bearer ";
  if (authorization.size() <= scheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != scheme[i])
      return std::nullopt;
  auto token = authorization.substr(scheme.size());
  while (!token.empty() && (token.front() == ' ' || token.front() == '\t'))
    token.remove_prefix(1);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t'))
    token.remove_suffix(1);
  if (token.empty()) return std::nullopt;
  return token;
}

// The server-name as a path of the route: levels as path segments, each percent-encoded where a
// character is not unreserved (RFC 3986 §2.3) or a sub-delimiter allowed in a segment.
std::string encoded_segments(std::string_view name, bool slash_encoded) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : name) {
    const bool plain = std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
                       (c == '/' && !slash_encoded);
    if (plain) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  return out;
}

}  // namespace

Authenticator::Authenticator(const ServerOptions& options, std::string default_server)
    : options_(options.oauth),
      public_url_(options.public_url),
      default_server_(std::move(default_server)),
      tokens_(options.bearer_tokens) {
  rules_.issuer = options_.issuer;
  rules_.algorithms = algorithms_of(options_.algorithms);
  rules_.clock_skew = std::chrono::seconds(options_.clock_skew_s);
  rules_.require_at_jwt = options_.require_at_jwt;
}

std::string Authenticator::base(std::string_view host) const {
  if (!public_url_.empty()) return public_url_;
  return "http://" + std::string(host);
}

std::string Authenticator::resource_uri(std::string_view path, std::string_view host) const {
  return base(host) + std::string(path);
}

std::string Authenticator::problem() const {
  if (!oauth()) return {};
  if (!keys_) return "no key source for the issuer's keys";
  if (!keys_->keys()) {
    auto why = keys_->problem();
    return why.empty() ? "the issuer's keys have not been fetched yet" : why;
  }
  if (!options_.introspects()) return {};
  if (!introspector_) return "no introspector for opaque tokens (http.oauth.introspection)";
  return introspector_->problem();
}

Authenticator::Outcome Authenticator::unavailable(const std::string& why) const {
  Outcome out;
  out.kind = Outcome::Kind::refused;
  out.refusal = error_response(503, jsonrpc::code::connection_closed,
                               "Service Unavailable: access tokens cannot be checked now: " + why);
  out.refusal->set(bhttp::field::retry_after, "5");
  out.log_reason = "the token cannot be checked now: " + why;
  return out;
}

std::string Authenticator::scopes_reaching(std::string_view server) const {
  std::string out;
  for (const auto& [scope, filters] : options_.scopes) {
    bool reaches = false;
    for (const auto& f : filters)
      reaches = reaches || server.empty() || topics::filter_matches(f, server);
    if (!reaches) continue;
    if (!out.empty()) out += ' ';
    out += scope;
  }
  return out;
}

Response Authenticator::challenge(unsigned status, std::string_view error,
                                  std::string_view description, std::string_view path,
                                  std::string_view host, std::string_view scope,
                                  std::string body_message) const {
  auto res = error_response(status, jsonrpc::code::connection_closed, body_message);
  // RFC 9728 §5.1: where the client finds the protected resource metadata of this resource.
  std::string value = "Bearer resource_metadata=\"" + param_text(base(host)) +
                      std::string(kResourceMetadataPath) + param_text(path) + "\"";
  if (!error.empty()) value += ", error=\"" + std::string(error) + "\"";
  if (!description.empty()) value += ", error_description=\"" + param_text(description) + "\"";
  if (!scope.empty()) value += ", scope=\"" + param_text(scope) + "\"";
  res.set(bhttp::field::www_authenticate, value);
  return res;
}

std::vector<std::string> Authenticator::audiences(const Route& route, std::string_view path,
                                                  std::string_view server,
                                                  std::string_view host) const {
  // RFC 8707 §2 and MCP authorization §Token Audience Binding: a token is for this bridge (its
  // origin) or for the endpoint the request reaches, in any spelling of its URI.
  const auto b = base(host);
  std::vector<std::string> out{b, b + "/"};
  if (route.kind != Route::Kind::mcp) return out;
  out.push_back(b + std::string(path));
  if (server == default_server_) out.push_back(b + "/mcp");
  if (!server.empty()) {
    out.push_back(b + "/servers/" + encoded_segments(server, false) + "/mcp");
    out.push_back(b + "/servers/" + encoded_segments(server, true) + "/mcp");
  }
  return out;
}

Authenticator::Outcome Authenticator::check(const Request& req, const Route& route,
                                            std::string_view server, bool retried) const {
  Outcome out;
  if (!required()) return out;
  const auto authorization = sv(req[bhttp::field::authorization]);
  const auto host = sv(req[bhttp::field::host]);
  const auto path = route.kind == Route::Kind::mcp ? path_of(sv(req.target())) : "";
  const auto refuse = [&out](Response r, std::string why) {
    out.kind = Outcome::Kind::refused;
    out.refusal = std::move(r);
    out.log_reason = std::move(why);
    return out;
  };
  const auto token = bearer_of(authorization);

  if (!oauth()) {
    const auto result = tokens_.check(authorization);
    if (result == BearerTokens::Result::ok) {
      out.principal = principal_of(authorization, true);
      return out;
    }
    auto res = error_response(
        401, jsonrpc::code::connection_closed,
        result == BearerTokens::Result::missing
            ? "Unauthorized: send \"Authorization: Bearer <token>\" with a token from "
              "http.bearer_tokens_file"
            : "Unauthorized: the bearer token is not one of http.bearer_tokens_file");
    res.set(bhttp::field::www_authenticate,
            result == BearerTokens::Result::missing
                ? "Bearer realm=\"mcp-mqtt-bridge\""
                : "Bearer realm=\"mcp-mqtt-bridge\", error=\"invalid_token\"");
    return refuse(std::move(res), result == BearerTokens::Result::missing
                                      ? "no bearer token"
                                      : "a bearer token not in http.bearer_tokens_file");
  }

  if (!token) {
    // RFC 6750 §3.1: a request without credentials gets the challenge without an error code.
    return refuse(
        challenge(401, "", "", path, host, scopes_reaching(server),
                  "Unauthorized: send \"Authorization: Bearer <access token>\" with a "
                  "token from " +
                      options_.issuer + "; the resource metadata (RFC 9728) is at " + base(host) +
                      std::string(kResourceMetadataPath) + std::string(path)),
        "no bearer token");
  }
  if (tokens_.enabled() && tokens_.check(authorization) == BearerTokens::Result::ok) {
    out.principal = principal_of(authorization, true);
    return out;
  }

  const auto invalid = [&](const std::string& detail) {
    return refuse(challenge(401, "invalid_token", detail, path, host, "",
                            "Unauthorized: invalid access token: " + detail),
                  "invalid access token: " + detail);
  };
  auto rules = rules_;
  rules.audiences = audiences(route, path, server, host);
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  const auto digest = token_digest(*token);
  const auto hit = cache_->find(digest);
  // The claims checked: those of the cache entry (`hit` keeps them), or `fresh` ones.
  const auth::Claims* claims = nullptr;
  std::optional<auth::Claims> fresh;
  if (options_.introspects() && !auth::looks_like_jws(*token)) {
    // An opaque token: only its issuer can say what it is (RFC 7662 §2.1).
    if (token->size() > auth::kMaxTokenBytes) {
      return invalid("a token of " + std::to_string(token->size()) + " bytes, more than " +
                     std::to_string(auth::kMaxTokenBytes));
    }
    // Once introspected for this request, the answer just kept serves even if it holds for no
    // longer (an exp within the clock skew).
    if (!hit || hit->keys || (now >= hit->valid_until && !retried)) {
      if (!introspector_) return unavailable("no introspector for opaque tokens");
      // Introspected for this request already, and the answer is gone (the cache was full).
      if (retried) return unavailable("too many tokens are being checked at once");
      out.kind = Outcome::Kind::introspect;
      return out;
    }
    if (!hit->claims) return invalid(hit->refusal);
    if (auto why = recheck(*hit->claims, rules, now); !why.empty()) return invalid(why);
    claims = &*hit->claims;
  }
  const auto keys = keys_ ? keys_->keys() : nullptr;
  if (!claims && keys && hit && hit->keys == keys && hit->claims) {
    // Verified with these keys before: only what depends on the request and the time is
    // checked again (the signature, typ and iss cannot have changed). Keys fetched since (a
    // rotation may have withdrawn the one that signed it): verified again.
    if (auto why = recheck(*hit->claims, rules, now); !why.empty()) return invalid(why);
    claims = &*hit->claims;
  }
  if (!claims) {
    auto parsed = auth::parse_token(*token, rules_.algorithms);
    if (!parsed) return invalid(parsed.error().detail);
    if (!keys) return unavailable(problem());
    auto verified = auth::verify(*parsed, *keys, rules, now);
    if (!verified) {
      if (verified.error().failure == auth::Failure::unknown_kid && !retried) {
        out.kind = Outcome::Kind::unknown_kid;
        return out;
      }
      return invalid(verified.error().detail);
    }
    cache_->remember(
        digest, Verified{keys, *verified, {}, verified->expires_at + rules_.clock_skew.count()});
    fresh = std::move(*verified);
    claims = &*fresh;
  }
  auto& p = out.principal;
  p.key = "oauth:" + claims->issuer + "|" + claims->subject;
  p.issuer = claims->issuer;
  p.subject = claims->subject;
  p.client_id = claims->client_id;
  p.scopes = claims->scopes;
  p.expires_at = claims->expires_at;
  p.unrestricted = options_.scopes.empty();
  for (const auto& s : claims->scopes)
    if (auto it = options_.scopes.find(s); it != options_.scopes.end())
      p.server_filters.insert(p.server_filters.end(), it->second.begin(), it->second.end());
  if (options_.keep_access_token) p.access_token = std::make_shared<const std::string>(*token);
  if (!server.empty() && !p.may_reach(server)) {
    // RFC 6750 §3.1: the token is valid but its scopes do not reach this server.
    const auto scope_hint = scopes_reaching(server);
    const auto needed =
        scope_hint.empty() ? std::string("(no configured scope reaches it)") : scope_hint;
    return refuse(
        challenge(403, "insufficient_scope",
                  "the token's scopes do not reach server " + std::string(server), path, host,
                  scope_hint,
                  "Forbidden: the access token's scopes do not reach server \"" +
                      std::string(server) + "\"; it needs one of: " + needed),
        "scopes [" +
            [&] {
              std::string all;
              for (const auto& s : claims->scopes)
                all += (all.empty() ? "" : " ") + s;
              return all;
            }() +
            "] of " + p.key + " do not reach " + std::string(server));
  }
  return out;
}

std::string Authenticator::token_digest(std::string_view token) {
  // OpenSSL 3 looks SHA-256 up in its providers on every EVP_Digest(EVP_sha256()) and allocates
  // a context: most of what a request with a known token costs (bench_compare --oauth). The
  // algorithm is fetched once, and each thread reuses its context.
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  thread_local const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(),
                                                                                 &EVP_MD_CTX_free);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!sha256 || !ctx || EVP_DigestInit_ex2(ctx.get(), sha256, nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), token.data(), token.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), out, &n) != 1) {
    EVP_Digest(token.data(), token.size(), out, &n, EVP_sha256(), nullptr);
  }
  return std::string(reinterpret_cast<const char*>(out), n);
}

std::shared_ptr<const Authenticator::Verified> Authenticator::TokenCache::find(
    const std::string& digest) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(digest);
  if (it == entries_.end()) return nullptr;
  return it->second;
}

void Authenticator::TokenCache::remember(const std::string& digest, Verified entry) {
  std::lock_guard lock(mu_);
  if (entries_.size() >= kEntries && !entries_.contains(digest)) {
    // Bounded: the useless go first; if none is, everything (a new check each).
    const auto now = static_cast<std::int64_t>(std::time(nullptr));
    std::erase_if(entries_, [now](const auto& e) { return e.second->valid_until <= now; });
    if (entries_.size() >= kEntries) entries_.clear();
  }
  entries_[digest] = std::make_shared<const Verified>(std::move(entry));
}

void Authenticator::introspect(const Request& req, std::function<void(std::string)> done) const {
  const auto token = bearer_of(sv(req[bhttp::field::authorization]));
  if (!token || !introspector_) return done("no bearer token to introspect");
  auto digest = token_digest(*token);
  introspector_->introspect(
      std::string(*token), digest,
      [cache = cache_, rules = rules_, max = options_.introspection_cache_max_s, digest,
       done = std::move(done)](Expected<std::string, std::string> answer) {
        if (!answer) return done(std::move(answer.error()));
        const auto now = static_cast<std::int64_t>(std::time(nullptr));
        auto claims = auth::check_introspection(*answer, rules, now);
        // An answer that is not an RFC 7662 response says nothing about the token: the
        // issuer's fault, not the client's.
        if (!claims && claims.error().failure == auth::Failure::malformed)
          return done("the issuer's introspection answer is refused: " + claims.error().detail);
        keep_answer(*cache, digest, claims, now, max);
        done({});
      });
}

void Authenticator::keep_answer(TokenCache& cache, const std::string& digest,
                                const Expected<auth::Claims, auth::Rejection>& answer,
                                std::int64_t now, std::int64_t cache_max_s) {
  Verified entry;
  if (answer) {
    // Until the token expires, and no longer than cache_max_s: revocation at the issuer is
    // noticed within that.
    entry.valid_until = now + cache_max_s;
    if (answer->expires_at != 0)
      entry.valid_until = std::min(entry.valid_until, answer->expires_at);
    entry.claims = *answer;
  } else {
    entry.valid_until = now + std::min(kRefusalCacheSeconds, cache_max_s);
    entry.refusal = answer.error().detail;
  }
  cache.remember(digest, std::move(entry));
}

std::string Authenticator::recheck(const auth::Claims& claims, const auth::Rules& rules,
                                   std::int64_t now) {
  // As auth::verify decides: valid while now < exp + skew and now >= nbf - skew (RFC 7519
  // §4.1.4, §4.1.5); the audience per request (RFC 8707 §2).
  const auto skew = rules.clock_skew.count();
  // An introspection answer may have no exp (0): it holds as long as it is cached.
  if (claims.expires_at != 0 && now >= claims.expires_at + skew)
    return "expired " + std::to_string(now - claims.expires_at) + " s ago";
  if (claims.not_before != 0 && now < claims.not_before - skew)
    return "not valid for another " + std::to_string(claims.not_before - now) + " s";
  for (const auto& a : claims.audiences)
    for (const auto& want : rules.audiences)
      if (a == want) return {};
  return "the audience does not name this resource";
}

std::string Authenticator::resource_metadata(std::string_view resource_path,
                                             std::string_view host) const {
  if (!resource_path.empty() && parse_route(resource_path).kind != Route::Kind::mcp) return {};
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  const auto str = [&w](std::string_view s) {
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  };
  w.StartObject();
  w.Key("resource");
  str(base(host) + std::string(resource_path));
  w.Key("authorization_servers");
  w.StartArray();
  str(options_.issuer);
  w.EndArray();
  if (!options_.scopes.empty()) {
    // The SDK clients ask for these scopes when the challenge names none (SEP-835).
    w.Key("scopes_supported");
    w.StartArray();
    for (const auto& [scope, filters] : options_.scopes)
      str(scope);
    w.EndArray();
  }
  w.Key("bearer_methods_supported");
  w.StartArray();
  str("header");
  w.EndArray();
  w.Key("resource_name");
  str("mcp-mqtt-bridge");
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

}  // namespace mcpmqtt::http

#include "http/server_auth.hpp"

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
  if (keys_->keys()) return {};
  auto why = keys_->problem();
  return why.empty() ? "the issuer's keys have not been fetched yet" : why;
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

  const auto scope_hint = scopes_reaching(server);
  if (!token) {
    // RFC 6750 §3.1: a request without credentials gets the challenge without an error code.
    return refuse(
        challenge(401, "", "", path, host, scope_hint,
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
  const auto keys = keys_ ? keys_->keys() : nullptr;
  auto rules = rules_;
  rules.audiences = audiences(route, path, server, host);
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  const auto digest = token_digest(*token);
  std::optional<auth::Claims> claims;
  if (keys) {
    if (auto hit = cached(digest, keys)) {
      // Verified with these keys before: only what depends on the request and the time is
      // checked again (the signature, typ and iss cannot have changed).
      if (auto why = recheck(*hit, rules, now); !why.empty()) return invalid(why);
      claims = std::move(*hit);
    }
  }
  if (!claims) {
    auto parsed = auth::parse_token(*token, rules_.algorithms);
    if (!parsed) return invalid(parsed.error().detail);
    if (!keys) {
      const auto why = problem();
      auto res = error_response(503, jsonrpc::code::connection_closed,
                                "Service Unavailable: access tokens cannot be checked yet: " + why);
      res.set(bhttp::field::retry_after, "5");
      return refuse(std::move(res), "no keys to check the token with: " + why);
    }
    auto verified = auth::verify(*parsed, *keys, rules, now);
    if (!verified) {
      if (verified.error().failure == auth::Failure::unknown_kid && !retried) {
        out.kind = Outcome::Kind::unknown_kid;
        return out;
      }
      return invalid(verified.error().detail);
    }
    remember(digest, keys, *verified);
    claims = std::move(*verified);
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
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(token.data(), token.size(), out, &n, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(out), n);
}

std::optional<auth::Claims> Authenticator::cached(
    const std::string& digest, const std::shared_ptr<const auth::KeySet>& keys) const {
  std::lock_guard lock(cache_mu_);
  auto it = cache_.find(digest);
  // Keys fetched since (a rotation may have withdrawn the one that signed it): verify again.
  if (it == cache_.end() || it->second.keys != keys) return std::nullopt;
  return it->second.claims;
}

void Authenticator::remember(const std::string& digest,
                             const std::shared_ptr<const auth::KeySet>& keys,
                             const auth::Claims& claims) const {
  std::lock_guard lock(cache_mu_);
  if (cache_.size() >= kCacheEntries) {
    // Bounded: the expired go first; if none has, everything (a new verification each).
    const auto now = static_cast<std::int64_t>(std::time(nullptr));
    std::erase_if(cache_, [now, this](const auto& e) {
      return e.second.claims.expires_at + rules_.clock_skew.count() <= now;
    });
    if (cache_.size() >= kCacheEntries) cache_.clear();
  }
  cache_[digest] = Verified{keys, claims};
}

std::string Authenticator::recheck(const auth::Claims& claims, const auth::Rules& rules,
                                   std::int64_t now) {
  // As auth::verify decides: valid while now < exp + skew and now >= nbf - skew (RFC 7519
  // §4.1.4, §4.1.5); the audience per request (RFC 8707 §2).
  const auto skew = rules.clock_skew.count();
  if (now >= claims.expires_at + skew)
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

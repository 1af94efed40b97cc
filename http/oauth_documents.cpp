#include "http/oauth_documents.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <limits>

#include <arpa/inet.h>
#include <openssl/evp.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include "http/client_request.hpp"

namespace mcpmqtt::http::oauth {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// The issuer without its scheme and authority: "" or "/path...".
std::pair<std::string_view, std::string_view> split_origin(std::string_view issuer) {
  const auto scheme_end = issuer.find("://");
  const auto path_start =
      scheme_end == std::string_view::npos ? issuer.size() : issuer.find('/', scheme_end + 3);
  if (path_start == std::string_view::npos) return {issuer, {}};
  return {issuer.substr(0, path_start), issuer.substr(path_start)};
}

std::string_view without_trailing_slash(std::string_view path) {
  while (!path.empty() && path.back() == '/')
    path.remove_suffix(1);
  return path;
}

// Parses JSON iteratively: a deeply nested document cannot exhaust the stack.
bool parse_json(rapidjson::Document& d, std::string_view text, std::string& error) {
  d.Parse<rapidjson::kParseIterativeFlag>(text.data(), text.size());
  if (d.HasParseError()) {
    error = std::string("not JSON (") + rapidjson::GetParseError_En(d.GetParseError()) +
            " at offset " + std::to_string(d.GetErrorOffset()) + ")";
    return false;
  }
  if (!d.IsObject()) {
    error = "not a JSON object";
    return false;
  }
  return true;
}

}  // namespace

bool is_loopback_host(const Url& url) {
  if (url.host == "localhost") return true;
  if (!url.ip_literal) return false;
  in_addr a4{};
  if (inet_pton(AF_INET, url.host.c_str(), &a4) == 1) {
    return (ntohl(a4.s_addr) >> 24) == 127;
  }
  in6_addr a6{};
  if (inet_pton(AF_INET6, url.host.c_str(), &a6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&a6);
  }
  return false;
}

Expected<Url, std::string> check_issuer(std::string_view issuer) {
  auto url = parse_url(issuer);
  if (!url) return unexpected("the issuer \"" + std::string(issuer) + "\": " + url.error());
  // RFC 8414 §2: "a URL that uses the https scheme and has no query or fragment components".
  if (issuer.find('?') != std::string_view::npos || issuer.find('#') != std::string_view::npos) {
    return unexpected("the issuer \"" + std::string(issuer) +
                      "\" has a query or a fragment; an issuer identifier has neither (RFC 8414 "
                      "§2): write it as the authorization server's metadata states it");
  }
  if (!url->tls && !is_loopback_host(*url)) {
    return unexpected("the issuer \"" + std::string(issuer) +
                      "\" is not an https URL; http is accepted only for a loopback address "
                      "(127.0.0.1, [::1], localhost), for tests and local development");
  }
  return url;
}

std::string authorization_server_metadata_url(std::string_view issuer) {
  const auto [origin, path] = split_origin(issuer);
  return std::string(origin) + "/.well-known/oauth-authorization-server" +
         std::string(without_trailing_slash(path));
}

std::string openid_configuration_url(std::string_view issuer) {
  const auto [origin, path] = split_origin(issuer);
  return std::string(origin) + std::string(without_trailing_slash(path)) +
         "/.well-known/openid-configuration";
}

Expected<AuthServerMetadata, std::string> parse_metadata(std::string_view document,
                                                         std::string_view expected_issuer) {
  rapidjson::Document d;
  std::string error;
  if (!parse_json(d, document, error)) return unexpected(std::move(error));
  AuthServerMetadata m;
  const auto issuer_it = d.FindMember("issuer");
  if (issuer_it == d.MemberEnd() || !issuer_it->value.IsString()) {
    return unexpected(std::string("it has no \"issuer\" string (RFC 8414 §2)"));
  }
  m.issuer.assign(issuer_it->value.GetString(), issuer_it->value.GetStringLength());
  if (m.issuer != expected_issuer) {
    return unexpected("its issuer \"" + sanitize_excerpt(m.issuer) +
                      "\" is not the configured issuer \"" + std::string(expected_issuer) +
                      "\"; they must be identical (RFC 8414 §3.3)");
  }
  auto issuer_url = parse_url(expected_issuer);
  const bool http_allowed = issuer_url && !issuer_url->tls;
  struct Field {
    const char* name;
    std::string* out;
  };
  const std::array<Field, 5> fields{{{"jwks_uri", &m.jwks_uri},
                                     {"token_endpoint", &m.token_endpoint},
                                     {"introspection_endpoint", &m.introspection_endpoint},
                                     {"authorization_endpoint", &m.authorization_endpoint},
                                     {"registration_endpoint", &m.registration_endpoint}}};
  for (const auto& f : fields) {
    const auto it = d.FindMember(f.name);
    if (it == d.MemberEnd()) continue;
    if (!it->value.IsString()) return unexpected(std::string(f.name) + " is not a string");
    const std::string_view text(it->value.GetString(), it->value.GetStringLength());
    auto url = parse_url(text);
    if (!url) return unexpected(std::string(f.name) + " is not a usable URL: " + url.error());
    if (!url->tls && !(http_allowed && is_loopback_host(*url))) {
      return unexpected(std::string(f.name) + " \"" + url->display() +
                        "\" is not an https URL (http only beside an http loopback issuer)");
    }
    f.out->assign(text);
  }
  if (const auto it = d.FindMember("scopes_supported"); it != d.MemberEnd()) {
    if (!it->value.IsArray()) return unexpected(std::string("scopes_supported is not an array"));
    for (const auto& s : it->value.GetArray()) {
      if (!s.IsString()) return unexpected(std::string("scopes_supported holds a non-string"));
      m.scopes_supported.emplace_back(s.GetString(), s.GetStringLength());
    }
  }
  return m;
}

std::optional<std::int64_t> parse_http_date(std::string_view text) {
  // "Sun, 06 Nov 1994 08:49:37 GMT": fixed width, 29 characters.
  text = trim(text);
  if (text.size() != 29 || text[3] != ',' || text[4] != ' ' || text[7] != ' ' || text[11] != ' ' ||
      text[16] != ' ' || text[19] != ':' || text[22] != ':' || text.substr(25) != " GMT") {
    return std::nullopt;
  }
  auto number = [&](std::size_t pos, std::size_t len, int& out) {
    const char* b = text.data() + pos;
    return std::from_chars(b, b + len, out).ptr == b + len;
  };
  static constexpr std::array<std::string_view, 12> months{
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const auto month_it = std::find(months.begin(), months.end(), text.substr(8, 3));
  int day = 0, year = 0, hour = 0, minute = 0, second = 0;
  if (month_it == months.end() || !number(5, 2, day) || !number(12, 4, year) ||
      !number(17, 2, hour) || !number(20, 2, minute) || !number(23, 2, second)) {
    return std::nullopt;
  }
  if (day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return std::nullopt;
  // Days from the civil date (H. Hinnant's algorithm), without the C library's time zone.
  const int month = static_cast<int>(month_it - months.begin()) + 1;
  const int y = month <= 2 ? year - 1 : year;
  const int era = (y >= 0 ? y : y - 399) / 400;
  const int yoe = y - era * 400;
  const int doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const std::int64_t days = static_cast<std::int64_t>(era) * 146097 + doe - 719468;
  return days * 86400 + hour * 3600 + minute * 60 + second;
}

std::optional<std::chrono::seconds> freshness_lifetime(std::string_view cache_control,
                                                       std::string_view expires,
                                                       std::string_view date, std::string_view age,
                                                       std::int64_t now) {
  std::optional<std::int64_t> max_age;
  bool no_cache = false;
  std::string_view rest = cache_control;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const auto directive = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const auto eq = directive.find('=');
    const std::string name = lower(trim(directive.substr(0, eq)));
    std::string_view value = eq == std::string_view::npos ? "" : trim(directive.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (name == "no-store" || name == "no-cache") {
      no_cache = true;
    } else if (name == "max-age") {
      std::int64_t n = 0;
      const auto r = std::from_chars(value.data(), value.data() + value.size(), n);
      if (r.ec == std::errc::result_out_of_range) {
        n = std::numeric_limits<std::int32_t>::max();  // RFC 9111 §1.2.2: "as large as possible"
      } else if (r.ec != std::errc{} || r.ptr != value.data() + value.size() || n < 0 ||
                 value.empty()) {
        // §4.2.1: an invalid max-age makes the response stale.
        n = 0;
      }
      if (!max_age) max_age = n;
    }
  }
  if (no_cache) return std::chrono::seconds(0);
  if (max_age) {
    std::int64_t current_age = 0;
    const auto a = trim(age);
    std::from_chars(a.data(), a.data() + a.size(), current_age);
    return std::chrono::seconds(
        std::max<std::int64_t>(0, *max_age - std::max<std::int64_t>(0, current_age)));
  }
  if (!trim(expires).empty()) {
    const auto when = parse_http_date(expires);
    if (!when) return std::chrono::seconds(0);
    const auto base = parse_http_date(date).value_or(now);
    return std::chrono::seconds(std::max<std::int64_t>(0, *when - base));
  }
  return std::nullopt;
}

std::chrono::milliseconds refresh_interval(std::optional<std::chrono::seconds> lifetime,
                                           std::chrono::milliseconds fallback,
                                           std::chrono::milliseconds min,
                                           std::chrono::milliseconds max) {
  // Capped in seconds first: a max-age of years must not overflow milliseconds.
  const auto cap = std::chrono::duration_cast<std::chrono::seconds>(max) + std::chrono::seconds(1);
  const std::chrono::milliseconds wanted =
      lifetime ? std::chrono::milliseconds(std::min(*lifetime, cap)) : fallback;
  return std::clamp(wanted, min, std::max(min, max));
}

Expected<TokenResponse, std::string> parse_token_response(std::string_view body) {
  rapidjson::Document d;
  std::string error;
  if (!parse_json(d, body, error)) return unexpected("the token response is " + error);
  TokenResponse t;
  const auto token = d.FindMember("access_token");
  if (token == d.MemberEnd() || !token->value.IsString() || token->value.GetStringLength() == 0) {
    return unexpected(std::string("the token response has no access_token string"));
  }
  const std::string_view token_text(token->value.GetString(), token->value.GetStringLength());
  // It goes into a header as it is (RFC 6750 §2.1: b64token).
  const bool header_safe = std::all_of(token_text.begin(), token_text.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u > 0x20 && u < 0x7f;
  });
  if (!header_safe || token_text.size() > 16 * 1024) {
    return unexpected(std::string(
        "the access_token is longer than 16 KiB or holds characters a header cannot carry"));
  }
  t.access_token.assign(token_text);
  const auto type = d.FindMember("token_type");
  if (type == d.MemberEnd() || !type->value.IsString()) {
    return unexpected(std::string("the token response has no token_type string"));
  }
  t.token_type.assign(type->value.GetString(), type->value.GetStringLength());
  if (lower(t.token_type) != "bearer") {
    return unexpected("token_type \"" + sanitize_excerpt(t.token_type, 40) +
                      "\" is not supported; only Bearer tokens can be sent");
  }
  if (const auto it = d.FindMember("expires_in"); it != d.MemberEnd()) {
    // Some servers send it as a string; RFC 6749 §5.1 says a number.
    if (it->value.IsInt64() && it->value.GetInt64() >= 0) {
      t.expires_in = it->value.GetInt64();
    } else if (it->value.IsString()) {
      std::int64_t n = 0;
      const std::string_view s(it->value.GetString(), it->value.GetStringLength());
      const auto r = std::from_chars(s.data(), s.data() + s.size(), n);
      if (r.ec != std::errc{} || r.ptr != s.data() + s.size() || n < 0) {
        return unexpected(std::string("expires_in is not a number of seconds"));
      }
      t.expires_in = n;
    } else {
      return unexpected(std::string("expires_in is not a number of seconds"));
    }
  }
  if (const auto it = d.FindMember("scope"); it != d.MemberEnd() && it->value.IsString()) {
    t.scope.assign(it->value.GetString(), it->value.GetStringLength());
  }
  return t;
}

std::optional<TokenErrorResponse> parse_token_error(std::string_view body) {
  rapidjson::Document d;
  std::string error;
  if (!parse_json(d, body, error)) return std::nullopt;
  const auto e = d.FindMember("error");
  if (e == d.MemberEnd() || !e->value.IsString()) return std::nullopt;
  TokenErrorResponse r;
  r.error =
      sanitize_excerpt(std::string_view(e->value.GetString(), e->value.GetStringLength()), 80);
  const auto desc = d.FindMember("error_description");
  if (desc != d.MemberEnd() && desc->value.IsString()) {
    r.description = sanitize_excerpt(
        std::string_view(desc->value.GetString(), desc->value.GetStringLength()), 300);
  }
  return r;
}

std::string form_urlencode(std::string_view text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size() * 3);
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '*' || c == '-' || c == '.' || c == '_') {
      out.push_back(c);
    } else if (c == ' ') {
      out.push_back('+');
    } else {
      out.push_back('%');
      out.push_back(hex[u >> 4]);
      out.push_back(hex[u & 0x0f]);
    }
  }
  return out;
}

std::string basic_authorization(std::string_view client_id, std::string_view client_secret) {
  const std::string plain = form_urlencode(client_id) + ":" + form_urlencode(client_secret);
  std::string encoded(4 * ((plain.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(encoded.data()),
                                reinterpret_cast<const unsigned char*>(plain.data()),
                                static_cast<int>(plain.size()));
  encoded.resize(static_cast<std::size_t>(std::max(n, 0)));
  return "Basic " + encoded;
}

}  // namespace mcpmqtt::http::oauth

#include "http/server_rules.hpp"

#include <algorithm>
#include <cctype>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/random.h>

#include "bridge/protocol/topics.hpp"
#include "common/hex.hpp"

namespace mcpmqtt::http {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.size() <= 5 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

struct HostPort {
  std::string host;  // lowercase, without IPv6 brackets
  std::string port;  // empty: none given
};

// "name", "name:port", "[v6]" or "[v6]:port". `lenient` also takes a bare IPv6 literal (as
// people write it in configuration files), which a Host header may not carry.
std::optional<HostPort> split_host_port(std::string_view s, bool lenient) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  HostPort hp;
  if (s.front() == '[') {
    const auto close = s.find(']');
    if (close == std::string_view::npos || close == 1) return std::nullopt;
    hp.host = lower(s.substr(1, close - 1));
    const auto rest = s.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':' || !all_digits(rest.substr(1))) return std::nullopt;
      hp.port = std::string(rest.substr(1));
    }
    return hp;
  }
  const auto colons = std::count(s.begin(), s.end(), ':');
  if (colons == 0) {
    hp.host = lower(s);
  } else if (colons == 1) {
    const auto c = s.find(':');
    if (c == 0 || !all_digits(s.substr(c + 1))) return std::nullopt;
    hp.host = lower(s.substr(0, c));
    hp.port = std::string(s.substr(c + 1));
  } else {
    if (!lenient) return std::nullopt;
    hp.host = lower(s);
  }
  if (hp.host.find_first_of("/@ \t") != std::string::npos) return std::nullopt;
  return hp;
}

boost::asio::ip::address normalized(const boost::asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, a.to_v6());
  return a;
}

std::optional<boost::asio::ip::address> ip_literal(const std::string& host) {
  boost::system::error_code ec;
  auto a = boost::asio::ip::make_address(host, ec);
  if (ec) return std::nullopt;
  return normalized(a);
}

bool is_local_name(const std::string& host) {
  if (host == "localhost") return true;
  const auto a = ip_literal(host);
  return a && a->is_loopback();
}

std::array<unsigned char, 32> sha256(std::string_view s) {
  std::array<unsigned char, 32> out{};
  unsigned int n = 0;
  EVP_Digest(s.data(), s.size(), out.data(), &n, EVP_sha256(), nullptr);
  return out;
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// ---- routes ------------------------------------------------------------------------------------

std::optional<std::string> percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    const int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

Route parse_route(std::string_view target) {
  std::string_view path = target.substr(0, target.find_first_of("?#"));
  Route r;
  if (path == "/mcp") {
    r.kind = Route::Kind::mcp;
  } else if (path == "/servers" || path == "/servers/") {
    r.kind = Route::Kind::servers;
  } else if (path == "/healthz") {
    r.kind = Route::Kind::healthz;
  } else if (path == "/readyz") {
    r.kind = Route::Kind::readyz;
  } else if (path == "/metrics") {
    r.kind = Route::Kind::metrics;
  } else if (path.starts_with(kResourceMetadataPath) &&
             (path.size() == kResourceMetadataPath.size() ||
              path[kResourceMetadataPath.size()] == '/')) {
    // RFC 9728 §3.1: the root document, or the one of the resource whose path follows.
    r.kind = Route::Kind::resource_metadata;
    r.resource_path = std::string(path.substr(kResourceMetadataPath.size()));
  } else {
    constexpr std::string_view prefix = "/servers/", suffix = "/mcp";
    if (path.size() >= prefix.size() + suffix.size() && path.starts_with(prefix) &&
        path.ends_with(suffix)) {
      const auto middle = path.substr(prefix.size(), path.size() - prefix.size() - suffix.size());
      r.kind = Route::Kind::bad_server_name;
      const auto decoded = percent_decode(middle);
      if (!decoded) {
        r.problem = "the server-name in the path has a malformed percent-escape";
        return r;
      }
      if (std::any_of(decoded->begin(), decoded->end(),
                      [](unsigned char c) { return c < 0x20 || c == 0x7f; })) {
        r.problem = "the server-name in the path must not contain control characters";
        return r;
      }
      const auto why = topics::check_server_name(*decoded);
      if (!why.empty()) {
        r.problem = "the server-name in the path " + why;
        return r;
      }
      r.kind = Route::Kind::mcp;
      r.server_name = *decoded;
    }
  }
  return r;
}

// ---- Host and Origin ---------------------------------------------------------------------------

bool host_allowed(std::string_view host, const boost::asio::ip::address& local,
                  const std::vector<std::string>& allowed_hosts) {
  const auto hp = split_host_port(host, false);
  if (!hp) return false;
  for (const auto& entry : allowed_hosts) {
    const auto e = split_host_port(entry, true);
    if (e && e->host == hp->host && (e->port.empty() || e->port == hp->port)) return true;
  }
  const auto here = normalized(local);
  if (const auto a = ip_literal(hp->host); a && *a == here) return true;
  return here.is_loopback() && is_local_name(hp->host);
}

bool origin_listed(std::string_view origin, const std::vector<std::string>& allowed_origins) {
  origin = trim(origin);
  for (std::string_view entry : allowed_origins) {
    entry = trim(entry);
    if (entry.size() > 1 && entry.back() == '/') entry.remove_suffix(1);
    if (iequals(entry, origin)) return true;
  }
  return false;
}

bool origin_allowed(std::string_view origin, const boost::asio::ip::address& local,
                    const std::vector<std::string>& allowed_origins) {
  origin = trim(origin);
  if (origin.empty()) return true;
  if (origin_listed(origin, allowed_origins)) return true;
  if (!normalized(local).is_loopback()) return false;
  const auto sep = origin.find("://");
  if (sep == std::string_view::npos) return false;
  const auto scheme = lower(origin.substr(0, sep));
  if (scheme != "http" && scheme != "https") return false;
  const auto hp = split_host_port(origin.substr(sep + 3), false);
  return hp && is_local_name(hp->host);
}

// ---- media types -------------------------------------------------------------------------------

bool accept_lists(std::string_view accept, std::string_view type) {
  while (!accept.empty()) {
    const auto comma = accept.find(',');
    std::string_view item = accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view{} : accept.substr(comma + 1);
    const auto semi = item.find(';');
    const auto media = trim(item.substr(0, semi));
    if (!iequals(media, type)) continue;
    bool zero = false;
    std::string_view params =
        semi == std::string_view::npos ? std::string_view{} : item.substr(semi + 1);
    while (!params.empty()) {
      const auto next = params.find(';');
      const auto p = trim(params.substr(0, next));
      params = next == std::string_view::npos ? std::string_view{} : params.substr(next + 1);
      if (p.size() >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
        const auto v = trim(p.substr(2));
        zero = !v.empty() &&
               std::all_of(v.begin(), v.end(), [](char c) { return c == '0' || c == '.'; });
      }
    }
    if (!zero) return true;
  }
  return false;
}

bool is_json_content_type(std::string_view content_type) {
  const auto media = trim(content_type.substr(0, content_type.find(';')));
  return iequals(media, "application/json");
}

// ---- bearer tokens -----------------------------------------------------------------------------

bool constant_time_equal(std::string_view a, std::string_view b) {
  const auto da = sha256(a), db = sha256(b);
  return CRYPTO_memcmp(da.data(), db.data(), da.size()) == 0;
}

BearerTokens::BearerTokens(const std::vector<std::string>& tokens) {
  for (const auto& t : tokens)
    if (!t.empty()) digests_.push_back(sha256(t));
}

BearerTokens::Result BearerTokens::check(std::string_view authorization) const {
  authorization = trim(authorization);
  if (authorization.empty()) return Result::missing;
  constexpr std::string_view scheme = "bearer ";
  if (authorization.size() <= scheme.size() ||
      !iequals(authorization.substr(0, scheme.size()), scheme))
    return Result::invalid;
  const auto token = trim(authorization.substr(scheme.size()));
  const auto d = sha256(token);
  int matched = 0;
  for (const auto& known : digests_)
    matched |= CRYPTO_memcmp(known.data(), d.data(), d.size()) == 0 ? 1 : 0;
  return matched ? Result::ok : Result::invalid;
}

bridge::Principal principal_of(std::string_view authorization, bool tokens_enabled) {
  bridge::Principal p;
  if (!tokens_enabled) return p;
  authorization = trim(authorization);
  constexpr std::string_view scheme = "bearer ";
  if (authorization.size() > scheme.size() &&
      iequals(authorization.substr(0, scheme.size()), scheme))
    authorization = trim(authorization.substr(scheme.size()));
  const auto d = sha256(authorization);
  p.key =
      "token:" + hex_encode(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
  return p;
}

// ---- sessions and versions ---------------------------------------------------------------------

std::string new_session_id() {
  unsigned char raw[16];
  if (RAND_bytes(raw, sizeof raw) != 1) {
    std::size_t got = 0;
    while (got < sizeof raw) {
      const auto n = getrandom(raw + got, sizeof raw - got, 0);
      if (n <= 0) return {};
      got += static_cast<std::size_t>(n);
    }
  }
  return hex_encode(std::string_view(reinterpret_cast<const char*>(raw), sizeof raw));
}

const std::vector<std::string>& supported_protocol_versions() {
  static const std::vector<std::string> versions = {"2024-11-05", "2025-03-26", "2025-06-18",
                                                    "2025-11-25"};
  return versions;
}

bool is_supported_protocol_version(std::string_view v) {
  const auto& all = supported_protocol_versions();
  return std::find(all.begin(), all.end(), v) != all.end();
}

std::string supported_protocol_versions_text() {
  std::string out;
  for (const auto& v : supported_protocol_versions()) {
    if (!out.empty()) out += ", ";
    out += v;
  }
  return out;
}

jsonrpc::Id reply_id(const jsonrpc::Body& body) {
  if (body.batch || body.messages.size() != 1 || !body.messages.front().is_request()) return {};
  return body.messages.front().id();
}

std::string error_body(int code, std::string_view message, const jsonrpc::Id& id) {
  return std::string(jsonrpc::Message::error(id, code, message).text());
}

}  // namespace mcpmqtt::http

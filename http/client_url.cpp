#include "http/client_url.hpp"

#include <algorithm>
#include <cctype>

#include <arpa/inet.h>

namespace mcpmqtt::http {
namespace {

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

// RFC 3986 reg-name as DNS uses it: letters, digits, '-', '.', '_'.
bool is_host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '.' || c == '_';
}

std::string quoted(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

}  // namespace

std::string Url::host_header() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port != (tls ? 443 : 80)) h += ":" + std::to_string(port);
  return h;
}

std::string Url::display() const {
  const auto q = target.find('?');
  return std::string(tls ? "https://" : "http://") + host_header() + target.substr(0, q);
}

Expected<Url, std::string> parse_url(std::string_view text) {
  Url u;
  std::string_view rest;
  if (starts_with_nocase(text, "https://")) {
    u.tls = true;
    u.port = 443;
    rest = text.substr(8);
  } else if (starts_with_nocase(text, "http://")) {
    rest = text.substr(7);
  } else {
    const auto colon = text.find("://");
    if (colon != std::string_view::npos && colon > 0) {
      return unexpected("unsupported scheme " + quoted(text.substr(0, colon)) +
                        "; use an http:// or https:// URL");
    }
    return unexpected(std::string("expected an absolute URL such as https://example.com/mcp"));
  }
  for (const char c : rest) {
    const auto uc = static_cast<unsigned char>(c);
    if (uc <= 0x20 || uc >= 0x7f) {
      return unexpected(
          std::string("the URL contains a space, a control character or a non-ASCII character; "
                      "percent-encode it"));
    }
  }
  // A fragment is for the client only (RFC 3986 §3.5); it is never sent.
  rest = rest.substr(0, rest.find('#'));

  const auto authority_end = rest.find_first_of("/?");
  const std::string_view authority = rest.substr(0, authority_end);
  std::string target = authority_end == std::string_view::npos
                           ? std::string("/")
                           : std::string(rest.substr(authority_end));
  if (target.front() == '?') target.insert(0, "/");
  u.target = std::move(target);

  if (authority.find('@') != std::string_view::npos) {
    return unexpected(std::string(
        "credentials in the URL are not supported; put them in \"headers\" (for example "
        "\"Authorization\"), which are never logged"));
  }
  std::string_view host = authority;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) {
      return unexpected("unterminated IPv6 address in " + quoted(authority));
    }
    host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return unexpected("unexpected " + quoted(after) + " after the IPv6 address");
      }
      port = after.substr(1);
    }
    if (host.empty()) return unexpected(std::string("the URL has no host"));
    in6_addr a6{};
    const std::string h(host);
    if (inet_pton(AF_INET6, h.c_str(), &a6) != 1) {
      return unexpected("invalid IPv6 address " + quoted(host));
    }
    u.ip_literal = true;
  } else {
    const auto colon = authority.find(':');
    if (colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
    }
    if (host.empty()) return unexpected(std::string("the URL has no host"));
    if (!std::all_of(host.begin(), host.end(), is_host_char)) {
      return unexpected("invalid host name " + quoted(host) +
                        " (letters, digits, '-' and '.'; IPv6 addresses go in brackets)");
    }
    const bool numeric = std::all_of(host.begin(), host.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c)) != 0 || c == '.';
    });
    if (numeric) {
      in_addr a4{};
      const std::string h(host);
      if (inet_pton(AF_INET, h.c_str(), &a4) != 1) {
        return unexpected("invalid IPv4 address " + quoted(host));
      }
      u.ip_literal = true;
    }
  }
  if (host.empty()) return unexpected(std::string("the URL has no host"));
  u.host.reserve(host.size());
  for (const char c : host) {
    u.host.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }

  if (!port.empty()) {
    if (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c)) != 0;
        })) {
      return unexpected("invalid port " + quoted(port) + "; expected a number from 1 to 65535");
    }
    const unsigned long p = std::stoul(std::string(port));
    if (p == 0 || p > 65535) {
      return unexpected("invalid port " + quoted(port) + "; expected a number from 1 to 65535");
    }
    u.port = static_cast<std::uint16_t>(p);
  }
  return u;
}

}  // namespace mcpmqtt::http

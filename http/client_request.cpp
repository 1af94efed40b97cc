#include "http/client_request.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include <rapidjson/document.h>

namespace mcpmqtt::http {
namespace beast_http = boost::beast::http;

namespace {

constexpr std::string_view kUserAgent = "mcp-mqtt-bridge/" MCPMQTT_VERSION;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// RFC 9110 §5.6.2 tchar.
bool is_tchar(char c) {
  if (std::isalnum(static_cast<unsigned char>(c)) != 0) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// Headers the transport sets itself, or that would change the framing of the request.
constexpr std::array<std::string_view, 16> kReserved = {
    "host",          "content-length",
    "content-type",  "transfer-encoding",
    "connection",    "keep-alive",
    "upgrade",       "te",
    "trailer",       "expect",
    "accept",        "mcp-session-id",
    "last-event-id", "mcp-protocol-version",
    "mcp-method",    "mcp-name",
};

boost::beast::string_view bsv(std::string_view s) {
  return {s.data(), s.size()};
}

ClientRequest base_request(const RequestContext& ctx, beast_http::verb verb) {
  ClientRequest req{verb, ctx.url->target, 11};
  req.set(beast_http::field::host, ctx.url->host_header());
  req.set(beast_http::field::user_agent, bsv(kUserAgent));
  if (ctx.extra_headers) {
    for (const auto& [name, value] : *ctx.extra_headers)
      req.set(name, value);
  }
  // 002 §Session Management: the session id on every request after initialization.
  if (!ctx.session_id.empty()) req.set("Mcp-Session-Id", ctx.session_id);
  // 2025-06-18 §Protocol Version Header: the negotiated version on every later request.
  if (!ctx.protocol_version.empty()) req.set("MCP-Protocol-Version", ctx.protocol_version);
  return req;
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is invalid.
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  std::size_t n = 0;
  unsigned min = 0;
  unsigned cp = 0;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2;
    cp = b0 & 0x1F;
    min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3;
    cp = b0 & 0x0F;
    min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4;
    cp = b0 & 0x07;
    min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

ClientRequest build_post(const RequestContext& ctx, std::string body) {
  ClientRequest req = base_request(ctx, beast_http::verb::post);
  // 002 §Sending Messages to the Server: Accept lists both JSON and SSE.
  req.set(beast_http::field::accept, "application/json, text/event-stream");
  req.set(beast_http::field::content_type, "application/json");
  req.body() = std::move(body);
  req.prepare_payload();
  return req;
}

ClientRequest build_modern_post(const RequestContext& ctx, std::string body,
                                const ModernHeaders& headers) {
  // No session: a 2026-07-28 server never mints one and ignores Mcp-Session-Id
  // (streamable-http §Backward Compatibility).
  RequestContext sessionless{ctx.url, ctx.extra_headers, {}, {}};
  ClientRequest req = build_post(sessionless, std::move(body));
  req.set("MCP-Protocol-Version", bsv(headers.protocol_version));
  if (!headers.method.empty()) req.set("Mcp-Method", bsv(headers.method));
  if (!headers.name.empty()) req.set("Mcp-Name", bsv(headers.name));
  for (const auto& [name, value] : headers.params)
    req.set(bsv(name), bsv(value));
  return req;
}

ClientRequest build_get(const RequestContext& ctx, std::string_view last_event_id) {
  ClientRequest req = base_request(ctx, beast_http::verb::get);
  req.set(beast_http::field::accept, "text/event-stream");
  req.set(beast_http::field::cache_control, "no-cache");
  if (!last_event_id.empty()) req.set("Last-Event-ID", bsv(last_event_id));
  return req;
}

ClientRequest build_delete(const RequestContext& ctx) {
  ClientRequest req = base_request(ctx, beast_http::verb::delete_);
  req.prepare_payload();
  return req;
}

Expected<std::vector<Header>, std::string> check_extra_headers(const std::vector<Header>& headers) {
  for (const auto& [name, value] : headers) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), is_tchar)) {
      return unexpected("header name \"" + sanitize_excerpt(name, 64) +
                        "\" is not a valid HTTP header name");
    }
    const std::string l = lower(name);
    if (std::find(kReserved.begin(), kReserved.end(), l) != kReserved.end()) {
      return unexpected("header \"" + name +
                        "\" is set by the Streamable HTTP transport and cannot be configured");
    }
    for (const char c : value) {
      const auto uc = static_cast<unsigned char>(c);
      if ((uc < 0x20 && c != '\t') || uc == 0x7f) {
        return unexpected("the value of header \"" + name +
                          "\" contains a line break or a control character");
      }
    }
  }
  return headers;
}

std::string header_names(const std::vector<Header>& headers) {
  std::string out;
  for (const auto& h : headers) {
    if (!out.empty()) out += ", ";
    out += h.first;
  }
  return out;
}

bool is_valid_session_id(std::string_view id) {
  return !id.empty() && id.size() <= 1024 &&
         std::all_of(id.begin(), id.end(), [](char c) { return c >= 0x21 && c <= 0x7e; });
}

bool is_valid_protocol_version(std::string_view version) {
  return !version.empty() && version.size() <= 64 &&
         std::all_of(version.begin(), version.end(), [](char c) { return c >= 0x21 && c <= 0x7e; });
}

std::string sanitize_excerpt(std::string_view text, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 3);
  bool space = false;
  bool cut = false;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence(text, i);
    const auto b = static_cast<unsigned char>(text[i]);
    if (n == 1 && (b < 0x20 || b == 0x7f || b == ' ')) {
      space = !out.empty();
      ++i;
      continue;
    }
    const std::size_t add = (space ? 1 : 0) + (n == 0 ? 1 : n);
    if (out.size() + add > max_bytes) {
      cut = true;
      break;
    }
    if (space) out.push_back(' ');
    space = false;
    if (n == 0) {
      out.push_back('?');
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  if (cut) out += "...";
  return out;
}

std::string describe_error_body(std::string_view content_type, std::string_view body) {
  if (media_type(content_type) == "application/json" && body.size() <= 1024 * 1024) {
    rapidjson::Document d;
    d.Parse(body.data(), body.size());
    if (!d.HasParseError() && d.IsObject()) {
      const auto err = d.FindMember("error");
      if (err != d.MemberEnd()) {
        if (err->value.IsString()) {
          return sanitize_excerpt({err->value.GetString(), err->value.GetStringLength()});
        }
        if (err->value.IsObject()) {
          const auto msg = err->value.FindMember("message");
          if (msg != err->value.MemberEnd() && msg->value.IsString()) {
            return sanitize_excerpt({msg->value.GetString(), msg->value.GetStringLength()});
          }
        }
      }
    }
  }
  return sanitize_excerpt(body);
}

std::string media_type(std::string_view content_type) {
  const auto semi = content_type.find(';');
  std::string_view t = content_type.substr(0, semi);
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t'))
    t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t'))
    t.remove_suffix(1);
  return lower(t);
}

}  // namespace mcpmqtt::http

#include "http/client_url.hpp"

#include <catch2/catch.hpp>

using mcpmqtt::http::parse_url;
using mcpmqtt::http::Url;

namespace {

Url good(const std::string& text) {
  auto u = parse_url(text);
  INFO(text << ": " << (u ? std::string() : u.error()));
  REQUIRE(u);
  return *u;
}

std::string bad(const std::string& text) {
  auto u = parse_url(text);
  INFO(text);
  REQUIRE_FALSE(u);
  return u.error();
}

}  // namespace

TEST_CASE("client URL: scheme decides TLS and the default port", "[http][client]") {
  const Url plain = good("http://example.com/mcp");
  CHECK_FALSE(plain.tls);
  CHECK(plain.host == "example.com");
  CHECK(plain.port == 80);
  CHECK(plain.target == "/mcp");
  CHECK(plain.host_header() == "example.com");
  CHECK(plain.service() == "80");

  const Url secure = good("HTTPS://Example.COM/mcp");
  CHECK(secure.tls);
  CHECK(secure.host == "example.com");
  CHECK(secure.port == 443);
  CHECK(secure.host_header() == "example.com");
  CHECK(secure.display() == "https://example.com/mcp");
}

TEST_CASE("client URL: explicit ports appear in Host only when not the default", "[http][client]") {
  CHECK(good("http://h:8080/mcp").port == 8080);
  CHECK(good("http://h:8080/mcp").host_header() == "h:8080");
  CHECK(good("https://h:443/mcp").host_header() == "h");
  CHECK(good("http://h:443/mcp").host_header() == "h:443");
  CHECK(good("http://h:/mcp").port == 80);  // empty port: the default (RFC 3986 §3.2.3)
  CHECK(good("http://h:65535/").port == 65535);
}

TEST_CASE("client URL: IPv4 and IPv6 literals", "[http][client]") {
  const Url v4 = good("http://127.0.0.1:9000/mcp");
  CHECK(v4.ip_literal);
  CHECK(v4.host == "127.0.0.1");
  CHECK(v4.host_header() == "127.0.0.1:9000");

  const Url v6 = good("http://[::1]:9000/mcp");
  CHECK(v6.ip_literal);
  CHECK(v6.host == "::1");
  CHECK(v6.port == 9000);
  CHECK(v6.host_header() == "[::1]:9000");
  CHECK(v6.display() == "http://[::1]:9000/mcp");

  const Url v6_default = good("https://[2001:DB8::1]/x");
  CHECK(v6_default.host == "2001:db8::1");
  CHECK(v6_default.port == 443);
  CHECK(v6_default.host_header() == "[2001:db8::1]");

  CHECK_FALSE(good("http://localhost/").ip_literal);
}

TEST_CASE("client URL: path and query form the target, the query stays out of logs",
          "[http][client]") {
  CHECK(good("http://h").target == "/");
  CHECK(good("http://h:1").target == "/");
  CHECK(good("http://h?x=1").target == "/?x=1");
  const Url q = good("https://h/a/b?api_key=secret&x=%20y#frag");
  CHECK(q.target == "/a/b?api_key=secret&x=%20y");
  CHECK(q.display() == "https://h/a/b");
  CHECK(good("http://h/mcp#only-a-fragment").target == "/mcp");
}

TEST_CASE("client URL: bad URLs are refused with the reason", "[http][client]") {
  CHECK(bad("ftp://h/mcp") == "unsupported scheme \"ftp\"; use an http:// or https:// URL");
  CHECK(bad("ws://h/mcp") == "unsupported scheme \"ws\"; use an http:// or https:// URL");
  CHECK(bad("example.com/mcp") == "expected an absolute URL such as https://example.com/mcp");
  CHECK(bad("") == "expected an absolute URL such as https://example.com/mcp");
  CHECK(bad("http:///mcp") == "the URL has no host");
  CHECK(bad("http://:80/mcp") == "the URL has no host");
  CHECK(bad("http://[]/") == "the URL has no host");
  CHECK(bad("http://h:0/") == "invalid port \"0\"; expected a number from 1 to 65535");
  CHECK(bad("http://h:65536/") == "invalid port \"65536\"; expected a number from 1 to 65535");
  CHECK(bad("http://h:12ab/") == "invalid port \"12ab\"; expected a number from 1 to 65535");
  CHECK(bad("http://h:1234567/") == "invalid port \"1234567\"; expected a number from 1 to 65535");
  CHECK(bad("http://user:pw@h/mcp") ==
        "credentials in the URL are not supported; put them in \"headers\" (for example "
        "\"Authorization\"), which are never logged");
  CHECK(bad("http://h/a b") ==
        "the URL contains a space, a control character or a non-ASCII character; "
        "percent-encode it");
  CHECK(bad("http://h/\xC3\xA9") ==
        "the URL contains a space, a control character or a non-ASCII character; "
        "percent-encode it");
  CHECK(bad("http://h\r\nX: y/") ==
        "the URL contains a space, a control character or a non-ASCII character; "
        "percent-encode it");
  CHECK(bad("http://[::1/") == "unterminated IPv6 address in \"[::1\"");
  CHECK(bad("http://[::1]x/") == "unexpected \"x\" after the IPv6 address");
  CHECK(bad("http://[zz::1]/") == "invalid IPv6 address \"zz::1\"");
  CHECK(bad("http://::1/") == "the URL has no host");  // IPv6 needs brackets
  CHECK(bad("http://h*st/") ==
        "invalid host name \"h*st\" (letters, digits, '-' and '.'; IPv6 addresses go in "
        "brackets)");
  CHECK(bad("http://256.1.1.1/") == "invalid IPv4 address \"256.1.1.1\"");
}

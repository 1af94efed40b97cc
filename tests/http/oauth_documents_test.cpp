// The pure OAuth pieces of http/: issuer identifiers and the well-known URLs derived from them,
// metadata documents, HTTP freshness, token responses and form-encoded client credentials.
#include "http/oauth_documents.hpp"

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "http/oauth_client_credentials.hpp"
#include "http/oauth_issuer.hpp"

using namespace std::chrono_literals;
namespace oauth = mcpmqtt::http::oauth;

TEST_CASE("RFC 8414 §3.1: the metadata URL inserts the well-known path before the issuer's path",
          "[oauth]") {
  CHECK(oauth::authorization_server_metadata_url("https://auth.example.com") ==
        "https://auth.example.com/.well-known/oauth-authorization-server");
  CHECK(oauth::authorization_server_metadata_url("https://auth.example.com/") ==
        "https://auth.example.com/.well-known/oauth-authorization-server");
  CHECK(oauth::authorization_server_metadata_url("https://auth.example.com/tenant1") ==
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1");
  CHECK(oauth::authorization_server_metadata_url("https://auth.example.com/tenant1/") ==
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1");
  CHECK(oauth::authorization_server_metadata_url("http://127.0.0.1:8080/a/b") ==
        "http://127.0.0.1:8080/.well-known/oauth-authorization-server/a/b");
  CHECK(oauth::authorization_server_metadata_url("https://[::1]:9443/x") ==
        "https://[::1]:9443/.well-known/oauth-authorization-server/x");
}

TEST_CASE("OpenID Connect Discovery §4: the configuration URL appends to the issuer's path",
          "[oauth]") {
  CHECK(oauth::openid_configuration_url("https://auth.example.com") ==
        "https://auth.example.com/.well-known/openid-configuration");
  CHECK(oauth::openid_configuration_url("https://auth.example.com/") ==
        "https://auth.example.com/.well-known/openid-configuration");
  CHECK(oauth::openid_configuration_url("https://auth.example.com/tenant1/") ==
        "https://auth.example.com/tenant1/.well-known/openid-configuration");
}

TEST_CASE("RFC 8414 §2: an issuer is https without query or fragment, http only on loopback",
          "[oauth]") {
  CHECK(oauth::check_issuer("https://auth.example.com"));
  CHECK(oauth::check_issuer("https://auth.example.com/realms/x"));
  CHECK(oauth::check_issuer("http://127.0.0.1:8080"));
  CHECK(oauth::check_issuer("http://127.1.2.3"));
  CHECK(oauth::check_issuer("http://[::1]:9000/"));
  CHECK(oauth::check_issuer("http://localhost:9000"));

  auto plain = oauth::check_issuer("http://auth.example.com");
  REQUIRE_FALSE(plain);
  CHECK_THAT(plain.error(),
             Catch::Contains("not an https URL") && Catch::Contains("only for a loopback address"));
  CHECK_FALSE(oauth::check_issuer("http://10.0.0.1"));
  CHECK_FALSE(oauth::check_issuer("http://[::2]"));
  CHECK_FALSE(oauth::check_issuer("http://localhost.example.com"));
  auto query = oauth::check_issuer("https://auth.example.com/?tenant=1");
  REQUIRE_FALSE(query);
  CHECK_THAT(query.error(), Catch::Contains("query or a fragment"));
  CHECK_FALSE(oauth::check_issuer("https://auth.example.com/#x"));
  auto scheme = oauth::check_issuer("ftp://auth.example.com");
  REQUIRE_FALSE(scheme);
  CHECK_THAT(scheme.error(), Catch::Contains("unsupported scheme"));
}

TEST_CASE("RFC 8414 §3.2: the metadata fields the bridge reads", "[oauth]") {
  const std::string doc = R"({
    "issuer": "https://auth.example.com",
    "jwks_uri": "https://auth.example.com/keys",
    "token_endpoint": "https://auth.example.com/token",
    "introspection_endpoint": "https://auth.example.com/introspect",
    "authorization_endpoint": "https://auth.example.com/authorize",
    "registration_endpoint": "https://auth.example.com/register",
    "scopes_supported": ["mcp:all", "mcp:weather"],
    "response_types_supported": ["code"]
  })";
  auto m = oauth::parse_metadata(doc, "https://auth.example.com");
  REQUIRE(m);
  CHECK(m->issuer == "https://auth.example.com");
  CHECK(m->jwks_uri == "https://auth.example.com/keys");
  CHECK(m->token_endpoint == "https://auth.example.com/token");
  CHECK(m->introspection_endpoint == "https://auth.example.com/introspect");
  CHECK(m->authorization_endpoint == "https://auth.example.com/authorize");
  CHECK(m->registration_endpoint == "https://auth.example.com/register");
  CHECK(m->scopes_supported == std::vector<std::string>{"mcp:all", "mcp:weather"});

  auto minimal = oauth::parse_metadata(R"({"issuer":"https://a.example"})", "https://a.example");
  REQUIRE(minimal);
  CHECK(minimal->jwks_uri.empty());
  CHECK(minimal->scopes_supported.empty());
}

TEST_CASE("RFC 8414 §3.3: metadata naming another issuer is refused, even by a trailing slash",
          "[oauth]") {
  auto other =
      oauth::parse_metadata(R"({"issuer":"https://evil.example"})", "https://auth.example.com");
  REQUIRE_FALSE(other);
  CHECK_THAT(other.error(),
             Catch::Contains("\"https://evil.example\"") && Catch::Contains("must be identical"));
  CHECK_FALSE(oauth::parse_metadata(R"({"issuer":"https://auth.example.com/"})",
                                    "https://auth.example.com"));
  CHECK_FALSE(oauth::parse_metadata(R"({"jwks_uri":"https://auth.example.com/k"})",
                                    "https://auth.example.com"));
}

TEST_CASE("RFC 8414 §3.2: malformed metadata is refused with the field that is wrong", "[oauth]") {
  const std::string issuer = "https://auth.example.com";
  auto not_json = oauth::parse_metadata("{\"issuer\":", issuer);
  REQUIRE_FALSE(not_json);
  CHECK_THAT(not_json.error(), Catch::Contains("not JSON"));
  auto array = oauth::parse_metadata("[]", issuer);
  REQUIRE_FALSE(array);
  CHECK_THAT(array.error(), Catch::Contains("not a JSON object"));
  auto jwks = oauth::parse_metadata(R"({"issuer":")" + issuer + R"(","jwks_uri":42})", issuer);
  REQUIRE_FALSE(jwks);
  CHECK_THAT(jwks.error(), Catch::Contains("jwks_uri is not a string"));
  auto http_keys = oauth::parse_metadata(
      R"({"issuer":")" + issuer + R"(","jwks_uri":"http://auth.example.com/k"})", issuer);
  REQUIRE_FALSE(http_keys);
  CHECK_THAT(http_keys.error(), Catch::Contains("jwks_uri") && Catch::Contains("not an https"));
  auto scopes =
      oauth::parse_metadata(R"({"issuer":")" + issuer + R"(","scopes_supported":[1]})", issuer);
  REQUIRE_FALSE(scopes);
  CHECK_THAT(scopes.error(), Catch::Contains("scopes_supported"));
  // Deep nesting is parsed without recursion, and refused for what it is.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK_FALSE(oauth::parse_metadata(deep, issuer));
  // Beside an http loopback issuer, http loopback endpoints are fine; others are not.
  CHECK(oauth::parse_metadata(
      R"({"issuer":"http://127.0.0.1:9","jwks_uri":"http://127.0.0.1:9/jwks"})",
      "http://127.0.0.1:9"));
  CHECK_FALSE(oauth::parse_metadata(
      R"({"issuer":"http://127.0.0.1:9","jwks_uri":"http://keys.example.com/jwks"})",
      "http://127.0.0.1:9"));
}

TEST_CASE("RFC 9110 §5.6.7: IMF-fixdate parsing", "[oauth]") {
  CHECK(oauth::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT") == 784111777);
  CHECK(oauth::parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT") == 0);
  CHECK(oauth::parse_http_date("Tue, 29 Feb 2028 23:59:59 GMT") == 1835481599);
  CHECK_FALSE(oauth::parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"));
  CHECK_FALSE(oauth::parse_http_date("Sun, 06 Now 1994 08:49:37 GMT"));
  CHECK_FALSE(oauth::parse_http_date("0"));
  CHECK_FALSE(oauth::parse_http_date(""));
}

TEST_CASE("RFC 9111 §4.2.1: freshness from Cache-Control and Expires", "[oauth]") {
  const std::int64_t now = 784111777;  // Sun, 06 Nov 1994 08:49:37 GMT
  using oauth::freshness_lifetime;
  CHECK(freshness_lifetime("max-age=600", "", "", "", now) == 600s);
  CHECK(freshness_lifetime("public, MAX-AGE=\"120\", must-revalidate", "", "", "", now) == 120s);
  CHECK(freshness_lifetime("max-age=600", "", "", "100", now) == 500s);
  CHECK(freshness_lifetime("max-age=60", "", "", "100", now) == 0s);
  // max-age wins over Expires.
  CHECK(freshness_lifetime("max-age=30", "Sun, 06 Nov 1994 09:49:37 GMT", "", "", now) == 30s);
  CHECK(freshness_lifetime("no-store", "", "", "", now) == 0s);
  CHECK(freshness_lifetime("max-age=600, no-cache", "", "", "", now) == 0s);
  CHECK(freshness_lifetime("", "Sun, 06 Nov 1994 09:49:37 GMT", "", "", now) == 3600s);
  CHECK(freshness_lifetime("", "Sun, 06 Nov 1994 09:49:37 GMT", "Sun, 06 Nov 1994 09:48:37 GMT", "",
                           now) == 60s);
  // §5.3: an invalid Expires means already expired.
  CHECK(freshness_lifetime("", "0", "", "", now) == 0s);
  CHECK(freshness_lifetime("max-age=abc", "", "", "", now) == 0s);
  CHECK(freshness_lifetime("max-age=99999999999999999999", "", "", "", now) > 24h);
  CHECK_FALSE(freshness_lifetime("", "", "", "", now));
  CHECK_FALSE(freshness_lifetime("public", "", "", "", now));
}

TEST_CASE("JWK Set refresh interval: the response's lifetime clamped to the bounds", "[oauth]") {
  using oauth::refresh_interval;
  const auto min = std::chrono::milliseconds(60s);
  const auto max = std::chrono::milliseconds(24h);
  const auto fallback = std::chrono::milliseconds(5min);
  CHECK(refresh_interval(600s, fallback, min, max) == 600s);
  CHECK(refresh_interval(0s, fallback, min, max) == 60s);
  CHECK(refresh_interval(std::chrono::seconds(365LL * 24 * 3600 * 1000), fallback, min, max) ==
        24h);
  CHECK(refresh_interval(std::nullopt, fallback, min, max) == 5min);
  CHECK(refresh_interval(std::nullopt, 10s, min, max) == 60s);
}

TEST_CASE("RFC 6749 §5.1: a token response", "[oauth]") {
  auto t = oauth::parse_token_response(
      R"({"access_token":"abc.def.ghi","token_type":"bearer","expires_in":3600,"scope":"a b"})");
  REQUIRE(t);
  CHECK(t->access_token == "abc.def.ghi");
  CHECK(t->expires_in == 3600);
  CHECK(t->scope == "a b");
  auto as_string = oauth::parse_token_response(
      R"({"access_token":"x","token_type":"Bearer","expires_in":"60"})");
  REQUIRE(as_string);
  CHECK(as_string->expires_in == 60);
  auto no_expiry = oauth::parse_token_response(R"({"access_token":"x","token_type":"Bearer"})");
  REQUIRE(no_expiry);
  CHECK_FALSE(no_expiry->expires_in);

  auto mac = oauth::parse_token_response(R"({"access_token":"secret-tok","token_type":"mac"})");
  REQUIRE_FALSE(mac);
  CHECK_THAT(mac.error(), Catch::Contains("token_type \"mac\" is not supported"));
  CHECK_THAT(mac.error(), !Catch::Contains("secret-tok"));
  CHECK_FALSE(oauth::parse_token_response(R"({"token_type":"Bearer"})"));
  CHECK_FALSE(oauth::parse_token_response(R"({"access_token":"a b","token_type":"Bearer"})"));
  CHECK_FALSE(
      oauth::parse_token_response(R"({"access_token":"x","token_type":"Bearer","expires_in":-5})"));
  CHECK_FALSE(oauth::parse_token_response("<html>"));
}

TEST_CASE("RFC 6749 §5.2: an error response's error and error_description", "[oauth]") {
  auto e = oauth::parse_token_error(
      R"({"error":"invalid_client","error_description":"unknown client\nor bad secret"})");
  REQUIRE(e);
  CHECK(e->error == "invalid_client");
  CHECK(e->description == "unknown client or bad secret");
  CHECK_FALSE(oauth::parse_token_error(R"({"message":"no"})"));
  CHECK_FALSE(oauth::parse_token_error("Internal Server Error"));
}

TEST_CASE("RFC 6749 §2.3.1 and Appendix B: form-encoded Basic client credentials", "[oauth]") {
  CHECK(oauth::form_urlencode("a b+c/d:e~f*-._") == "a+b%2Bc%2Fd%3Ae%7Ef*-._");
  CHECK(oauth::form_urlencode("é") == "%C3%A9");
  // base64("my+client:s%3Acr%26t") — the id and secret form-encoded before base64.
  CHECK(oauth::basic_authorization("my client", "s:cr&t") == "Basic bXkrY2xpZW50OnMlM0FjciUyNnQ=");
  CHECK(oauth::basic_authorization("id", "") == "Basic aWQ6");
}

TEST_CASE("IssuerKeys and ClientCredentials refuse a bad issuer or bounds at construction",
          "[oauth]") {
  boost::asio::io_context io;
  using mcpmqtt::http::ClientCredentials;
  using mcpmqtt::http::IssuerKeys;
  IssuerKeys::Options k;
  k.server.issuer = "http://auth.example.com";
  auto plain = IssuerKeys::create(io.get_executor(), k);
  REQUIRE_FALSE(plain);
  CHECK(plain.error() ==
        "the issuer \"http://auth.example.com\" is not an https URL; http is accepted only for "
        "a loopback address (127.0.0.1, [::1], localhost), for tests and local development");
  k.server.issuer = "https://auth.example.com";
  CHECK(IssuerKeys::create(io.get_executor(), k));
  k.min_refresh = std::chrono::hours(48);
  auto bounds = IssuerKeys::create(io.get_executor(), k);
  REQUIRE_FALSE(bounds);
  CHECK_THAT(bounds.error(), Catch::Contains("min_refresh must not exceed max_refresh"));
  k.min_refresh = std::chrono::seconds(60);
  k.server.ca_file = "/nonexistent/ca.pem";
  auto ca = IssuerKeys::create(io.get_executor(), k);
  REQUIRE_FALSE(ca);
  CHECK_THAT(ca.error(), Catch::Contains("cannot read the CA file \"/nonexistent/ca.pem\""));

  ClientCredentials::Options c;
  c.server.issuer = "https://auth.example.com";
  c.client_id = "bridge";
  c.client_secret = "secret";
  c.resource = "https://upstream.example.com/mcp";
  CHECK(ClientCredentials::create(io.get_executor(), c));
  c.resource = "https://upstream.example.com/mcp#frag";
  auto fragment = ClientCredentials::create(io.get_executor(), c);
  REQUIRE_FALSE(fragment);
  CHECK_THAT(fragment.error(), Catch::Contains("RFC 8707"));
  c.resource = "https://upstream.example.com/mcp";
  c.client_secret.clear();
  CHECK_FALSE(ClientCredentials::create(io.get_executor(), c));
  c.client_secret = "secret";
  c.server.issuer = "http://10.1.2.3";
  CHECK_FALSE(ClientCredentials::create(io.get_executor(), c));
}

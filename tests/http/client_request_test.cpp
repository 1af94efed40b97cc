#include "http/client_request.hpp"

#include <catch2/catch.hpp>

using namespace mcpmqtt::http;

namespace {

std::string field(const ClientRequest& req, const char* name) {
  auto it = req.find(name);
  return it == req.end() ? std::string("<absent>") : std::string(it->value());
}

Url url(const std::string& text) {
  auto u = parse_url(text);
  REQUIRE(u);
  return *u;
}

}  // namespace

TEST_CASE(
    "client requests: POST carries what 002 requires, and nothing of a session before "
    "there is one",
    "[http][client]") {
  const Url u = url("http://127.0.0.1:9000/mcp?k=v");
  const std::vector<Header> extra = {{"Authorization", "Bearer t0k3n"}, {"X-Tenant", "a"}};
  RequestContext ctx{&u, &extra, "", ""};
  const ClientRequest req = build_post(ctx, R"({"jsonrpc":"2.0","id":1,"method":"ping"})");
  CHECK(req.method() == boost::beast::http::verb::post);
  CHECK(req.target() == "/mcp?k=v");
  CHECK(req.version() == 11);
  CHECK(field(req, "Host") == "127.0.0.1:9000");
  CHECK(field(req, "Accept") == "application/json, text/event-stream");
  CHECK(field(req, "Content-Type") == "application/json");
  CHECK(field(req, "Content-Length") == "40");
  CHECK(field(req, "Authorization") == "Bearer t0k3n");
  CHECK(field(req, "X-Tenant") == "a");
  CHECK(field(req, "Mcp-Session-Id") == "<absent>");
  CHECK(field(req, "MCP-Protocol-Version") == "<absent>");
  CHECK(field(req, "User-Agent").rfind("mcp-mqtt-bridge/", 0) == 0);
  CHECK(req.body() == R"({"jsonrpc":"2.0","id":1,"method":"ping"})");

  ctx.session_id = "sess-1";
  ctx.protocol_version = "2025-06-18";
  const ClientRequest later = build_post(ctx, "{}");
  CHECK(field(later, "Mcp-Session-Id") == "sess-1");
  CHECK(field(later, "MCP-Protocol-Version") == "2025-06-18");
}

TEST_CASE(
    "client requests (streamable-http §Standard Request Headers): a 2026-07-28 POST has "
    "MCP-Protocol-Version, Mcp-Method, Mcp-Name and Mcp-Param-{Name}, and no session whatever "
    "the context holds",
    "[http][client][modern]") {
  const Url u = url("http://127.0.0.1:9000/mcp");
  const std::vector<Header> extra = {{"Authorization", "Bearer t0k3n"}};
  RequestContext ctx{&u, &extra, "sess-1", "2025-06-18"};
  const ClientRequest req = build_modern_post(
      ctx, "{}",
      ModernHeaders{"2026-07-28", "tools/call", "=?base64?eA==?=", {{"Mcp-Param-region", "eu"}}});
  CHECK(field(req, "MCP-Protocol-Version") == "2026-07-28");
  CHECK(field(req, "Mcp-Method") == "tools/call");
  CHECK(field(req, "Mcp-Name") == "=?base64?eA==?=");
  CHECK(field(req, "Mcp-Param-Region") == "eu");  // SEP-2243
  CHECK(field(req, "Mcp-Session-Id") == "<absent>");
  CHECK(field(req, "Authorization") == "Bearer t0k3n");
  CHECK(field(req, "Accept") == "application/json, text/event-stream");
  const ClientRequest note = build_modern_post(ctx, "{}", ModernHeaders{"2026-07-28", "", "", {}});
  CHECK(field(note, "Mcp-Method") == "<absent>");
  CHECK(field(note, "Mcp-Name") == "<absent>");
  for (const char* reserved : {"Mcp-Method", "mcp-name"}) {
    INFO(reserved);
    CHECK_FALSE(check_extra_headers({{reserved, "v"}}));
  }
}

TEST_CASE("client requests: GET asks for an event stream, with Last-Event-ID to resume",
          "[http][client]") {
  const Url u = url("https://[::1]/mcp");
  const std::vector<Header> extra;
  RequestContext ctx{&u, &extra, "s", "2025-03-26"};
  const ClientRequest first = build_get(ctx, "");
  CHECK(first.method() == boost::beast::http::verb::get);
  CHECK(field(first, "Host") == "[::1]");
  CHECK(field(first, "Accept") == "text/event-stream");
  CHECK(field(first, "Last-Event-ID") == "<absent>");
  CHECK(field(first, "Mcp-Session-Id") == "s");
  CHECK(field(first, "Content-Type") == "<absent>");
  const ClientRequest resume = build_get(ctx, "stream-1:42");
  CHECK(field(resume, "Last-Event-ID") == "stream-1:42");

  const ClientRequest del = build_delete(ctx);
  CHECK(del.method() == boost::beast::http::verb::delete_);
  CHECK(field(del, "Mcp-Session-Id") == "s");
  CHECK(field(del, "MCP-Protocol-Version") == "2025-03-26");
}

TEST_CASE("client requests: configured headers are checked without showing their values",
          "[http][client]") {
  CHECK(check_extra_headers({{"Authorization", "Bearer x"}, {"X-Api-Key", "k\tv"}}));
  auto crlf = check_extra_headers({{"Authorization", "Bearer x\r\nX-Evil: 1"}});
  REQUIRE_FALSE(crlf);
  CHECK(crlf.error() ==
        "the value of header \"Authorization\" contains a line break or a control character");
  CHECK(crlf.error().find("Bearer") == std::string::npos);
  auto name = check_extra_headers({{"Bad Name", "v"}});
  REQUIRE_FALSE(name);
  CHECK(name.error() == "header name \"Bad Name\" is not a valid HTTP header name");
  auto empty = check_extra_headers({{"", "v"}});
  REQUIRE_FALSE(empty);
  CHECK(empty.error() == "header name \"\" is not a valid HTTP header name");
  for (const char* reserved : {"Host", "content-length", "Mcp-Session-Id", "MCP-Protocol-Version",
                               "Transfer-Encoding", "Accept", "Last-Event-ID", "Connection"}) {
    auto r = check_extra_headers({{reserved, "v"}});
    INFO(reserved);
    REQUIRE_FALSE(r);
    CHECK(r.error() == std::string("header \"") + reserved +
                           "\" is set by the Streamable HTTP transport and cannot be configured");
  }
  CHECK(header_names({{"Authorization", "secret"}, {"X-Api-Key", "secret"}}) ==
        "Authorization, X-Api-Key");
}

TEST_CASE("client requests: session ids and versions from the server are checked",
          "[http][client]") {
  CHECK(is_valid_session_id("1868a90c-abc"));
  CHECK(is_valid_session_id(std::string(1024, 'a')));
  CHECK_FALSE(is_valid_session_id(std::string(1025, 'a')));
  CHECK_FALSE(is_valid_session_id(""));
  CHECK_FALSE(is_valid_session_id("has space"));
  CHECK_FALSE(is_valid_session_id("tab\t"));
  CHECK_FALSE(is_valid_session_id("\xC3\xA9"));
  CHECK(is_valid_protocol_version("2025-06-18"));
  CHECK_FALSE(is_valid_protocol_version(""));
  CHECK_FALSE(is_valid_protocol_version("2025 06 18"));
  CHECK_FALSE(is_valid_protocol_version(std::string(65, '1')));
}

TEST_CASE("client requests: error bodies become short, safe excerpts", "[http][client]") {
  CHECK(sanitize_excerpt("  database\r\n\tis   down \x01 ") == "database is down");
  CHECK(sanitize_excerpt("caf\xC3\xA9 \xFF\xFE ok") == "caf\xC3\xA9 ?? ok");
  CHECK(sanitize_excerpt("\xE2\x82") == "??");       // a truncated sequence
  CHECK(sanitize_excerpt("\xED\xA0\x80") == "???");  // a UTF-16 surrogate is not UTF-8
  CHECK(sanitize_excerpt("abcdefghij", 5) == "abcde...");
  CHECK(sanitize_excerpt("abc\xE2\x82\xAC", 5) == "abc...");  // never cuts inside a character
  CHECK(sanitize_excerpt("") == "");

  CHECK(
      describe_error_body(
          "application/json; charset=utf-8",
          R"({"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: No valid session ID"}})") ==
      "Bad Request: No valid session ID");
  CHECK(describe_error_body("application/json", R"({"error":"invalid_token"})") == "invalid_token");
  CHECK(describe_error_body("application/json", "{not json") == "{not json");
  CHECK(describe_error_body("text/html", "<h1>Bad\nGateway</h1>") == "<h1>Bad Gateway</h1>");
  CHECK(media_type(" Text/Event-Stream ; charset=utf-8") == "text/event-stream");
  CHECK(media_type("application/json") == "application/json");
  CHECK(media_type("") == "");
}

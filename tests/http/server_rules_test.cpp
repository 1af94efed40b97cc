// Pure rules of the Streamable HTTP server: routes, Host/Origin (002 §Security Warning), media
// types, bearer tokens, session ids, protocol versions, SSE framing.
#include "http/server_rules.hpp"

#include <set>

#include <catch2/catch.hpp>

#include "http/server_sse.hpp"

using namespace mcpmqtt::http;
using boost::asio::ip::make_address;

TEST_CASE("routes: fixed paths and the default MCP endpoint", "[http][rules]") {
  CHECK(parse_route("/mcp").kind == Route::Kind::mcp);
  CHECK(parse_route("/mcp").server_name.empty());
  CHECK(parse_route("/mcp?x=1").kind == Route::Kind::mcp);
  CHECK(parse_route("/servers").kind == Route::Kind::servers);
  CHECK(parse_route("/servers/").kind == Route::Kind::servers);
  CHECK(parse_route("/healthz").kind == Route::Kind::healthz);
  CHECK(parse_route("/readyz").kind == Route::Kind::readyz);
  CHECK(parse_route("/metrics").kind == Route::Kind::metrics);
  for (const char* t : {"/", "", "/mcp/", "/MCP", "/servers/mcp", "/serversx/a/mcp", "/x/mcp",
                        "/servers/a/mcpx", "/healthz/"}) {
    INFO(t);
    CHECK(parse_route(t).kind == Route::Kind::not_found);
  }
}

TEST_CASE("routes: a server-name with encoded slashes or as path segments", "[http][rules]") {
  for (const char* t : {"/servers/demo%2Feverything/mcp", "/servers/demo%2feverything/mcp",
                        "/servers/demo/everything/mcp", "/servers/demo/everything/mcp?a=b"}) {
    INFO(t);
    auto r = parse_route(t);
    CHECK(r.kind == Route::Kind::mcp);
    CHECK(r.server_name == "demo/everything");
  }
  CHECK(parse_route("/servers/a/b%2Fc/mcp").server_name == "a/b/c");
  CHECK(parse_route("/servers/weather/mcp").server_name == "weather");
  // A server-name whose last level is "mcp".
  CHECK(parse_route("/servers/tools/mcp/mcp").server_name == "tools/mcp");
  CHECK(parse_route("/servers/caf%C3%A9/mcp").server_name == "café");
}

TEST_CASE("routes: invalid server-names say why", "[http][rules]") {
  auto plus = parse_route("/servers/a%2Bb/mcp");
  CHECK(plus.kind == Route::Kind::bad_server_name);
  CHECK(plus.problem == "the server-name in the path must not contain '+' or '#'");
  CHECK(parse_route("/servers/a+b/mcp").kind == Route::Kind::bad_server_name);
  CHECK(parse_route("/servers/a%23b/mcp").kind == Route::Kind::bad_server_name);
  auto empty_level = parse_route("/servers/a//b/mcp");
  CHECK(empty_level.kind == Route::Kind::bad_server_name);
  CHECK(empty_level.problem.find("no empty level") != std::string::npos);
  CHECK(parse_route("/servers//mcp").kind == Route::Kind::bad_server_name);
  CHECK(parse_route("/servers/a%2F/mcp").kind == Route::Kind::bad_server_name);
  auto escape = parse_route("/servers/a%2/mcp");
  CHECK(escape.kind == Route::Kind::bad_server_name);
  CHECK(escape.problem == "the server-name in the path has a malformed percent-escape");
  CHECK(parse_route("/servers/a%zz/mcp").kind == Route::Kind::bad_server_name);
  CHECK(parse_route("/servers/a%00b/mcp").kind == Route::Kind::bad_server_name);
  CHECK(parse_route("/servers/a%0Ab/mcp").problem ==
        "the server-name in the path must not contain control characters");
  CHECK(parse_route("/servers/%FF/mcp").kind == Route::Kind::bad_server_name);  // not UTF-8
}

TEST_CASE("percent-decoding", "[http][rules]") {
  CHECK(percent_decode("a%20b%2F") == std::optional<std::string>("a b/"));
  CHECK(percent_decode("plain") == std::optional<std::string>("plain"));
  CHECK_FALSE(percent_decode("%"));
  CHECK_FALSE(percent_decode("%4"));
  CHECK_FALSE(percent_decode("%G0"));
}

TEST_CASE("Host: loopback binds accept localhost names with any port", "[http][rules]") {
  const auto v4 = make_address("127.0.0.1");
  const auto v6 = make_address("::1");
  for (const auto& local : {v4, v6}) {
    for (const char* h : {"localhost", "localhost:8080", "LOCALHOST:1", "127.0.0.1",
                          "127.0.0.1:65535", "[::1]", "[::1]:8080"}) {
      INFO(h);
      CHECK(host_allowed(h, local, {}));
    }
    for (const char* h :
         {"", "evil.example", "evil.example:8080", "localhost.evil.example", "10.0.0.1", "::1",
          "127.0.0.1:x", "127.0.0.1:", "[::1", "a b", "user@localhost"}) {
      INFO(h);
      CHECK_FALSE(host_allowed(h, local, {}));
    }
  }
  CHECK(host_allowed("bridge.lan:8080", v4, {"bridge.lan"}));
  CHECK(host_allowed("Bridge.LAN", v4, {"bridge.lan"}));
  CHECK(host_allowed("bridge.lan:8080", v4, {"bridge.lan:8080"}));
  CHECK_FALSE(host_allowed("bridge.lan:9090", v4, {"bridge.lan:8080"}));
}

TEST_CASE("Host: other binds accept the address the client used and the listed names",
          "[http][rules]") {
  const auto lan = make_address("192.168.1.20");
  CHECK(host_allowed("192.168.1.20:8080", lan, {}));
  CHECK(host_allowed("192.168.1.20", lan, {}));
  CHECK_FALSE(host_allowed("localhost:8080", lan, {}));
  CHECK_FALSE(host_allowed("127.0.0.1:8080", lan, {}));
  CHECK_FALSE(host_allowed("192.168.1.21:8080", lan, {}));
  CHECK_FALSE(host_allowed("bridge.lan:8080", lan, {}));
  CHECK(host_allowed("bridge.lan:8080", lan, {"bridge.lan"}));
  const auto v6 = make_address("fd00::20");
  CHECK(host_allowed("[fd00::20]:8080", v6, {}));
  CHECK(host_allowed("[FD00:0::20]:8080", v6, {}));
  CHECK(host_allowed("[fd00::21]:1", v6, {"fd00::21"}));
  CHECK(host_allowed("[fd00::21]:1", v6, {"[fd00::21]"}));
  // A wildcard bind: an IPv4 client on a dual-stack socket shows as a v4-mapped address.
  CHECK(host_allowed("127.0.0.1:8080", make_address("::ffff:127.0.0.1"), {}));
  CHECK(host_allowed("localhost:8080", make_address("::ffff:127.0.0.1"), {}));
}

TEST_CASE("Origin: absent, listed, or localhost over loopback", "[http][rules]") {
  const auto lo = make_address("127.0.0.1");
  const auto lan = make_address("192.168.1.20");
  CHECK(origin_allowed("", lo, {}));
  CHECK(origin_allowed("", lan, {}));
  for (const char* o : {"http://localhost", "http://localhost:6274", "https://127.0.0.1:3000",
                        "http://[::1]:5173", "HTTP://LOCALHOST:1"}) {
    INFO(o);
    CHECK(origin_allowed(o, lo, {}));
    CHECK_FALSE(origin_allowed(o, lan, {}));
  }
  for (const char* o :
       {"http://evil.example", "http://localhost.evil.example", "null", "file://",
        "ftp://localhost", "http://localhost@evil.example", "localhost", "http://"}) {
    INFO(o);
    CHECK_FALSE(origin_allowed(o, lo, {}));
  }
  const std::vector<std::string> listed = {"https://app.example.com", "http://tool.lan:8000/"};
  CHECK(origin_allowed("https://app.example.com", lan, listed));
  CHECK(origin_allowed("HTTPS://APP.EXAMPLE.COM", lan, listed));
  CHECK(origin_allowed("http://tool.lan:8000", lan, listed));
  CHECK_FALSE(origin_allowed("https://app.example.com:444", lan, listed));
  CHECK_FALSE(origin_allowed("http://app.example.com", lan, listed));
  CHECK(origin_listed("https://app.example.com", listed));
  CHECK_FALSE(origin_listed("http://localhost", listed));
}

TEST_CASE("Accept lists a type explicitly, and Content-Type is JSON", "[http][rules]") {
  CHECK(accept_lists("application/json, text/event-stream", "application/json"));
  CHECK(accept_lists("application/json, text/event-stream", "text/event-stream"));
  CHECK(accept_lists("text/event-stream;q=0.9,application/json", "text/event-stream"));
  CHECK(accept_lists("APPLICATION/JSON ; charset=utf-8", "application/json"));
  CHECK_FALSE(accept_lists("*/*", "application/json"));
  CHECK_FALSE(accept_lists("application/*", "application/json"));
  CHECK_FALSE(accept_lists("application/json-seq", "application/json"));
  CHECK_FALSE(accept_lists("text/event-stream;q=0", "text/event-stream"));
  CHECK_FALSE(accept_lists("text/event-stream; q=0.0", "text/event-stream"));
  CHECK_FALSE(accept_lists("", "application/json"));

  CHECK(is_json_content_type("application/json"));
  CHECK(is_json_content_type("Application/JSON; charset=utf-8"));
  CHECK_FALSE(is_json_content_type("text/plain"));
  CHECK_FALSE(is_json_content_type("application/jsonx"));
  CHECK_FALSE(is_json_content_type(""));
}

TEST_CASE("constant-time compare and bearer tokens", "[http][rules]") {
  CHECK(constant_time_equal("secret", "secret"));
  CHECK_FALSE(constant_time_equal("secret", "secreT"));
  CHECK_FALSE(constant_time_equal("secret", "secret2"));
  CHECK_FALSE(constant_time_equal("", "x"));
  CHECK(constant_time_equal("", ""));

  BearerTokens none({});
  CHECK_FALSE(none.enabled());

  BearerTokens tokens({"tok-a", "tok-b"});
  CHECK(tokens.enabled());
  CHECK(tokens.check("Bearer tok-a") == BearerTokens::Result::ok);
  CHECK(tokens.check("bearer tok-b") == BearerTokens::Result::ok);
  CHECK(tokens.check("  Bearer   tok-b  ") == BearerTokens::Result::ok);
  CHECK(tokens.check("") == BearerTokens::Result::missing);
  CHECK(tokens.check("Bearer tok-c") == BearerTokens::Result::invalid);
  CHECK(tokens.check("Bearer tok-a2") == BearerTokens::Result::invalid);
  CHECK(tokens.check("Bearer ") == BearerTokens::Result::invalid);
  CHECK(tokens.check("Basic dG9rLWE=") == BearerTokens::Result::invalid);
  CHECK(tokens.check("tok-a") == BearerTokens::Result::invalid);
}

TEST_CASE("session ids: 128 random bits as visible ASCII", "[http][rules]") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const auto id = new_session_id();
    REQUIRE(id.size() == 32);
    for (char c : id)
      CHECK(((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')));
    CHECK(seen.insert(id).second);
  }
}

TEST_CASE("protocol versions", "[http][rules]") {
  for (const char* v : {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})
    CHECK(is_supported_protocol_version(v));
  CHECK_FALSE(is_supported_protocol_version("2026-07-28"));
  CHECK_FALSE(is_supported_protocol_version("1.0"));
  CHECK(supported_protocol_versions_text() == "2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25");
  CHECK(wants_priming("2025-11-25"));
  CHECK_FALSE(wants_priming("2025-06-18"));
  CHECK_FALSE(wants_priming(""));
}

TEST_CASE("error bodies are JSON-RPC error responses", "[http][rules]") {
  CHECK(error_body(-32000, "Bad \"thing\"") ==
        R"({"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad \"thing\""}})");
  auto m =
      mcpmqtt::jsonrpc::Message::parse(error_body(-32600, "x", mcpmqtt::jsonrpc::Id::integer(4)));
  REQUIRE(m);
  CHECK(m->error().code == -32600);
  CHECK(m->id() == mcpmqtt::jsonrpc::Id::integer(4));
}

TEST_CASE("SSE framing: events, priming, keep-alive", "[http][sse]") {
  CHECK(sse_event("3-1", R"({"jsonrpc":"2.0","id":1,"result":{}})") ==
        "event: message\nid: 3-1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n");
  CHECK(sse_event("", "{}") == "event: message\ndata: {}\n\n");
  // A line break would end the data field; each line becomes its own data: line.
  CHECK(sse_event("1-1", "a\nb\r\nc\rd") ==
        "event: message\nid: 1-1\ndata: a\ndata: b\ndata: c\ndata: d\n\n");
  CHECK(sse_priming("0-1", 1000) == "id: 0-1\nretry: 1000\ndata: \n\n");
  CHECK(sse_keepalive() == ": keepalive\n\n");
}

TEST_CASE("chunk framing: the size line and what is left after any partial write", "[http][sse]") {
  char head[24];
  REQUIRE(chunk_head(head, 26) == 4);
  CHECK(std::string(head, 4) == "1a\r\n");
  REQUIRE(chunk_head(head, 1 << 20) == 8);
  CHECK(std::string(head, 8) == "100000\r\n");
  // RFC 9112 §7.1: size line, data, CRLF. Whatever number of bytes went, the tail is the rest
  // of exactly that chunk: inside the size line, the data or the final CRLF.
  const std::string data = "event: message\ndata: {}\n\n";
  const std::size_t head_len = chunk_head(head, data.size());
  const std::string whole = std::string(head, head_len) + data + "\r\n";
  for (std::size_t sent = 1; sent < whole.size(); ++sent) {
    std::string buffer = data;
    keep_chunk_tail(buffer, head, head_len, sent);
    INFO("sent " << sent);
    CHECK(buffer == whole.substr(sent));
  }
}

// The Streamable HTTP server's answers to bad and unusual requests over real HTTP on loopback
// port 0: every row of the status table in spec/notes.md, limits, DNS rebinding protection,
// bearer tokens, CORS, routes — and the daemon keeps serving afterwards.
#include "tests/http/server_test_support.hpp"
#include "tests/support/prerequisite.hpp"
#include "tests/support/wait.hpp"

using namespace mcpmqtt::test;
using mcpmqtt::jsonrpc::Kind;

namespace {

// The session still answers, and (unless told otherwise) a new session can be made.
void check_still_serving(TestServer& ts, const std::string& sid, bool new_session = true) {
  RawClient c(ts.endpoint);
  c.send(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid, "2025-11-25"),
         request_body(900, "tools/list"));
  auto head = c.read_header();
  REQUIRE(head.status == 200);
  auto res = sse_response(c);
  REQUIRE(res);
  CHECK(res->id() == Id::integer(900));
  CHECK(res->kind() == Kind::result);
  if (new_session) CHECK(open_session(ts).size() == 32);
}

}  // namespace

TEST_CASE("http: every row of the status table, and the daemon keeps serving",
          "[http][integration]") {
  TestServer ts;
  const auto sid = open_session(ts);
  const auto host = ts.host();
  auto post = [&](const Headers& h, const std::string& body) {
    RawClient c(ts.endpoint);
    return c.request(bhttp::verb::post, "/mcp", h, body);
  };
  auto with = [](Headers h, const std::string& name, const std::string& value) {
    for (auto& [k, v] : h)
      if (k == name) {
        v = value;
        return h;
      }
    h.emplace_back(name, value);
    return h;
  };

  SECTION("bad Host → 403 -32000") {
    auto r =
        post(with(post_headers(host, sid), "Host", "evil.example:8080"), request_body(2, "ping"));
    CHECK(r.status == 403);
    CHECK(r.error_code() == -32000);
    CHECK(r.error_message().find("http.allowed_hosts") != std::string::npos);
    RawClient c(ts.endpoint);
    CHECK(c.request(bhttp::verb::get, "/servers", {{"Host", "evil.example"}}).status == 403);
  }
  SECTION("bad Origin → 403 -32000") {
    auto r = post(with(post_headers(host, sid), "Origin", "http://evil.example"),
                  request_body(2, "ping"));
    CHECK(r.status == 403);
    CHECK(r.error_code() == -32000);
    // A localhost origin over loopback is fine.
    auto ok = post(with(post_headers(host, sid), "Origin", "http://localhost:6274"),
                   request_body(3, "ping"));
    CHECK(ok.status == 200);
    CHECK_FALSE(ok.has("access-control-allow-origin"));
  }
  SECTION("Accept lacking a type → 406") {
    auto json_only =
        post(with(post_headers(host, sid), "Accept", "application/json"), request_body(2, "ping"));
    CHECK(json_only.status == 406);
    CHECK(json_only.error_code() == -32000);
    CHECK(
        post(with(post_headers(host, sid), "Accept", "text/event-stream"), request_body(2, "ping"))
            .status == 406);
    CHECK(post(with(post_headers(host, sid), "Accept", "*/*"), request_body(2, "ping")).status ==
          406);
    RawClient c(ts.endpoint);
    auto get = c.request(bhttp::verb::get, "/mcp",
                         {{"Host", host}, {"Accept", "application/json"}, {"Mcp-Session-Id", sid}});
    CHECK(get.status == 406);
  }
  SECTION("Content-Type not JSON → 415") {
    auto r =
        post(with(post_headers(host, sid), "Content-Type", "text/plain"), request_body(2, "ping"));
    CHECK(r.status == 415);
    CHECK(r.error_code() == -32000);
  }
  SECTION("body not JSON → 400 -32700; not JSON-RPC → 400 -32600") {
    auto parse = post(post_headers(host, sid), "{not json");
    CHECK(parse.status == 400);
    CHECK(parse.error_code() == -32700);
    CHECK(parse.error_message().find("line 1 column 2") != std::string::npos);
    auto invalid = post(post_headers(host, sid), R"({"foo":1})");
    CHECK(invalid.status == 400);
    CHECK(invalid.error_code() == -32600);
    CHECK(invalid.error_message().find("jsonrpc") != std::string::npos);
    CHECK(post(post_headers(host, sid), "[]").error_code() == -32600);
    CHECK(post(post_headers(host, sid), "").error_code() == -32700);
    CHECK(post(post_headers(host), "42").status == 400);
  }
  SECTION("second initialize, or initialize in a batch → 400 -32600") {
    auto second = post(post_headers(host, sid), initialize_body(5));
    CHECK(second.status == 400);
    CHECK(second.error_code() == -32600);
    auto batch = post(post_headers(host), "[" + initialize_body(6) + "," + kInitialized + "]");
    CHECK(batch.status == 400);
    CHECK(batch.error_code() == -32600);
    CHECK(batch.error_message().find("alone") != std::string::npos);
    CHECK_FALSE(batch.has("mcp-session-id"));
  }
  SECTION("missing Mcp-Session-Id after initialize → 400 -32000") {
    auto r = post(post_headers(host), request_body(2, "tools/list"));
    CHECK(r.status == 400);
    CHECK(r.error_code() == -32000);
    CHECK(r.error_message().find("Mcp-Session-Id header is required") != std::string::npos);
    RawClient c(ts.endpoint);
    CHECK(c.request(bhttp::verb::get, "/mcp", {{"Host", host}, {"Accept", "text/event-stream"}})
              .status == 400);
    CHECK(c.request(bhttp::verb::delete_, "/mcp", {{"Host", host}}).status == 400);
  }
  SECTION("unknown session → 404 -32001") {
    const std::string unknown(32, 'a');
    auto r = post(post_headers(host, unknown), request_body(2, "tools/list"));
    CHECK(r.status == 404);
    CHECK(r.error_code() == -32001);
    RawClient c(ts.endpoint);
    CHECK(c.request(bhttp::verb::get, "/mcp", get_headers(host, unknown)).status == 404);
    CHECK(c.request(bhttp::verb::delete_, "/mcp", {{"Host", host}, {"Mcp-Session-Id", unknown}})
              .status == 404);
    // A session of another endpoint is not found on this one.
    CHECK(c.request(bhttp::verb::post, "/servers/other/server/mcp", post_headers(host, sid),
                    request_body(3, "ping"))
              .status == 404);
  }
  SECTION("unsupported MCP-Protocol-Version → 400 -32000 listing the supported ones") {
    auto r = post(post_headers(host, sid, "2099-01-01"), request_body(2, "tools/list"));
    CHECK(r.status == 400);
    CHECK(r.error_code() == -32000);
    CHECK(r.error_message() ==
          "Bad Request: Unsupported protocol version: 2099-01-01 (supported versions: "
          "2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25)");
    // Absent is accepted (the spec allows it).
    CHECK(post(post_headers(host, sid), request_body(3, "ping")).status == 200);
  }
  SECTION("only notifications or responses → 202 with no body") {
    auto n = post(post_headers(host, sid), R"({"jsonrpc":"2.0","method":"notifications/x"})");
    CHECK(n.status == 202);
    CHECK(n.body.empty());
    auto resp = post(post_headers(host, sid), R"({"jsonrpc":"2.0","id":"s1","result":{}})");
    CHECK(resp.status == 202);
    auto both = post(post_headers(host, sid),
                     R"([{"jsonrpc":"2.0","method":"notifications/y"},)"
                     R"({"jsonrpc":"2.0","id":"s2","error":{"code":-1,"message":"no"}}])");
    CHECK(both.status == 202);
    REQUIRE(ts.backend.wait_received(0, "notifications/y"));
  }
  SECTION("second GET stream → 409") {
    RawClient g(ts.endpoint);
    g.send(bhttp::verb::get, "/mcp", get_headers(host, sid));
    REQUIRE(g.read_header().status == 200);
    RawClient c(ts.endpoint);
    auto r = c.request(bhttp::verb::get, "/mcp", get_headers(host, sid));
    CHECK(r.status == 409);
    CHECK(r.error_code() == -32000);
  }
  SECTION("other methods → 405 with Allow: GET, POST, DELETE") {
    for (auto verb : {bhttp::verb::put, bhttp::verb::patch, bhttp::verb::head}) {
      RawClient c(ts.endpoint);
      c.send(verb, "/mcp", post_headers(host, sid), verb == bhttp::verb::head ? "" : "{}");
      auto r = c.read_header();
      CHECK(r.status == 405);
      CHECK(r.header("allow") == "GET, POST, DELETE");
    }
    RawClient c(ts.endpoint);
    auto r = c.request(bhttp::verb::post, "/servers", post_headers(host), "{}");
    CHECK(r.status == 405);
    CHECK(r.header("allow") == "GET, HEAD");
  }
  SECTION("malformed HTTP → 400, and a request that never completes is cut off") {
    RawClient c(ts.endpoint);
    REQUIRE(c.write_raw("NOT HTTP AT ALL\r\n\r\n"));
    auto r = c.read_response();
    CHECK(r.status == 400);
    CHECK(c.wait_closed());
  }
  check_still_serving(ts, sid);
}

TEST_CASE("http: an incomplete request is cut off after request_header_timeout_ms",
          "[http][integration]") {
  TestServer ts(config_with([](auto& c) { c.limits.request_header_timeout_ms = 300; }));
  RawClient c(ts.endpoint);
  REQUIRE(c.write_raw("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
  const auto start = std::chrono::steady_clock::now();
  CHECK(c.wait_closed(10s));
  CHECK(std::chrono::steady_clock::now() - start < 8s);
  // A body that never arrives counts too.
  RawClient b(ts.endpoint);
  REQUIRE(b.write_raw("POST /mcp HTTP/1.1\r\nHost: " + ts.host() +
                      "\r\nAccept: application/json, text/event-stream\r\n"
                      "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"));
  CHECK(b.wait_closed(10s));
  CHECK(open_session(ts).size() == 32);
}

TEST_CASE("http: an oversized body gets 413 with a JSON-RPC error", "[http][integration]") {
  TestServer ts(config_with([](auto& c) { c.limits.max_body_bytes = 2048; }));
  const auto sid = open_session(ts);
  const std::string big =
      request_body(2, "tools/call",
                   R"({"name":"echo","arguments":{"text":")" + std::string(10000, 'x') + R"("}})");
  RawClient c(ts.endpoint);
  auto r = c.request(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid), big);
  CHECK(r.status == 413);
  CHECK(r.error_code() == -32000);
  CHECK(r.error_message().find("http.limits.max_body_bytes") != std::string::npos);
  CHECK(c.wait_closed());
  // Chunked bodies are held to the same limit.
  RawClient chunked(ts.endpoint);
  REQUIRE(chunked.write_raw("POST /mcp HTTP/1.1\r\nHost: " + ts.host() +
                            "\r\nAccept: application/json, text/event-stream\r\n"
                            "Content-Type: application/json\r\nMcp-Session-Id: " +
                            sid + "\r\nTransfer-Encoding: chunked\r\n\r\n"));
  std::string chunks;
  for (int i = 0; i < 4; ++i)
    chunks += "400\r\n" + std::string(1024, ' ') + "\r\n";
  chunked.write_raw(chunks);
  auto rc = chunked.read_response();
  CHECK(rc.status == 413);
  check_still_serving(ts, sid);
}

TEST_CASE(
    "http: bearer tokens guard every route but /healthz - /readyz answers its status without "
    "one, and why only with one",
    "[http][integration]") {
  TestServer ts(config_with([](auto& c) { c.bearer_tokens = {"s3cret-token", "other"}; }));
  const auto host = ts.host();
  RawClient c(ts.endpoint);
  auto none = c.request(bhttp::verb::post, "/mcp", post_headers(host), initialize_body());
  CHECK(none.status == 401);
  CHECK(none.header("www-authenticate") == "Bearer realm=\"mcp-mqtt-bridge\"");
  CHECK(none.error_code() == -32000);
  CHECK_FALSE(none.has("mcp-session-id"));

  auto wrong_headers = post_headers(host);
  wrong_headers.emplace_back("Authorization", "Bearer s3cret-tokeN");
  auto wrong = c.request(bhttp::verb::post, "/mcp", wrong_headers, initialize_body());
  CHECK(wrong.status == 401);
  CHECK(wrong.header("www-authenticate") ==
        "Bearer realm=\"mcp-mqtt-bridge\", error=\"invalid_token\"");
  CHECK(c.request(bhttp::verb::get, "/servers", {{"Host", host}}).status == 401);
  CHECK(c.request(bhttp::verb::get, "/metrics", {{"Host", host}}).status == 401);
  CHECK(c.request(bhttp::verb::get, "/healthz", {{"Host", host}}).status == 200);
  CHECK(ts.backend.session_count() == 0);
  // Probes carry no token: the status code, not the reasons.
  auto probe = c.request(bhttp::verb::get, "/readyz", {{"Host", host}});
  CHECK(probe.status == 200);
  CHECK(probe.body == "ready");
  ts.backend.ready_ = false;
  probe = c.request(bhttp::verb::get, "/readyz", {{"Host", host}});
  CHECK(probe.status == 503);
  CHECK(probe.body == "not ready");
  auto told =
      c.request(bhttp::verb::get, "/readyz", {{"Host", host}, {"Authorization", "Bearer other"}});
  CHECK(told.status == 503);
  CHECK(told.body == "not ready: the broker connection is down");
  ts.backend.ready_ = true;

  auto good_headers = post_headers(host);
  good_headers.emplace_back("Authorization", "Bearer s3cret-token");
  c.send(bhttp::verb::post, "/mcp", good_headers, initialize_body());
  auto head = c.read_header();
  CHECK(head.status == 200);
  const auto sid = head.header("mcp-session-id");
  CHECK(sid.size() == 32);
  CHECK(c.wait_end());
  auto servers =
      c.request(bhttp::verb::get, "/servers", {{"Host", host}, {"Authorization", "Bearer other"}});
  CHECK(servers.status == 200);
  // Every request of the session needs it too.
  auto later = c.request(bhttp::verb::post, "/mcp", post_headers(host, sid), kInitialized);
  CHECK(later.status == 401);
}

TEST_CASE("http: max_sessions → 503, and a DELETE makes room again", "[http][integration]") {
  TestServer ts(config_with([](auto& c) {
    c.limits.max_sessions = 2;
    c.limits.idle_floor_ms = 3600000;  // no session is idle long enough to make room
  }));
  const auto a = open_session(ts);
  const auto b = open_session(ts);
  RawClient c(ts.endpoint);
  auto full = c.request(bhttp::verb::post, "/mcp", post_headers(ts.host()), initialize_body());
  CHECK(full.status == 503);
  CHECK(full.error_code() == -32000);
  CHECK(full.error_message().find("http.limits.max_sessions") != std::string::npos);
  CHECK_FALSE(full.has("mcp-session-id"));
  CHECK(c.request(bhttp::verb::delete_, "/mcp", {{"Host", ts.host()}, {"Mcp-Session-Id", a}})
            .status == 200);
  CHECK(open_session(ts).size() == 32);
  check_still_serving(ts, b, false);
}

TEST_CASE(
    "http: at max_sessions the least recently active session with nothing in flight and no "
    "open stream makes room however recently it was used, and answers 404 afterwards - one with "
    "an open stream never does, and with none to close the refusal is a 503",
    "[http][integration][limits]") {
  TestServer ts(config_with([](auto& c) { c.limits.max_sessions = 3; }));
  // Opens a GET stream on `sid` and keeps it open (busy, however quiet).
  std::vector<std::unique_ptr<RawClient>> streams;
  auto hold_stream = [&](const std::string& sid) {
    streams.push_back(std::make_unique<RawClient>(ts.endpoint));
    streams.back()->send(bhttp::verb::get, "/mcp", get_headers(ts.host(), sid));
    REQUIRE(streams.back()->read_header().status == 200);
  };
  const auto a = open_session(ts);  // the least recently active
  const auto b = open_session(ts);  // idle, since a little later
  const auto s = open_session(ts);
  hold_stream(s);

  auto ended = [&](const std::string& sid) {
    RawClient c(ts.endpoint);
    return c.request(bhttp::verb::post, "/mcp", post_headers(ts.host(), sid, "2025-11-25"),
                     request_body(5, "tools/list"));
  };
  const auto c = open_session(ts);  // a makes room at once
  auto gone = ended(a);
  CHECK(gone.status == 404);
  REQUIRE(ts.backend.wait_closed(0));
  const auto why = ts.backend.closed(0);
  CHECK(why->kind == mcpmqtt::bridge::CloseReason::Kind::timeout);
  CHECK(why->detail.find("closed to make room for a new session (http.limits.max_sessions 3): "
                         "the least recently active") != std::string::npos);
  hold_stream(c);
  const auto d = open_session(ts);  // then b
  CHECK(ended(b).status == 404);
  hold_stream(d);
  // s, c and d have a stream open: nobody to close.
  RawClient e(ts.endpoint);
  auto full = e.request(bhttp::verb::post, "/mcp", post_headers(ts.host()), initialize_body());
  CHECK(full.status == 503);
  CHECK(full.error_code() == -32000);
  CHECK(full.error_message() ==
        "Service Unavailable: the bridge holds its maximum of 3 MCP sessions "
        "(http.limits.max_sessions); try again later");
  check_still_serving(ts, s, false);
  check_still_serving(ts, c, false);
  check_still_serving(ts, d, false);
  CHECK(ts.server().metrics_text().find("mcpmqtt_http_sessions_evicted_total 2") !=
        std::string::npos);
}

TEST_CASE(
    "http: at max_sessions with http.limits.idle_floor_ms, a session active within the floor is "
    "spared and one quiet for longer makes room",
    "[http][integration][limits]") {
  TestServer ts(config_with([](auto& c) {
    c.limits.max_sessions = 1;
    c.limits.idle_floor_ms = 300;
  }));
  const auto a = open_session(ts);
  RawClient c(ts.endpoint);
  CHECK(c.request(bhttp::verb::post, "/mcp", post_headers(ts.host()), initialize_body()).status ==
        503);
  std::this_thread::sleep_for(350ms);  // the floor is what is being tested
  const auto b = open_session(ts);
  CHECK(b.size() == 32);
  check_still_serving(ts, b, false);
}

TEST_CASE("http: max_connections → 503 for the connection past the limit", "[http][integration]") {
  TestServer ts(config_with([](auto& c) { c.limits.max_connections = 2; }));
  auto a = std::make_unique<RawClient>(ts.endpoint);
  RawClient b(ts.endpoint);
  // Both are accepted before the third (the listener takes them in order).
  CHECK(b.request(bhttp::verb::get, "/healthz", {{"Host", ts.host()}}).status == 200);
  RawClient third(ts.endpoint);
  auto refused = third.read_response();
  CHECK(refused.status == 503);
  CHECK(refused.error_code() == -32000);
  a->close();
  a.reset();
  CHECK(eventually([&] {
    RawClient again(ts.endpoint);
    return again.request(bhttp::verb::get, "/healthz", {{"Host", ts.host()}}, {}, 2s).status == 200;
  }));
}

TEST_CASE("http: routes by server-name, and /mcp without a default server", "[http][integration]") {
  TestServer ts(test_http_config(), "");
  RawClient c(ts.endpoint);
  auto none = c.request(bhttp::verb::post, "/mcp", post_headers(ts.host()), initialize_body());
  CHECK(none.status == 404);
  CHECK(none.error_code() == -32000);
  CHECK(none.error_message().find("no default server is configured") != std::string::npos);
  CHECK(none.error_message().find("/servers/{server-name}/mcp") != std::string::npos);

  const auto encoded = open_session(ts, "/servers/demo%2Feverything/mcp");
  const auto segments = open_session(ts, "/servers/demo/everything/mcp");
  CHECK(ts.backend.session(0)->server_name == "demo/everything");
  CHECK(ts.backend.session(1)->server_name == "demo/everything");
  // Both spellings name the same endpoint.
  auto cross = c.request(bhttp::verb::post, "/servers/demo/everything/mcp",
                         post_headers(ts.host(), encoded), request_body(2, "ping"));
  CHECK(cross.status == 200);
  CHECK(segments != encoded);

  auto bad = c.request(bhttp::verb::post, "/servers/demo+x/mcp", post_headers(ts.host()),
                       initialize_body());
  CHECK(bad.status == 400);
  CHECK(bad.error_message().find("must not contain '+' or '#'") != std::string::npos);
  auto unknown = c.request(bhttp::verb::get, "/nothing/here", {{"Host", ts.host()}});
  CHECK(unknown.status == 404);
  CHECK(ts.backend.session_count() == 2);
}

TEST_CASE("http: /servers, /healthz, /readyz and /metrics", "[http][integration]") {
  TestServer ts;
  const auto sid = open_session(ts);
  RawClient c(ts.endpoint);
  auto servers = c.request(bhttp::verb::get, "/servers", {{"Host", ts.host()}});
  CHECK(servers.status == 200);
  CHECK(servers.header("content-type") == "application/json");
  CHECK(servers.body == R"({"servers":[{"name":"demo/everything"}]})");
  auto health = c.request(bhttp::verb::get, "/healthz", {{"Host", "anything"}});
  CHECK(health.status == 200);
  CHECK(health.body == "ok");
  CHECK(c.request(bhttp::verb::get, "/readyz", {{"Host", ts.host()}}).status == 200);
  ts.backend.ready_ = false;
  auto not_ready = c.request(bhttp::verb::get, "/readyz", {{"Host", ts.host()}});
  CHECK(not_ready.status == 503);
  CHECK(not_ready.body == "not ready: the broker connection is down");
  auto metrics = c.request(bhttp::verb::get, "/metrics", {{"Host", ts.host()}});
  CHECK(metrics.status == 200);
  CHECK(metrics.header("content-type").starts_with("text/plain; version=0.0.4"));
  CHECK(metrics.body.find("fake_backend_up 1\n") != std::string::npos);
  CHECK(metrics.body.find("\nmcpmqtt_http_sessions 1\n") != std::string::npos);
  CHECK(metrics.body.find("mcpmqtt_http_responses_total{code=\"202\"} 1\n") != std::string::npos);
  CHECK(sid.size() == 32);
}

TEST_CASE("http: CORS headers for listed origins only, and preflight", "[http][integration]") {
  TestServer ts(config_with([](auto& c) { c.allowed_origins = {"https://app.example.com"}; }));
  const auto host = ts.host();
  auto h = post_headers(host);
  h.emplace_back("Origin", "https://app.example.com");
  RawClient c(ts.endpoint);
  c.send(bhttp::verb::post, "/mcp", h, initialize_body());
  auto head = c.read_header();
  CHECK(head.status == 200);
  CHECK(head.header("access-control-allow-origin") == "https://app.example.com");
  CHECK(head.header("access-control-expose-headers") == "Mcp-Session-Id");
  CHECK(head.header("vary") == "Origin");
  CHECK(c.wait_end());

  auto pre = c.request(bhttp::verb::options, "/mcp",
                       {{"Host", host},
                        {"Origin", "https://app.example.com"},
                        {"Access-Control-Request-Method", "POST"},
                        {"Access-Control-Request-Headers", "content-type, mcp-session-id"}});
  CHECK(pre.status == 204);
  CHECK(pre.header("access-control-allow-origin") == "https://app.example.com");
  CHECK(pre.header("access-control-allow-methods") == "GET, POST, DELETE, OPTIONS");
  CHECK(pre.header("access-control-allow-headers") ==
        "Content-Type, Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, Mcp-Name, "
        "Last-Event-ID, Authorization");

  auto other = c.request(bhttp::verb::options, "/mcp",
                         {{"Host", host}, {"Origin", "https://elsewhere.example.com"}});
  CHECK(other.status == 403);
  auto local = c.request(bhttp::verb::options, "/mcp",
                         {{"Host", host}, {"Origin", "http://localhost:3000"}});
  CHECK(local.status == 204);
  CHECK_FALSE(local.has("access-control-allow-origin"));
}

TEST_CASE("http: listening on IPv6 loopback", "[http][integration]") {
  {
    boost::asio::io_context probe;
    boost::asio::ip::tcp::acceptor a(probe);
    boost::system::error_code ec;
    a.open(boost::asio::ip::tcp::v6(), ec);
    if (!ec) a.bind({boost::asio::ip::make_address("::1"), 0}, ec);
    if (ec) {
      missing_prerequisite("no IPv6 loopback on this machine: " + ec.message());
      return;
    }
  }
  auto cfg = test_http_config();
  cfg.listen_host = "::1";
  TestServer ts(cfg);
  CHECK(ts.endpoint.address().is_v6());
  const std::string host = "[::1]:" + std::to_string(ts.endpoint.port());
  RawClient c(ts.endpoint);
  c.send(bhttp::verb::post, "/mcp", post_headers(host), initialize_body());
  auto head = c.read_header();
  CHECK(head.status == 200);
  CHECK(c.wait_end());
  auto local = c.request(bhttp::verb::get, "/servers", {{"Host", "localhost:1"}});
  CHECK(local.status == 200);
}

TEST_CASE("http: an error about a POSTed request carries the request's id", "[http][integration]") {
  // JSON-RPC 2.0 §5: the id of the request, null only when it could not be read.
  TestServer ts;
  const auto sid = open_session(ts);
  const auto host = ts.host();
  auto post = [&](const Headers& h, const std::string& body) {
    RawClient c(ts.endpoint);
    return c.request(bhttp::verb::post, "/mcp", h, body);
  };
  auto id_of = [](const HttpResult& r) {
    auto m = Message::parse(r.body);
    REQUIRE(m);
    return m->id();
  };
  auto invalid = post(post_headers(host, sid), R"({"jsonrpc":"1.0","id":5,"method":"ping"})");
  CHECK(invalid.status == 400);
  CHECK(invalid.error_code() == -32600);
  CHECK(id_of(invalid) == Id::integer(5));
  auto missing = post(post_headers(host), request_body(6, "tools/list"));
  CHECK(missing.status == 400);
  CHECK(id_of(missing) == Id::integer(6));
  auto unknown = post(post_headers(host, std::string(32, 'a')), request_body(7, "tools/list"));
  CHECK(unknown.status == 404);
  CHECK(id_of(unknown) == Id::integer(7));
  auto version = post(post_headers(host, sid, "2099-01-01"), request_body(8, "ping"));
  CHECK(version.status == 400);
  CHECK(id_of(version) == Id::integer(8));
  auto again = post(post_headers(host, sid), initialize_body(9));
  CHECK(again.status == 400);
  CHECK(id_of(again) == Id::integer(9));
  // An id still in flight in the session.
  RawClient slow(ts.endpoint);
  slow.send(bhttp::verb::post, "/mcp", post_headers(host, sid), tool_call(10, "slow"));
  REQUIRE(slow.read_header().status == 200);
  REQUIRE(ts.backend.wait_slow_calls(0, 1));
  auto in_use = post(post_headers(host, sid), tool_call(10, "echo"));
  CHECK(in_use.status == 400);
  CHECK(in_use.error_code() == -32600);
  CHECK(in_use.error_message().find("already in use") != std::string::npos);
  CHECK(id_of(in_use) == Id::integer(10));
  ts.backend.complete_slow(0);
  // Unreadable, or a batch refused as a whole: null.
  CHECK(id_of(post(post_headers(host, sid), "{not json")).is_null());
  CHECK(id_of(post(post_headers(host), "[" + initialize_body(11) + "," + kInitialized + "]"))
            .is_null());
  check_still_serving(ts, sid);
}

TEST_CASE(
    "http: header values and paths that are not UTF-8 are quoted in the error, and the server "
    "keeps serving",
    "[http][integration]") {
  // The throw tests/fuzz/jsonrpc_fuzzer caught in Message::error, reached from the HTTP front
  // (corpus regression-http-not-utf8): an error body quoting a peer's bytes that are not UTF-8
  // (a Host, an Origin, a path, a version, a Last-Event-ID) threw from the connection's handler,
  // which ended the daemon.
  TestServer ts;
  const auto sid = open_session(ts);
  const auto host = ts.host();
  const std::string fffd = "\xef\xbf\xbd";
  auto raw = [&](const std::string& request) {
    RawClient c(ts.endpoint);
    REQUIRE(c.write_raw(request));
    return c.read_response();
  };
  auto r = raw("GET /servers HTTP/1.1\r\nHost: evil\xff.example\r\n\r\n");
  CHECK(r.status == 403);
  CHECK(r.error_message() == "Forbidden: Host header \"evil" + fffd +
                                 ".example\" is not accepted (DNS rebinding protection); list it "
                                 "in http.allowed_hosts");
  r = raw("GET /servers HTTP/1.1\r\nHost: " + host + "\r\nOrigin: http://\xc3.example\r\n\r\n");
  CHECK(r.status == 403);
  CHECK(r.error_message().find("http://" + fffd + ".example") != std::string::npos);
  r = raw("GET /caf\xc3 HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
  CHECK(r.status == 404);
  CHECK(r.error_message().rfind("Not Found: no endpoint at /caf" + fffd + ";", 0) == 0);
  r = raw("GET /mcp HTTP/1.1\r\nHost: " + host + "\r\nAccept: text/event-stream\r\n" +
          "Mcp-Session-Id: " + sid + "\r\nLast-Event-ID: 1-\xff\r\n\r\n");
  CHECK(r.status == 400);
  CHECK(r.error_message().find("1-" + fffd) != std::string::npos);
  const std::string body = request_body(2, "ping");
  r = raw("POST /mcp HTTP/1.1\r\nHost: " + host +
          "\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
          "Mcp-Session-Id: " +
          sid + "\r\nMCP-Protocol-Version: 2025-\xe2\x82\r\nContent-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body);
  CHECK(r.status == 400);
  CHECK(r.error_message().find("Unsupported protocol version: 2025-" + fffd) != std::string::npos);
  check_still_serving(ts, sid);
}

TEST_CASE("http: headers past 32 KiB get 431, and a Last-Event-ID this session never sent gets 400",
          "[http][integration]") {
  TestServer ts;
  const auto sid = open_session(ts);
  const auto host = ts.host();
  {
    RawClient c(ts.endpoint);
    REQUIRE(c.write_raw("GET /servers HTTP/1.1\r\nHost: " + host +
                        "\r\nX-Big: " + std::string(33 * 1024, 'x') + "\r\n\r\n"));
    auto r = c.read_response();
    CHECK(r.status == 431);
    CHECK(r.error_code() == -32000);
    CHECK(r.error_message() == "Request Header Fields Too Large: at most 32768 bytes of headers");
    CHECK(c.wait_closed());
  }
  RawClient c(ts.endpoint);
  auto shape = c.request(bhttp::verb::get, "/mcp", get_headers(host, sid, "nonsense"));
  CHECK(shape.status == 400);
  CHECK(shape.error_code() == -32000);
  CHECK(shape.error_message() ==
        "Last-Event-ID \"nonsense\" is not an event id of this server (expected "
        "<stream>-<number>)");
  auto unsent = c.request(bhttp::verb::get, "/mcp", get_headers(host, sid, "99-1"));
  CHECK(unsent.status == 400);
  CHECK(unsent.error_message() == "Last-Event-ID \"99-1\" was not sent in this session");
  check_still_serving(ts, sid);
}

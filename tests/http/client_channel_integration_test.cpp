// The Streamable HTTP client against a scripted server on loopback: what an MQTT client of the
// HTTP egress would receive, and what the upstream server sees (002 §Streamable HTTP).
#include <algorithm>
#include <atomic>
#include <future>
#include <sstream>

#include <catch2/catch.hpp>

#include "common/log.hpp"
#include "tests/http/client_fake_server.hpp"
#include "tests/http/client_harness.hpp"
#include "tests/support/log_capture.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/wait.hpp"

using namespace mcpmqtt;
using namespace std::chrono_literals;
using test::ClientHarness;
using test::test_spec;
using test::fake::Conn;
using test::fake::Request;

TEST_CASE(
    "HTTP client: JSON round trip, session id and protocol version on later requests, "
    "GET 405 tolerated, DELETE on close",
    "[integration][http][client]") {
  test::fake::Script script;
  script.request = [](Conn& c, const Request&, const jsonrpc::Message& m) {
    if (m.method() == "tools/list") {
      c.json(test::fake::result_json(m.id(), R"({"tools":[{"name":"echo"}]})"));
    } else {
      c.json(test::fake::result_json(m.id(), "{}"));
    }
  };
  test::fake::Server srv(test::fake::mcp(script));
  auto c = std::make_unique<ClientHarness>(test_spec(srv.url()));

  c->send(test::kClientInitialize);
  const auto init = c->next();
  CHECK(init.kind() == jsonrpc::Kind::result);
  CHECK(init.id() == jsonrpc::Id::integer(1));
  CHECK(init.text().find("\"serverInfo\"") != std::string_view::npos);
  c->send(test::kInitialized);
  c->send(test::request_body(2, "tools/list"));
  const auto list = c->next();
  CHECK(list.id() == jsonrpc::Id::integer(2));
  CHECK(list.text().find("\"echo\"") != std::string_view::npos);
  CHECK(c->session_id() == "sess-1");
  CHECK(c->protocol_version() == "2025-06-18");

  // The initialize POST carries no session; everything after it carries the session and the
  // negotiated version.
  const auto init_req = srv.wait_for(test::fake::post_with("\"initialize\""));
  REQUIRE(init_req);
  CHECK(init_req->target == "/mcp");
  CHECK(init_req->header("Accept") == "application/json, text/event-stream");
  CHECK(init_req->header("Content-Type") == "application/json");
  CHECK(init_req->header("Mcp-Session-Id") == "<absent>");
  CHECK(init_req->header("MCP-Protocol-Version") == "<absent>");
  CHECK(init_req->body == test::kClientInitialize);
  const auto list_req = srv.wait_for(test::fake::post_with("tools/list"));
  REQUIRE(list_req);
  CHECK(list_req->header("Mcp-Session-Id") == "sess-1");
  CHECK(list_req->header("MCP-Protocol-Version") == "2025-06-18");
  // notifications/initialized is accepted before the next request is sent.
  const auto all = srv.requests();
  std::size_t initialized_at = all.size(), list_at = all.size();
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].has("notifications/initialized")) initialized_at = i;
    if (all[i].has("tools/list")) list_at = i;
  }
  CHECK(initialized_at < list_at);

  // After the initialize result the client asks for the GET stream; 405 means none.
  const auto get = srv.wait_for(test::fake::method_is("GET"));
  REQUIRE(get);
  CHECK(get->header("Accept") == "text/event-stream");
  CHECK(get->header("Mcp-Session-Id") == "sess-1");
  CHECK(get->header("Last-Event-ID") == "<absent>");
  c->send(test::request_body(3, "ping"));
  CHECK(c->next().id() == jsonrpc::Id::integer(3));
  // Not synchronisation: several reconnect intervals, in which no second GET may go out.
  std::this_thread::sleep_for(300ms);
  CHECK(srv.count(test::fake::method_is("GET")) == 1);
  // Keep-alive: fewer connections than requests.
  CHECK(srv.connections() < static_cast<int>(srv.requests().size()));

  c->close();
  const auto del = srv.wait_for(test::fake::method_is("DELETE"));
  REQUIRE(del);
  CHECK(del->header("Mcp-Session-Id") == "sess-1");
  CHECK(c->close_count() == 0);  // the owner's close is not reported back
}

TEST_CASE("HTTP client: configured headers go on every request and never into the log",
          "[integration][http][client]") {
  test::LogCapture capture("http", {.level = spdlog::level::trace});
  test::fake::Server srv(test::fake::mcp({}));
  auto spec = test_spec(srv.url("/mcp?token=query-s3cret"));
  spec.headers = {{"Authorization", "Bearer header-s3cret"}, {"X-Tenant", "seven"}};
  {
    ClientHarness c(spec);
    initialize(c);
    c.send(test::request_body(2, "ping"));
    CHECK(c.next().id() == jsonrpc::Id::integer(2));
  }
  REQUIRE(srv.wait_for(test::fake::method_is("DELETE")));
  for (const auto& r : srv.requests()) {
    INFO(r.method << " " << r.body);
    CHECK(r.target == "/mcp?token=query-s3cret");
    CHECK(r.header("Authorization") == "Bearer header-s3cret");
    CHECK(r.header("X-Tenant") == "seven");
    CHECK(r.header("Host") == "127.0.0.1:" + std::to_string(srv.port()));
  }
  const std::string logged = capture.dump();
  CHECK(logged.find("session initialized") != std::string::npos);  // the capture works
  CHECK(logged.find("Authorization") != std::string::npos);        // names are fine
  CHECK(logged.find("s3cret") == std::string::npos);               // values and queries not
}

TEST_CASE(
    "HTTP client: an SSE response delivers a notification and a server request before "
    "the response, and the client's answer is POSTed while the stream is open",
    "[integration][http][client]") {
  test::fake::Server srv;  // before the script, which refers to it
  test::fake::Script script;
  script.request = [&](Conn& c, const Request&, const jsonrpc::Message& m) {
    if (m.method() != "tools/call") return (void)c.json(test::fake::result_json(m.id(), "{}"));
    c.start_sse();
    c.event(
        R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t1","progress":1}})");
    c.event(
        R"({"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}})");
    // The tool waits for the client's answer to its sampling request. (No assertion here: this
    // is a server thread; the test thread checks what arrived.)
    if (!srv.wait_for(test::fake::post_with(R"("id":"s1")"))) return;
    // The response event arrives in two pieces.
    const std::string event =
        "event: message\ndata: " +
        test::fake::result_json(m.id(), R"({"content":[{"type":"text","text":"done"}]})") + "\n\n";
    c.chunk(event.substr(0, 20));
    // Not synchronisation: apart in time, the two pieces reach the client in two reads.
    std::this_thread::sleep_for(50ms);
    c.chunk(event.substr(20));
    c.end_sse();
  };
  srv.start(test::fake::mcp(script));
  ClientHarness c(test_spec(srv.url()));
  initialize(c);
  c.send(test::request_body(2, "tools/call", R"({"name":"x","_meta":{"progressToken":"t1"}})"));
  const auto progress = c.next();
  CHECK(progress.method() == "notifications/progress");
  const auto sampling = c.next();
  CHECK(sampling.is_request());
  CHECK(sampling.method() == "sampling/createMessage");
  CHECK(sampling.id() == jsonrpc::Id::string("s1"));
  c.send(
      R"({"jsonrpc":"2.0","id":"s1","result":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}})");
  const auto result = c.next();
  CHECK(result.id() == jsonrpc::Id::integer(2));
  CHECK(result.text().find("\"done\"") != std::string_view::npos);
  const auto answer = srv.wait_for(test::fake::post_with(R"("id":"s1")"));
  REQUIRE(answer);
  CHECK(answer->header("Mcp-Session-Id") == "sess-1");
  c.close();
}

TEST_CASE("HTTP client: a JSON batch response delivers every message",
          "[integration][http][client]") {
  test::fake::Script script;
  script.request = [](Conn& c, const Request&, const jsonrpc::Message& m) {
    c.json(
        "[" +
        std::string(
            R"({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}})") +
        "," + test::fake::result_json(m.id(), R"({"ok":true})") + "]");
  };
  test::fake::Server srv(test::fake::mcp(script));
  ClientHarness c(test_spec(srv.url()));
  initialize(c);
  c.send(test::request_body(2, "tools/call"));
  CHECK(c.next().method() == "notifications/message");
  CHECK(c.next().id() == jsonrpc::Id::integer(2));
}

TEST_CASE(
    "HTTP client: the GET stream delivers a server request, the answer is POSTed back, "
    "and a dropped GET stream is reopened with Last-Event-ID after the server's retry",
    "[integration][http][client]") {
  std::atomic<int> gets{0};
  std::atomic<std::int64_t> cut_at_ms{0};
  const auto now_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  std::atomic<std::int64_t> second_get_ms{0};
  test::fake::Server srv;  // before the script, which refers to it
  test::fake::Script script;
  script.get = [&](Conn& c, const Request&) {
    const int n = ++gets;
    c.start_sse();
    if (n == 1) {
      c.chunk("retry: 300\n\n");
      c.event(R"({"jsonrpc":"2.0","id":"r1","method":"roots/list"})", "e-1");
      if (!srv.wait_for(test::fake::post_with(R"("id":"r1")"))) return;
      cut_at_ms = now_ms();
      c.cut();
      return;
    }
    second_get_ms = now_ms();
    c.event(R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})", "e-2");
    while (!srv.stopping() && !c.closed())
      std::this_thread::sleep_for(20ms);
  };
  srv.start(test::fake::mcp(script));
  {
    ClientHarness c(test_spec(srv.url()));
    initialize(c);
    const auto roots = c.next();
    CHECK(roots.method() == "roots/list");
    CHECK(roots.id() == jsonrpc::Id::string("r1"));
    c.send(R"({"jsonrpc":"2.0","id":"r1","result":{"roots":[]}})");
    const auto changed = c.next();
    CHECK(changed.method() == "notifications/tools/list_changed");

    const auto first = srv.wait_for(test::fake::method_is("GET"));
    const auto second = srv.wait_for(test::fake::method_is("GET"), 5s, 2);
    REQUIRE(first);
    REQUIRE(second);
    CHECK(first->header("Last-Event-ID") == "<absent>");
    CHECK(second->header("Last-Event-ID") == "e-1");
    CHECK(second->header("Mcp-Session-Id") == "sess-1");
    // The server asked for 300 ms between reconnections.
    CHECK(second_get_ms - cut_at_ms >= 290);
    const auto answer = srv.wait_for(test::fake::post_with(R"("id":"r1")"));
    REQUIRE(answer);
    CHECK(answer->body == R"({"jsonrpc":"2.0","id":"r1","result":{"roots":[]}})");
  }
}

TEST_CASE(
    "HTTP client: a POST stream cut before its response is resumed with GET and "
    "Last-Event-ID",
    "[integration][http][client]") {
  test::fake::Script script;
  script.request = [](Conn& c, const Request&, const jsonrpc::Message& m) {
    if (m.method() != "tools/call") return (void)c.json(test::fake::result_json(m.id(), "{}"));
    c.start_sse();
    c.chunk("id: p-0\nretry: 50\ndata:\n\n");  // 2025-06-18 priming event
    c.event(
        R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}})",
        "p-1");
    c.cut();
  };
  script.get = [](Conn& c, const Request& r) {
    if (r.header("Last-Event-ID") != "p-1") {
      c.respond(405, "", "");
      return;
    }
    c.start_sse();
    c.event(test::fake::result_json(jsonrpc::Id::integer(2), R"({"content":[]})"), "p-2");
    c.end_sse();
  };
  test::fake::Server srv(test::fake::mcp(script));
  ClientHarness c(test_spec(srv.url()));
  initialize(c);
  c.send(test::request_body(2, "tools/call"));
  CHECK(c.next().method() == "notifications/progress");
  const auto result = c.next();
  CHECK(result.kind() == jsonrpc::Kind::result);
  CHECK(result.id() == jsonrpc::Id::integer(2));
  const auto resume = srv.wait_for(
      [](const Request& r) { return r.method == "GET" && r.header("Last-Event-ID") == "p-1"; });
  REQUIRE(resume);
  CHECK(resume->header("Mcp-Session-Id") == "sess-1");
  CHECK(resume->header("Accept") == "text/event-stream");
  // Nothing else arrives for the request (no duplicate, no error).
  c.send(test::request_body(3, "ping"));
  CHECK(c.next().id() == jsonrpc::Id::integer(3));
  CHECK(c.queued() == 0);
}

TEST_CASE("HTTP client: requests beyond the concurrency bound wait for a free connection",
          "[integration][http][client]") {
  test::fake::Queue<int> release;
  test::fake::Server srv;  // before the script, which refers to it
  test::fake::Script script;
  script.request = [&](Conn& c, const Request&, const jsonrpc::Message& m) {
    if (m.method() != "tools/call") return (void)c.json(test::fake::result_json(m.id(), "{}"));
    c.start_sse();
    release.pop(10s, &srv.stopping());
    c.event(test::fake::result_json(m.id(), "{}"));
    c.end_sse();
  };
  srv.start(test::fake::mcp(script));
  auto spec = test_spec(srv.url());
  spec.max_concurrent_requests = 1;
  {
    ClientHarness c(spec);
    initialize(c);
    c.send(test::request_body(2, "tools/call"));
    REQUIRE(srv.wait_for(test::fake::post_with("tools/call")));
    c.send(test::request_body(3, "tools/call"));
    // Not synchronisation: a window in which the second call would have been sent, had the
    // bound not held it back.
    std::this_thread::sleep_for(300ms);
    CHECK(srv.count(test::fake::post_with("tools/call")) == 1);
    release.push(1);
    CHECK(c.next().id() == jsonrpc::Id::integer(2));
    REQUIRE(srv.wait_for(test::fake::post_with("tools/call"), 5s, 2));
    release.push(1);
    CHECK(c.next().id() == jsonrpc::Id::integer(3));
  }
}

TEST_CASE(
    "HTTP client: cancelling a request forwards notifications/cancelled and no response "
    "follows, a request cancelled before it was sent is never sent",
    "[integration][http][client]") {
  test::fake::Server srv;  // before the script, which refers to it
  test::fake::Script script;
  script.request = [&](Conn& c, const Request&, const jsonrpc::Message& m) {
    if (m.method() != "tools/call") return (void)c.json(test::fake::result_json(m.id(), "{}"));
    c.start_sse();
    // Answers only after the cancellation, as a slow server might.
    srv.wait_for(test::fake::post_with("notifications/cancelled"));
    c.event(test::fake::result_json(m.id(), "{}"));
    c.end_sse();
  };
  srv.start(test::fake::mcp(script));
  auto spec = test_spec(srv.url());
  spec.max_concurrent_requests = 1;
  {
    ClientHarness c(spec);
    initialize(c);
    c.send(test::request_body(2, "tools/call"));
    REQUIRE(srv.wait_for(test::fake::post_with("tools/call")));
    c.send(test::request_body(3, "tools/call"));  // waits: one request at a time
    c.send(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}})");
    c.send(
        R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"user"}})");
    const auto cancel = srv.wait_for(test::fake::post_with("notifications/cancelled"));
    REQUIRE(cancel);
    CHECK(cancel->has(R"("requestId":2)"));
    c.send(test::request_body(4, "ping"));
    CHECK(c.next().id() == jsonrpc::Id::integer(4));
    // Not synchronisation: a window in which a late response or the cancelled call would show.
    std::this_thread::sleep_for(200ms);
    CHECK(c.queued() == 0);
    CHECK(srv.count(test::fake::post_with("tools/call")) == 1);
    CHECK(srv.count(test::fake::post_with("notifications/cancelled")) == 1);
  }
}

TEST_CASE("HTTP client: a kept-alive connection the server closed is retried on a fresh one",
          "[integration][http][client]") {
  auto cuts = std::make_shared<std::atomic<int>>(0);
  test::fake::Script script;
  script.request = [cuts](Conn& c, const Request&, const jsonrpc::Message& m) {
    c.json(test::fake::result_json(m.id(), "{}"));
    c.cut();  // closes after answering, without saying so
    ++*cuts;
  };
  test::fake::Server srv(test::fake::mcp(script));
  ClientHarness c(test_spec(srv.url()));
  c.send(test::request_body(2, "ping"));
  CHECK(c.next().id() == jsonrpc::Id::integer(2));
  // The next request goes out only once the server has closed the connection it kept alive.
  REQUIRE(test::eventually([&] { return cuts->load() == 1; }));
  c.send(test::request_body(3, "ping"));
  const auto m = c.next();
  CHECK(m.kind() == jsonrpc::Kind::result);
  CHECK(m.id() == jsonrpc::Id::integer(3));
  CHECK(srv.count(test::fake::post_with(R"("id":3)")) == 1);
  CHECK(srv.connections() == 2);
}

// Small JSON-RPC messages must not wait for Nagle's algorithm and the server's delayed ACK: the
// client sets TCP_NODELAY on its own sockets (issue 18: before, only an interposed connect(2)
// meant for Paho gave it to them).
TEST_CASE("HTTP client: its connections to the upstream have TCP_NODELAY set",
          "[integration][http][client]") {
  // The server holds the tools/call's connection open until the test has looked at it.
  auto release = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = release->get_future().share();
  test::fake::Script script;
  script.request = [released](Conn& c, const Request&, const jsonrpc::Message& m) {
    if (m.method() == "tools/call") released.wait_for(10s);
    c.json(test::fake::result_json(m.id(), "{}"));
  };
  test::fake::Server srv(test::fake::mcp(script));
  ClientHarness c(test_spec(srv.url()));
  initialize(c);
  c.send(test::request_body(2, "tools/call", R"({"name":"echo"})"));
  REQUIRE(srv.wait_for(test::fake::post_with("\"tools/call\"")));
  const auto sockets = test::nodelay_of_sockets_to(srv.port());
  release->set_value();
  REQUIRE_FALSE(sockets.empty());
  for (int v : sockets)
    CHECK(v == 1);
  CHECK(c.next().id() == jsonrpc::Id::integer(2));
}

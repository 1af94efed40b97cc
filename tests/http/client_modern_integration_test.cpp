// The Streamable HTTP client speaking MCP 2026-07-28 (the HTTP egress to a 2026-only server)
// against a scripted server on loopback: what the server sees on each request, what the owner
// gets back (streamable-http §Request Metadata, §Server Validation, §Cancellation).
#include <atomic>

#include <catch2/catch.hpp>

#include "bridge/modern/protocol.hpp"
#include "tests/http/client_fake_server.hpp"
#include "tests/http/client_harness.hpp"
#include "tests/support/wait.hpp"

using namespace mcpmqtt;
using namespace std::chrono_literals;
using test::ClientHarness;
using test::eventually;
using test::test_spec;
using test::fake::Conn;
using test::fake::Request;

namespace {

const std::string kMeta = R"("_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",)"
                          R"("io.modelcontextprotocol/clientCapabilities":{}})";

std::string modern_request(const std::string& id_json, const std::string& method,
                           const std::string& members = "") {
  return R"({"jsonrpc":"2.0","id":)" + id_json + R"(,"method":")" + method + R"(","params":{)" +
         members + (members.empty() ? "" : ",") + kMeta + "}}";
}

std::string cancel(const std::string& id_json) {
  return R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":)" + id_json +
         "," + kMeta + "}}";
}

// Keeps an SSE response open until the client closes it (a write then fails), or `limit`.
bool hold_until_closed(Conn& c, std::chrono::milliseconds limit = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!c.chunk(": keepalive\n\n")) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

}  // namespace

TEST_CASE(
    "HTTP client (streamable-http §Standard Request Headers): a 2026-07-28 request goes "
    "without a session, with MCP-Protocol-Version, Mcp-Method and Mcp-Name from its body: no "
    "GET stream, no DELETE",
    "[integration][http][client][modern]") {
  test::fake::Script script;
  script.request = [](Conn& c, const Request&, const jsonrpc::Message& m) {
    if (m.method() == "tools/call") {
      // Progress first, then the result: an SSE response.
      c.start_sse();
      c.event(
          R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}})");
      c.event(test::fake::result_json(m.id(), R"({"content":[],"resultType":"complete"})"));
      c.end_sse();
      return;
    }
    c.json(test::fake::result_json(m.id(), R"({"tools":[],"resultType":"complete"})"));
  };
  test::fake::Server srv(test::fake::mcp(script));
  {
    ClientHarness c(test_spec(srv.url()));
    c.send(modern_request(R"("a-1")", "tools/call", R"("name":"héllo wörld","arguments":{})"));
    const auto progress = c.next();
    CHECK(progress.method() == "notifications/progress");
    const auto result = c.next();
    CHECK(result.id() == jsonrpc::Id::string("a-1"));
    CHECK(result.kind() == jsonrpc::Kind::result);
    c.send(modern_request("2", "tools/list"));
    CHECK(c.next().id() == jsonrpc::Id::integer(2));
    c.send(modern_request("3", "resources/read", R"("uri":"test://plain")"));
    CHECK(c.next().id() == jsonrpc::Id::integer(3));

    const auto call = srv.wait_for(test::fake::post_with("tools/call"));
    REQUIRE(call);
    CHECK(call->header("MCP-Protocol-Version") == "2026-07-28");
    CHECK(call->header("Mcp-Method") == "tools/call");
    CHECK(call->header("Mcp-Name") == modern::encode_header_value("héllo wörld"));
    CHECK(call->header("Mcp-Name").starts_with("=?base64?"));
    CHECK(call->header("Mcp-Session-Id") == "<absent>");
    CHECK(call->header("Accept") == "application/json, text/event-stream");
    const auto list = srv.wait_for(test::fake::post_with("tools/list"));
    REQUIRE(list);
    CHECK(list->header("Mcp-Method") == "tools/list");
    CHECK(list->header("Mcp-Name") == "<absent>");
    const auto read = srv.wait_for(test::fake::post_with("resources/read"));
    REQUIRE(read);
    CHECK(read->header("Mcp-Name") == "test://plain");
    CHECK(c.session_id().empty());
  }
  CHECK(srv.count(test::fake::method_is("GET")) == 0);
  CHECK(srv.count(test::fake::method_is("DELETE")) == 0);
}

TEST_CASE(
    "HTTP client (streamable-http §Server Validation): a 4xx whose body is a JSON-RPC error "
    "is that error for the request: other 4xx bodies are described as before",
    "[integration][http][client][modern]") {
  test::fake::Script script;
  script.request = [](Conn& c, const Request& r, const jsonrpc::Message& m) {
    if (r.has("mismatch")) {
      c.respond(
          400, "application/json",
          R"({"jsonrpc":"2.0","id":)" + m.id().to_json() +
              R"(,"error":{"code":-32020,"message":"Bad Request: the request headers and body disagree","data":{"mismatch":{"header":"x","body":"y"}}}})");
    } else if (r.has("unknown/method")) {
      c.respond(
          404, "application/json",
          R"({"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"Method not found"}})");
    } else {
      c.respond(400, "text/plain", "no");
    }
  };
  test::fake::Server srv(test::fake::mcp(script));
  ClientHarness c(test_spec(srv.url()));
  c.send(modern_request("1", "tools/call", R"("name":"mismatch")"));
  auto e = c.next();
  REQUIRE(e.kind() == jsonrpc::Kind::error);
  CHECK(e.id() == jsonrpc::Id::integer(1));
  CHECK(e.error().code == -32020);
  CHECK(e.error().data_json == R"({"mismatch":{"header":"x","body":"y"}})");
  // 404 with a JSON-RPC error: the method is unknown (not an expired session: there is none).
  c.send(modern_request("2", "unknown/method"));
  e = c.next();
  CHECK(e.id() == jsonrpc::Id::integer(2));
  CHECK(e.error().code == -32601);
  c.send(modern_request("3", "tools/list"));
  e = c.next();
  CHECK(e.id() == jsonrpc::Id::integer(3));
  CHECK(e.error().code == -32603);
  CHECK(e.error().message == "upstream " + srv.url() + " answered HTTP 400 Bad Request: no");
  CHECK(c.close_count() == 0);
}

TEST_CASE(
    "HTTP client (streamable-http §Cancellation): notifications/cancelled of a 2026-07-28 "
    "request closes that request's stream and posts nothing: a long-lived listen streams "
    "notifications as they come",
    "[integration][http][client][modern]") {
  std::atomic<bool> call_stream_closed{false};
  std::atomic<bool> listen_stream_closed{false};
  test::fake::Queue<std::string> listen_events;
  test::fake::Script script;
  script.request = [&](Conn& c, const Request&, const jsonrpc::Message& m) {
    if (m.method() == "subscriptions/listen") {
      c.start_sse();
      c.event(
          R"({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/subscriptionId":"L"}}})");
      for (;;) {
        auto e = listen_events.pop(50ms);
        if (e && !c.event(*e)) break;
        if (!e && !c.chunk(": keepalive\n\n")) break;
      }
      listen_stream_closed = true;
      return;
    }
    c.start_sse();
    call_stream_closed = hold_until_closed(c);
  };
  test::fake::Server srv(test::fake::mcp(script));
  ClientHarness c(test_spec(srv.url()));
  c.send(modern_request(R"("L")", "subscriptions/listen",
                        R"("notifications":{"toolsListChanged":true})"));
  const auto ack = c.next();
  CHECK(ack.method() == "notifications/subscriptions/acknowledged");
  listen_events.push(
      R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"}}})");
  const auto changed = c.next();
  CHECK(changed.method() == "notifications/tools/list_changed");
  CHECK(changed.subscription_id() == jsonrpc::Id::string("L"));

  c.send(modern_request("5", "tools/call", R"("name":"slow")"));
  REQUIRE(srv.wait_for(test::fake::post_with("\"slow\"")));
  c.send(cancel("5"));
  CHECK(eventually([&] { return call_stream_closed.load(); }));
  c.send(cancel(R"("L")"));
  CHECK(eventually([&] { return listen_stream_closed.load(); }));
  // Nothing answers a cancelled request, and no cancellation was posted. Not synchronisation:
  // a window in which either would show.
  std::this_thread::sleep_for(200ms);
  CHECK(c.queued() == 0);
  CHECK(srv.count(test::fake::post_with("notifications/cancelled")) == 0);
}

TEST_CASE(
    "HTTP client (changelog Major §9): a 2026-07-28 stream cut before its response is not "
    "resumed: the request gets an error",
    "[integration][http][client][modern]") {
  test::fake::Script script;
  script.request = [](Conn& c, const Request&, const jsonrpc::Message&) {
    c.start_sse();
    c.chunk("id: e-1\nretry: 10\ndata:\n\n");
    c.cut();
  };
  test::fake::Server srv(test::fake::mcp(script));
  ClientHarness c(test_spec(srv.url()));
  c.send(modern_request("1", "tools/call", R"("name":"x")"));
  const auto e = c.next();
  CHECK(e.id() == jsonrpc::Id::integer(1));
  CHECK(e.error().code == -32000);
  CHECK(e.error().message == "upstream " + srv.url() +
                                 " closed the event stream before answering \"tools/call\"; "
                                 "2026-07-28 streams cannot be resumed");
  // Not synchronisation: a window in which a resuming GET would have gone out, and none may.
  std::this_thread::sleep_for(200ms);
  CHECK(srv.count(test::fake::method_is("GET")) == 0);
}

TEST_CASE(
    "HTTP client (basic/versioning §Backward Compatibility): initialize refused with -32022 "
    "is delivered as that error and, for an owner that can switch, the channel stays open",
    "[integration][http][client][modern]") {
  test::fake::Script script;
  script.initialize = [](Conn& c, const Request&, const jsonrpc::Message& m) {
    c.respond(
        400, "application/json",
        R"({"jsonrpc":"2.0","error":{"code":-32022,"message":"Unsupported protocol version: 2025-06-18","data":{"supported":["2026-07-28"],"requested":"2025-06-18"}},"id":)" +
            m.id().to_json() + "}");
  };
  script.request = [](Conn& c, const Request&, const jsonrpc::Message& m) {
    c.json(test::fake::result_json(
        m.id(),
        R"({"supportedVersions":["2026-07-28"],"capabilities":{},"resultType":"complete"})"));
  };
  const std::string init =
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})";
  test::fake::Server srv(test::fake::mcp(script));
  SECTION("modern_fallback") {
    auto spec = test_spec(srv.url());
    spec.modern_fallback = true;
    ClientHarness c(spec);
    c.send(init);
    const auto refused = c.next();
    CHECK(refused.id() == jsonrpc::Id::integer(1));
    CHECK(refused.error().code == -32022);
    CHECK(refused.error().data_json == R"({"supported":["2026-07-28"],"requested":"2025-06-18"})");
    c.send(modern_request("2", "server/discover"));
    const auto discovered = c.next();
    CHECK(discovered.id() == jsonrpc::Id::integer(2));
    CHECK(discovered.kind() == jsonrpc::Kind::result);
    CHECK(c.close_count() == 0);
  }
  SECTION("without it, as before: the initialize fails and the channel closes") {
    ClientHarness c(test_spec(srv.url()));
    c.send(init);
    const auto refused = c.next();
    CHECK(refused.error().code == -32603);
    CHECK(refused.error().message == "upstream " + srv.url() +
                                         " answered HTTP 400 Bad Request: Unsupported protocol "
                                         "version: 2025-06-18");
    c.wait_close();
  }
}

// The Streamable HTTP client when the upstream fails: every request gets exactly one response,
// with the message an MQTT client of the HTTP egress would read, and the channel closes itself
// when the session cannot go on. Real HTTP (and TLS) on loopback.
#include <catch2/catch.hpp>

#include "tests/http/client_fake_server.hpp"
#include "tests/http/client_harness.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mcpmqtt;
using namespace std::chrono_literals;
using bridge::CloseReason;
using test::ClientHarness;
using test::test_spec;
using test::fake::Conn;
using test::fake::Request;

namespace {

// The error response a client receives for request `id`.
jsonrpc::Error error_for(ClientHarness& c, int id) {
  const auto m = c.next();
  INFO(m.text());
  REQUIRE(m.kind() == jsonrpc::Kind::error);
  REQUIRE(m.id() == jsonrpc::Id::integer(id));
  return m.error();
}

// A loopback port nobody listens on: bound, then released.
std::uint16_t closed_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(
      io, {boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(0)});
  return a.local_endpoint().port();
}

}  // namespace

TEST_CASE(
    "HTTP client failure: connection refused answers initialize and what waits behind it, "
    "then closes (peer gone)",
    "[integration][http][client]") {
  const std::string url = "http://127.0.0.1:" + std::to_string(closed_port()) + "/mcp";
  ClientHarness c(test_spec(url));
  c.send_all({test::kClientInitialize, test::request_body(2, "tools/list")});
  const std::string expected = "upstream " + url + " unreachable: Connection refused";
  const auto init = error_for(c, 1);
  CHECK(init.code == -32000);
  CHECK(init.message == expected);
  const auto list = error_for(c, 2);
  CHECK(list.code == -32000);
  CHECK(list.message == expected);
  const auto why = c.wait_close();
  CHECK(why.kind == CloseReason::Kind::peer_gone);
  CHECK(why.detail == expected);
  CHECK(c.queued() == 0);
}

TEST_CASE("HTTP client failure: a host name that does not resolve", "[integration][http][client]") {
  // RFC 6761 §6.4: .invalid names never resolve.
  ClientHarness c(test_spec("http://no-such-host.invalid/mcp"));
  c.send(test::kClientInitialize);
  const auto init = error_for(c, 1);
  CHECK(init.code == -32000);
  CHECK_THAT(init.message,
             Catch::StartsWith("upstream http://no-such-host.invalid/mcp unreachable: cannot "
                               "resolve host \"no-such-host.invalid\""));
  const auto why = c.wait_close();
  CHECK(why.kind == CloseReason::Kind::peer_gone);
  CHECK(why.detail == init.message);
}

TEST_CASE(
    "HTTP client failure: HTTP 500 and 401 answer the request with the status and an "
    "excerpt, the session goes on",
    "[integration][http][client]") {
  test::fake::Script script;
  script.request = [](Conn& c, const Request&, const jsonrpc::Message& m) {
    if (m.method() == "tools/call") {
      c.respond(500, "text/plain", "  database\nis down\n");
    } else if (m.method() == "resources/list") {
      c.respond(401, "application/json", R"({"error":"invalid_token"})",
                {{"WWW-Authenticate", "Bearer"}});
    } else {
      c.json(test::fake::result_json(m.id(), "{}"));
    }
  };
  test::fake::Server srv(test::fake::mcp(script));
  ClientHarness c(test_spec(srv.url()));
  initialize(c);
  c.send(test::request_body(2, "tools/call"));
  const auto e500 = error_for(c, 2);
  CHECK(e500.code == -32603);
  CHECK(e500.message ==
        "upstream " + srv.url() + " answered HTTP 500 Internal Server Error: database is down");
  c.send(test::request_body(3, "resources/list"));
  const auto e401 = error_for(c, 3);
  CHECK(e401.message == "upstream " + srv.url() +
                            " answered HTTP 401 Unauthorized: invalid_token (check the "
                            "credentials in the headers configured for this server)");
  c.send(test::request_body(4, "ping"));
  CHECK(c.next().id() == jsonrpc::Id::integer(4));
  CHECK(c.close_count() == 0);
}

TEST_CASE("HTTP client failure: initialize answered with an HTTP error closes the channel",
          "[integration][http][client]") {
  test::fake::Script script;
  script.initialize = [](Conn& c, const Request&, const jsonrpc::Message&) {
    c.respond(503, "text/html", "<html><body>Service Unavailable</body></html>");
  };
  test::fake::Server srv(test::fake::mcp(script));
  ClientHarness c(test_spec(srv.url()));
  c.send(test::kClientInitialize);
  const std::string expected = "upstream " + srv.url() +
                               " answered HTTP 503 Service Unavailable: <html><body>Service "
                               "Unavailable</body></html>";
  CHECK(error_for(c, 1).message == expected);
  const auto why = c.wait_close();
  CHECK(why.kind == CloseReason::Kind::error);
  CHECK(why.detail == expected);
}

TEST_CASE(
    "HTTP client failure: initialize rejected with a JSON-RPC error is passed on, then the "
    "channel closes",
    "[integration][http][client]") {
  test::fake::Script script;
  script.session_id = "";
  script.initialize = [](Conn& c, const Request&, const jsonrpc::Message& m) {
    c.json(
        R"({"jsonrpc":"2.0","id":)" + m.id().to_json() +
        R"(,"error":{"code":-32602,"message":"Unsupported protocol version","data":{"supported":["2024-11-05"]}}})");
  };
  test::fake::Server srv(test::fake::mcp(script));
  ClientHarness c(test_spec(srv.url()));
  c.send(test::kClientInitialize);
  const auto e = error_for(c, 1);
  CHECK(e.code == -32602);  // the server's own error, unchanged
  CHECK(e.message == "Unsupported protocol version");
  CHECK(e.data_json == R"({"supported":["2024-11-05"]})");
  const auto why = c.wait_close();
  CHECK(why.kind == CloseReason::Kind::error);
  CHECK(why.detail ==
        "upstream " + srv.url() + " rejected initialize: Unsupported protocol version");
  CHECK(srv.count(test::fake::method_is("GET")) == 0);
}

TEST_CASE(
    "HTTP client failure: 404 to a request with the session id expires the session, every "
    "pending request is answered and the channel closes",
    "[integration][http][client]") {
  test::fake::Server srv;  // before the script, which refers to it
  test::fake::Script script;
  script.request = [&](Conn& c, const Request&, const jsonrpc::Message& m) {
    if (m.method() == "tools/call") {
      c.start_sse();  // a long-running call: no response yet
      while (!srv.stopping() && !c.closed())
        std::this_thread::sleep_for(20ms);
      return;
    }
    c.respond(
        404, "application/json",
        R"({"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}})");
  };
  srv.start(test::fake::mcp(script));
  {
    ClientHarness c(test_spec(srv.url()));
    initialize(c);
    c.send(test::request_body(2, "tools/call"));
    REQUIRE(srv.wait_for(test::fake::post_with("tools/call")));
    c.send(test::request_body(3, "resources/list"));
    const std::string expected =
        "upstream " + srv.url() + " session expired (HTTP 404); initialize a new session";
    const auto call = error_for(c, 2);
    CHECK(call.code == -32000);
    CHECK(call.message == expected);
    const auto list = error_for(c, 3);
    CHECK(list.message == expected);
    const auto why = c.wait_close();
    CHECK(why.kind == CloseReason::Kind::peer_gone);
    CHECK(why.detail == "upstream session expired (HTTP 404)");
    // Not synchronisation: a window in which a DELETE would have gone out, and none may.
    std::this_thread::sleep_for(200ms);
    CHECK(srv.count(test::fake::method_is("DELETE")) == 0);  // the session is already gone
    CHECK(c.queued() == 0);
  }
}

TEST_CASE(
    "HTTP client failure: a GET stream that cannot be reopened means the server is gone, "
    "the channel closes",
    "[integration][http][client]") {
  test::fake::Server srv;  // before the script, which refers to it
  test::fake::Script script;
  script.get = [&](Conn& c, const Request&) {
    c.start_sse();
    c.chunk(": open\n\n");
    while (!srv.stopping() && !c.closed())
      std::this_thread::sleep_for(20ms);
  };
  srv.start(test::fake::mcp(script));
  ClientHarness c(test_spec(srv.url()));
  c.send(
      test::kClientInitialize);  // and nothing else: the GET stream is the only exchange in flight
  REQUIRE(c.next().kind() == jsonrpc::Kind::result);
  REQUIRE(srv.wait_for(test::fake::method_is("GET")));
  // The server goes away: its connections drop (idle keep-alive ones too) and new ones are
  // refused.
  srv.stop_accepting();
  srv.drop_connections();
  // Five refused reconnections (50 ms doubling to 400 ms), then the session is given up.
  const auto why = c.wait_close();
  CHECK(why.kind == CloseReason::Kind::peer_gone);
  CHECK(why.detail == "upstream " + srv.url() + " unreachable: Connection refused");
  CHECK(c.queued() == 0);
}

TEST_CASE(
    "HTTP client failure: a stream cut before the response without event ids answers that "
    "request, the session goes on",
    "[integration][http][client]") {
  test::fake::Script script;
  script.request = [](Conn& c, const Request&, const jsonrpc::Message& m) {
    if (m.method() != "tools/call") return (void)c.json(test::fake::result_json(m.id(), "{}"));
    c.start_sse();
    c.event(
        R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}})");
    c.chunk("event: message\ndata: {\"jsonrpc\":\"2.0\",");  // half an event, then nothing
    c.cut();
  };
  test::fake::Server srv(test::fake::mcp(script));
  ClientHarness c(test_spec(srv.url()));
  initialize(c);
  c.send(test::request_body(2, "tools/call"));
  CHECK(c.next().method() == "notifications/progress");
  const auto e = error_for(c, 2);
  CHECK(e.code == -32000);
  CHECK(e.message == "upstream " + srv.url() +
                         " closed the event stream before answering \"tools/call\"; it gave no "
                         "event id to resume it");
  c.send(test::request_body(3, "ping"));
  CHECK(c.next().id() == jsonrpc::Id::integer(3));
  CHECK(c.close_count() == 0);
}

TEST_CASE("HTTP client failure: a cut stream whose resumption is refused answers the request",
          "[integration][http][client]") {
  test::fake::Script script;
  script.request = [](Conn& c, const Request&, const jsonrpc::Message& m) {
    if (m.method() != "tools/call") return (void)c.json(test::fake::result_json(m.id(), "{}"));
    c.start_sse();
    c.chunk("id: 41\ndata:\n\n");
    c.cut();
  };
  test::fake::Server srv(test::fake::mcp(script));  // GET: 405
  ClientHarness c(test_spec(srv.url()));
  initialize(c);
  c.send(test::request_body(2, "tools/call"));
  const auto e = error_for(c, 2);
  CHECK(e.code == -32000);
  CHECK(e.message == "upstream " + srv.url() +
                         " closed the event stream before answering \"tools/call\"; resuming it "
                         "was refused with HTTP 405 Method Not Allowed");
  CHECK(srv.wait_for([](const Request& r) { return r.header("Last-Event-ID") == "41"; }));
}

TEST_CASE("HTTP client failure: a slow server times out that request, the session goes on",
          "[integration][http][client]") {
  test::fake::Server srv;  // before the script, which refers to it
  test::fake::Script script;
  script.request = [&](Conn& c, const Request&, const jsonrpc::Message& m) {
    if (m.method() == "tools/call") {
      while (!srv.stopping() && !c.closed())  // never answers
        std::this_thread::sleep_for(20ms);
      return;
    }
    c.json(test::fake::result_json(m.id(), "{}"));
  };
  srv.start(test::fake::mcp(script));
  auto spec = test_spec(srv.url());
  spec.response_timeout = 300ms;
  {
    ClientHarness c(spec);
    initialize(c);
    const auto start = std::chrono::steady_clock::now();
    c.send(test::request_body(2, "tools/call"));
    const auto e = error_for(c, 2);
    CHECK(std::chrono::steady_clock::now() - start >= 290ms);
    CHECK(e.code == -32000);
    CHECK(e.message == "upstream " + srv.url() + " did not answer \"tools/call\" within 300 ms");
    c.send(test::request_body(3, "ping"));
    CHECK(c.next().id() == jsonrpc::Id::integer(3));
    CHECK(c.close_count() == 0);
  }
}

TEST_CASE("HTTP client failure: an SSE event over the limit answers the request",
          "[integration][http][client]") {
  test::fake::Script script;
  script.request = [](Conn& c, const Request&, const jsonrpc::Message& m) {
    c.start_sse();
    c.event(test::fake::result_json(m.id(), "\"" + std::string(4096, 'x') + "\""));
    c.end_sse();
  };
  test::fake::Server srv(test::fake::mcp(script));
  auto spec = test_spec(srv.url());
  spec.max_event_bytes = 1024;
  ClientHarness c(spec);
  initialize(c);
  c.send(test::request_body(2, "tools/call"));
  const auto e = error_for(c, 2);
  CHECK(e.code == -32603);
  CHECK(e.message == "upstream " + srv.url() +
                         " sent an event larger than the limit of 1024 bytes in reply to "
                         "\"tools/call\"");
}

namespace {

// A self-signed certificate and its key, made with the openssl command line.
struct Certificate {
  test::TempDir dir;
  std::string cert, key;
  explicit Certificate(const std::string& san) {
    cert = dir.path() + "/cert.pem";
    key = dir.path() + "/key.pem";
    const auto r = test::run_capture({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                                      "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
                                      "-out", cert, "-days", "2", "-subj", "/CN=mcp-test",
                                      "-addext", "subjectAltName=" + san});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  std::shared_ptr<boost::asio::ssl::context> server_context() const {
    auto ctx = std::make_shared<boost::asio::ssl::context>(boost::asio::ssl::context::tls_server);
    ctx->use_certificate_chain_file(cert);
    ctx->use_private_key_file(key, boost::asio::ssl::context::pem);
    return ctx;
  }
};

}  // namespace

TEST_CASE(
    "HTTP client TLS: a self-signed certificate is rejected by default, accepted with its "
    "CA file or with verification off",
    "[integration][http][client]") {
  Certificate cert("IP:127.0.0.1,DNS:localhost");
  test::fake::Server srv(test::fake::mcp({}), cert.server_context());
  REQUIRE(srv.url().rfind("https://", 0) == 0);

  SECTION("verified against the system's store: rejected") {
    ClientHarness c(test_spec(srv.url()));
    c.send(test::kClientInitialize);
    const std::string expected =
        "upstream " + srv.url() + " TLS certificate verification failed: self-signed certificate";
    const auto e = error_for(c, 1);
    CHECK(e.code == -32000);
    CHECK(e.message == expected);
    const auto why = c.wait_close();
    CHECK(why.kind == CloseReason::Kind::error);
    CHECK(why.detail == expected);
  }
  SECTION("verified against its own CA file: accepted") {
    auto spec = test_spec(srv.url());
    spec.ca_file = cert.cert;
    {
      ClientHarness c(spec);
      initialize(c);
      c.send(test::request_body(2, "ping"));
      CHECK(c.next().id() == jsonrpc::Id::integer(2));
    }
    CHECK(srv.wait_for(test::fake::method_is("DELETE")));
  }
  SECTION("verification off: accepted") {
    auto spec = test_spec(srv.url());
    spec.tls_verify = false;
    ClientHarness c(spec);
    initialize(c);
    c.send(test::request_body(2, "ping"));
    CHECK(c.next().id() == jsonrpc::Id::integer(2));
  }
  SECTION("a CA file that holds no certificate") {
    auto spec = test_spec(srv.url());
    spec.ca_file = cert.key;
    ClientHarness c(spec);
    c.send(test::kClientInitialize);
    CHECK(error_for(c, 1).message == "upstream " + srv.url() +
                                         " cannot be used: cannot load the CA file \"" + cert.key +
                                         "\": it holds no PEM certificate OpenSSL "
                                         "accepts");
    CHECK(c.wait_close().kind == CloseReason::Kind::error);
  }
  SECTION("a CA file that cannot be read") {
    auto spec = test_spec(srv.url());
    spec.ca_file = cert.dir.path() + "/missing.pem";
    ClientHarness c(spec);
    c.send(test::kClientInitialize);
    const auto e = error_for(c, 1);
    CHECK(e.message == "upstream " + srv.url() + " cannot be used: cannot read the CA file \"" +
                           spec.ca_file + "\": No such file or directory");
    CHECK(c.wait_close().kind == CloseReason::Kind::error);
  }
}

TEST_CASE("HTTP client TLS: a trusted certificate for another name is rejected",
          "[integration][http][client]") {
  Certificate cert("DNS:other.example");
  test::fake::Server srv(test::fake::mcp({}), cert.server_context());
  auto spec = test_spec(srv.url());
  spec.ca_file = cert.cert;
  ClientHarness c(spec);
  c.send(test::kClientInitialize);
  CHECK(error_for(c, 1).message ==
        "upstream " + srv.url() + " TLS certificate verification failed: IP address mismatch");
  CHECK(c.wait_close().kind == CloseReason::Kind::error);
}

// Raw bytes as HTTP/1.1 requests (pipelined), through the request parser configured as the
// Streamable HTTP server configures it, then every pure rule the server applies to a request
// (http/server_rules.hpp) and the Streamable HTTP headers:
//
//   the route and its server-name       parse_route, percent_decode
//   Host, Origin                        host_allowed (four local addresses), origin_allowed,
//                                       origin_listed
//   Accept, Content-Type                accept_lists, is_json_content_type
//   Authorization                       BearerTokens::check
//   Mcp-Session-Id                      the session registry's lookup
//   MCP-Protocol-Version                is_supported_protocol_version, wants_priming
//   Last-Event-ID                       StreamRouter::parse_event_id, and resume() on a router
//                                       holding a POST stream and the GET stream
//   MCP-Protocol-Version, Mcp-Method,   modern::check_headers against the body's message and
//   Mcp-Name                            its envelope, decode_header_value
//   the body                            jsonrpc::parse_body with the server's limits
//
// and every error body the server builds around one of these values must build (the client
// gets it as a JSON-RPC error). This is the fast companion of http_server_fuzzer, which runs the
// same requests through the real server on a loopback socket at a fraction of the speed.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/modern/protocol.hpp"
#include "bridge/protocol/topics.hpp"
#include "bridge/relay/stream_router.hpp"
#include "http/server_options.hpp"
#include "http/server_rules.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace http = mcpmqtt::http;
namespace jsonrpc = mcpmqtt::jsonrpc;
namespace modern = mcpmqtt::modern;
namespace bhttp = boost::beast::http;
using mcpmqtt::bridge::StreamRouter;
using mcpmqtt::fuzz::check;

namespace {

std::string_view sv(boost::beast::string_view s) {
  return {s.data(), s.size()};
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string percent_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

// An error body the server builds with `value` in its message: it must build, and read back as
// an error response.
void error_body_with(std::string_view value) {
  const auto body = http::error_body(jsonrpc::code::connection_closed,
                                     "Forbidden: \"" + std::string(value) + "\" is not accepted");
  auto m = jsonrpc::Message::parse(body);
  check(m.has_value() && m->kind() == jsonrpc::Kind::error, "an error body does not read back");
}

const std::vector<std::string>& allowed_hosts() {
  static const std::vector<std::string> v = {"bridge.example", "bridge.example:8443",
                                             "[2001:db8::1]", "2001:db8::2"};
  return v;
}
const std::vector<std::string>& allowed_origins() {
  static const std::vector<std::string> v = {"https://app.example", "http://127.0.0.1:6274/"};
  return v;
}
const std::vector<boost::asio::ip::address>& locals() {
  static const std::vector<boost::asio::ip::address> v = {
      boost::asio::ip::make_address("127.0.0.1"), boost::asio::ip::make_address("::1"),
      boost::asio::ip::make_address("192.0.2.10"),
      boost::asio::ip::make_address("::ffff:127.0.0.1")};
  return v;
}

void check_route(std::string_view target) {
  const auto r = http::parse_route(target);
  if (r.kind == http::Route::Kind::bad_server_name) check(!r.problem.empty(), "no problem named");
  if (r.kind == http::Route::Kind::mcp && !r.server_name.empty()) {
    check(mcpmqtt::topics::is_valid_server_name(r.server_name),
          "a route to an invalid server-name");
    // The same name, percent-encoded as a whole, names the same server.
    const auto again = http::parse_route("/servers/" + percent_encode(r.server_name) + "/mcp");
    check(again.kind == http::Route::Kind::mcp && again.server_name == r.server_name,
          "an encoded server-name routes elsewhere");
  }
  if (r.kind == http::Route::Kind::bad_server_name) error_body_with(r.problem);
  // Decoding undoes encoding.
  const auto decoded = http::percent_decode(percent_encode(target));
  check(decoded && *decoded == target, "percent_decode(encode(x)) != x");
  error_body_with(target);  // "Not Found: no endpoint at <path>"
}

void check_host(std::string_view host) {
  for (const auto& local : locals()) {
    const bool ok = http::host_allowed(host, local, allowed_hosts());
    check(ok == http::host_allowed(upper(host), local, allowed_hosts()),
          "Host is compared case-sensitively");
    if (local.is_loopback()) {
      check(http::host_allowed("localhost", local, {}), "localhost refused over loopback");
    }
  }
  error_body_with(host);
}

void check_origin(std::string_view origin) {
  for (const auto& local : locals()) {
    const bool listed = http::origin_listed(origin, allowed_origins());
    const bool ok = http::origin_allowed(origin, local, allowed_origins());
    check(!listed || ok, "a listed origin is refused");
    check(listed == http::origin_listed(upper(origin), allowed_origins()),
          "origins are compared case-sensitively");
  }
  error_body_with(origin);
}

void check_accept(std::string_view accept) {
  for (std::string_view type : {"application/json", "text/event-stream"}) {
    const bool listed = http::accept_lists(accept, type);
    check(listed == http::accept_lists(std::string(accept) + ", other/type", type),
          "another type after changes the answer");
    check(listed == http::accept_lists("other/type, " + std::string(accept), type),
          "another type before changes the answer");
    check(http::accept_lists(std::string(accept) + "," + std::string(type), type),
          "an Accept listing the type");
  }
}

void check_content_type(std::string_view ct) {
  const bool json = http::is_json_content_type(ct);
  check(json == http::is_json_content_type(std::string(ct) + "; charset=utf-8"),
        "a parameter changes the media type");
}

void check_authorization(std::string_view authorization) {
  static const http::BearerTokens tokens({"s3cret", "other token"});
  const auto r = tokens.check(authorization);
  if (r == http::BearerTokens::Result::ok) {
    // Only the scheme (any case) and the token, with blanks around.
    std::string_view a = authorization;
    while (!a.empty() && (a.front() == ' ' || a.front() == '\t'))
      a.remove_prefix(1);
    while (!a.empty() && (a.back() == ' ' || a.back() == '\t'))
      a.remove_suffix(1);
    check(a.size() > 7 && upper(a.substr(0, 7)) == "BEARER ", "a token without the scheme");
    a.remove_prefix(7);
    while (!a.empty() && (a.front() == ' ' || a.front() == '\t'))
      a.remove_prefix(1);
    check(a == "s3cret" || a == "other token", "an unknown token accepted");
  }
  check(tokens.check("Bearer s3cret") == http::BearerTokens::Result::ok, "the token refused");
}

void check_version(std::string_view version) {
  const bool supported = http::is_supported_protocol_version(version);
  check(!supported || version.size() == 10, "a supported version of another shape");
  if (supported) check(http::wants_priming(version) == (version >= "2025-11-25"), "priming");
  error_body_with("Bad Request: Unsupported protocol version: " + std::string(version) +
                  " (supported versions: " + http::supported_protocol_versions_text() + ")");
}

// A router as a session holds it: the GET stream, and a POST stream with one answered request
// and one pending.
void check_last_event_id(std::string_view id) {
  const auto parsed = StreamRouter::parse_event_id(id);
  if (parsed) check(StreamRouter::event_id(parsed->first, parsed->second) == id, "event id");
  StreamRouter router(StreamRouter::Limits{4, 4, 2});
  check(router.open_get(), "open_get");
  auto a = jsonrpc::Message::request(jsonrpc::Id::integer(1), "tools/call", R"({"name":"x"})");
  auto b = jsonrpc::Message::request(jsonrpc::Id::integer(2), "tools/list");
  StreamRouter::StreamOptions options;
  auto stream = router.open_post({a, b}, options);
  check(stream.has_value(), "open_post");
  router.route(jsonrpc::Message::notification("notifications/message", R"({"level":"info"})"));
  router.route(jsonrpc::Message::result(jsonrpc::Id::integer(1), "{}"));
  router.detach(*stream);
  router.detach(StreamRouter::kGetStream);
  auto resumed = router.resume(id);
  if (!resumed) {
    error_body_with(resumed.error());
    return;
  }
  check(parsed.has_value(), "resumed from an id that does not parse");
  check(resumed->stream == parsed->first, "resumed another stream");
  for (const auto& e : resumed->events) {
    const auto seq = StreamRouter::parse_event_id(e.id);
    check(seq && seq->first == parsed->first && seq->second > parsed->second,
          "replayed an event at or before the cursor");
  }
}

void check_modern_headers(const bhttp::request<bhttp::string_body>& req,
                          const jsonrpc::Message& m) {
  modern::Headers h;
  auto field = [&](const char* name) -> std::optional<std::string> {
    const auto it = req.find(name);
    if (it == req.end()) return std::nullopt;
    return std::string(it->value());
  };
  h.protocol_version = field(modern::header::protocol_version);
  h.method = field(modern::header::method);
  h.name = field(modern::header::name);
  for (const auto& v : {h.method, h.name}) {
    if (!v) continue;
    const auto decoded = modern::decode_header_value(*v);
    if (decoded) {
      const auto again = modern::decode_header_value(modern::encode_header_value(*decoded));
      check(again && *again == *decoded, "a decoded header value does not encode back");
    }
  }
  if (!m.is_request() && !m.is_notification()) return;
  auto envelope = modern::read_envelope(m);
  if (!envelope) return;
  const auto mismatch = modern::check_headers(m, *envelope, h);
  if (mismatch) {
    check(mismatch->code == modern::code::header_mismatch, "a header error that is not -32020");
    const auto reply = jsonrpc::Message::error(m.id(), *mismatch);
    check(reply.kind() == jsonrpc::Kind::error, "the header error response");
    return;
  }
  check(h.protocol_version.has_value(), "accepted without MCP-Protocol-Version");
  if (m.is_request()) {
    const auto method = modern::decode_header_value(*h.method);
    check(method && *method == m.method(), "accepted an Mcp-Method naming another method");
  }
}

void check_request(bhttp::request_parser<bhttp::string_body>& parser, bool complete) {
  const auto& req = parser.get();
  check_route(sv(req.target()));
  if (auto it = req.find(bhttp::field::host); it != req.end()) check_host(sv(it->value()));
  if (auto it = req.find(bhttp::field::origin); it != req.end()) check_origin(sv(it->value()));
  check_accept(sv(req[bhttp::field::accept]));
  check_content_type(sv(req[bhttp::field::content_type]));
  check_authorization(sv(req[bhttp::field::authorization]));
  check_version(sv(req["MCP-Protocol-Version"]));
  if (auto it = req.find("Last-Event-ID"); it != req.end()) check_last_event_id(sv(it->value()));
  if (!complete) return;
  // The body as the server reads a POST.
  auto body = jsonrpc::parse_body(req.body(), jsonrpc::Limits{});
  if (!body) {
    const auto& f = body.error();
    auto reply = jsonrpc::Message::error(f.id, f.error);
    check(reply.kind() == jsonrpc::Kind::error, "the body's error response");
    return;
  }
  for (const auto& m : body->messages)
    check_modern_headers(req, m);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const http::ServerLimits limits;  // the server's defaults
  // Requests one after another on one connection, as a keep-alive client pipelines them.
  for (int n = 0; n < 8 && !in.empty(); ++n) {
    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(http::kRequestHeaderLimit);
    parser.body_limit(limits.max_body_bytes);
    parser.eager(true);
    boost::beast::error_code ec;
    bool header_checked = false;
    while (!parser.is_done()) {
      const auto used = parser.put(boost::asio::buffer(in.data(), in.size()), ec);
      in.remove_prefix(used);
      if (!header_checked && parser.is_header_done()) {
        header_checked = true;
        check_request(parser, false);
      }
      // The parser wants more than is left (or takes nothing more, as it does from an empty
      // buffer): the input is all there is, so it ends here.
      if (ec == bhttp::error::need_more || (!ec && used == 0)) {
        if (used > 0 && !in.empty()) continue;
        ec = {};
        parser.put_eof(ec);
        break;
      }
      if (ec) break;
    }
    if (ec || !parser.is_done()) return 0;
    check_request(parser, true);
    if (!parser.get().keep_alive()) return 0;
  }
  return 0;
}

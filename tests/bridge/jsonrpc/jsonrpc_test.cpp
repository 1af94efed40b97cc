#include "bridge/jsonrpc/jsonrpc.hpp"

#include <cmath>
#include <cstdint>
#include <thread>

#include <catch2/catch.hpp>

using namespace mcpmqtt::jsonrpc;

namespace {

Message ok(const std::string& text) {
  auto m = Message::parse(text);
  INFO(text);
  REQUIRE(m.has_value());
  return m.value();
}

ParseFailure bad(const std::string& text, const Limits& limits = {}) {
  auto m = Message::parse(text, limits);
  INFO(text);
  REQUIRE_FALSE(m.has_value());
  return m.error();
}

}  // namespace

TEST_CASE("classifies requests, notifications, results and errors", "[jsonrpc]") {
  auto req = ok(R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})");
  CHECK(req.kind() == Kind::request);
  CHECK(req.method() == "tools/list");
  CHECK(req.id() == Id::integer(1));

  auto sreq = ok(R"({"jsonrpc":"2.0","id":"abc","method":"ping","params":{}})");
  CHECK(sreq.kind() == Kind::request);
  CHECK(sreq.id() == Id::string("abc"));

  auto note = ok(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  CHECK(note.kind() == Kind::notification);
  CHECK(note.id().is_null());

  auto res = ok(R"({"jsonrpc":"2.0","id":7,"result":{"tools":[]}})");
  CHECK(res.kind() == Kind::result);
  CHECK(res.is_response());
  CHECK(res.method().empty());

  auto err = ok(R"({"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"nope"}})");
  CHECK(err.kind() == Kind::error);
  CHECK(err.error().code == -32601);
  CHECK(err.error().message == "nope");
  CHECK(err.error().data_json.empty());
}

TEST_CASE("an error response may carry a null id and data", "[jsonrpc]") {
  auto err = ok(
      R"({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":{"at":[1,2]}}})");
  CHECK(err.kind() == Kind::error);
  CHECK(err.id().is_null());
  CHECK(err.error().data_json == R"({"at":[1,2]})");
}

TEST_CASE("ids: negative, zero, large and string forms are kept apart", "[jsonrpc]") {
  CHECK(ok(R"({"jsonrpc":"2.0","id":-5,"method":"m"})").id() == Id::integer(-5));
  CHECK(ok(R"({"jsonrpc":"2.0","id":0,"method":"m"})").id() == Id::integer(0));
  CHECK(ok(R"({"jsonrpc":"2.0","id":9223372036854775807,"method":"m"})").id() ==
        Id::integer(INT64_MAX));
  CHECK(ok(R"({"jsonrpc":"2.0","id":"1","method":"m"})").id() == Id::string("1"));
  CHECK_FALSE(Id::string("1") == Id::integer(1));
  CHECK(Id::string("1").hash() != Id::integer(1).hash());
  CHECK(ok(R"({"jsonrpc":"2.0","id":"","method":"m"})").id() == Id::string(""));
}

TEST_CASE("progress tokens are read from _meta of requests and from progress notifications",
          "[jsonrpc]") {
  auto r = ok(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":"tok-1"}}})");
  REQUIRE(r.progress_token());
  CHECK(*r.progress_token() == Id::string("tok-1"));

  auto n = ok(
      R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":42,"progress":1}})");
  REQUIRE(n.progress_token());
  CHECK(*n.progress_token() == Id::integer(42));

  // A progressToken deeper in arguments is not the request's token.
  auto deep = ok(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"_meta":{"progressToken":"no"}}}})");
  CHECK_FALSE(deep.progress_token());
}

TEST_CASE("the wire text survives unchanged: ids, params, unknown members, number spellings",
          "[jsonrpc]") {
  const std::string text =
      R"({"jsonrpc":"2.0","id":"a\u00e9","method":"x/y","params":{"n":1.50,"e":1E+2,"big":123456789012345678901234567890,"s":"\"q\""},"extension":{"k":[true,null]}})";
  auto m = ok(text);
  CHECK(m.text() == text);
  // Re-parsing the text gives the same message.
  auto again = ok(std::string(m.text()));
  CHECK(again.id() == m.id());
  CHECK(again.text() == text);
}

TEST_CASE("line breaks outside strings become spaces, so a message is one stdio line",
          "[jsonrpc]") {
  auto m = ok("{\n  \"jsonrpc\": \"2.0\",\r\n  \"id\": 1,\n  \"method\": \"a\\nb\"\n}");
  CHECK(m.text().find('\n') == std::string_view::npos);
  CHECK(m.text().find('\r') == std::string_view::npos);
  CHECK(m.method() == "a\nb");
}

TEST_CASE("the document is available lazily and matches the text", "[jsonrpc]") {
  auto m =
      ok(R"({"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"test://x"}})");
  const auto* p = m.params();
  REQUIRE(p);
  CHECK(std::string((*p)["uri"].GetString()) == "test://x");
  auto r = ok(R"({"jsonrpc":"2.0","id":1,"result":{"ok":true}})");
  REQUIRE(r.result_value());
  CHECK((*r.result_value())["ok"].GetBool());
  CHECK(r.params() == nullptr);
}

TEST_CASE("copies share state and can be read from many threads", "[jsonrpc]") {
  auto m =
      ok(R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"u"}})");
  std::vector<std::thread> threads;
  std::atomic<int> seen{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([m, &seen] {
      auto copy = m;
      if (std::string((*copy.params())["uri"].GetString()) == "u") ++seen;
    });
  }
  for (auto& t : threads)
    t.join();
  CHECK(seen == 8);
  auto copy = m;
  CHECK(copy.shared_text() == m.shared_text());
}

TEST_CASE("builders produce valid messages", "[jsonrpc]") {
  auto r = Message::request(Id::integer(3), "tools/call", R"({"name":"echo"})");
  CHECK(r.kind() == Kind::request);
  CHECK(r.text() == R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"}})");
  auto n = Message::notification("notifications/disconnected");
  CHECK(n.text() == R"({"jsonrpc":"2.0","method":"notifications/disconnected"})");
  auto res = Message::result(Id::string("s"), "{}");
  CHECK(res.text() == R"({"jsonrpc":"2.0","id":"s","result":{}})");
  auto e = Message::error(Id{}, Error{-32700, "bad \"json\"", R"({"line":1})"});
  CHECK(
      e.text() ==
      R"({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad \"json\"","data":{"line":1}}})");
  CHECK(e.error().data_json == R"({"line":1})");
  CHECK_THROWS(Message::result(Id::integer(1), "{not json"));
}

TEST_CASE("with_id replaces the id and keeps everything else", "[jsonrpc]") {
  auto m = ok(R"({"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1,2]},"x":"y"})");
  auto n = m.with_id(Id::string("bridge-9"));
  CHECK(n.id() == Id::string("bridge-9"));
  CHECK(n.method() == "m");
  CHECK(n.text() ==
        R"({"jsonrpc":"2.0","id":"bridge-9","method":"m","params":{"a":[1,2]},"x":"y"})");
  CHECK(m.id() == Id::integer(1));
}

TEST_CASE("parse errors are -32700 and say where", "[jsonrpc][malformed]") {
  auto f = bad(R"({"jsonrpc":"2.0", "id":1,)");
  CHECK(f.error.code == code::parse_error);
  CHECK(f.error.message.rfind("invalid JSON at line 1 column ", 0) == 0);

  f = bad("{\n\"jsonrpc\": \"2.0\",\n\"id\": 1 2}");
  CHECK(f.error.code == code::parse_error);
  CHECK(f.error.message ==
        "invalid JSON at line 3 column 9: Missing a comma or '}' after an object member.");

  f = bad("");
  CHECK(f.error.code == code::parse_error);
  CHECK(f.error.message == "empty message: expected a JSON object");
  f = bad("   \n ");
  CHECK(f.error.message == "empty message: expected a JSON object");

  f = bad(R"({"jsonrpc":"2.0","id":1,"method":"m"} trailing)");
  CHECK(f.error.code == code::parse_error);
  CHECK(f.error.message.find("The document root must not be followed by other values") !=
        std::string::npos);

  // Comments and trailing commas are not JSON on the wire.
  CHECK(bad(R"({"jsonrpc":"2.0","method":"m",})").error.code == code::parse_error);
  CHECK(bad(R"({"jsonrpc":"2.0",/*c*/"method":"m"})").error.code == code::parse_error);
  // Invalid UTF-8 (JSON-RPC messages MUST be UTF-8, 002 §Transports).
  f = bad("{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}");
  CHECK(f.error.code == code::parse_error);
  CHECK(f.error.message.find("Invalid encoding in string") != std::string::npos);
  // A raw control character inside a string.
  CHECK(bad("{\"jsonrpc\":\"2.0\",\"method\":\"a\nb\"}").error.code == code::parse_error);
}

TEST_CASE("UTF-8 is checked wherever a byte is not ASCII, at any offset (002 §Transports)",
          "[jsonrpc][malformed]") {
  // Text that is all ASCII skips the per-byte validation, so the first non-ASCII byte is put at
  // every offset across the eight-byte words the ASCII check reads.
  for (std::size_t pad = 0; pad < 20; ++pad) {
    const std::string head =
        R"({"jsonrpc":"2.0","method":"m","params":{"s":")" + std::string(pad, 'a');
    INFO("pad " << pad);
    // Valid: é (2 bytes), € (3), 😀 (4): accepted and kept byte for byte.
    const std::string good_text = head + "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}}";
    auto m = ok(good_text);
    CHECK(m.text() == good_text);
    CHECK(m.params()->FindMember("s")->value.GetStringLength() == pad + 9);
    // Invalid: a stray continuation byte, a truncated sequence, an overlong encoding.
    for (const char* wrong : {"\x80", "\xe2\x82\"", "\xc0\xaf"}) {
      auto f = bad(head + wrong + "\"}}");
      CHECK(f.error.code == code::parse_error);
      CHECK(f.error.message.find("Invalid encoding in string") != std::string::npos);
    }
  }
}

TEST_CASE("invalid requests are -32600 with the reason and the id when readable",
          "[jsonrpc][malformed]") {
  struct Case {
    const char* text;
    const char* message;
    Id id;
  };
  const Case cases[] = {
      {R"([])",
       "a JSON-RPC message must be an object, found an array (a batch is not allowed here)",
       {}},
      {R"(42)", "a JSON-RPC message must be an object, found a number", {}},
      {R"("x")", "a JSON-RPC message must be an object, found a string", {}},
      {R"(null)", "a JSON-RPC message must be an object, found null", {}},
      {R"(true)", "a JSON-RPC message must be an object, found a boolean", {}},
      {R"({"id":1,"method":"m"})", R"(missing member "jsonrpc": "2.0")", Id::integer(1)},
      {R"({"jsonrpc":"1.0","id":1,"method":"m"})", R"("jsonrpc" must be "2.0", found "1.0")",
       Id::integer(1)},
      {R"({"jsonrpc":2.0,"id":1,"method":"m"})",
       R"("jsonrpc" must be the string "2.0", found a number)", Id::integer(1)},
      {R"({"jsonrpc":"2.0","id":null,"method":"m"})",
       R"(a request "id" must be a string or an integer, not null)",
       {}},
      {R"({"jsonrpc":"2.0","id":1.5,"method":"m"})",
       R"("id" must be a string or an integer, found a non-integer number)",
       {}},
      {R"({"jsonrpc":"2.0","id":1.0,"method":"m"})",
       R"("id" must be a string or an integer, found a non-integer number)",
       {}},
      {R"({"jsonrpc":"2.0","id":18446744073709551615,"method":"m"})",
       R"("id" is an integer out of range (at most 9223372036854775807))",
       {}},
      {R"({"jsonrpc":"2.0","id":true,"method":"m"})",
       R"("id" must be a string or an integer, found a boolean)",
       {}},
      {R"({"jsonrpc":"2.0","id":{},"method":"m"})",
       R"("id" must be a string or an integer, found an object)",
       {}},
      {R"({"jsonrpc":"2.0","id":[1],"method":"m"})",
       R"("id" must be a string or an integer, found an array)",
       {}},
      {R"({"jsonrpc":"2.0","id":1,"method":7})", R"("method" must be a string, found a number)",
       Id::integer(1)},
      {R"({"jsonrpc":"2.0","id":1,"method":""})", R"("method" must not be empty)", Id::integer(1)},
      {R"({"jsonrpc":"2.0","id":1,"method":"m","params":"x"})",
       R"("params" must be an object or an array, found a string)", Id::integer(1)},
      {R"({"jsonrpc":"2.0","id":1,"method":"m","params":null})",
       R"("params" must be an object or an array, found null)", Id::integer(1)},
      {R"({"jsonrpc":"2.0","id":1,"method":"m","result":{}})",
       R"(a message cannot have both "method" and "result")", Id::integer(1)},
      {R"({"jsonrpc":"2.0","id":1,"method":"m","error":{"code":1,"message":"x"}})",
       R"(a message cannot have both "method" and "error")", Id::integer(1)},
      {R"({"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}})",
       R"(a response must have exactly one of "result" and "error", found both)", Id::integer(1)},
      {R"({"jsonrpc":"2.0","result":{}})", R"(a response must have an "id")", {}},
      {R"({"jsonrpc":"2.0","id":null,"result":{}})",
       R"(a result's "id" must be a string or an integer, not null)",
       {}},
      {R"({"jsonrpc":"2.0","error":{"code":1,"message":"x"}})",
       R"(an error response must have an "id" (null if unknown))",
       {}},
      {R"({"jsonrpc":"2.0","id":2,"error":"boom"})", R"("error" must be an object, found a string)",
       Id::integer(2)},
      {R"({"jsonrpc":"2.0","id":2,"error":{"message":"x"}})",
       R"("error" must have an integer "code")", Id::integer(2)},
      {R"({"jsonrpc":"2.0","id":2,"error":{"code":1.5,"message":"x"}})",
       R"("error.code" must be an integer, found a non-integer number)", Id::integer(2)},
      {R"({"jsonrpc":"2.0","id":2,"error":{"code":"1","message":"x"}})",
       R"("error.code" must be an integer, found a string)", Id::integer(2)},
      {R"({"jsonrpc":"2.0","id":2,"error":{"code":99999999999,"message":"x"}})",
       R"("error.code" is out of range)", Id::integer(2)},
      {R"({"jsonrpc":"2.0","id":2,"error":{"code":1}})", R"("error" must have a string "message")",
       Id::integer(2)},
      {R"({"jsonrpc":"2.0","id":2,"error":{"code":1,"message":null}})",
       R"("error.message" must be a string, found null)", Id::integer(2)},
      {R"({"jsonrpc":"2.0","id":3})",
       R"(a message must have "method" (request or notification) or "result"/"error" (response))",
       Id::integer(3)},
      {R"({"jsonrpc":"2.0","id":1,"id":2,"method":"m"})", R"(member "id" appears more than once)",
       Id::integer(2)},
      {R"({"jsonrpc":"2.0","method":"a","method":"b"})",
       R"(member "method" appears more than once)",
       {}},
  };
  for (const auto& c : cases) {
    auto f = bad(c.text);
    INFO(c.text);
    CHECK(f.error.code == code::invalid_request);
    CHECK(f.error.message == c.message);
    CHECK(f.id == c.id);
  }
}

TEST_CASE("limits on size and nesting depth", "[jsonrpc][malformed]") {
  Limits small{64, 100};
  auto f = bad(
      R"({"jsonrpc":"2.0","method":"m","params":{"pad":"0123456789012345678901234567890123456789"}})",
      small);
  CHECK(f.error.code == code::invalid_request);
  CHECK(f.error.message == "message of 90 bytes exceeds the limit of 64 bytes");

  std::string deep = R"({"jsonrpc":"2.0","method":"m","params":)";
  for (int i = 0; i < 200; ++i)
    deep += "[";
  for (int i = 0; i < 200; ++i)
    deep += "]";
  deep += "}";
  f = bad(deep);
  CHECK(f.error.code == code::invalid_request);
  CHECK(f.error.message == "nesting deeper than 100 levels");

  // Deep nesting within the limit is fine; a million brackets do not overflow the stack.
  std::string ok_depth = R"({"jsonrpc":"2.0","method":"m","params":)";
  for (int i = 0; i < 98; ++i)
    ok_depth += "[";
  for (int i = 0; i < 98; ++i)
    ok_depth += "]";
  ok_depth += "}";
  CHECK(Message::parse(ok_depth).has_value());
  std::string bomb(1'000'000, '[');
  f = bad(bomb, Limits{2'000'000, 100});
  CHECK(f.error.message == "nesting deeper than 100 levels");
}

TEST_CASE("bodies: single messages and batches", "[jsonrpc][batch]") {
  auto single = parse_body(R"({"jsonrpc":"2.0","id":1,"method":"m"})");
  REQUIRE(single);
  CHECK_FALSE(single->batch);
  REQUIRE(single->messages.size() == 1);

  const std::string a = R"({"jsonrpc":"2.0","id":1,"method":"a","params":{"s":"],[{"}})";
  const std::string b = R"({"jsonrpc":"2.0","method":"b"})";
  const std::string c = R"({"jsonrpc":"2.0","id":"z","result":[1,[2]]})";
  auto batch = parse_body(" [ " + a + " ,\n" + b + "," + c + " ] ");
  REQUIRE(batch);
  CHECK(batch->batch);
  REQUIRE(batch->messages.size() == 3);
  CHECK(batch->messages[0].text() == a);
  CHECK(batch->messages[0].method() == "a");
  CHECK(batch->messages[1].text() == b);
  CHECK(batch->messages[2].text() == c);
  CHECK(serialize_batch(batch->messages) == "[" + a + "," + b + "," + c + "]");
}

TEST_CASE(
    "bodies of several messages, one per line (what some servers answer under "
    "application/json): read as those messages - anything else stays an error",
    "[jsonrpc][batch]") {
  const std::string a = R"({"jsonrpc":"2.0","method":"notifications/progress","params":{}})";
  const std::string b = R"({"jsonrpc":"2.0","id":3,"result":{"x":"line\nbreak"}})";
  CHECK_FALSE(parse_body(a + "\n" + b + "\n"));  // not one JSON text
  auto lines = parse_lines(a + "\n\r\n  \n" + b + "\r\n");
  REQUIRE(lines);
  REQUIRE(lines->messages.size() == 2);
  CHECK(lines->messages[0].method() == "notifications/progress");
  CHECK(lines->messages[1].id() == Id::integer(3));
  // A batch on a line is messages too.
  auto with_batch = parse_lines(a + "\n[" + b + "," + a + "]");
  REQUIRE(with_batch);
  CHECK(with_batch->messages.size() == 3);
  // One line that is not JSON-RPC spoils the whole, naming its line.
  auto bad_line = parse_lines(a + "\nnot json\n" + b);
  REQUIRE_FALSE(bad_line);
  CHECK(bad_line.error().error.code == code::parse_error);
  CHECK(bad_line.error().error.message.rfind("line 2: ", 0) == 0);
  // One message (with a line break inside it, say) is parse_body's, not this.
  CHECK_FALSE(parse_lines(a + "\n"));
  CHECK_FALSE(parse_lines("\n\n"));
  CHECK_FALSE(parse_lines(a + "\n" + b, Limits{10, 100}));
}

TEST_CASE("malformed batches", "[jsonrpc][batch][malformed]") {
  auto f = parse_body("[]");
  REQUIRE_FALSE(f);
  CHECK(f.error().error.code == code::invalid_request);
  CHECK(f.error().error.message == "empty batch: a batch must hold at least one message");

  f = parse_body(R"([{"jsonrpc":"2.0","method":"a"}, 5])");
  REQUIRE_FALSE(f);
  CHECK(f.error().error.code == code::invalid_request);
  CHECK(f.error().error.message ==
        "batch element 1: a JSON-RPC message must be an object, found a number");

  f = parse_body(R"([{"jsonrpc":"2.0","method":"a"}, {"jsonrpc":"2.0","id":9}])");
  REQUIRE_FALSE(f);
  CHECK(
      f.error().error.message ==
      R"(batch element 1: a message must have "method" (request or notification) or "result"/"error" (response))");
  CHECK(f.error().id == Id::integer(9));

  f = parse_body(R"([{"jsonrpc":"2.0","method":"a"})");
  REQUIRE_FALSE(f);
  CHECK(f.error().error.code == code::parse_error);

  f = parse_body(R"([[{"jsonrpc":"2.0","method":"a"}]])");
  REQUIRE_FALSE(f);
  CHECK(f.error().error.message ==
        "batch element 0: a JSON-RPC message must be an object, found an array (a batch is not "
        "allowed here)");

  std::string big = "[" + std::string(100, ' ') + R"({"jsonrpc":"2.0","method":"a"}])";
  f = parse_body(big, Limits{50, 100});
  REQUIRE_FALSE(f);
  CHECK(f.error().error.message == "batch of 132 bytes exceeds the limit of 50 bytes");
}

TEST_CASE("quote escapes for JSON", "[jsonrpc]") {
  CHECK(quote("a\"b\\c\n") == R"("a\"b\\c\n")");
  CHECK(quote("") == R"("")");
}

TEST_CASE("quote writes valid JSON whatever the bytes: what is not UTF-8 becomes U+FFFD",
          "[jsonrpc][malformed]") {
  // tests/fuzz/jsonrpc_fuzzer checks that every refusal builds its error response: an error
  // message quoting a peer's bytes (a cut string; over HTTP a Host header or a path) made
  // Message::error throw "internal error: built an invalid JSON-RPC message", which ended the
  // daemon.
  CHECK(quote("caf\xc3\xa9") == "\"caf\xc3\xa9\"");
  CHECK(quote("a\xff") == "\"a\xef\xbf\xbd\"");
  CHECK(quote("\xc3") == "\"\xef\xbf\xbd\"");                                  // cut short
  CHECK(quote("\xed\xa0\x80") == "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");  // a surrogate
  CHECK(quote("\xc0\xaf") == "\"\xef\xbf\xbd\xef\xbf\xbd\"");                  // overlong
  const auto m = Message::error(Id::integer(3), code::connection_closed,
                                "Forbidden: Host header \"\xff\xfe\" is not accepted");
  CHECK(m.kind() == Kind::error);
  CHECK(m.error().message == "Forbidden: Host header \"\xef\xbf\xbd\xef\xbf\xbd\" is not accepted");
  CHECK(Message::notification("x/\x80").method() == "x/\xef\xbf\xbd");
}

TEST_CASE("every refusal can be sent back: a cut excerpt keeps UTF-8 sequences whole",
          "[jsonrpc][malformed]") {
  // tests/fuzz/jsonrpc_fuzzer, corpus regression-jsonrpc-cut-utf8: "jsonrpc" quoted
  // in the error was cut at 32 bytes, inside a two-byte character.
  std::string value = "a";
  for (int i = 0; i < 20; ++i)
    value += "\xc3\xa9";
  auto f = bad(R"({"jsonrpc":")" + value + R"(","method":"x"})");
  CHECK(f.error.code == code::invalid_request);
  CHECK(f.error.message == "\"jsonrpc\" must be \"2.0\", found \"" + value.substr(0, 31) + "\"");
  const auto reply = Message::error(f.id, f.error);
  CHECK(reply.error().message == f.error.message);
}

TEST_CASE("a NUL byte anywhere is a parse error, not the end of the text", "[jsonrpc][malformed]") {
  // tests/fuzz/jsonrpc_fuzzer, corpus regression-jsonrpc-nul: RapidJSON took the NUL
  // for the end of the text, so what followed it was accepted and passed on unread.
  const std::string text = std::string(R"({"jsonrpc":"2.0","method":"x"})") + '\0' + "garbage";
  auto f = bad(text);
  CHECK(f.error.code == code::parse_error);
  CHECK(f.error.message ==
        "invalid JSON at line 1 column 31: a NUL byte, which JSON text never holds");
  auto body = parse_body("[" + text + "]");
  REQUIRE_FALSE(body);
  CHECK(body.error().error.code == code::parse_error);
  CHECK(bad(std::string("{\"jsonrpc\":\"2.0\",\"method\":\"a\0b\"}")).error.code ==
        code::parse_error);
}

TEST_CASE("numbers in the document are read exactly, and those beyond a double are refused",
          "[jsonrpc][malformed]") {
  // Found by tests/fuzz/jsonrpc_fuzzer (UBSan in RapidJSON on 0e308; corpus
  // regression-jsonrpc-number-*): RapidJSON 1.1's
  // full-precision reading made 0e308 -6.06e-269, 9e308 -2.78e-308 and 1.8e308 NaN, which
  // with_id() then wrote (or, for NaN, could not write: it threw).
  auto m = ok(R"({"jsonrpc":"2.0","id":1,"result":{"a":0e308,"b":-0.0e300,"c":0.1,"d":1e308,)"
              R"("e":1e-400,"f":18446744073709551615,"g":-9223372036854775808,)"
              R"("h":18446744073709551616,"i":2.2250738585072011e-308}})");
  const auto& r = *m.result_value();
  CHECK(r["a"].GetDouble() == 0.0);
  CHECK(r["b"].GetDouble() == 0.0);
  CHECK(std::signbit(r["b"].GetDouble()));
  CHECK(r["c"].GetDouble() == 0.1);
  CHECK(r["d"].GetDouble() == 1e308);
  CHECK(r["e"].GetDouble() == 0.0);
  CHECK(r["f"].GetUint64() == 18446744073709551615ull);
  CHECK(r["g"].GetInt64() == INT64_MIN);
  CHECK(r["h"].GetDouble() == 18446744073709551616.0);
  CHECK(r["i"].GetDouble() == 2.2250738585072011e-308);
  CHECK(m.with_id(Id::integer(2)).text() ==
        R"({"jsonrpc":"2.0","id":2,"result":{"a":0.0,"b":-0.0,"c":0.1,"d":1e308,"e":0.0,)"
        R"("f":18446744073709551615,"g":-9223372036854775808,"h":18446744073709553000.0,)"
        R"("i":2.225073858507201e-308}})");
  for (const char* big : {"1.8e308", "9e308", "-17976931348623159e292", "10e308"}) {
    auto f = bad(std::string(R"({"jsonrpc":"2.0","id":1,"result":{"v":)") + big + "}}");
    INFO(big);
    CHECK(f.error.code == code::parse_error);
    CHECK(f.error.message.find("Number too big to be stored in double.") != std::string::npos);
  }
  // The largest double is fine.
  CHECK(ok(R"({"jsonrpc":"2.0","id":1,"result":1.7976931348623157e308})")
            .result_value()
            ->GetDouble() == 1.7976931348623157e308);
}

TEST_CASE("a lone UTF-16 surrogate escaped in a string is a parse error", "[jsonrpc][malformed]") {
  // tests/fuzz/jsonrpc_fuzzer, corpus regression-jsonrpc-lone-surrogate: RapidJSON
  // decodes \udc00 to bytes that are not UTF-8, so with_id() and every error quoting the
  // method threw. RFC 8259 §8.2: such a string is no Unicode text.
  for (const char* text : {R"({"jsonrpc":"2.0","method":"x\udc00"})",
                           R"({"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"\uDFFF"}})",
                           R"({"jsonrpc":"2.0","id":1,"result":{"\udc00":1}})"}) {
    auto f = bad(text);
    CHECK(f.error.code == code::parse_error);
    CHECK(f.error.message.find("a \\u escape names a lone UTF-16 surrogate") != std::string::npos);
  }
  // A pair is fine, and so is every other escape.
  auto m = ok(R"({"jsonrpc":"2.0","id":1,"method":"m\ud83d\ude00\u00e9\ud7ff\ue000"})");
  CHECK(m.method() == "m\xf0\x9f\x98\x80\xc3\xa9\xed\x9f\xbf\xee\x80\x80");
  CHECK(m.with_id(Id::integer(2)).method() == m.method());
}

TEST_CASE("jsonrpc 000: a notification's subscriptionId is read without building a document",
          "[jsonrpc]") {
  auto n = Message::parse(
      R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a://x","_meta":{"io.modelcontextprotocol/subscriptionId":"s1"}}})");
  REQUIRE(n);
  CHECK(n->subscription_id() == Id::string("s1"));
  auto i = Message::parse(
      R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":42}}})");
  REQUIRE(i);
  CHECK(i->subscription_id() == Id::integer(42));
  // Only in params._meta, and only for notifications.
  auto nested = Message::parse(
      R"({"jsonrpc":"2.0","method":"n","params":{"x":{"_meta":{"io.modelcontextprotocol/subscriptionId":1}}}})");
  REQUIRE(nested);
  CHECK_FALSE(nested->subscription_id());
  auto request = Message::parse(
      R"({"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1}}})");
  REQUIRE(request);
  CHECK_FALSE(request->subscription_id());
}

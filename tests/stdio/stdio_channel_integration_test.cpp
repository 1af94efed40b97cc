// StdioChannel over real pipes and files, the test playing the host that launched the bridge.
#include <cerrno>

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "stdio/stdio_channel.hpp"
#include "tests/stdio/harness.hpp"
#include "tests/support/temp_dir.hpp"

namespace mcpmqtt::stdio {
namespace {

using namespace std::chrono_literals;
using bridge::CloseReason;
using jsonrpc::Id;
using jsonrpc::Message;
using test::LogCapture;
using test::stdio::Loop;
using test::stdio::Recorder;

// The host's side: writes to the bridge's stdin pipe, reads the bridge's stdout pipe.
struct Host {
  int to_bridge[2] = {-1, -1};    // [0] is the bridge's stdin
  int from_bridge[2] = {-1, -1};  // [1] is the bridge's stdout
  std::string received;

  Host() {
    REQUIRE(::pipe2(to_bridge, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(from_bridge, O_CLOEXEC) == 0);
    ::fcntl(from_bridge[0], F_SETFL, O_NONBLOCK);
  }
  ~Host() {
    for (int fd : {to_bridge[0], to_bridge[1], from_bridge[0], from_bridge[1]})
      if (fd >= 0) ::close(fd);
  }
  void write(const std::string& text) {
    REQUIRE(::write(to_bridge[1], text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  }
  void close_input() {
    ::close(to_bridge[1]);
    to_bridge[1] = -1;
  }
  // Reads what is available; true when the bridge's stdout reached EOF.
  bool read_available() {
    char buf[65536];
    for (;;) {
      const auto n = ::read(from_bridge[0], buf, sizeof buf);
      if (n > 0) {
        received.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      return n == 0;
    }
  }
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    std::size_t start = 0, nl;
    while ((nl = received.find('\n', start)) != std::string::npos) {
      out.push_back(received.substr(start, nl - start));
      start = nl + 1;
    }
    return out;
  }
};

struct Fixture {
  Recorder rec;
  LogCapture logs{"stdio"};
  Host host;
  Loop loop;
  std::shared_ptr<StdioChannel> ch;

  explicit Fixture(StdioChannel::Options o = {}) {
    o.input_fd = host.to_bridge[0];
    o.output_fd = host.from_bridge[1];
    auto c = StdioChannel::create(loop.strand, std::move(o));
    REQUIRE(c);
    ch = *c;
    // The channel has its own duplicates; the host keeps only its ends.
    ::close(host.to_bridge[0]);
    host.to_bridge[0] = -1;
    ::close(host.from_bridge[1]);
    host.from_bridge[1] = -1;
    ch->start(rec.receiver());
  }
  ~Fixture() {
    if (ch) ch->close(CloseReason{CloseReason::Kind::shutdown, "test over"});
    ch.reset();
    loop.poll();
  }
  bool wait_lines(std::size_t n) {
    return loop.run_until([&] {
      host.read_available();
      return host.lines().size() >= n;
    });
  }
};

TEST_CASE("stdio channel: messages make a round trip over pipes", "[integration][stdio]") {
  Fixture f;
  f.host.write(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}})"
      "\n"
      R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
      "\r\n\n"
      R"([{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","id":2,"result":{}}])"
      "\n");
  REQUIRE(f.loop.run_until([&] { return f.rec.messages.size() == 4; }));
  CHECK(f.rec.messages[0].method() == "initialize");
  CHECK(f.rec.messages[1].method() == "notifications/initialized");
  CHECK(f.rec.messages[2].id() == Id::string("a"));
  CHECK(f.rec.messages[3].kind() == jsonrpc::Kind::result);

  f.ch->send(Message::result(Id::integer(1), R"({"protocolVersion":"2025-03-26"})"));
  f.ch->send(Message::request(Id::integer(100), "roots/list"));
  REQUIRE(f.wait_lines(2));
  CHECK(f.host.lines()[0] ==
        R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-03-26"}})");
  CHECK(f.host.lines()[1] == R"({"jsonrpc":"2.0","id":100,"method":"roots/list"})");
  CHECK_FALSE(f.rec.closed());
  CHECK(f.ch->describe() == "[stdio]");
}

TEST_CASE("stdio channel: invalid lines get JSON-RPC error responses", "[integration][stdio]") {
  StdioChannel::Options o;
  o.limits.max_bytes = 4096;
  Fixture f(o);
  f.host.write("this is not json\n");
  REQUIRE(f.wait_lines(1));
  {
    const auto r = Message::parse(f.host.lines()[0]);
    REQUIRE(r);
    CHECK(r->kind() == jsonrpc::Kind::error);
    CHECK(r->id().is_null());
    CHECK(r->error().code == jsonrpc::code::parse_error);
    CHECK(r->error().message.find("invalid JSON at line 1 column ") != std::string::npos);
  }
  f.host.write(R"({"jsonrpc":"2.0","id":7,"method":5})"
               "\n");
  REQUIRE(f.wait_lines(2));
  {
    const auto r = Message::parse(f.host.lines()[1]);
    REQUIRE(r);
    CHECK(r->id() == Id::integer(7));
    CHECK(r->error().code == jsonrpc::code::invalid_request);
    CHECK(r->error().message == "\"method\" must be a string, found a number");
  }
  // A malformed response is never answered (JSON-RPC 2.0 §5); the next line shows it.
  f.host.write(R"({"jsonrpc":"2.0","result":{}})"
               "\n"
               R"({"jsonrpc":"1.0","id":"x","method":"ping"})"
               "\n");
  REQUIRE(f.wait_lines(3));
  {
    const auto r = Message::parse(f.host.lines()[2]);
    REQUIRE(r);
    CHECK(r->id() == Id::string("x"));
    CHECK(r->error().code == jsonrpc::code::invalid_request);
  }
  // A batch: the valid element is delivered, the invalid one answered with its id.
  f.host.write(R"([{"jsonrpc":"2.0","id":8,"method":"ping"},{"jsonrpc":"2.0","id":9}])"
               "\n");
  REQUIRE(f.wait_lines(4));
  {
    const auto r = Message::parse(f.host.lines()[3]);
    REQUIRE(r);
    CHECK(r->id() == Id::integer(9));
    CHECK(r->error().code == jsonrpc::code::invalid_request);
    CHECK(r->error().message.rfind("batch element 1: ", 0) == 0);
  }
  f.host.write("[]\n" + std::string(5000, ' ') + "{}\n");
  REQUIRE(f.wait_lines(6));
  {
    const auto empty = Message::parse(f.host.lines()[4]);
    REQUIRE(empty);
    CHECK(empty->id().is_null());
    CHECK(empty->error().code == jsonrpc::code::invalid_request);
    const auto big = Message::parse(f.host.lines()[5]);
    REQUIRE(big);
    CHECK(big->error().code == jsonrpc::code::invalid_request);
    CHECK(big->error().message == "message of 5002 bytes exceeds the limit of 4096 bytes");
  }
  // Still up, and only the valid message was delivered.
  f.host.write(R"({"jsonrpc":"2.0","id":10,"method":"ping"})"
               "\n");
  REQUIRE(f.loop.run_until([&] { return f.rec.messages.size() == 2; }));
  CHECK(f.rec.messages[0].id() == Id::integer(8));
  CHECK(f.rec.messages[1].id() == Id::integer(10));
  CHECK_FALSE(f.rec.closed());
  f.loop.poll();
  f.host.read_available();
  CHECK(f.host.lines().size() == 6);
  INFO(f.logs.dump());
  CHECK(f.logs.find({"[stdio] invalid message from the host", "this is not json"}));
  CHECK(f.logs.find({"not answered: it is a response"}));
}

TEST_CASE("stdio channel: EOF on stdin closes normally after the last line",
          "[integration][stdio]") {
  Fixture f;
  f.host.write(R"({"jsonrpc":"2.0","id":1,"method":"ping"})"
               "\n"
               R"({"jsonrpc":"2.0","method":"notifications/last"})");  // no newline
  f.host.close_input();
  REQUIRE(f.loop.run_until([&] { return f.rec.closed(); }));
  REQUIRE(f.rec.events.size() == 3);
  CHECK(f.rec.messages[1].method() == "notifications/last");
  CHECK(f.rec.closes[0].kind == CloseReason::Kind::normal);
  CHECK(f.rec.closes[0].detail == "stdin closed");
  f.ch->send(Message::result(Id::integer(1), "{}"));                 // ignored after the close
  CHECK(f.loop.run_until([&] { return f.host.read_available(); }));  // output closed: EOF
  CHECK(f.host.received.empty());
}

TEST_CASE("stdio channel: close() flushes what is queued, then closes stdout",
          "[integration][stdio]") {
  Fixture f;
  f.ch->send(Message::notification("notifications/one"));
  f.ch->send(Message::notification("notifications/two"));
  f.ch->close(CloseReason{CloseReason::Kind::peer_gone, "server gone"});
  REQUIRE(f.loop.run_until([&] { return f.host.read_available(); }));
  REQUIRE(f.host.lines().size() == 2);
  CHECK(f.host.lines()[1] == R"({"jsonrpc":"2.0","method":"notifications/two"})");
  CHECK(f.rec.closes.empty());
}

TEST_CASE("stdio channel: a host that does not read makes the channel close with an error",
          "[integration][stdio]") {
  StdioChannel::Options o;
  o.max_queued_bytes = 128 * 1024;
  Fixture f(o);
  const std::string params = "{\"pad\":\"" + std::string(16 * 1024, 'p') + "\"}";
  std::size_t sent = 0;
  REQUIRE(f.loop.run_until([&] {
    if (!f.rec.closed()) {
      const auto m = Message::notification("notifications/message", params);
      f.ch->send(m);
      sent += m.size() + 1;
      f.loop.poll();
    }
    return f.rec.closed();
  }));
  CHECK(f.rec.closes[0].kind == CloseReason::Kind::error);
  CHECK(f.rec.closes[0].detail.find("stdout is full") != std::string::npos);
  CHECK(sent > 128 * 1024 + 32 * 1024);  // the pipe took its share first
}

TEST_CASE("stdio channel: the output queue is bounded in messages too", "[integration][stdio]") {
  StdioChannel::Options o;
  o.max_queued_messages = 1000;  // bytes stay far below max_queued_bytes
  Fixture f(o);
  std::size_t sent = 0;
  while (!f.rec.closed() && sent < 200000)
    f.ch->send(Message::notification("n", "{\"i\":" + std::to_string(sent++) + "}"));
  REQUIRE(f.loop.run_until([&] { return f.rec.closed(); }));
  CHECK(f.rec.closes[0].kind == CloseReason::Kind::error);
  CHECK(f.rec.closes[0].detail ==
        "stdout is full: 1000 messages wait to be written, the limit; the host is not reading "
        "the bridge's output");
  CHECK(sent < 200000);
}

TEST_CASE("stdio channel: a host that closes stdout is gone", "[integration][stdio]") {
  Fixture f;
  ::close(f.host.from_bridge[0]);
  f.host.from_bridge[0] = -1;
  f.ch->send(Message::notification("notifications/message"));
  REQUIRE(f.loop.run_until([&] { return f.rec.closed(); }));
  CHECK(f.rec.closes[0].kind == CloseReason::Kind::peer_gone);
  CHECK(f.rec.closes[0].detail.find("the host closed the bridge's stdout") != std::string::npos);
}

TEST_CASE("stdio channel: regular files work as stdin and stdout", "[integration][stdio]") {
  test::TempDir dir;
  const std::string in = dir.write("in.jsonl", R"({"jsonrpc":"2.0","id":1,"method":"ping"})"
                                               "\n"
                                               R"({"jsonrpc":"2.0","id":2,"method":"ping"})"
                                               "\n");
  const std::string out = dir.path() + "/out.jsonl";
  const int in_fd = ::open(in.c_str(), O_RDONLY | O_CLOEXEC);
  const int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(in_fd >= 0);
  REQUIRE(out_fd >= 0);
  Recorder rec;
  Loop loop;
  StdioChannel::Options o;
  o.input_fd = in_fd;
  o.output_fd = out_fd;
  auto c = StdioChannel::create(loop.strand, o);
  REQUIRE(c);
  auto ch = *c;
  auto r = rec.receiver();
  // Answer each request as it arrives.
  r.on_message = [&, inner = r.on_message](Message m) {
    ch->send(Message::result(m.id(), "{}"));
    inner(std::move(m));
  };
  ch->start(std::move(r));
  REQUIRE(loop.run_until([&] { return rec.closed(); }));
  CHECK(rec.messages.size() == 2);
  CHECK(rec.closes[0].detail == "stdin closed");
  const std::string expected = R"({"jsonrpc":"2.0","id":1,"result":{}})"
                               "\n"
                               R"({"jsonrpc":"2.0","id":2,"result":{}})"
                               "\n";
  loop.run_until([&] { return test::read_file(out) == expected; }, 5s);
  CHECK(test::read_file(out) == expected);
  ch.reset();
  loop.poll();
  ::close(in_fd);
  ::close(out_fd);
}

TEST_CASE("stdio channel: /dev/null as stdin is an immediate end", "[integration][stdio]") {
  const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  REQUIRE(null_fd >= 0);
  Recorder rec;
  Loop loop;
  StdioChannel::Options o;
  o.input_fd = null_fd;
  o.output_fd = null_fd;
  auto c = StdioChannel::create(loop.strand, o);
  REQUIRE(c);
  (*c)->start(rec.receiver());
  REQUIRE(loop.run_until([&] { return rec.closed(); }));
  CHECK(rec.closes[0].kind == CloseReason::Kind::normal);
  CHECK(rec.closes[0].detail == "stdin closed");
  c->reset();
  loop.poll();
  ::close(null_fd);
}

TEST_CASE("stdio channel: the caller's descriptors stay open and keep their mode",
          "[integration][stdio]") {
  int in[2], out[2];
  REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  {
    Recorder rec;
    Loop loop;
    StdioChannel::Options o;
    o.input_fd = in[0];
    o.output_fd = out[1];
    auto c = StdioChannel::create(loop.strand, o);
    REQUIRE(c);
    (*c)->start(rec.receiver());  // starts a read: Asio makes the input non-blocking
    (*c)->send(Message::notification("notifications/x"));
    REQUIRE(loop.run_until([&] {
      pollfd p{out[0], POLLIN, 0};
      return ::poll(&p, 1, 0) == 1;
    }));
    loop.poll();  // the write's completion
    CHECK((::fcntl(in[0], F_GETFL) & O_NONBLOCK) != 0);
    (*c)->close(CloseReason{});
  }
  CHECK(::fcntl(in[0], F_GETFD) >= 0);
  CHECK(::fcntl(out[1], F_GETFD) >= 0);
  CHECK((::fcntl(in[0], F_GETFL) & O_NONBLOCK) == 0);
  CHECK((::fcntl(out[1], F_GETFL) & O_NONBLOCK) == 0);
  char buf[256];
  const auto n = ::read(out[0], buf, sizeof buf);
  CHECK(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0) ==
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}\n");
  for (int fd : {in[0], in[1], out[0], out[1]})
    ::close(fd);
}

TEST_CASE("stdio channel: a descriptor that is not open is a clear error", "[integration][stdio]") {
  Loop loop;
  StdioChannel::Options o;
  o.input_fd = 1000;
  auto c = StdioChannel::create(loop.strand, o);
  REQUIRE_FALSE(c);
  CHECK(c.error() == "cannot use the input descriptor 1000: Bad file descriptor");
}

}  // namespace
}  // namespace mcpmqtt::stdio

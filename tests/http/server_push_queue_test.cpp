// The push queue of an SSE stream: its states, and sends on the lent socket when the reader is
// gone, behind, or the stream is closed while pushers still push (a local socket pair).
#include "http/server_push_queue.hpp"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace mcpmqtt::http;
using S = PushQueue::State;
using E = PushQueue::Event;
using Pushed = PushQueue::Pushed;

namespace {

// Both ends of a local stream socket; the "client" end reads what the queue sends.
struct Pair {
  int server = -1;
  int client = -1;
  Pair() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    server = fds[0];
    client = fds[1];
    ::fcntl(client, F_SETFL, ::fcntl(client, F_GETFL) | O_NONBLOCK);
  }
  ~Pair() {
    if (server >= 0) ::close(server);
    if (client >= 0) ::close(client);
  }
  std::string read_all() {
    std::string got;
    char buf[65536];
    ssize_t n;
    while ((n = ::read(client, buf, sizeof buf)) > 0)
      got.append(buf, static_cast<std::size_t>(n));
    return got;
  }
};

auto text(std::string_view s) {
  return [s](std::string& out) { out += s; };
}

PushQueue::Taken take(PushQueue& q, std::string& out, int lend_fd = -1) {
  out.clear();
  return q.take(out, lend_fd, false);
}

}  // namespace

TEST_CASE("push queue states: the transition of every event in every state", "[http][push]") {
  struct Row {
    S from;
    S lend, take_back, last_queued, last_framed, send_stalled, close;
  };
  const Row rows[] = {
      {S::held, S::lent, S::held, S::ending, S::held, S::held, S::closed},
      {S::lent, S::lent, S::held, S::ending, S::terminated, S::held, S::closed},
      {S::ending, S::ending, S::ending, S::ending, S::ending, S::ending, S::closed},
      {S::terminated, S::terminated, S::terminated, S::terminated, S::terminated, S::terminated,
       S::closed},
      {S::closed, S::closed, S::closed, S::closed, S::closed, S::closed, S::closed},
  };
  for (const auto& r : rows) {
    INFO("from state " << static_cast<int>(r.from));
    CHECK(PushQueue::next(r.from, E::lend) == r.lend);
    CHECK(PushQueue::next(r.from, E::take_back) == r.take_back);
    CHECK(PushQueue::next(r.from, E::last_queued) == r.last_queued);
    CHECK(PushQueue::next(r.from, E::last_framed) == r.last_framed);
    CHECK(PushQueue::next(r.from, E::send_stalled) == r.send_stalled);
    CHECK(PushQueue::next(r.from, E::close) == r.close);
  }
}

TEST_CASE("push queue: pushes queue for the writer, which is told once per turn", "[http][push]") {
  PushQueue q(10, 1 << 20);
  CHECK(q.push(text("a"), 1, false).what == Pushed::queued_first);
  CHECK(q.push(text("b"), 1, false).what == Pushed::queued);
  std::string out;
  auto t = take(q, out);
  CHECK(out == "ab");
  CHECK_FALSE(t.framed);
  CHECK_FALSE(t.ending);
  CHECK_FALSE(t.lent);
  CHECK(q.state() == S::held);
  CHECK(q.push(text("c"), 1, true).what == Pushed::queued_first);
  CHECK(q.state() == S::ending);
  CHECK(q.push(text("d"), 1, false).what == Pushed::dropped);
  t = take(q, out);
  CHECK(out == "c");
  CHECK(t.ending);
  CHECK_FALSE(t.terminated);
}

TEST_CASE("push queue: the bounds close it", "[http][push]") {
  SECTION("messages") {
    PushQueue q(2, 1 << 20);
    q.push(text("a"), 1, false);
    q.push(text("b"), 1, false);
    const auto r = q.push(text("c"), 1, false);
    CHECK(r.what == Pushed::overflow);
    CHECK(r.items == 2);
    CHECK(r.bytes == 2);
    CHECK(q.state() == S::closed);
    CHECK(q.push(text("d"), 1, false).what == Pushed::dropped);
  }
  SECTION("bytes, though one event alone may exceed them") {
    PushQueue q(100, 4);
    CHECK(q.push(text("123456"), 6, false).what == Pushed::queued_first);
    CHECK(q.push(text("7"), 1, false).what == Pushed::overflow);
  }
}

TEST_CASE("push queue: an idle writer lends the socket, a push sends one chunk", "[http][push]") {
  Pair p;
  PushQueue q(10, 1 << 20);
  std::string out;
  SECTION("not while something waits, or the stream ends") {
    q.push(text("a"), 1, false);
    CHECK_FALSE(take(q, out, p.server).lent);  // took "a": the writer writes it first
    CHECK_FALSE(q.take(out, p.server, true).lent);
    CHECK(q.state() == S::held);
  }
  SECTION("sent on the socket, framed") {
    CHECK(take(q, out, p.server).lent);
    CHECK(q.state() == S::lent);
    CHECK(q.push(text("hello"), 5, false).what == Pushed::sent);
    CHECK(q.push(text("0123456789abcdef"), 16, true).what == Pushed::sent);
    CHECK(p.read_all() == "5\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n");
    CHECK(q.state() == S::terminated);
    CHECK(q.push(text("late"), 4, false).what == Pushed::dropped);
    const auto t = take(q, out, p.server);
    CHECK(out.empty());
    CHECK(t.terminated);
    CHECK_FALSE(t.lent);
    CHECK(t.lent_write_at != std::chrono::steady_clock::time_point{});
  }
}

TEST_CASE("push queue: the reader gone while the socket is lent", "[http][push]") {
  Pair p;
  PushQueue q(10, 1 << 20);
  std::string out;
  REQUIRE(take(q, out, p.server).lent);
  ::close(p.client);  // the reader is gone; a send now fails with EPIPE (no SIGPIPE)
  p.client = -1;
  CHECK(q.push(text("event"), 5, false).what == Pushed::queued_first);
  CHECK(q.state() == S::held);  // back to the writer, whose own send reports the error
  const auto t = take(q, out, p.server);
  CHECK(out == "event");  // unframed: the writer frames it
  CHECK_FALSE(t.framed);
}

TEST_CASE("push queue: a slow reader leaves the framed tail to the writer", "[http][push]") {
  Pair p;
  int small = 4096;
  ::setsockopt(p.server, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  PushQueue q(10, 1 << 24);
  std::string out;
  REQUIRE(take(q, out, p.server).lent);
  const std::string big(1 << 20, 'x');  // far more than the socket takes at once
  const bool last = GENERATE(false, true);
  CHECK(q.push(text(big), big.size(), last).what == Pushed::queued_first);
  CHECK(q.state() == (last ? S::terminated : S::held));
  CHECK(q.push(text("next"), 4, false).what == (last ? Pushed::dropped : Pushed::queued));
  auto t = take(q, out);
  CHECK(t.framed);
  CHECK(t.terminated == last);
  // What the reader got and the tail make exactly one chunk (and the body's end).
  const std::string whole = p.read_all() + out;
  CHECK(whole == "100000\r\n" + big + (last ? "\r\n0\r\n\r\n" : "\r\n"));
  if (!last) {
    t = take(q, out);  // then what was pushed meanwhile, unframed
    CHECK_FALSE(t.framed);
    CHECK(out == "next");
  }
}

TEST_CASE("push queue: closed during pushes, no send after close() returns", "[http][push]") {
  auto p = std::make_unique<Pair>();
  PushQueue q(1'000'000, 1 << 30);
  std::string out;
  REQUIRE(take(q, out, p->server).lent);
  std::atomic<bool> stop{false};
  std::atomic<int> sent{0};
  std::thread pusher([&] {
    while (!stop) {
      if (q.push(text("e"), 1, false).what == Pushed::sent) ++sent;
    }
  });
  while (sent < 100)
    std::this_thread::yield();
  q.close(true);  // as the connection does before it closes the descriptor
  const int old_fd = p->server;
  ::close(p->server);
  p->server = -1;
  // The descriptor's number is reused at once; no push may write on the new socket.
  Pair reused;
  for (int i = 0; i < 1000; ++i)
    std::this_thread::yield();
  stop = true;
  pusher.join();
  CHECK(q.state() == S::closed);
  CHECK(q.push(text("e"), 1, false).what == Pushed::dropped);
  const int peer = reused.server == old_fd ? reused.client : reused.server;
  char c;
  CHECK(::recv(peer, &c, 1, MSG_DONTWAIT) < 0);
}

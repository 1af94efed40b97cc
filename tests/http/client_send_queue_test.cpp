// The send queue of a client channel: urgent messages first, the order of the rest, the barrier
// and the bounds on what is in flight.
#include "http/client_send_queue.hpp"

#include <catch2/catch.hpp>

using namespace mcpmqtt;
using http::SendQueue;
using jsonrpc::Id;
using jsonrpc::Message;

namespace {

std::string method_of(const std::optional<Message>& m) {
  REQUIRE(m);
  return m->is_response() ? "response" : std::string(m->method());
}

}  // namespace

TEST_CASE("send queue: urgent messages pass the ordered ones", "[http][client][queue]") {
  SendQueue q(8, 4);
  q.push(Message::request(Id::integer(1), "tools/call"));
  q.push(Message::notification("notifications/cancelled", R"({"requestId":0})"));
  q.push(Message::result(Id::integer(7), "{}"));
  CHECK(q.size() == 3);
  CHECK(method_of(q.pop()) == "notifications/cancelled");
  CHECK(method_of(q.pop()) == "response");
  CHECK(method_of(q.pop()) == "tools/call");
  CHECK_FALSE(q.pop());
}

TEST_CASE("send queue: a barrier holds the ordered messages, not the urgent ones",
          "[http][client][queue]") {
  SendQueue q(8, 4);
  q.push(Message::request(Id::integer(1), "initialize"));
  q.push(Message::request(Id::integer(2), "tools/list"));
  CHECK(method_of(q.pop()) == "initialize");
  q.raise_barrier();
  q.push(Message::notification("notifications/progress"));
  CHECK(method_of(q.pop()) == "notifications/progress");
  CHECK_FALSE(q.pop());
  q.lower_barrier();
  CHECK(method_of(q.pop()) == "tools/list");
}

TEST_CASE("send queue: the bounds on requests and short messages in flight",
          "[http][client][queue]") {
  SendQueue q(1, 1);
  q.push(Message::request(Id::integer(1), "a"));
  q.push(Message::request(Id::integer(2), "b"));
  CHECK(method_of(q.pop()) == "a");
  q.occupy(SendQueue::Slot::request);
  CHECK_FALSE(q.pop());  // one request in flight at most
  q.occupy(SendQueue::Slot::short_message);
  q.push(Message::result(Id::integer(9), "{}"));
  CHECK_FALSE(q.pop());  // and one short message
  q.release(SendQueue::Slot::short_message);
  CHECK(method_of(q.pop()) == "response");
  q.release(SendQueue::Slot::request);
  CHECK(method_of(q.pop()) == "b");
}

TEST_CASE("send queue: a request cancelled before it is sent leaves the queue",
          "[http][client][queue]") {
  SendQueue q(8, 4);
  q.push(Message::request(Id::integer(1), "a"));
  q.push(Message::request(Id::string("x"), "b"));
  CHECK(q.remove_request(Id::string("x")));
  CHECK_FALSE(q.remove_request(Id::string("x")));
  CHECK(q.size() == 1);
  q.clear();
  CHECK(q.size() == 0);
  CHECK_FALSE(q.pop());
}

// The messages of a client channel that wait for a connection, and the bounds on what is in
// flight. Urgent messages (answers to the server's requests, and notifications about requests
// already sent) go first, up to the bound on short messages; requests and other notifications
// keep their order behind a barrier: a notification (such as notifications/initialized) is
// accepted before anything after it is sent, and nothing follows initialize before its result.
//
// No I/O; one strand (the channel's), not thread-safe.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>

#include "bridge/jsonrpc/jsonrpc.hpp"

namespace mcpmqtt::http {

class SendQueue {
 public:
  // What a message in flight counts against.
  enum class Slot { none, request, short_message };

  SendQueue(std::size_t max_requests, std::size_t max_short)
      : max_requests_(max_requests), max_short_(max_short) {}

  // Answers to the server's requests, and the notifications that concern requests already sent.
  static bool is_urgent(const jsonrpc::Message& m);

  std::size_t size() const { return ordered_.size() + urgent_.size(); }
  void push(jsonrpc::Message m);
  // Takes a request that is still waiting out of the queue; false when it is not there.
  bool remove_request(const jsonrpc::Id& id);
  // The next message that may be sent now, taken out of the queue.
  std::optional<jsonrpc::Message> pop();
  void clear();

  void occupy(Slot slot);
  void release(Slot slot);
  void raise_barrier() { barrier_ = true; }
  void lower_barrier() { barrier_ = false; }

 private:
  const std::size_t max_requests_;
  const std::size_t max_short_;
  std::deque<jsonrpc::Message> ordered_;  // requests and notifications, sent in order
  std::deque<jsonrpc::Message> urgent_;   // responses, cancellations, progress
  bool barrier_ = false;
  std::size_t requests_in_flight_ = 0;
  std::size_t short_in_flight_ = 0;
};

}  // namespace mcpmqtt::http

// The idle kept-alive connections of a client channel to its upstream: one is reused while it is
// open and younger than the keep-alive bound (common servers close theirs after 5 s), and at
// most a bound of them are kept.
//
// One strand (the channel's), not thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "http/client_connection.hpp"

namespace mcpmqtt::http {

class ConnectionPool {
 public:
  ConnectionPool(std::chrono::milliseconds max_idle_age, std::size_t max_idle)
      : max_idle_age_(max_idle_age), max_idle_(max_idle) {}

  // The most recently idle connection still fit for a request, or null; the others it finds
  // unfit are closed.
  std::shared_ptr<ClientConnection> take();
  // Keeps `conn` for reuse when `keep` and it can be reused and there is room, else closes it.
  void give_back(const std::shared_ptr<ClientConnection>& conn, bool keep);
  void close_all();

 private:
  const std::chrono::milliseconds max_idle_age_;
  const std::size_t max_idle_;
  std::vector<std::shared_ptr<ClientConnection>> idle_;
};

}  // namespace mcpmqtt::http

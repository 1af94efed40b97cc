#include "http/client_pool.hpp"

namespace mcpmqtt::http {

std::shared_ptr<ClientConnection> ConnectionPool::take() {
  const auto now = std::chrono::steady_clock::now();
  while (!idle_.empty()) {
    auto conn = std::move(idle_.back());
    idle_.pop_back();
    if (conn->is_open() && now - conn->idle_since < max_idle_age_) return conn;
    conn->close();
  }
  return nullptr;
}

void ConnectionPool::give_back(const std::shared_ptr<ClientConnection>& conn, bool keep) {
  if (!keep || !conn->reusable() || idle_.size() >= max_idle_) {
    conn->close();
    return;
  }
  conn->idle_since = std::chrono::steady_clock::now();
  idle_.push_back(conn);
}

void ConnectionPool::close_all() {
  for (const auto& conn : idle_)
    conn->close();
  idle_.clear();
}

}  // namespace mcpmqtt::http

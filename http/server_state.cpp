#include "http/server_state.hpp"

#include "common/log.hpp"
#include "http/server_session.hpp"

namespace mcpmqtt::http {

bool SessionRegistry::insert(const std::string& id, std::shared_ptr<ServerSession> session,
                             std::size_t max, std::chrono::steady_clock::duration idle_floor,
                             std::shared_ptr<ServerSession>* evicted) {
  std::lock_guard lock(mu_);
  if (map_.size() >= max) {
    const auto now = std::chrono::steady_clock::now();
    auto victim = map_.end();
    std::chrono::steady_clock::time_point victim_since;
    for (auto it = map_.begin(); it != map_.end(); ++it) {
      if (!it->second.visible) continue;  // initialize still in progress
      const auto since = it->second.session->idle_since();
      if (!since || (idle_floor.count() > 0 && now - *since < idle_floor)) continue;
      if (victim == map_.end() || *since < victim_since) {
        victim = it;
        victim_since = *since;
      }
    }
    if (victim == map_.end()) return false;
    if (evicted) *evicted = std::move(victim->second.session);
    map_.erase(victim);
  }
  return map_.emplace(id, Entry{std::move(session), false}).second;
}

void SessionRegistry::publish(const std::string& id) {
  std::lock_guard lock(mu_);
  if (auto it = map_.find(id); it != map_.end()) it->second.visible = true;
}

std::shared_ptr<ServerSession> SessionRegistry::find(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = map_.find(id);
  if (it == map_.end() || !it->second.visible) return nullptr;
  return it->second.session;
}

void SessionRegistry::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  map_.erase(id);
}

std::size_t SessionRegistry::size() const {
  std::lock_guard lock(mu_);
  return map_.size();
}

std::vector<std::shared_ptr<ServerSession>> SessionRegistry::all() const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<ServerSession>> out;
  out.reserve(map_.size());
  for (const auto& [id, e] : map_)
    out.push_back(e.session);
  return out;
}

ServerState::ServerState(boost::asio::io_context& ioc_in, ServerOptions http_in,
                         std::string default_server_in, Backend& backend_in)
    : ioc(ioc_in),
      http(std::move(http_in)),
      default_server(std::move(default_server_in)),
      backend(backend_in),
      auth(http, default_server),
      limits{http.limits.max_body_bytes, jsonrpc::Limits{}.max_depth},
      log(log::http()) {}

void ServerState::add_connection(std::uint64_t id, std::weak_ptr<ServerConnection> c) {
  std::lock_guard lock(conn_mu_);
  connections_.emplace(id, std::move(c));
}

void ServerState::remove_connection(std::uint64_t id) {
  std::lock_guard lock(conn_mu_);
  connections_.erase(id);
}

std::vector<std::shared_ptr<ServerConnection>> ServerState::connections() const {
  std::lock_guard lock(conn_mu_);
  std::vector<std::shared_ptr<ServerConnection>> out;
  for (const auto& [id, w] : connections_)
    if (auto c = w.lock()) out.push_back(std::move(c));
  return out;
}

std::size_t ServerState::connection_count() const {
  std::lock_guard lock(conn_mu_);
  return connections_.size();
}

void ServerState::count_status(unsigned status) {
  if (status < status_counts_.size())
    status_counts_[status].fetch_add(1, std::memory_order_relaxed);
}

std::string ServerState::metrics_text() const {
  std::string out;
  auto metric = [&out](const char* name, const char* type, const char* help, std::uint64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
           name + " " + std::to_string(v) + "\n";
  };
  metric("mcpmqtt_http_connections", "gauge", "Open HTTP connections.", connection_count());
  metric("mcpmqtt_http_connections_total", "counter", "HTTP connections accepted.",
         connections_total.load());
  metric("mcpmqtt_http_connections_refused_total", "counter",
         "HTTP connections refused because http.limits.max_connections were open.",
         connections_refused.load());
  metric("mcpmqtt_http_sessions", "gauge", "MCP sessions held by the HTTP server.",
         sessions.size());
  metric("mcpmqtt_http_sessions_created_total", "counter", "MCP sessions created by initialize.",
         sessions_created.load());
  metric("mcpmqtt_http_sessions_evicted_total", "counter",
         "Idle MCP sessions closed to make room for new ones at http.limits.max_sessions.",
         sessions_evicted.load());
  metric("mcpmqtt_http_slow_streams_closed_total", "counter",
         "SSE streams closed because the reader fell http.limits.stream_queue_messages behind.",
         slow_streams_closed.load());
  metric("mcpmqtt_http_messages_dropped_total", "counter",
         "Server messages that could not be delivered to an HTTP client (each is logged).",
         messages_dropped.load());
  out +=
      "# HELP mcpmqtt_http_responses_total HTTP responses by status code.\n"
      "# TYPE mcpmqtt_http_responses_total counter\n";
  for (std::size_t s = 100; s < status_counts_.size(); ++s) {
    const auto n = status_counts_[s].load(std::memory_order_relaxed);
    if (n)
      out += "mcpmqtt_http_responses_total{code=\"" + std::to_string(s) + "\"} " +
             std::to_string(n) + "\n";
  }
  return out;
}

}  // namespace mcpmqtt::http

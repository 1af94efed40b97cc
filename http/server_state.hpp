// State shared by the HTTP listener, its connections and its MCP sessions: configuration, the
// backend, the session registry, the open connections and the counters behind /metrics.
//
// Thread-safe: members are immutable after construction, atomic, or guarded by their mutex.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <spdlog/logger.h>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "http/server_auth.hpp"
#include "http/server_backend.hpp"
#include "http/server_options.hpp"
#include "http/server_rules.hpp"

namespace mcpmqtt::http {

class ServerSession;
class ServerConnection;
class SessionIds;
class Relay;

// MCP sessions by id. A session is counted (for max_sessions) from its initialize POST, and
// visible to requests only once initialize succeeded.
class SessionRegistry {
 public:
  // At `max` sessions, the visible session idle the longest (no request in flight, no open
  // stream; ServerSession::idle_since) is taken out to make room and returned in `evicted` (the
  // caller ends it), however recently it was used unless `idle_floor` spares sessions active
  // within it. False when none can be: every one is busy, opening or within the floor.
  bool insert(const std::string& id, std::shared_ptr<ServerSession> session, std::size_t max,
              std::chrono::steady_clock::duration idle_floor,
              std::shared_ptr<ServerSession>* evicted = nullptr);
  void publish(const std::string& id);
  std::shared_ptr<ServerSession> find(const std::string& id) const;  // visible sessions only
  void erase(const std::string& id);
  std::size_t size() const;
  std::vector<std::shared_ptr<ServerSession>> all() const;

 private:
  struct Entry {
    std::shared_ptr<ServerSession> session;
    bool visible = false;
  };
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> map_;
};

struct ServerState {
  ServerState(boost::asio::io_context& ioc, ServerOptions http, std::string default_server,
              Backend& backend);

  boost::asio::io_context& ioc;
  const ServerOptions http;
  const std::string default_server;
  Backend& backend;
  Authenticator auth;  // its key source is set before the server starts
  const jsonrpc::Limits limits;
  const std::shared_ptr<spdlog::logger> log;
  SessionRegistry sessions;
  std::atomic<bool> stopping{false};
  // Replicas (http/server_relay.hpp): how session ids are made and whom they name, and where
  // requests for another replica's sessions go. Set before the server starts; ids may be null
  // (then new_session_id()), relay null (a replica alone: such requests get 404).
  std::shared_ptr<const SessionIds> ids;
  std::shared_ptr<Relay> relay;

  // Open connections, for stop().
  void add_connection(std::uint64_t id, std::weak_ptr<ServerConnection> c);
  void remove_connection(std::uint64_t id);
  std::vector<std::shared_ptr<ServerConnection>> connections() const;
  std::size_t connection_count() const;
  std::atomic<std::uint64_t> next_connection{1};

  // Counters for /metrics.
  void count_status(unsigned status);
  std::atomic<std::uint64_t> connections_total{0};
  std::atomic<std::uint64_t> connections_refused{0};
  std::atomic<std::uint64_t> sessions_created{0};
  std::atomic<std::uint64_t> sessions_evicted{0};
  std::atomic<std::uint64_t> slow_streams_closed{0};
  std::atomic<std::uint64_t> messages_dropped{0};
  std::string metrics_text() const;

 private:
  mutable std::mutex conn_mu_;
  std::unordered_map<std::uint64_t, std::weak_ptr<ServerConnection>> connections_;
  std::array<std::atomic<std::uint64_t>, 600> status_counts_{};
};

}  // namespace mcpmqtt::http

// Egress: one configured mcpServers entry published on MQTT.
//
// A ServerEndpoint announces the server-name; each MQTT client session that initializes gets its
// own upstream — a child process for a `command` entry, an upstream Streamable HTTP session for
// a `url` entry — spliced to the client's link on the session's own strand. Unless the entry's
// protocol is "legacy", a bridge::ModernUpstream sits between the splice and the upstream: it
// finds out whether the server speaks MCP 2026-07-28 (server/discover first, initialize as the
// fallback; the verdict is kept per exposed server until a reload) and translates if so. A stdio
// server whose era is not known yet is probed on a short-lived copy of its command. The splice
// forwards initialize and everything after it, times requests out, and answers every pending
// request when either side ends. After the broker connection comes back, every session's MQTT
// client is pinged, and sessions whose client does not answer are ended (their will may have fired
// while the bridge was away, so the client may be gone).
//
// ExposedServer: one strand for its session table; sessions on their own strands.
// session_count() and online() may be read from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/io_context.hpp>

#include "bridge/modern/upstream.hpp"
#include "bridge/relay/splice.hpp"
#include "common/error.hpp"
#include "config/config.hpp"
#include "directions/asio_scheduler.hpp"
#include "http/client_channel.hpp"
#include "mqtt/server_endpoint.hpp"
#include "stdio/child_channel.hpp"

namespace mcpmqtt::directions {

// Makes the upstream end of one egress session on the session's strand, or says why it cannot
// (a transient failure, such as no process to spare, may pass; a permanent one, such as a
// command that is not installed, fails every session until someone fixes it).
using UpstreamFactory = std::function<Expected<std::shared_ptr<bridge::Channel>, Error>(
    boost::asio::any_io_executor strand, const std::string& log_prefix)>;

class ExposedServer : public std::enable_shared_from_this<ExposedServer> {
 public:
  struct Options {
    config::MqttConfig mqtt;
    config::ServerEntry entry;
    config::EgressConfig egress;
    config::Timeouts timeouts;
    std::string server_id;
    std::string connect_meta_json = "{}";
    // Besides max_sessions: a sentence when one more session cannot be afforded (see
    // memory_budget), empty when it can. Runs on the server's strand.
    std::function<std::string()> over_budget;
    // What the sessions learn of the server's x-mcp-header annotations; shared with the HTTP
    // upstream factory (http_upstream), which sends the headers.
    std::shared_ptr<modern::ToolHeaders> tool_headers = std::make_shared<modern::ToolHeaders>();
    // A `url` entry's access tokens (upstream_bearer), stopped with the server; null for none.
    std::shared_ptr<http::BearerSource> bearer;
  };

  // `upstream` is chosen by the caller from the entry (command or url).
  static std::shared_ptr<ExposedServer> create(boost::asio::io_context& ioc, Options options,
                                               UpstreamFactory upstream);
  void start();
  // Ends every session (each MQTT client gets `disconnected`, each upstream is closed), clears
  // presence and disconnects; `done` runs on the server's strand.
  void stop(std::chrono::milliseconds timeout, std::function<void()> done);

  const std::string& server_name() const { return options_.entry.name; }
  const std::string& server_id() const { return options_.server_id; }
  std::size_t session_count() const { return session_count_; }
  bool online() const { return online_; }
  // Why the server is not online, in the broker's words when it refused ("the broker refused
  // the connection: Not authorized (0x87)"); "connecting to the broker" before any answer.
  // Any thread.
  std::string offline_reason() const;
  // Why the last session could not start its upstream, when that failure will repeat for every
  // session (e.g. `cannot start server "x" (command "npx"): "npx" was not found in PATH …`);
  // empty once a session starts. Any thread.
  std::string upstream_problem() const;
  std::uint64_t reconnects() const { return reconnects_; }
  // What the sessions learnt about the server's MCP era (protocol "auto"); unknown at first.
  bridge::ModernUpstream::Era era() const { return era_memory_->get(); }
  // Forgets it (a reload): the next session probes again. Any thread.
  void forget_era() {
    era_memory_->forget();
    options_.tool_headers->forget();
  }

 private:
  struct EgressSession {
    std::unique_ptr<AsioScheduler> scheduler;  // outlives the splice's timers
    std::shared_ptr<bridge::Splice> splice;
    boost::asio::any_io_executor strand;
  };

  ExposedServer(boost::asio::io_context& ioc, Options options, UpstreamFactory upstream);
  void on_initialize(const std::shared_ptr<mqtt::ClientLink>& link, const jsonrpc::Message& init);
  void add_session(const std::string& client_id, EgressSession s);
  void remove_session(const std::string& client_id);
  void check_liveness();

  boost::asio::io_context& ioc_;
  boost::asio::any_io_executor strand_;
  Options options_;
  UpstreamFactory upstream_;
  std::shared_ptr<mqtt::ServerEndpoint> endpoint_;
  std::map<std::string, EgressSession> sessions_;  // by MQTT client id; on strand_
  std::atomic<std::size_t> session_count_{0};
  std::atomic<bool> online_{false};
  mutable std::mutex problem_mu_;
  std::string problem_;           // under problem_mu_
  std::string upstream_problem_;  // under problem_mu_
  std::atomic<std::uint64_t> reconnects_{0};
  std::shared_ptr<bridge::ModernUpstream::EraMemory> era_memory_ =
      std::make_shared<bridge::ModernUpstream::EraMemory>();
};

// The upstream factory for a `command` entry: one child process per session.
UpstreamFactory child_upstream(const config::ServerEntry& entry, const config::EgressConfig& egress,
                               std::shared_ptr<stdio::ChildRegistry> children);
// The memory bound of a `command` entry (max_memory_mb): a sentence when its children's
// resident memory, with one more child of their average size, would pass it; null when the
// entry has no bound.
std::function<std::string()> memory_budget(const config::ServerEntry& entry,
                                           std::shared_ptr<stdio::ChildRegistry> children);
// The upstream factory for a `url` entry: one upstream Streamable HTTP session per session.
// Fails (with a message naming the key) when the URL or headers cannot be used.
// `tool_headers`: the annotations the sessions learn (the ExposedServer's), for the
// Mcp-Param-{Name} headers of 2026-07-28 tools/call requests.
// `bearer`: the entry's access tokens (upstream_bearer), null for none.
Expected<UpstreamFactory, std::string> http_upstream(
    const config::ServerEntry& entry, const config::Timeouts& timeouts,
    std::shared_ptr<const modern::ToolHeaders> tool_headers = nullptr,
    std::shared_ptr<http::BearerSource> bearer = nullptr);
// The access tokens of a `url` entry with "oauth" (the client credentials grant, shared by its
// sessions); null without one. Fails with a message naming the key when the settings cannot be
// used. The owner stops it when the server goes offline.
Expected<std::shared_ptr<http::BearerSource>, std::string> upstream_bearer(
    const config::ServerEntry& entry, boost::asio::any_io_executor executor);

// The presence's params.meta of a published server (004 §Service Registration): the entry's
// own "meta", and under kUpstreamMetaKey what the bridge speaks to the upstream —
// {"transport": "stdio"|"streamable-http", "protocol": "auto"|"legacy"|"modern",
//  "era": "unknown"|"2025"|"2026-07-28"|"both", "why": "…"} ("both": 2025 to sessions that
//  initialized, 2026-07-28 to the bridge's ingress serving 2026 clients).
inline constexpr const char* kUpstreamMetaKey = "mcp-mqtt-bridge/upstream";
std::string presence_meta(const config::ServerEntry& entry, bridge::ModernUpstream::Era era,
                          const std::string& why);

// The MCP-META object this bridge puts on CONNECT (004 §User Property).
std::string connect_meta(const std::string& description);

// A server-id for an exposed server: the client-id prefix, a per-process random part, an index.
std::string make_server_id(const std::string& prefix, std::size_t index);

}  // namespace mcpmqtt::directions

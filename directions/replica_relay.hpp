// Replicas of the HTTP ingress (docs/replicas.md): this replica on the broker, and the relay of
// requests between replicas over MQTT 5 request/response (MQTT 5.0 §4.10), on one connection
// of its own under the bridge's own topic family, which no MCP participant reads:
//
//   $mcp-bridge/replica/{id}           retained presence {"replica","incarnation"}; the will (an
//                                      empty retained message) clears it when the replica dies
//   $mcp-bridge/relay/{id}/request     requests for sessions {id} holds, with Response Topic
//                                      (where the answer goes) and Correlation Data (which
//                                      request); later a "gone" when the client went away
//   $mcp-bridge/relay/{id}/reply       the frames of owners' answers (http/server_relay.hpp), a
//                                      list of one or more per message
//
// Every message carries an HMAC-SHA256 over its correlation data and payload under a key derived
// from the replicas' shared secret: no one else on the broker can make a replica serve a request
// (with the principal it names) or feed a client's stream.
//
// Bounds: at most max_relays relayed requests in flight each way (more get 503 at once); the
// owner's first frame within the timeout (else 503, and the owner is told the client is gone);
// the body of a request is bounded where it arrived (http.limits.max_body_bytes), frames by what
// the local connection's stream queue takes. A relay whose owner leaves (presence cleared or a
// new incarnation) or whose broker connection drops is answered at once: not yet answered, 404
// for a session (relay_owner_gone) or 503; a stream already open ends.
//
// Thread-safe: forward() and live() from any thread; the rest on the relay's strand.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "common/expected.hpp"
#include "config/config.hpp"
#include "http/server_relay.hpp"
#include "mqtt/broker_connection.hpp"

namespace mcpmqtt::http {
class Server;
}

namespace mcpmqtt::directions {

// ingress.replicas as a running replica needs it: its name (configured, or the host name and a
// random suffix) and its secret (the shared file's, or random bytes of this process).
struct ReplicaIdentity {
  std::string id;
  std::string secret;  // never logged
  bool shared = false;
};
Expected<ReplicaIdentity, std::string> resolve_replica(const config::ReplicasConfig& replicas);

class ReplicaRelay : public http::Relay, public std::enable_shared_from_this<ReplicaRelay> {
 public:
  struct Options {
    std::string replica;                 // this replica's name (ingress.replicas.id)
    std::string secret;                  // the replicas' shared secret
    mqtt::ConnectionOptions connection;  // broker, TLS, credentials; topics, will and id set here
    std::chrono::milliseconds timeout{35000};  // the owner's first frame
    std::size_t max_relays = 1024;             // in flight, each way
  };

  static std::shared_ptr<ReplicaRelay> create(boost::asio::io_context& ioc, Options options);
  ~ReplicaRelay() override;

  // Connects, announces this replica and serves relayed requests through `server`, which must
  // outlive stop()'s completion.
  void start(http::Server& server);
  // Answers every relay in flight, clears the presence and disconnects; `done` once closed.
  void stop(std::chrono::milliseconds timeout, std::function<void()> done);
  // Why relaying does not work now (no broker connection), or empty. Any thread.
  std::string problem() const;

  // http::Relay
  void forward(http::RelayedRequest request, std::shared_ptr<http::Exchange> exchange) override;
  bool live(const std::string& replica) const override;

 private:
  struct Outbound;
  struct Inbound;
  struct Outbox;

  ReplicaRelay(boost::asio::io_context& ioc, Options options);
  void do_forward(http::RelayedRequest request, std::shared_ptr<http::Exchange> exchange);
  void on_message(const mqtt::Incoming& m);
  void on_presence(const std::string& replica, const std::string& payload);
  void on_request(const mqtt::Incoming& m, std::string_view wire);
  void on_reply(const std::string& correlation, std::string_view wire);
  // One message of an owner's answer on `reply_topic`: the frames, in order, as a list (the only
  // form a reply takes on the wire).
  void publish_frames(const std::string& reply_topic, const std::string& correlation,
                      const std::vector<std::string_view>& frames, mqtt::Done done);
  // Publishes what `outbox` holds, in one message; on the strand.
  void flush(Outbox& outbox);
  void on_client_gone(const std::string& correlation);
  void on_timeout(const std::string& correlation);
  void peer_gone(const std::string& replica, const std::string& why);
  void lost_everything(const std::string& why);
  // Ends an outbound relay: not answered yet, with `not_started` (or the owner-gone answer).
  void fail_outbound(const std::string& correlation, bool owner_gone, const std::string& why);
  void send_gone(const std::string& owner, const std::string& correlation);
  void publish(const std::string& topic, const std::string& correlation, std::string wire,
               const std::string& response_topic, mqtt::Done done = {});
  std::string sealed(const std::string& correlation, std::string wire) const;
  // The wire of a message whose MAC is good; nullopt otherwise.
  std::optional<std::string_view> opened(const std::string& correlation,
                                         std::string_view payload) const;
  void announce();
  void count(const char* role, const char* outcome);
  void update_gauges();

  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  Options options_;
  bridge::HmacKey key_;  // the relay's MAC key, derived from the secret
  std::string incarnation_;
  std::string presence_prefix_, relay_prefix_;  // {prefix}bridge/replica/, {prefix}bridge/relay/
  std::string presence_topic_, request_topic_, reply_topic_;
  std::shared_ptr<mqtt::BrokerConnection> conn_;
  http::Server* server_ = nullptr;
  bool stopped_ = false;
  std::uint64_t next_ = 0;
  std::unordered_map<std::string, std::unique_ptr<Outbound>> outbound_;  // by correlation
  std::unordered_map<std::string, std::unique_ptr<Inbound>> inbound_;    // by reply topic + corr

  mutable std::mutex mu_;                     // guards the two below
  std::map<std::string, std::string> peers_;  // replica → incarnation
  std::string problem_ = "not connected to the broker yet";
};

}  // namespace mcpmqtt::directions

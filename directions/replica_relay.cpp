#include "directions/replica_relay.hpp"

#include <cctype>
#include <mutex>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <openssl/crypto.h>
#include <rapidjson/document.h>
#include <unistd.h>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/modern/request_state.hpp"
#include "bridge/protocol/topics.hpp"
#include "common/hex.hpp"
#include "common/log.hpp"
#include "common/metrics.hpp"
#include "http/server_listener.hpp"
#include "http/server_precheck.hpp"
#include "http/server_rules.hpp"

namespace mcpmqtt::directions {

namespace net = boost::asio;

namespace {

constexpr std::size_t kMacSize = 32;
// How long a relayed stream's head waits for the frames that follow it (ReplicaRelay::flush).
constexpr std::chrono::milliseconds kHoldHead{2};

// The replica named by a reply topic ({relay_prefix}{id}/reply), or empty.
std::string replica_of_reply_topic(std::string_view relay_prefix, std::string_view topic) {
  constexpr std::string_view kSuffix = "/reply";
  if (topic.substr(0, relay_prefix.size()) != relay_prefix ||
      topic.size() <= relay_prefix.size() + kSuffix.size() ||
      topic.substr(topic.size() - kSuffix.size()) != kSuffix)
    return {};
  return std::string(
      topic.substr(relay_prefix.size(), topic.size() - relay_prefix.size() - kSuffix.size()));
}

std::string bhttp_method(const http::RelayedRequest& r) {
  const auto m = boost::beast::http::to_string(r.method);
  return std::string(m.data(), m.size());
}

}  // namespace

Expected<ReplicaIdentity, std::string> resolve_replica(const config::ReplicasConfig& replicas) {
  ReplicaIdentity r;
  r.id = replicas.id;
  if (r.id.empty()) {
    // The host name (a container's is its own) in the characters an id may hold, and a suffix
    // that tells two processes on one host apart.
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    for (const char* c = host; *c && r.id.size() < 40; ++c)
      r.id += std::isalnum(static_cast<unsigned char>(*c)) || *c == '-' || *c == '_' ? *c : '-';
    const auto suffix = bridge::random_bytes(3);
    if (!suffix) return unexpected(std::string("no random source for the replica's name"));
    r.id += (r.id.empty() ? "" : "-") + hex_encode(*suffix);
  }
  r.shared = replicas.shared();
  r.secret = replicas.secret;
  if (r.secret.empty()) {
    auto key = bridge::random_bytes(32);
    if (!key)
      return unexpected(
          std::string("no random source for this replica's key; set ingress.replicas.secret_file"));
    r.secret = std::move(*key);
  }
  return r;
}

struct ReplicaRelay::Outbound {
  Outbound(net::any_io_executor ex) : timer(std::move(ex)) {}
  std::string owner;
  http::RelayedRequest request;  // its body stays for an error's id
  std::shared_ptr<http::Exchange> exchange;
  net::steady_timer timer;
  bool started = false;  // the owner's first frame arrived
};

// The frames of one relayed answer waiting for the relay's strand: filled on the session's
// thread, emptied on the strand, in order.
struct ReplicaRelay::Outbox {
  enum class Flush { none, now, later };

  Outbox(net::strand<net::io_context::executor_type> strand, std::string topic, std::string corr,
         std::string map_key)
      : hold(std::move(strand)),
        reply_topic(std::move(topic)),
        correlation(std::move(corr)),
        key(std::move(map_key)) {}

  net::steady_timer hold;  // a stream's head held back, waiting for what follows it
  const std::string reply_topic, correlation, key;

  // What the caller must do for `frame` to leave: nothing (a flush is on its way), flush now,
  // or arm `hold`.
  Flush add(std::string frame, bool is_last) {
    std::lock_guard<std::mutex> lock(mu_);
    const bool first = !started_;
    started_ = true;
    frames_.push_back(std::move(frame));
    last_ = last_ || is_last;
    if (flushing_) return Flush::none;
    if (first && !is_last) return Flush::later;
    flushing_ = true;
    return Flush::now;
  }
  std::pair<std::vector<std::string>, bool> take() {
    std::lock_guard<std::mutex> lock(mu_);
    flushing_ = false;
    return {std::exchange(frames_, {}), last_};
  }

 private:
  std::mutex mu_;
  std::vector<std::string> frames_;
  bool started_ = false;
  bool last_ = false;
  bool flushing_ = false;
};

struct ReplicaRelay::Inbound {
  std::string from;
  std::shared_ptr<http::RemoteExchange> exchange;
};

std::shared_ptr<ReplicaRelay> ReplicaRelay::create(net::io_context& ioc, Options options) {
  return std::shared_ptr<ReplicaRelay>(new ReplicaRelay(ioc, std::move(options)));
}

ReplicaRelay::ReplicaRelay(net::io_context& ioc, Options options)
    : strand_(net::make_strand(ioc)),
      options_(std::move(options)),
      key_(bridge::hmac_sha256(options_.secret, "mcp-mqtt-bridge relay")) {
  const auto random = bridge::random_bytes(8);
  incarnation_ = random
                     ? hex_encode(*random)
                     : std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  // {prefix}bridge/replica/{id} and {prefix}bridge/relay/{id}/…, under mqtt.topic_prefix.
  const topics::Scheme scheme(options_.connection.broker.topic_prefix);
  presence_prefix_ = scheme.bridge("replica/");
  relay_prefix_ = scheme.bridge("relay/");
  presence_topic_ = presence_prefix_ + options_.replica;
  request_topic_ = relay_prefix_ + options_.replica + "/request";
  reply_topic_ = relay_prefix_ + options_.replica + "/reply";
  options_.secret.clear();
}

ReplicaRelay::~ReplicaRelay() = default;

void ReplicaRelay::start(http::Server& server) {
  net::post(strand_, [self = shared_from_this(), &server] {
    if (self->stopped_ || self->conn_) return;
    self->server_ = &server;
    self->update_gauges();  // the series exist from the start, at 0
    auto o = self->options_.connection;
    o.will = mqtt::Will{self->presence_topic_, "", true};
    std::weak_ptr<ReplicaRelay> weak = self;
    mqtt::BrokerConnection::Handlers h;
    h.on_message = [weak](const mqtt::Incoming& m) {
      if (auto s = weak.lock()) s->on_message(m);
    };
    h.on_connected = [weak](const mqtt::ConnackInfo&, bool) {
      auto s = weak.lock();
      if (!s) return;
      {
        std::lock_guard<std::mutex> lock(s->mu_);
        s->problem_.clear();
      }
      s->announce();
    };
    h.on_connection_lost = [weak](const std::string& cause) {
      if (auto s = weak.lock()) s->lost_everything("lost the broker connection: " + cause);
    };
    h.on_connect_failed = [weak](const std::string& why, bool) {
      auto s = weak.lock();
      if (!s) return;
      std::lock_guard<std::mutex> lock(s->mu_);
      s->problem_ = "cannot connect to the broker: " + why;
    };
    self->conn_ = mqtt::BrokerConnection::create(self->strand_, std::move(o), std::move(h));
    self->conn_->subscribe({{self->presence_prefix_ + "+", false},
                            {self->relay_prefix_ + self->options_.replica + "/+", false}});
    self->conn_->connect();
    log::daemon()->info(
        "replica {}: relaying requests for other replicas' sessions through the broker "
        "(presence {})",
        self->options_.replica, self->presence_topic_);
  });
}

void ReplicaRelay::stop(std::chrono::milliseconds timeout, std::function<void()> done) {
  net::post(strand_, [self = shared_from_this(), timeout, done = std::move(done)]() mutable {
    if (self->stopped_) {
      if (done) done();
      return;
    }
    self->stopped_ = true;
    self->lost_everything("the bridge is stopping");
    self->server_ = nullptr;
    if (!self->conn_) {
      if (done) done();
      return;
    }
    // An empty retained message clears the presence at once; the clean DISCONNECT after it
    // keeps the broker from sending the will.
    self->conn_->publish(self->presence_topic_, std::string(), true);
    self->conn_->disconnect(timeout, std::move(done));
  });
}

std::string ReplicaRelay::problem() const {
  std::lock_guard<std::mutex> lock(mu_);
  return problem_;
}

bool ReplicaRelay::live(const std::string& replica) const {
  std::lock_guard<std::mutex> lock(mu_);
  return peers_.count(replica) != 0;
}

void ReplicaRelay::announce() {
  const std::string payload = R"({"replica":)" + jsonrpc::quote(options_.replica) +
                              R"(,"incarnation":)" + jsonrpc::quote(incarnation_) + "}";
  conn_->publish(presence_topic_, payload, true);
}

void ReplicaRelay::count(const char* role, const char* outcome) {
  metrics::registry()
      .counter("mcpmqtt_relay_requests_total",
               "Requests relayed between ingress replicas (ingress.replicas): role sent (this "
               "replica relayed it to the owner) or served (this replica owned it), by outcome.",
               {"role", "outcome"}, {role, outcome})
      .inc();
}

void ReplicaRelay::update_gauges() {
  auto g = [](const char* role) -> metrics::Gauge& {
    return metrics::registry().gauge("mcpmqtt_relay_in_flight",
                                     "Relayed requests in flight between ingress replicas, by "
                                     "role (sent, served).",
                                     {"role"}, {role});
  };
  g("sent").set(static_cast<std::int64_t>(outbound_.size()));
  g("served").set(static_cast<std::int64_t>(inbound_.size()));
}

// ---- the MAC ------------------------------------------------------------------------------------

std::string ReplicaRelay::sealed(const std::string& correlation, std::string wire) const {
  const auto mac = key_.sign({correlation, wire});
  wire += mac;
  return wire;
}

std::optional<std::string_view> ReplicaRelay::opened(const std::string& correlation,
                                                     std::string_view payload) const {
  if (payload.size() < kMacSize) return std::nullopt;
  const auto wire = payload.substr(0, payload.size() - kMacSize);
  const auto mac = key_.sign({correlation, wire});
  if (CRYPTO_memcmp(mac.data(), payload.data() + wire.size(), kMacSize) != 0) return std::nullopt;
  return wire;
}

void ReplicaRelay::publish(const std::string& topic, const std::string& correlation,
                           std::string wire, const std::string& response_topic, mqtt::Done done) {
  mqtt::PublishOptions o;
  o.response_topic = response_topic;
  o.correlation_data = correlation;
  conn_->publish(topic, std::make_shared<const std::string>(sealed(correlation, std::move(wire))),
                 std::move(o), std::move(done));
}

void ReplicaRelay::publish_frames(const std::string& reply_topic, const std::string& correlation,
                                  const std::vector<std::string_view>& frames, mqtt::Done done) {
  publish(reply_topic, correlation, http::relay_wire::encode(frames), {}, std::move(done));
}

// ---- relaying (this replica received the request) ----------------------------------------------

void ReplicaRelay::forward(http::RelayedRequest request, std::shared_ptr<http::Exchange> exchange) {
  net::post(strand_, [self = shared_from_this(), r = std::move(request),
                      ex = std::move(exchange)]() mutable {
    self->do_forward(std::move(r), std::move(ex));
  });
}

void ReplicaRelay::do_forward(http::RelayedRequest request,
                              std::shared_ptr<http::Exchange> exchange) {
  const auto refuse = [&](const char* outcome, http::Response response) {
    count("sent", outcome);
    exchange->reply(std::move(response));
  };
  if (stopped_ || !conn_)
    return refuse("refused", http::relay_unavailable(request, "the bridge is stopping"));
  if (!live(request.owner)) return refuse("owner_gone", http::relay_owner_gone(request));
  if (!conn_->connected())
    return refuse("refused", http::relay_unavailable(
                                 request, "no broker connection to reach replica " + request.owner +
                                              ", which holds this session"));
  if (outbound_.size() >= options_.max_relays)
    return refuse("refused", http::relay_unavailable(
                                 request, std::to_string(options_.max_relays) +
                                              " requests are being relayed to other replicas "
                                              "(ingress.replicas.max_relays); try again"));
  std::string correlation = incarnation_;
  correlation += std::to_string(++next_);
  std::string wire = http::relay_wire::encode_request(request);
  const std::string owner = request.owner;
  auto out = std::make_unique<Outbound>(strand_);
  out->owner = owner;
  out->request = std::move(request);
  out->exchange = exchange;
  out->timer.expires_after(options_.timeout);
  std::weak_ptr<ReplicaRelay> weak = weak_from_this();
  out->timer.async_wait([weak, correlation](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto s = weak.lock()) s->on_timeout(correlation);
  });
  log::http()->debug("[relay] {} {} → replica {} ({})", bhttp_method(out->request),
                     out->request.target, owner,
                     hex_encode(correlation.substr(incarnation_.size())));
  outbound_.emplace(correlation, std::move(out));
  update_gauges();
  exchange->watch([weak, correlation, ex = strand_] {
    net::post(ex, [weak, correlation] {
      if (auto s = weak.lock()) s->on_client_gone(correlation);
    });
  });
  publish(relay_prefix_ + owner + "/request", correlation, std::move(wire), reply_topic_,
          [weak, correlation](bool ok, const std::string& why) {
            if (ok) return;
            if (auto s = weak.lock())
              s->fail_outbound(correlation, false, "cannot publish to the broker: " + why);
          });
}

void ReplicaRelay::on_reply(const std::string& correlation, std::string_view wire) {
  auto it = outbound_.find(correlation);
  if (it == outbound_.end()) return;  // answered already (timeout, client gone)
  auto& out = *it->second;
  if (!out.started) {
    out.started = true;
    out.timer.cancel();
  }
  // One message holds the frames the owner had ready at once (a stream's last event and its
  // end, say), in order.
  auto applied = http::relay_wire::Applied::malformed;
  if (const auto frames = http::relay_wire::decode(wire)) {
    for (const auto frame : *frames) {
      const auto parts = http::relay_wire::decode(frame);
      applied = parts ? http::relay_wire::apply(*parts, *out.exchange)
                      : http::relay_wire::Applied::malformed;
      if (applied != http::relay_wire::Applied::more) break;
    }
  }
  if (applied == http::relay_wire::Applied::more) return;
  log::http()->debug("[relay] replica {} answered ({})", out.owner,
                     hex_encode(correlation.substr(incarnation_.size())));
  if (applied == http::relay_wire::Applied::malformed) {
    log::http()->warn("[relay] a malformed answer from replica {}: the client's request ends",
                      out.owner);
    out.exchange->abort();
    send_gone(out.owner, correlation);
    count("sent", "lost");
  } else {
    count("sent", "answered");
  }
  outbound_.erase(it);
  update_gauges();
}

void ReplicaRelay::on_client_gone(const std::string& correlation) {
  auto it = outbound_.find(correlation);
  if (it == outbound_.end()) return;
  log::http()->debug("[relay] the client of a request relayed to {} went away ({})",
                     it->second->owner, hex_encode(correlation.substr(incarnation_.size())));
  send_gone(it->second->owner, correlation);
  count("sent", "client_gone");
  outbound_.erase(it);
  update_gauges();
}

void ReplicaRelay::on_timeout(const std::string& correlation) {
  auto it = outbound_.find(correlation);
  if (it == outbound_.end() || it->second->started) return;
  const auto owner = it->second->owner;
  log::http()->warn("[relay] replica {} did not answer a relayed request within {}", owner,
                    log::duration_text(options_.timeout));
  send_gone(owner, correlation);
  fail_outbound(correlation, false,
                "replica " + owner + ", which holds this session, did not answer within " +
                    log::duration_text(options_.timeout));
}

void ReplicaRelay::fail_outbound(const std::string& correlation, bool owner_gone,
                                 const std::string& why) {
  auto it = outbound_.find(correlation);
  if (it == outbound_.end()) return;
  auto& out = *it->second;
  out.timer.cancel();
  if (out.started) {
    // The stream its owner opened ends here, with the request's error first (a POST's).
    const auto error = http::relay_stream_error(
        out.request, owner_gone ? "the replica that held this session is gone; send initialize "
                                  "without Mcp-Session-Id to start a new session"
                                : why);
    if (!error.empty()) out.exchange->push_event("", error, true);
    out.exchange->end();
    count("sent", "lost");
  } else if (owner_gone) {
    out.exchange->reply(http::relay_owner_gone(out.request));
    count("sent", "owner_gone");
  } else {
    out.exchange->reply(http::relay_unavailable(out.request, why));
    count("sent", "failed");
  }
  outbound_.erase(it);
  update_gauges();
}

void ReplicaRelay::send_gone(const std::string& owner, const std::string& correlation) {
  if (!conn_ || stopped_) return;
  publish(relay_prefix_ + owner + "/request", correlation, http::relay_wire::encode({"gone"}),
          reply_topic_);
}

// ---- serving (this replica holds the session) --------------------------------------------------

void ReplicaRelay::on_message(const mqtt::Incoming& m) {
  const std::string_view topic = m.topic;
  if (topic.substr(0, presence_prefix_.size()) == presence_prefix_) {
    const auto name = std::string(topic.substr(presence_prefix_.size()));
    if (name != options_.replica) on_presence(name, m.payload ? *m.payload : std::string());
    return;
  }
  if (!m.correlation_data || !m.payload) return;
  const auto wire = opened(*m.correlation_data, *m.payload);
  if (!wire) {
    log::http()->warn(
        "[relay] a message on {} without a valid MAC is ignored (another secret, "
        "or not a replica of this deployment)",
        m.topic);
    return;
  }
  if (topic == reply_topic_) return on_reply(*m.correlation_data, *wire);
  if (topic == request_topic_) return on_request(m, *wire);
}

void ReplicaRelay::on_request(const mqtt::Incoming& m, std::string_view wire) {
  if (!m.response_topic) return;
  const std::string& reply_topic = *m.response_topic;
  const std::string& correlation = *m.correlation_data;
  const std::string key = reply_topic + '\n' + correlation;
  const auto parts = http::relay_wire::decode(wire);
  if (!parts) return;
  if (parts->front() == "gone") {
    auto it = inbound_.find(key);
    if (it == inbound_.end()) return;
    auto ex = it->second->exchange;
    inbound_.erase(it);
    update_gauges();
    ex->gone();
    return;
  }
  const auto from = replica_of_reply_topic(relay_prefix_, reply_topic);
  auto answer = [&](http::Response r) {
    http::RemoteExchange ex(
        [&](std::string frame, bool) { publish_frames(reply_topic, correlation, {frame}, {}); });
    ex.reply(std::move(r));
  };
  auto request = http::relay_wire::decode_request(*parts);
  if (from.empty() || !request) {
    count("served", "refused");
    return answer(http::error_response(400, jsonrpc::code::invalid_request,
                                       "Bad Request: a malformed relayed request"));
  }
  if (!server_ || stopped_) {
    count("served", "refused");
    return answer(http::error_response(503, jsonrpc::code::connection_closed,
                                       "Service Unavailable: the bridge is stopping"));
  }
  if (inbound_.size() >= options_.max_relays) {
    count("served", "refused");
    return answer(
        http::error_response(503, jsonrpc::code::connection_closed,
                             "Service Unavailable: replica " + options_.replica +
                                 " serves its maximum of " + std::to_string(options_.max_relays) +
                                 " relayed requests (ingress.replicas.max_relays); try again"));
  }
  // The frames of the answer leave in messages of as many as are ready when the relay's strand
  // gets to them: a stream's last event and its end, made in one turn of the session, go as one
  // message (one write, one delivery by the broker, one read on the replica that relayed). A
  // stream's head waits up to kHoldHead for what follows it: a tool's answer that comes in time
  // goes with it in one message, instead of each waking the replica that relayed.
  auto outbox = std::make_shared<Outbox>(strand_, reply_topic, correlation, key);
  std::weak_ptr<ReplicaRelay> weak = weak_from_this();
  auto ex = std::make_shared<http::RemoteExchange>(
      [weak, strand = strand_, outbox](std::string frame, bool last) {
        switch (outbox->add(std::move(frame), last)) {
          case Outbox::Flush::none:
            return;
          case Outbox::Flush::now:
            net::post(strand, [weak, outbox] {
              if (auto s = weak.lock()) s->flush(*outbox);
            });
            return;
          case Outbox::Flush::later:
            // Armed on the strand, where the timer lives.
            net::post(strand, [weak, outbox] {
              outbox->hold.expires_after(kHoldHead);
              outbox->hold.async_wait([weak, outbox](const boost::system::error_code& ec) {
                if (ec) return;  // flushed with what followed
                if (auto s = weak.lock()) s->flush(*outbox);
              });
            });
            return;
        }
      });
  auto in = std::make_unique<Inbound>();
  in->from = from;
  in->exchange = ex;
  inbound_[key] = std::move(in);
  update_gauges();
  count("served", "served");
  server_->serve_relayed(std::move(*request), ex);
}

void ReplicaRelay::flush(Outbox& outbox) {
  // A head held back leaves now with what followed it: its timer need not wake the loop later.
  outbox.hold.cancel();
  auto [frames, ends] = outbox.take();
  if (frames.empty() || !conn_) return;  // sent with a later frame already
  std::weak_ptr<ReplicaRelay> weak = weak_from_this();
  publish_frames(outbox.reply_topic, outbox.correlation,
                 std::vector<std::string_view>(frames.begin(), frames.end()),
                 [weak, key = outbox.key](bool ok, const std::string&) {
                   if (ok) return;
                   auto s = weak.lock();
                   if (!s) return;
                   // The answer cannot reach the replica that asked: the request ends.
                   auto it = s->inbound_.find(key);
                   if (it == s->inbound_.end()) return;
                   auto gone = it->second->exchange;
                   s->inbound_.erase(it);
                   s->update_gauges();
                   gone->gone();
                 });
  if (ends && inbound_.erase(outbox.key)) update_gauges();
}

// ---- presence
// ------------------------------------------------------------------------------------

void ReplicaRelay::on_presence(const std::string& replica, const std::string& payload) {
  std::string incarnation;
  if (!payload.empty()) {
    rapidjson::Document d;
    d.Parse(payload.data(), payload.size());
    if (!d.HasParseError() && d.IsObject()) {
      auto it = d.FindMember("incarnation");
      if (it != d.MemberEnd() && it->value.IsString())
        incarnation.assign(it->value.GetString(), it->value.GetStringLength());
    }
  }
  std::string before;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = peers_.find(replica);
    if (it != peers_.end()) before = it->second;
    if (incarnation.empty())
      peers_.erase(replica);
    else
      peers_[replica] = incarnation;
  }
  if (!before.empty() && before != incarnation) {
    peer_gone(replica, incarnation.empty() ? "it left the broker" : "it restarted");
  }
  if (!incarnation.empty() && before != incarnation)
    log::http()->info("[relay] replica {} is up", replica);
}

void ReplicaRelay::peer_gone(const std::string& replica, const std::string& why) {
  log::http()->info("[relay] replica {} is gone ({}): its sessions get 404", replica, why);
  std::vector<std::string> out;
  for (const auto& [c, o] : outbound_)
    if (o->owner == replica) out.push_back(c);
  for (const auto& c : out)
    fail_outbound(c, true, "replica " + replica + " is gone");
  std::vector<std::shared_ptr<http::RemoteExchange>> gone;
  for (auto it = inbound_.begin(); it != inbound_.end();) {
    if (it->second->from == replica) {
      gone.push_back(it->second->exchange);
      it = inbound_.erase(it);
    } else {
      ++it;
    }
  }
  update_gauges();
  for (auto& ex : gone)
    ex->gone();
}

void ReplicaRelay::lost_everything(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    peers_.clear();
    if (!stopped_) problem_ = why;
  }
  std::vector<std::string> out;
  for (const auto& [c, o] : outbound_)
    out.push_back(c);
  for (const auto& c : out)
    fail_outbound(c, false, why);
  auto in = std::move(inbound_);
  inbound_.clear();
  update_gauges();
  for (auto& [k, i] : in)
    i->exchange->gone();
}

}  // namespace mcpmqtt::directions

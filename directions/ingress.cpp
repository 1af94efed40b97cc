#include "directions/ingress.hpp"

#include <deque>
#include <optional>
#include <unordered_set>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "bridge/jsonrpc/raw_json.hpp"
#include "bridge/protocol/events.hpp"
#include "bridge/protocol/topics.hpp"
#include "bridge/relay/holding_channel.hpp"
#include "bridge/relay/rbac_gate.hpp"
#include "bridge/relay/splice.hpp"
#include "bridge/relay/subscription_hub.hpp"
#include "common/lazy_deque.hpp"
#include "common/log.hpp"
#include "directions/asio_scheduler.hpp"
#include "directions/options.hpp"
#include "mqtt/client_session.hpp"

namespace mcpmqtt::directions {

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v)
    out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "(none)" : out;
}

}  // namespace

struct Ingress::IngressSession : std::enable_shared_from_this<IngressSession> {
  std::uint64_t id = 0;
  std::weak_ptr<Ingress> ingress;
  boost::asio::any_io_executor strand;
  std::string server_name;
  std::shared_ptr<bridge::HoldingChannel> downstream;
  std::optional<jsonrpc::Id> init_id;
  bridge::Directory::WatchId watch = 0;
  std::unique_ptr<boost::asio::steady_timer> wait_timer;
  std::unique_ptr<AsioScheduler> scheduler;  // declared before the splice: outlives its timers
  std::shared_ptr<mqtt::ClientSession> upstream;
  std::shared_ptr<bridge::Splice> splice;
  // Resource and list-change subscriptions of this session, and its subscriptions/listen.
  bridge::SubscriptionHub hub;
  OnClosed on_closed;
  OnFinished on_finished;
  bool ended = false;
  // Who opened the session; webhooks served by the bridge (Ingress::serve_webhooks) are keyed by
  // its key.
  std::optional<bridge::Principal> principal;
  WebhookHandler webhooks;
  std::optional<jsonrpc::Id> client_init_id;
  bool webhooks_here = false;  // the server has in-band events and no webhooks of its own
  // the client's resources/list requests unanswered
  std::unordered_set<jsonrpc::Id, jsonrpc::IdHash> resource_lists;
  // 004 §User Property MCP-RBAC: the role this session holds, known from the CONNACK of its MQTT
  // connection; until then the client's messages but initialize wait here (bounded by
  // Options::max_held), so none passes unchecked.
  std::string presence_meta = "{}";  // of the picked instance: its rbac.roles
  std::optional<bridge::RbacGate> rbac;
  LazyDeque<jsonrpc::Message> unchecked;

  // The webhook part of the hook: may replace the initialize result, or take a request.
  bool webhook_hook(bridge::Splice::Side from, jsonrpc::Message& m) {
    if (from == bridge::Splice::Side::client) {
      if (!m.is_request()) return false;
      if (m.method() == "initialize") {
        client_init_id = m.id();
        return false;
      }
      if (!webhooks_here) return false;
      if (m.method() == "resources/list") {
        // Bounded by the splice's own limit on requests in flight.
        resource_lists.insert(m.id());
        return false;
      }
      bool ours = m.method() == events::kRegister || m.method() == events::kDeregister;
      if (!ours && m.method() == "resources/read") {
        const auto* params = m.params();
        if (params && params->IsObject()) {
          auto u = params->FindMember("uri");
          ours =
              u != params->MemberEnd() && u->value.IsString() &&
              std::string_view(u->value.GetString(), u->value.GetStringLength())
                      .substr(0, events::kSubscriptionScheme.size()) == events::kSubscriptionScheme;
        }
      }
      if (!ours) return false;
      std::weak_ptr<IngressSession> weak = weak_from_this();
      webhooks(server_name, principal->key, m, [weak](jsonrpc::Message answer) {
        auto self = weak.lock();
        if (!self) return;
        boost::asio::post(self->strand, [self, answer = std::move(answer)]() mutable {
          if (self->splice && !self->splice->closed())
            self->splice->send_to(bridge::Splice::Side::client, std::move(answer));
        });
      });
      return true;
    }
    if (m.is_response() && !resource_lists.empty() && resource_lists.erase(m.id()))
      return append_subscriptions(m);
    if (client_init_id && m.is_response() && m.id() == *client_init_id) {
      client_init_id.reset();
      if (m.kind() != jsonrpc::Kind::result) return false;
      const auto raw = raw_json::member(m.text(), "result");
      if (!raw) return false;
      const auto caps = events::capabilities(*raw);
      if (!caps.subscribe || caps.webhook) return false;  // SEP-1803: the server's own pass
      if (auto with = events::with_webhook(*raw)) {
        webhooks_here = true;
        m = jsonrpc::Message::result(m.id(), *with);
      }
    }
    return false;
  }

  // The server's answer to a resources/list: its last page (no nextCursor) goes to the client
  // with the principal's subscription:// resources appended; anything else as it came.
  bool append_subscriptions(const jsonrpc::Message& m) {
    if (m.kind() != jsonrpc::Kind::result) return false;
    const auto raw = raw_json::member(m.text(), "result");
    if (!raw || raw_json::member(*raw, "nextCursor")) return false;
    auto held = std::make_shared<jsonrpc::Message>(m);
    std::weak_ptr<IngressSession> weak = weak_from_this();
    webhooks(server_name, principal->key,
             jsonrpc::Message::request(jsonrpc::Id::integer(0), "resources/list"),
             [weak, held](jsonrpc::Message ours) {
               auto self = weak.lock();
               if (!self) return;
               boost::asio::post(self->strand, [self, held, ours = std::move(ours)] {
                 if (!self->splice || self->splice->closed()) return;
                 jsonrpc::Message out = *held;
                 const auto theirs = raw_json::member(held->text(), "result");
                 const auto mine = ours.kind() == jsonrpc::Kind::result
                                       ? raw_json::member(ours.text(), "result")
                                       : std::nullopt;
                 const auto items = mine ? raw_json::member(*mine, "resources") : std::nullopt;
                 if (theirs && items && items->size() >= 2) {
                   if (auto with = events::with_resources_appended(
                           *theirs, items->substr(1, items->size() - 2)))
                     out = jsonrpc::Message::result(held->id(), *with);
                 }
                 self->splice->deliver_held(bridge::Splice::Side::server, std::move(out));
               });
             });
    return true;
  }

  std::shared_ptr<Ingress> owner() const { return ingress.lock(); }

  void on_initialize() {
    auto in = owner();
    if (!in) return;
    const auto filters = in->directory_->filters();
    bool covered = filters.empty();
    for (const auto& f : filters)
      covered |= topics::filter_matches(f, server_name);
    if (!covered) {
      refuse("the MCP server \"" + server_name +
             "\" is outside the server-name filters the bridge subscribes to (" + join(filters) +
             "); add a filter that matches it to ingress.server_name_filters");
      return;
    }
    try_connect();
  }

  void try_connect() {
    auto in = owner();
    if (ended || splice || !in) return;
    auto inst = in->directory_->pick(server_name, in->options_.ingress.pick == config::Pick::random
                                                      ? bridge::Directory::Pick::random
                                                      : bridge::Directory::Pick::round_robin);
    if (inst) {
      connect(*inst);
      return;
    }
    if (wait_timer) return;  // already waiting
    const auto wait = std::chrono::milliseconds(in->options_.ingress.presence_wait_ms);
    wait_timer = std::make_unique<boost::asio::steady_timer>(strand, wait);
    std::weak_ptr<IngressSession> weak = weak_from_this();
    wait_timer->async_wait([weak, wait, filters = in->directory_->filters(),
                            waited_on = in->topics_.server_presence_filter(server_name)](
                               const boost::system::error_code& ec) {
      auto self = weak.lock();
      if (ec || !self || self->splice || self->ended) return;
      self->refuse("no MCP server named \"" + self->server_name + "\" is online (waited " +
                   std::to_string(wait.count()) + " ms for its presence on " + waited_on +
                   "; server-name filters in use: " + join(filters) + ")");
    });
    auto ex = strand;
    watch = in->directory_->watch(server_name, [weak, ex] {
      boost::asio::post(ex, [weak] {
        if (auto self = weak.lock()) self->try_connect();
      });
    });
  }

  void stop_waiting() {
    if (wait_timer) wait_timer->cancel();
    if (watch) {
      if (auto in = owner()) in->directory_->unwatch(watch);
      watch = 0;
    }
  }

  void connect(const bridge::ServerInstance& inst) {
    auto in = owner();
    if (!in) return;
    stop_waiting();
    // mqtt.session_credentials: the broker authenticates (and its ACLs judge) the caller.
    auto broker =
        session_broker_options(in->broker_, in->options_.mqtt.session_credentials, principal);
    if (!broker) {
      refuse(broker.error());
      return;
    }
    mqtt::ClientSession::Options o;
    o.broker = std::move(*broker);
    // 004 §MQTT Client ID: a fresh client id for every initialize.
    o.client_id = mqtt::fresh_client_id(in->options_.mqtt.client_id_prefix);
    o.server_id = inst.server_id;
    o.server_name = inst.server_name;
    // Its presence and capability messages come from the directory's one subscription.
    o.directory = in->directory_;
    // 004 §User Property: MCP-META says whom the session serves (never the token).
    o.connect_meta_json =
        principal ? bridge::connect_meta_with(in->options_.connect_meta_json, *principal)
                  : in->options_.connect_meta_json;
    presence_meta = inst.meta_json;
    upstream = mqtt::ClientSession::create(strand, o);
    if (o.broker.username != in->broker_.username) {
      log::bridge()->debug("{} connects to the broker as \"{}\" (mqtt.session_credentials)",
                           upstream->describe(), o.broker.username);
    }
    if (on_finished) upstream->on_finished(on_finished);
    upstream->on_connected([weak = weak_from_this()](const mqtt::ConnackInfo& info) {
      if (auto self = weak.lock()) self->on_connack(info);
    });
    scheduler = std::make_unique<AsioScheduler>(strand);
    bridge::Splice::Options so;
    so.timeout_for = [timeouts = in->timeouts_](const std::string& method) {
      return std::chrono::milliseconds(timeouts->for_method(method));
    };
    so.log_prefix = upstream->describe();
    so.metrics_direction = in->options_.metrics_direction;
    bridge::Splice::Hooks hooks;
    std::weak_ptr<IngressSession> weak = weak_from_this();
    hooks.on_closed = [weak](const bridge::CloseReason& why) {
      if (auto self = weak.lock()) self->end(why);
    };
    hooks.on_message = [weak](bridge::Splice::Side from, jsonrpc::Message& m) {
      auto self = weak.lock();
      if (!self) return bridge::Splice::Verdict::pass;
      if (from == bridge::Splice::Side::client) return self->from_client(m);
      if (self->rbac) self->rbac->filter(m);
      return self->pass_on(from, m);
    };
    hooks.on_closing = [weak](const bridge::CloseReason& why) {
      auto self = weak.lock();
      if (!self) return std::vector<jsonrpc::Message>{};
      // 000 §Cancellation: the server ending the session ends its listens; a graceful end is
      // a result for each listen request, anything else an error naming why.
      const bool graceful = why.kind == bridge::CloseReason::Kind::normal ||
                            why.kind == bridge::CloseReason::Kind::shutdown;
      auto last = self->hub.close(graceful, why.detail);
      // Requests that waited for the CONNACK were never relayed: the splice does not know them.
      for (auto& m : self->unchecked) {
        if (m.is_request()) {
          last.push_back(jsonrpc::Message::error(m.id(), jsonrpc::code::connection_closed,
                                                 m.method() + " was not answered: " + why.detail));
        }
      }
      self->unchecked.clear();
      return last;
    };
    log::bridge()->info("{} new session for {}", upstream->describe(), downstream->describe());
    splice = bridge::Splice::create(downstream, upstream, *scheduler, so, std::move(hooks));
    splice->start();
  }

  // A message from the client, before the splice relays it: MCP-RBAC first, then the bridge's
  // own services.
  bridge::Splice::Verdict from_client(jsonrpc::Message& m) {
    const bool initialize = m.is_request() && m.method() == "initialize";
    if (!rbac && !initialize) {
      // The role is not known before the CONNACK: hold, in order, rather than guess.
      auto in = owner();
      if (unchecked.size() >= (in ? in->options_.max_held : 0)) {
        const std::string why = "too many messages (" + std::to_string(unchecked.size()) +
                                ") before the MQTT connection is up; wait for the initialize "
                                "response";
        if (m.is_request()) {
          splice->send_to(bridge::Splice::Side::client,
                          jsonrpc::Message::error(m.id(), jsonrpc::code::connection_closed, why));
        } else {
          log::bridge()->warn("{} dropped {} from the client: {}", splice->prefix(),
                              m.is_notification() ? m.method() : std::string("a response"), why);
        }
        return bridge::Splice::Verdict::drop;
      }
      unchecked.push_back(std::move(m));
      return bridge::Splice::Verdict::drop;
    }
    if (rbac) {
      if (auto refusal = rbac->check(m)) {
        // At debug: the client hears it, and a client may send many.
        log::bridge()->debug("{} {}", splice->prefix(), refusal->error().message);
        splice->send_to(bridge::Splice::Side::client, std::move(*refusal));
        return bridge::Splice::Verdict::drop;
      }
    }
    return pass_on(bridge::Splice::Side::client, m);
  }

  // The bridge's own services on a message in either direction: webhooks, subscriptions.
  bridge::Splice::Verdict pass_on(bridge::Splice::Side from, jsonrpc::Message& m) {
    if (webhooks && webhook_hook(from, m)) return bridge::Splice::Verdict::drop;
    auto actions = from == bridge::Splice::Side::client ? hub.from_client(m) : hub.from_server(m);
    const bool consumed = actions.consumed;
    apply(std::move(actions));
    return consumed ? bridge::Splice::Verdict::drop : bridge::Splice::Verdict::pass;
  }

  // The broker's CONNACK: the session's MCP-RBAC role against the server's presence.
  void on_connack(const mqtt::ConnackInfo& info) {
    if (rbac || !splice) return;
    auto policy = bridge::rbac::resolve(info.rbac_json, server_name, presence_meta);
    const auto& prefix = splice->prefix();
    switch (policy.mode) {
      case bridge::rbac::Policy::Mode::open:
        log::bridge()->debug("{} MCP-RBAC: none ({})", prefix, policy.reason);
        break;
      case bridge::rbac::Policy::Mode::enforce:
        log::bridge()->info("{} MCP-RBAC: {} {} on {} (methods: {}; tools: {}; resources: {})",
                            prefix, policy.roles.size() == 1 ? "role" : "roles",
                            policy.role_names(), server_name, policy.methods.describe(),
                            policy.tools.describe(), policy.resources.describe());
        if (!policy.reason.empty()) log::bridge()->warn("{} MCP-RBAC: {}", prefix, policy.reason);
        break;
      case bridge::rbac::Policy::Mode::deny:
        log::bridge()->warn("{} MCP-RBAC: {}; every request but initialize will be refused", prefix,
                            policy.reason);
        break;
    }
    rbac.emplace(std::move(policy));
    // What waited goes now, in order, as if it had just arrived.
    auto held = std::move(unchecked);
    unchecked.clear();
    for (auto& m : held) {
      if (!splice || splice->closed()) return;
      if (from_client(m) == bridge::Splice::Verdict::pass)
        splice->deliver_held(bridge::Splice::Side::client, std::move(m));
    }
  }

  // Carries out what the subscription hub asks for.
  void apply(bridge::SubscriptionHub::Actions actions) {
    if (!splice) return;
    for (auto& m : actions.to_client)
      splice->send_to(bridge::Splice::Side::client, std::move(m));
    std::weak_ptr<IngressSession> weak = weak_from_this();
    for (auto& uri : actions.subscribe) {
      splice->request_to_server("resources/subscribe", "{\"uri\":" + jsonrpc::quote(uri) + "}",
                                [weak, uri](const jsonrpc::Message& response) {
                                  auto self = weak.lock();
                                  if (!self) return;
                                  std::optional<std::string> error;
                                  if (response.kind() == jsonrpc::Kind::error) {
                                    error = response.error().message;
                                    log::bridge()->info(
                                        "{} the server refused resources/subscribe of {}: {}",
                                        self->splice ? self->splice->prefix() : std::string(), uri,
                                        *error);
                                  }
                                  self->apply(self->hub.subscribed(uri, error));
                                });
    }
    for (auto& uri : actions.unsubscribe) {
      splice->request_to_server("resources/unsubscribe", "{\"uri\":" + jsonrpc::quote(uri) + "}",
                                [weak, uri](const jsonrpc::Message& response) {
                                  auto self = weak.lock();
                                  if (self && response.kind() == jsonrpc::Kind::error &&
                                      self->splice && !self->splice->closed())
                                    log::bridge()->info(
                                        "{} the server refused resources/unsubscribe of {}: {}",
                                        self->splice->prefix(), uri, response.error().message);
                                });
    }
  }

  void refuse(const std::string& why) {
    if (ended) return;
    log::bridge()->warn("{} initialize refused: {}", downstream->describe(), why);
    if (init_id)
      downstream->send(jsonrpc::Message::error(*init_id, jsonrpc::code::connection_closed, why));
    const bridge::CloseReason reason{bridge::CloseReason::Kind::peer_gone, why};
    downstream->close(reason);
    end(reason);
    if (auto fn = std::move(on_finished)) boost::asio::post(strand, fn);
  }

  void end(const bridge::CloseReason& why) {
    if (ended) return;
    ended = true;
    stop_waiting();
    if (on_closed) on_closed(why);
    // Not from inside the splice's own callback: forget the session on the next turn.
    boost::asio::post(strand, [self = shared_from_this()] {
      if (auto in = self->owner()) in->forget(self->id);
    });
  }
};

std::shared_ptr<Ingress> Ingress::create(Options options,
                                         std::shared_ptr<bridge::Directory> directory) {
  return std::shared_ptr<Ingress>(new Ingress(std::move(options), std::move(directory)));
}

Ingress::Ingress(Options options, std::shared_ptr<bridge::Directory> directory)
    : options_(std::move(options)),
      broker_(session_connection_options(options_.mqtt)),
      topics_(options_.mqtt.topic_prefix),
      timeouts_(std::make_shared<const config::Timeouts>(options_.timeouts)),
      directory_(std::move(directory)) {}

void Ingress::attach(const std::string& server_name, std::shared_ptr<bridge::Channel> downstream,
                     boost::asio::any_io_executor strand, OnClosed on_closed,
                     OnFinished on_finished, std::optional<bridge::Principal> principal) {
  auto s = std::make_shared<IngressSession>();
  s->ingress = weak_from_this();
  s->strand = strand;
  s->server_name = server_name;
  s->on_closed = std::move(on_closed);
  s->on_finished = std::move(on_finished);
  s->principal = std::move(principal);
  {
    std::lock_guard lock(mu_);
    s->id = next_id_++;
    sessions_[s->id] = s;
    if (s->principal) s->webhooks = webhooks_;
  }
  std::weak_ptr<IngressSession> weak = s;
  bridge::HoldingChannel::Hooks hooks;
  // The hooks may run inside HoldingChannel::create(), before `s->downstream` is set: they
  // answer through the inner channel and leave the rest to the next turn.
  hooks.on_held = [weak,
                   inner = std::weak_ptr<bridge::Channel>(downstream)](const jsonrpc::Message& m) {
    auto self = weak.lock();
    if (!self) return false;
    if (self->init_id) return true;
    if (m.is_request() && m.method() == "initialize") {
      self->init_id = m.id();
      boost::asio::post(self->strand, [weak] {
        if (auto s2 = weak.lock()) s2->on_initialize();
      });
      return true;
    }
    // 002 §Lifecycle: initialize comes first.
    if (auto ch = inner.lock(); ch && m.is_request()) {
      ch->send(jsonrpc::Message::error(
          m.id(), jsonrpc::code::invalid_request,
          "the session is not initialized: send initialize before " + m.method()));
    }
    return false;
  };
  hooks.on_closed_while_held = [weak](const bridge::CloseReason& why) {
    auto self = weak.lock();
    if (!self) return;
    boost::asio::post(self->strand, [self, why] {
      if (self->splice) return;  // the splice reports it
      self->end(why);
      if (auto fn = std::move(self->on_finished)) fn();
    });
  };
  // The downstream may deliver its first messages from inside create(): the session's fields
  // must be in place before (on_initialize may run at once, and uses `downstream`).
  s->downstream =
      bridge::HoldingChannel::create(std::move(downstream), std::move(hooks), options_.max_held);
}

void Ingress::serve_webhooks(WebhookHandler handler) {
  std::lock_guard lock(mu_);
  webhooks_ = std::move(handler);
}

void Ingress::forget(std::uint64_t id) {
  std::shared_ptr<IngressSession> s;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return;
    s = std::move(it->second);
    sessions_.erase(it);
  }
  // `s` goes away here, on the session's strand (forget is posted there).
}

std::size_t Ingress::session_count() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

void Ingress::close_all(const bridge::CloseReason& why, boost::asio::any_io_executor ex,
                        std::chrono::milliseconds timeout, std::function<void()> done) {
  std::vector<std::shared_ptr<IngressSession>> all;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, s] : sessions_)
      all.push_back(s);
  }
  for (auto& s : all) {
    boost::asio::post(s->strand, [s, why] {
      if (s->splice)
        s->splice->close(why);
      else
        s->refuse(why.detail);
    });
  }
  // Wait for the table to empty (each session forgets itself), bounded by `timeout`.
  poll_until(
      ex, [self = shared_from_this()] { return self->session_count() == 0; }, timeout,
      std::move(done));
}

}  // namespace mcpmqtt::directions

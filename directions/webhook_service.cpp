#include "directions/webhook_service.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <boost/asio/ip/network_v4.hpp>
#include <boost/asio/ip/network_v6.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "bridge/protocol/events.hpp"
#include "common/log.hpp"
#include "common/metrics.hpp"
#include "http/client_url.hpp"

namespace mcpmqtt::directions {

namespace net = boost::asio;

namespace {

constexpr auto kReopenDelay = std::chrono::seconds(2);
constexpr auto kGaugeInterval = std::chrono::seconds(1);

bool in_v4(const net::ip::address_v4& a, std::uint32_t net_addr, int prefix) {
  const std::uint32_t mask = prefix == 0 ? 0 : ~std::uint32_t(0) << (32 - prefix);
  return (a.to_uint() & mask) == (net_addr & mask);
}

bool in_v6(const net::ip::address_v6& a, const net::ip::address_v6& n, int prefix) {
  const auto x = a.to_bytes(), y = n.to_bytes();
  for (int i = 0; i < 16 && prefix > 0; ++i, prefix -= 8) {
    const unsigned mask = prefix >= 8 ? 0xff : (0xff << (8 - prefix)) & 0xff;
    if ((x[static_cast<std::size_t>(i)] & mask) != (y[static_cast<std::size_t>(i)] & mask))
      return false;
  }
  return true;
}

std::uint32_t v4(int a, int b, int c, int d) {
  return (std::uint32_t(a) << 24) | (std::uint32_t(b) << 16) | (std::uint32_t(c) << 8) |
         std::uint32_t(d);
}

net::ip::address_v4 v4_at(const net::ip::address_v6& a, std::size_t at) {
  const auto b = a.to_bytes();
  return net::ip::address_v4({b[at], b[at + 1], b[at + 2], b[at + 3]});
}

// The class of a non-public address, or empty for a public one.
std::string address_class(const net::ip::address& addr) {
  if (addr.is_v6()) {
    const auto a = addr.to_v6();
    if (a.is_v4_mapped()) return address_class(net::ip::make_address_v4(net::ip::v4_mapped, a));
    if (a.is_loopback()) return "loopback";
    if (a.is_unspecified()) return "unspecified";
    if (a.is_link_local()) return "link-local";
    if (a.is_multicast()) return "multicast";
    if (in_v6(a, net::ip::make_address_v6("fc00::"), 7)) return "private (unique local)";
    if (a.is_site_local()) return "private (site-local)";
    // Addresses that carry an IPv4 address reach that address: they are as public as it is.
    // RFC 6052 §2.1: the well-known NAT64 prefix, the IPv4 address in the last 32 bits.
    if (in_v6(a, net::ip::make_address_v6("64:ff9b::"), 96)) {
      const auto inner = address_class(v4_at(a, 12));
      return inner.empty() ? inner : inner + " (through NAT64, 64:ff9b::/96)";
    }
    // RFC 8215: local-use NAT64, translated by the local network's own gateway.
    if (in_v6(a, net::ip::make_address_v6("64:ff9b:1::"), 48)) return "local-use NAT64";
    // RFC 3056 §2: 6to4, the IPv4 address of the gateway in bits 16 to 47.
    if (in_v6(a, net::ip::make_address_v6("2002::"), 16)) {
      const auto inner = address_class(v4_at(a, 2));
      return inner.empty() ? inner : inner + " (through 6to4, 2002::/16)";
    }
    // RFC 4380 §4: Teredo hides the client's IPv4 address; where it leads cannot be checked.
    if (in_v6(a, net::ip::make_address_v6("2001::"), 32)) return "Teredo tunnel (2001::/32)";
    // RFC 4291 §2.5.5.1: the deprecated IPv4-compatible form ::a.b.c.d.
    if (in_v6(a, net::ip::address_v6(), 96)) return address_class(v4_at(a, 12));
    // RFC 3849 documentation; RFC 6666 discard-only.
    if (in_v6(a, net::ip::make_address_v6("2001:db8::"), 32)) return "documentation";
    if (in_v6(a, net::ip::make_address_v6("100::"), 64)) return "discard-only";
    return {};
  }
  const auto a = addr.to_v4();
  if (in_v4(a, v4(127, 0, 0, 0), 8)) return "loopback";
  if (in_v4(a, v4(0, 0, 0, 0), 8)) return "unspecified";
  if (in_v4(a, v4(169, 254, 0, 0), 16)) return "link-local";
  if (in_v4(a, v4(10, 0, 0, 0), 8) || in_v4(a, v4(172, 16, 0, 0), 12) ||
      in_v4(a, v4(192, 168, 0, 0), 16))
    return "private";
  if (in_v4(a, v4(100, 64, 0, 0), 10)) return "shared (carrier-grade NAT)";
  if (in_v4(a, v4(224, 0, 0, 0), 4) || in_v4(a, v4(240, 0, 0, 0), 4))
    return "multicast or reserved";
  // RFC 6890: IETF protocol assignments, documentation (RFC 5737) and benchmarking (RFC 2544).
  if (in_v4(a, v4(192, 0, 0, 0), 24)) return "reserved (IETF protocol assignments)";
  if (in_v4(a, v4(192, 0, 2, 0), 24) || in_v4(a, v4(198, 51, 100, 0), 24) ||
      in_v4(a, v4(203, 0, 113, 0), 24))
    return "documentation";
  if (in_v4(a, v4(198, 18, 0, 0), 15)) return "benchmarking";
  return {};
}

bool allowed_by(const net::ip::address& addr, const std::string& entry) {
  boost::system::error_code ec;
  const auto slash = entry.find('/');
  const auto base = net::ip::make_address(entry.substr(0, slash), ec);
  if (ec) return false;
  const int bits = base.is_v4() ? 32 : 128;
  int prefix = bits;
  if (slash != std::string::npos) prefix = std::atoi(entry.c_str() + slash + 1);
  auto a = addr;
  if (a.is_v6() && a.to_v6().is_v4_mapped() && base.is_v4())
    a = net::ip::make_address_v4(net::ip::v4_mapped, a.to_v6());
  if (a.is_v4() != base.is_v4()) return false;
  return a.is_v4() ? in_v4(a.to_v4(), base.to_v4().to_uint(), prefix)
                   : in_v6(a.to_v6(), base.to_v6(), prefix);
}

metrics::Gauge& gauge(const char* name, const char* help) {
  return metrics::registry().gauge(name, help);
}

}  // namespace

std::string check_allow_target(const std::string& entry) {
  boost::system::error_code ec;
  const auto slash = entry.find('/');
  const auto base = net::ip::make_address(entry.substr(0, slash), ec);
  if (ec) return "\"" + entry + "\" is not an IP address or network (such as \"10.0.0.0/8\")";
  if (slash == std::string::npos) return {};
  const std::string p = entry.substr(slash + 1);
  const int bits = base.is_v4() ? 32 : 128;
  if (p.empty() || p.size() > 3 || !std::all_of(p.begin(), p.end(), ::isdigit) ||
      std::atoi(p.c_str()) > bits)
    return "\"" + entry + "\" has no valid prefix length (0 to " + std::to_string(bits) + ")";
  return {};
}

std::string webhook_address_refusal(const net::ip::address& a,
                                    const std::vector<std::string>& allowed) {
  const auto cls = address_class(a);
  if (cls.empty()) return {};
  for (const auto& entry : allowed)
    if (allowed_by(a, entry)) return {};
  return "it resolves to " + a.to_string() + ", a " + cls +
         " address; webhooks go to public addresses only unless events.webhooks.allow_targets "
         "lists it";
}

// ---- the service -----------------------------------------------------------------------------

// The core's sender: each POST goes to the client of its target's host, on that client's
// strand (a delivery thread); the outcome comes back on the service's strand, only while the
// service lives.
class ServiceSender : public bridge::WebhookSender {
 public:
  ServiceSender(std::vector<std::shared_ptr<http::WebhookClient>> clients,
                net::any_io_executor home, std::weak_ptr<WebhookService> owner)
      : clients_(std::move(clients)), home_(std::move(home)), owner_(std::move(owner)) {}
  void post(bridge::WebhookDelivery d, std::function<void(bridge::WebhookOutcome)> done) override {
    // The scheme, host and port (what a connection is kept for): up to the path.
    const std::string_view target = d.target;
    const auto scheme_end = target.find("://");
    const auto path = target.find('/', scheme_end == std::string_view::npos ? 0 : scheme_end + 3);
    const auto& client =
        clients_[std::hash<std::string_view>{}(target.substr(0, path)) % clients_.size()];
    net::post(client->executor(), [client, d = std::move(d), done = std::move(done), home = home_,
                                   owner = owner_]() mutable {
      client->post(std::move(d),
                   [home, owner, done = std::move(done)](bridge::WebhookOutcome o) mutable {
                     net::post(home, [owner, done = std::move(done), o = std::move(o)]() mutable {
                       if (owner.lock()) done(std::move(o));
                     });
                   });
    });
  }

 private:
  std::vector<std::shared_ptr<http::WebhookClient>> clients_;
  net::any_io_executor home_;
  std::weak_ptr<WebhookService> owner_;
};

Expected<std::shared_ptr<WebhookService>, std::string> WebhookService::create(
    net::any_io_executor strand, config::WebhooksConfig config, std::shared_ptr<Ingress> ingress) {
  for (const auto& entry : config.allow_targets) {
    if (auto why = check_allow_target(entry); !why.empty())
      return unexpected("events.webhooks.allow_targets: " + why);
  }
  std::shared_ptr<WebhookService> s(
      new WebhookService(std::move(strand), std::move(config), std::move(ingress)));
  http::WebhookClient::Options co;
  co.timeout = std::chrono::milliseconds(s->config_.timeout_ms);
  // As many kept-alive connections as POSTs may be in flight: a burst to one receiver reuses
  // them all instead of closing the excess after each exchange and connecting again.
  co.max_idle_per_target = std::max<std::size_t>(co.max_idle_per_target, s->config_.max_in_flight);
  co.address_check = [allowed = s->config_.allow_targets](const net::ip::address& a) {
    return webhook_address_refusal(a, allowed);
  };
  const int threads = std::max(1, s->config_.threads);
  for (int i = 0; i < threads; ++i)
    s->clients_.push_back(http::WebhookClient::create(net::make_strand(s->post_ioc_), co));
  s->post_work_.emplace(s->post_ioc_.get_executor());
  for (int i = 0; i < threads; ++i)
    s->post_threads_.emplace_back([ioc = &s->post_ioc_] { ioc->run(); });
  s->sender_ = std::make_unique<ServiceSender>(s->clients_, s->strand_, s);
  bridge::WebhookOptions o;
  o.database = s->config_.database;
  o.retry_min = std::chrono::milliseconds(s->config_.retry_min_ms);
  o.retry_max = std::chrono::milliseconds(s->config_.retry_max_ms);
  o.retry_window = std::chrono::seconds(s->config_.retry_window_s);
  o.max_in_flight = s->config_.max_in_flight;
  o.max_outbox = s->config_.max_outbox;
  o.max_registrations = s->config_.max_registrations;
  o.max_uris = s->config_.max_uris;
  std::weak_ptr<WebhookService> weak = s;
  auto w =
      bridge::Webhooks::open(std::move(o), *s->scheduler_, *s->sender_,
                             [weak](const std::string& server, const std::set<std::string>& uris) {
                               if (auto self = weak.lock()) self->on_interest(server, uris);
                             });
  if (!w) return unexpected(w.error());
  s->webhooks_ = std::move(*w);
  return s;
}

WebhookService::WebhookService(net::any_io_executor strand, config::WebhooksConfig config,
                               std::shared_ptr<Ingress> ingress)
    : strand_(std::move(strand)),
      config_(std::move(config)),
      ingress_(std::move(ingress)),
      scheduler_(std::make_unique<AsioScheduler>(strand_)),
      gauge_timer_(strand_) {}

WebhookService::~WebhookService() {
  gauge_timer_.cancel();
  webhooks_.reset();  // before the scheduler and the sender it uses
  // The delivery threads end with what they were doing cut short (close() ended the clients'
  // connections already); their clients go with the loop. They never hold the service (the
  // sender keeps it weakly, and only the service's strand locks it), so this does not run on
  // one of them.
  post_work_.reset();
  post_ioc_.stop();
  for (auto& t : post_threads_)
    t.join();
  clients_.clear();
  sender_.reset();
}

void WebhookService::start() {
  net::post(strand_, [self = shared_from_this()] {
    for (const auto& [server, uris] : self->webhooks_->interest())
      self->on_interest(server, uris);
    self->update_gauges();
  });
}

void WebhookService::update_gauges() {
  if (closed_ || !webhooks_) return;
  const auto st = webhooks_->stats();
  gauge("mcpmqtt_webhook_registrations", "Webhook registrations the bridge holds.")
      .set(static_cast<std::int64_t>(st.registrations));
  gauge("mcpmqtt_webhook_outbox_events", "Webhook events in the outbox, not delivered yet.")
      .set(static_cast<std::int64_t>(st.outbox));
  gauge("mcpmqtt_webhook_outbox_bytes",
        "Bytes of the webhook events in the outbox (held in memory as on disk; at most 256 MiB).")
      .set(static_cast<std::int64_t>(st.outbox_bytes));
  gauge("mcpmqtt_webhook_outbox_oldest_seconds",
        "Age of the oldest webhook event in the outbox, in seconds (0 when empty).")
      .set(static_cast<std::int64_t>(st.oldest_seconds));
  gauge_timer_.expires_after(kGaugeInterval);
  std::weak_ptr<WebhookService> weak = weak_from_this();
  gauge_timer_.async_wait([weak](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->update_gauges();
  });
}

// ---- upstream sessions -----------------------------------------------------------------------

void WebhookService::on_interest(const std::string& server, const std::set<std::string>& uris) {
  if (closed_) return;
  auto& u = upstreams_[server];
  u.server = server;
  u.want = uris;
  if (!u.channel && !u.want.empty()) {
    if (!u.retry) open(u);
    return;
  }
  sync(u);
}

void WebhookService::open(Upstream& u) {
  std::weak_ptr<WebhookService> weak = weak_from_this();
  const std::string server = u.server;
  bridge::LocalChannel::Peer peer;
  peer.on_message = [weak, server](jsonrpc::Message m) {
    if (auto self = weak.lock()) self->on_upstream_message(server, std::move(m));
  };
  const std::uint64_t id = u.serial = next_serial_++;
  peer.on_closed = [weak, server, id, strand = strand_](const bridge::CloseReason& why) {
    net::post(strand, [weak, server, id, why] {
      if (auto self = weak.lock()) self->on_upstream_closed(server, id, why);
    });
  };
  u.channel = bridge::LocalChannel::create("[webhooks " + server + "]", std::move(peer), 4096);
  u.ready = false;
  u.have.clear();
  u.subscribing.clear();
  u.init_id = jsonrpc::Id::integer(u.next_id++);
  ingress_->attach(server, u.channel, strand_, {}, {}, bridge::Principal::keyed("webhooks"));
  u.channel->deliver(jsonrpc::Message::request(
      *u.init_id, "initialize",
      R"({"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcp-mqtt-bridge-webhooks","version":")" MCPMQTT_VERSION
      R"("}})"));
}

void WebhookService::on_upstream_message(const std::string& server, jsonrpc::Message m) {
  auto it = upstreams_.find(server);
  if (it == upstreams_.end()) return;
  auto& u = it->second;
  if (m.is_notification()) {
    if (m.method() == "notifications/resources/updated" && webhooks_)
      webhooks_->on_event(server, m);
    else if (m.method() == "notifications/resources/list_changed" && u.ready)
      list_templates(u);
    return;
  }
  if (m.is_request()) {
    // The server asks its client: the bridge answers ping, and has nothing else.
    u.channel->deliver(m.method() == "ping"
                           ? jsonrpc::Message::result(m.id(), "{}")
                           : jsonrpc::Message::error(m.id(), jsonrpc::code::method_not_found,
                                                     "Method not found: " + m.method()));
    return;
  }
  if (u.init_id && m.id() == *u.init_id) {
    u.init_id.reset();
    if (m.kind() != jsonrpc::Kind::result) {
      log::bridge()->warn("[webhooks {}] initialize refused: {}", server, m.error().message);
      hang_up(u, {bridge::CloseReason::Kind::normal, "initialize refused: " + m.error().message});
      return;
    }
    u.channel->deliver(jsonrpc::Message::notification("notifications/initialized"));
    u.ready = true;
    log::bridge()->info("[webhooks {}] holding {} event subscriptions", server, u.want.size());
    sync(u);
    list_templates(u);
    return;
  }
  if (u.templates_id && m.id() == jsonrpc::Id::integer(*u.templates_id)) {
    on_templates(u, m);
    return;
  }
  std::string uri;
  if (m.id().is_integer()) {
    if (auto s = u.subscribing.find(m.id().as_integer()); s != u.subscribing.end()) {
      uri = s->second;
      u.subscribing.erase(s);
    }
  }
  if (m.kind() == jsonrpc::Kind::error) {
    log::bridge()->warn("[webhooks {}] the server refused a subscription change{}: {}", server,
                        uri.empty() ? "" : " (" + uri + ")", m.error().message);
    if (!uri.empty()) u.have.erase(uri);
  } else if (!uri.empty()) {
    log::bridge()->info("[webhooks {}] subscribed {}", server, uri);
  }
}

void WebhookService::hang_up(Upstream& u, const bridge::CloseReason& why) {
  if (!u.channel) return;
  // The peer's hang-up is not reported back through Peer::on_closed: report it here.
  const std::uint64_t id = u.serial;
  u.channel->hang_up(why);
  std::weak_ptr<WebhookService> weak = weak_from_this();
  net::post(strand_, [weak, server = u.server, id, why] {
    if (auto self = weak.lock()) self->on_upstream_closed(server, id, why);
  });
}

void WebhookService::on_upstream_closed(const std::string& server, std::uint64_t serial,
                                        const bridge::CloseReason& why) {
  auto it = upstreams_.find(server);
  if (it == upstreams_.end() || it->second.serial != serial) return;
  auto& u = it->second;
  u.channel.reset();
  u.ready = false;
  u.have.clear();
  if (closed_ || u.want.empty()) {
    upstreams_.erase(it);
    return;
  }
  log::bridge()->info("[webhooks {}] the session ended ({}); opening another in {} s", server,
                      why.detail, kReopenDelay.count());
  u.retry = std::make_unique<net::steady_timer>(strand_, kReopenDelay);
  std::weak_ptr<WebhookService> weak = weak_from_this();
  u.retry->async_wait([weak, server](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || self->closed_) return;
    auto i = self->upstreams_.find(server);
    if (i == self->upstreams_.end()) return;
    i->second.retry.reset();
    if (!i->second.channel && !i->second.want.empty()) self->open(i->second);
  });
}

void WebhookService::sync(Upstream& u) {
  if (!u.channel) return;
  if (u.want.empty()) {
    hang_up(u, {bridge::CloseReason::Kind::normal, "no webhook registration left"});
    return;
  }
  if (!u.ready) return;
  for (const auto& uri : u.want) {
    if (u.have.count(uri)) continue;
    u.have.insert(uri);
    u.subscribing[u.next_id] = uri;
    u.channel->deliver(jsonrpc::Message::request(jsonrpc::Id::integer(u.next_id++),
                                                 "resources/subscribe",
                                                 "{\"uri\":" + jsonrpc::quote(uri) + "}"));
  }
  for (auto h = u.have.begin(); h != u.have.end();) {
    if (u.want.count(*h)) {
      ++h;
      continue;
    }
    u.channel->deliver(jsonrpc::Message::request(jsonrpc::Id::integer(u.next_id++),
                                                 "resources/unsubscribe",
                                                 "{\"uri\":" + jsonrpc::quote(*h) + "}"));
    h = u.have.erase(h);
  }
}

void WebhookService::list_templates(Upstream& u, const std::string& cursor) {
  if (!u.channel) return;
  if (cursor.empty()) u.templates.clear();
  u.templates_id = u.next_id++;
  u.channel->deliver(jsonrpc::Message::request(
      jsonrpc::Id::integer(*u.templates_id), "resources/templates/list",
      cursor.empty() ? std::string("{}") : "{\"cursor\":" + jsonrpc::quote(cursor) + "}"));
}

void WebhookService::on_templates(Upstream& u, const jsonrpc::Message& m) {
  u.templates_id.reset();
  // A server without templates (or without resources) answers with an error: no types then.
  const auto* result = m.kind() == jsonrpc::Kind::result ? m.result_value() : nullptr;
  if (result && result->IsObject()) {
    auto list = result->FindMember("resourceTemplates");
    if (list != result->MemberEnd() && list->value.IsArray()) {
      for (const auto& t : list->value.GetArray()) {
        if (!t.IsObject()) continue;
        auto tpl = t.FindMember("uriTemplate");
        auto meta = t.FindMember("_meta");
        if (tpl == t.MemberEnd() || !tpl->value.IsString() || meta == t.MemberEnd() ||
            !meta->value.IsObject())
          continue;
        auto type = meta->value.FindMember("webhookType");
        if (type == meta->value.MemberEnd() || !type->value.IsString()) continue;
        u.templates.push_back(
            {std::string(tpl->value.GetString(), tpl->value.GetStringLength()),
             std::string(type->value.GetString(), type->value.GetStringLength())});
      }
    }
    auto next = result->FindMember("nextCursor");
    // Pages are followed up to a bound: a server that never ends its list is not a reason to
    // loop for ever.
    if (next != result->MemberEnd() && next->value.IsString() && next->value.GetStringLength() &&
        u.templates.size() < 10000) {
      list_templates(u, std::string(next->value.GetString(), next->value.GetStringLength()));
      return;
    }
  }
  if (!u.templates.empty())
    log::bridge()->info("[webhooks {}] {} event templates name their webhook type", u.server,
                        u.templates.size());
  webhooks_->set_event_types(u.server, std::move(u.templates));
  u.templates.clear();
}

// ---- requests of ingress clients -------------------------------------------------------------

void WebhookService::handle(std::string server_name, std::string principal,
                            jsonrpc::Message request, std::function<void(jsonrpc::Message)> reply) {
  net::post(strand_, [self = shared_from_this(), server_name = std::move(server_name),
                      principal = std::move(principal), request = std::move(request),
                      reply = std::move(reply)]() mutable {
    const auto& id = request.id();
    if (self->closed_ || !self->webhooks_) {
      reply(
          jsonrpc::Message::error(id, jsonrpc::code::connection_closed, "the bridge is stopping"));
      return;
    }
    const std::string method = request.method();
    if (method == events::kRegister) {
      self->do_register(std::move(server_name), std::move(principal), std::move(request),
                        std::move(reply));
      return;
    }
    if (method == events::kDeregister) {
      auto r = self->webhooks_->deregister(principal, server_name, request);
      reply(r ? jsonrpc::Message::result(id, *r) : jsonrpc::Message::error(id, r.error()));
      return;
    }
    // resources/list: the principal's subscription:// resources, for the ingress to append.
    if (method == "resources/list") {
      reply(jsonrpc::Message::result(
          id, R"({"resources":[)" + self->webhooks_->list(principal, server_name) + "]}"));
      return;
    }
    // resources/read of subscription://
    const auto* params = request.params();
    std::string uri;
    if (params && params->IsObject()) {
      auto u = params->FindMember("uri");
      if (u != params->MemberEnd() && u->value.IsString())
        uri.assign(u->value.GetString(), u->value.GetStringLength());
    }
    auto r = self->webhooks_->read(principal, server_name, uri);
    reply(r ? jsonrpc::Message::result(id, *r) : jsonrpc::Message::error(id, r.error()));
  });
}

void WebhookService::do_register(std::string server_name, std::string principal,
                                 jsonrpc::Message request,
                                 std::function<void(jsonrpc::Message)> reply) {
  const auto id = request.id();
  auto refuse = [&](const std::string& why) {
    reply(jsonrpc::Message::error(id, jsonrpc::code::invalid_params,
                                  "resources/subscriptions/register: " + why));
  };
  const auto* params = request.params();
  std::string target;
  if (params && params->IsObject()) {
    auto t = params->FindMember("targetUri");
    if (t != params->MemberEnd() && t->value.IsString())
      target.assign(t->value.GetString(), t->value.GetStringLength());
  }
  if (target.empty()) return refuse("params.targetUri (the URL to POST events to) is missing");
  auto url = http::parse_url(target);
  if (!url) return refuse("targetUri " + url.error());
  if (!url->tls && !config_.allow_http)
    return refuse("targetUri must be https (events.webhooks.allow_http is off)");
  // Resolve now and check every address (no SSRF through the bridge); the client checks again
  // before each connection.
  auto resolver = std::make_shared<net::ip::tcp::resolver>(strand_);
  resolver->async_resolve(
      url->host, url->service(),
      [self = shared_from_this(), resolver, server_name = std::move(server_name),
       principal = std::move(principal), request = std::move(request), reply = std::move(reply),
       target, host = url->host](const boost::system::error_code& ec,
                                 const net::ip::tcp::resolver::results_type& results) {
        const auto rid = request.id();
        auto refused = [&](const std::string& why) {
          reply(jsonrpc::Message::error(
              rid, jsonrpc::code::invalid_params,
              "resources/subscriptions/register: targetUri refused: " + why));
        };
        if (ec) return refused("cannot resolve host \"" + host + "\": " + ec.message());
        for (const auto& e : results) {
          auto why = webhook_address_refusal(e.endpoint().address(), self->config_.allow_targets);
          if (!why.empty()) return refused(why);
        }
        if (self->closed_ || !self->webhooks_)
          return reply(jsonrpc::Message::error(rid, jsonrpc::code::connection_closed,
                                               "the bridge is stopping"));
        auto r = self->webhooks_->register_subscription(principal, server_name, request, target);
        reply(r ? jsonrpc::Message::result(rid, *r) : jsonrpc::Message::error(rid, r.error()));
      });
}

void WebhookService::close(std::function<void()> done) {
  net::post(strand_, [self = shared_from_this(), done = std::move(done)] {
    self->closed_ = true;
    self->gauge_timer_.cancel();
    if (self->webhooks_) self->webhooks_->close();
    for (const auto& c : self->clients_)
      net::post(c->executor(), [c] { c->close(); });
    for (auto& [server, u] : self->upstreams_) {
      if (u.retry) u.retry->cancel();
      if (u.channel) u.channel->hang_up({bridge::CloseReason::Kind::shutdown, "the bridge stops"});
      u.channel.reset();
    }
    if (done) done();
  });
}

}  // namespace mcpmqtt::directions

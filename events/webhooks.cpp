#include "events/webhooks.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include <rapidjson/document.h>

#include "bridge/jsonrpc/json_access.hpp"
#include "bridge/jsonrpc/raw_json.hpp"
#include "bridge/modern/request_state.hpp"
#include "bridge/protocol/events.hpp"
#include "common/hex.hpp"
#include "common/log.hpp"

namespace mcpmqtt::bridge {

namespace {

constexpr std::string_view kEventScheme = "event://";

using jsonrpc::member;

std::string iso8601(std::int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms % 1000));
  return out;
}

jsonrpc::Error invalid(std::string message) {
  return {jsonrpc::code::invalid_params, std::move(message), {}};
}

}  // namespace

// ---- opening ---------------------------------------------------------------------------------

Webhooks::Webhooks(Options options, Scheduler& scheduler, WebhookSender& sender,
                   InterestChanged on_interest, std::unique_ptr<WebhookStore> store)
    : options_(std::move(options)),
      on_interest_(std::move(on_interest)),
      store_(std::move(store)),
      outbox_(options_, scheduler, sender, *store_, registrations_,
              [this](const std::string& id) { remove_registration(id); }) {}

Webhooks::~Webhooks() {
  close();
}

Expected<std::unique_ptr<Webhooks>, std::string> Webhooks::open(Options options,
                                                                Scheduler& scheduler,
                                                                WebhookSender& sender,
                                                                InterestChanged on_interest) {
  auto store = WebhookStore::open(options.database);
  if (!store) return unexpected(std::move(store.error()));
  std::unique_ptr<Webhooks> w(new Webhooks(std::move(options), scheduler, sender,
                                           std::move(on_interest), std::move(store).value()));
  for (auto& r : w->store_->load_registrations()) {
    const std::string id = r.id;
    w->registrations_[id] = std::move(r);
  }
  w->outbox_.load(w->store_->load_outbox());
  if (!w->registrations_.empty() || w->outbox_.size() != 0)
    log::bridge()->info("[webhooks] {} registrations, {} events waiting in {}",
                        w->registrations_.size(), w->outbox_.size(), w->options_.database);
  w->outbox_.pump();
  return w;
}

std::map<std::string, std::set<std::string>> Webhooks::interest() const {
  std::map<std::string, std::set<std::string>> out;
  for (const auto& [id, r] : registrations_)
    out[r.server].insert(r.uris.begin(), r.uris.end());
  return out;
}

void Webhooks::interest_changed(const std::string& server) {
  std::set<std::string> uris;
  for (const auto& [id, r] : registrations_)
    if (r.server == server) uris.insert(r.uris.begin(), r.uris.end());
  if (on_interest_) on_interest_(server, uris);
}

// ---- registration ----------------------------------------------------------------------------

Expected<std::string, jsonrpc::Error> Webhooks::register_subscription(
    const std::string& principal, const std::string& server_name, const jsonrpc::Message& request,
    const std::string& target) {
  const auto* params = request.params();
  const auto* uris_v = member(params, "uris");
  if (!uris_v || !uris_v->IsArray() || uris_v->Empty())
    return unexpected(invalid(
        "resources/subscriptions/register needs params.uris, a non-empty array of event:// URIs"));
  if (uris_v->Size() > options_.max_uris)
    return unexpected(invalid("resources/subscriptions/register: " +
                              std::to_string(uris_v->Size()) + " URIs; the bridge takes at most " +
                              std::to_string(options_.max_uris) + " per registration"));
  std::vector<std::string> uris;
  for (const auto& u : uris_v->GetArray()) {
    if (!u.IsString() ||
        std::string_view(u.GetString(), u.GetStringLength()).substr(0, kEventScheme.size()) !=
            kEventScheme)
      return unexpected(invalid(
          "resources/subscriptions/register: every entry of params.uris must be an event:// URI "
          "(SEP-1803 §Out-of-Band)"));
    std::string s(u.GetString(), u.GetStringLength());
    if (std::find(uris.begin(), uris.end(), s) == uris.end()) uris.push_back(std::move(s));
  }
  if (registrations_.size() >= options_.max_registrations)
    return unexpected(jsonrpc::Error{
        jsonrpc::code::connection_closed,
        "the bridge holds the maximum of " + std::to_string(options_.max_registrations) +
            " webhook registrations (events.webhooks.max_registrations); deregister one first",
        {}});
  const auto id_bytes = random_bytes(16);
  const auto key = random_bytes(32);
  if (!id_bytes || !key)
    return unexpected(jsonrpc::Error{
        jsonrpc::code::internal_error, "no random source for the webhook secret", {}});
  WebhookRegistration r;
  r.id = hex_encode(*id_bytes);
  r.principal = principal;
  r.server = server_name;
  r.target = target;
  r.secret = "whsec_" + base64(*key);
  r.key = *key;
  r.uris = std::move(uris);
  r.created_ms = wall_ms();
  r.last_status = "never";
  if (auto why = store_->insert_registration(r))
    return unexpected(jsonrpc::Error{
        jsonrpc::code::internal_error, "the bridge could not store the registration: " + *why, {}});
  const std::string result =
      R"({"subscription":{"uri":)" + jsonrpc::quote(std::string(kSubscriptionScheme) + r.id) +
      R"(,"eventUris":)" + webhook_uris_json(r.uris) + R"(,"targetUri":)" +
      jsonrpc::quote(r.target) + R"(,"webhookSecret":{"type":"standard","key":)" +
      jsonrpc::quote(r.secret) + "}}}";
  log::bridge()->info("[webhooks] registered {}{} for {} on {} → {}", kSubscriptionScheme, r.id,
                      webhook_uris_json(r.uris), server_name, r.shown_target());
  const std::string server = r.server;
  registrations_[r.id] = std::move(r);
  interest_changed(server);
  return result;
}

Expected<std::string, jsonrpc::Error> Webhooks::deregister(const std::string& principal,
                                                           const std::string& server_name,
                                                           const jsonrpc::Message& request) {
  const auto* uri = member(request.params(), "uri");
  if (!uri || !uri->IsString())
    return unexpected(
        invalid("resources/subscriptions/deregister needs params.uri, the subscription:// URI that "
                "register returned"));
  const std::string_view u(uri->GetString(), uri->GetStringLength());
  const std::string id(u.substr(0, kSubscriptionScheme.size()) == kSubscriptionScheme
                           ? u.substr(kSubscriptionScheme.size())
                           : std::string_view());
  auto it = registrations_.find(id);
  // Someone else's registration is reported as unknown: others cannot learn it exists.
  if (it == registrations_.end() || it->second.principal != principal ||
      it->second.server != server_name)
    return unexpected(invalid("no webhook subscription " + std::string(u) + " of yours"));
  log::bridge()->info("[webhooks] deregistered {}", u);
  remove_registration(id);
  return std::string("{}");
}

Expected<std::string, jsonrpc::Error> Webhooks::read(const std::string& principal,
                                                     const std::string& server_name,
                                                     const std::string& uri) {
  const std::string id = uri.substr(std::min(uri.size(), kSubscriptionScheme.size()));
  auto it = registrations_.find(id);
  if (it == registrations_.end() || it->second.principal != principal ||
      it->second.server != server_name)
    return unexpected(jsonrpc::Error{-32002, "Resource not found: " + uri,
                                     R"({"uri":)" + jsonrpc::quote(uri) + "}"});
  const auto& r = it->second;
  const std::size_t waiting = outbox_.waiting_for(id);
  const std::string text = R"({"uri":)" + jsonrpc::quote(uri) + R"(,"eventUris":)" +
                           webhook_uris_json(r.uris) + R"(,"targetUri":)" +
                           jsonrpc::quote(r.target) + R"(,"lastDelivery":{"status":)" +
                           jsonrpc::quote(r.last_status) + R"(,"at":)" +
                           (r.last_ms ? jsonrpc::quote(iso8601(r.last_ms)) : std::string("null")) +
                           R"(},"waiting":)" + std::to_string(waiting) + "}";
  return R"({"contents":[{"uri":)" + jsonrpc::quote(uri) +
         R"(,"mimeType":"application/json","text":)" + jsonrpc::quote(text) + "}]}";
}

std::string Webhooks::list(const std::string& principal, const std::string& server_name) const {
  std::string out;
  for (const auto& [id, r] : registrations_) {
    if (r.principal != principal || r.server != server_name) continue;
    if (!out.empty()) out += ',';
    const std::string uri = std::string(kSubscriptionScheme) + id;
    out += R"({"uri":)" + jsonrpc::quote(uri) + R"(,"name":)" +
           jsonrpc::quote("webhook " + id.substr(0, 8)) + R"(,"title":)" +
           jsonrpc::quote("Webhook to " + r.shown_target()) + R"(,"description":)" +
           jsonrpc::quote("Out-of-band subscription of " + webhook_uris_json(r.uris) +
                          ", served by mcp-mqtt-bridge; read it for its last delivery") +
           R"(,"mimeType":"application/json"})";
  }
  return out;
}

void Webhooks::remove_registration(const std::string& id) {
  auto it = registrations_.find(id);
  if (it == registrations_.end()) return;
  const std::string server = it->second.server;
  registrations_.erase(it);
  store_->delete_registration(id);
  outbox_.drop_registration(id);
  interest_changed(server);
  outbox_.pump();
}

// ---- events ----------------------------------------------------------------------------------

void Webhooks::set_event_types(const std::string& server_name, std::vector<EventType> types) {
  if (types.empty()) {
    event_types_.erase(server_name);
  } else {
    event_types_[server_name] = std::move(types);
  }
}

void Webhooks::on_event(const std::string& server_name, const jsonrpc::Message& updated) {
  if (outbox_.closed()) return;
  const auto raw_params = raw_json::member(updated.text(), "params");
  if (!raw_params) return;
  const auto uri_raw = raw_json::member(*raw_params, "uri");
  const auto* uri_v = member(updated.params(), "uri");
  if (!uri_raw || !uri_v || !uri_v->IsString()) return;
  const std::string_view uri(uri_v->GetString(), uri_v->GetStringLength());
  const auto payload = raw_json::member(*raw_params, "payload");
  std::vector<const WebhookRegistration*> hit;
  for (const auto& [id, r] : registrations_) {
    if (r.server != server_name) continue;
    for (const auto& s : r.uris) {
      if (events::covers(s, uri)) {
        hit.push_back(&r);
        break;
      }
    }
  }
  if (hit.empty()) return;
  const std::int64_t now = wall_ms();
  const std::string timestamp = jsonrpc::quote(iso8601(now));
  std::string type = "\"notifications/resources/updated\"";
  if (auto t = event_types_.find(server_name); t != event_types_.end()) {
    for (const auto& et : t->second) {
      if (events::template_matches(et.uri_template, uri)) {
        type = jsonrpc::quote(et.type);
        break;
      }
    }
  }
  // Standard Webhooks payload: type, timestamp, data (the event as the server wrote it).
  outbox_.add(hit, now, updated.size(), uri, [&](const WebhookRegistration& r) {
    return R"({"type":)" + type + R"(,"timestamp":)" + timestamp + R"(,"data":{"subscription":)" +
           jsonrpc::quote(std::string(kSubscriptionScheme) + r.id) + R"(,"uri":)" +
           std::string(*uri_raw) +
           (payload ? R"(,"payload":)" + std::string(*payload) : std::string()) + "}}";
  });
}

// ---- state -----------------------------------------------------------------------------------

Webhooks::Stats Webhooks::stats() const {
  Stats s;
  s.registrations = registrations_.size();
  s.outbox = outbox_.size();
  s.outbox_bytes = outbox_.bytes();
  s.in_flight = outbox_.in_flight();
  if (outbox_.size() != 0)
    s.oldest_seconds = static_cast<double>(wall_ms() - outbox_.oldest_ms()) / 1000.0;
  return s;
}

void Webhooks::close() {
  outbox_.close();
}

}  // namespace mcpmqtt::bridge

#include "bridge/relay/subscription_hub.hpp"

#include <algorithm>

#include "bridge/jsonrpc/json_access.hpp"
#include "bridge/jsonrpc/raw_json.hpp"
#include "bridge/protocol/events.hpp"

namespace mcpmqtt::bridge {

namespace {

constexpr std::string_view kListen = "subscriptions/listen";
constexpr std::string_view kAcknowledged = "notifications/subscriptions/acknowledged";
constexpr std::string_view kUpdated = "notifications/resources/updated";

using jsonrpc::member;
using jsonrpc::to_json;

std::string_view sv(const rapidjson::Value& v) {
  return {v.GetString(), v.GetStringLength()};
}

std::optional<jsonrpc::Id> id_of(const rapidjson::Value& v) {
  if (v.IsString()) return jsonrpc::Id::string(std::string(sv(v)));
  if (v.IsInt64()) return jsonrpc::Id::integer(v.GetInt64());
  return std::nullopt;
}

// The members of an object as JSON text without the braces, leaving out `skip`:
// `"a":1,"b":2`. Empty for an empty object or a non-object.
std::string members_without(const rapidjson::Value* obj, std::string_view skip) {
  std::string out;
  if (!obj || !obj->IsObject()) return out;
  for (auto it = obj->MemberBegin(); it != obj->MemberEnd(); ++it) {
    if (sv(it->name) == skip) continue;
    if (!out.empty()) out.push_back(',');
    out += jsonrpc::quote(sv(it->name));
    out.push_back(':');
    out += to_json(it->value);
  }
  return out;
}

// The members of an object's text as written, without `skip` (raw_json: payloads keep their
// escapes, numbers and key order, SEP-1803); nullopt when the text cannot be read so.
std::optional<std::string> raw_members_without(std::string_view obj, std::string_view skip) {
  auto all = raw_json::members(obj);
  if (!all) return std::nullopt;
  std::string out;
  for (const auto& m : *all) {
    if (m.name == skip) continue;
    if (!out.empty()) out.push_back(',');
    out.push_back('"');
    out.append(m.name);
    out += "\":";
    out.append(m.value);
  }
  return out;
}

// A notification tagged for listens: the params with `_meta.<subscriptionId>` set, built once
// as two halves around the id so that each copy costs one concatenation. The params' members
// are copied as written; only when that fails are they serialized from the document.
class Tagger {
 public:
  explicit Tagger(const jsonrpc::Message& m) {
    const auto* params = m.params();
    std::string meta, rest;
    const auto raw_params = raw_json::member(m.text(), "params");
    std::optional<std::string> raw_rest, raw_meta = std::string();
    if (raw_params) {
      raw_rest = raw_members_without(*raw_params, "_meta");
      if (auto raw_m = raw_json::member(*raw_params, "_meta"))
        raw_meta = raw_members_without(*raw_m, kSubscriptionIdKey);
    }
    if (raw_rest && raw_meta) {
      meta = std::move(*raw_meta);
      rest = std::move(*raw_rest);
    } else {
      meta = members_without(member(params, "_meta"), kSubscriptionIdKey);
      rest = members_without(params, "_meta");
    }
    head_ = "{\"_meta\":{" + jsonrpc::quote(kSubscriptionIdKey) + ":";
    tail_ = (meta.empty() ? "" : "," + meta) + "}" + (rest.empty() ? "" : "," + rest) + "}";
    method_ = m.method();
  }
  jsonrpc::Message for_listen(const jsonrpc::Id& id) const {
    return jsonrpc::Message::built_notification(method_, head_ + id.to_json() + tail_, id);
  }

 private:
  std::string method_, head_, tail_;
};

}  // namespace

std::optional<jsonrpc::Id> subscription_id(const jsonrpc::Message& m) {
  return m.subscription_id();
}

SubscriptionHub::SubscriptionHub(Limits limits) : limits_(limits) {}

std::size_t SubscriptionHub::interest(const std::string& uri) const {
  auto it = listen_interest_.find(uri);
  return legacy_.count(uri) + (it == listen_interest_.end() ? 0 : it->second);
}

bool SubscriptionHub::subscribed_upstream(const std::string& uri) const {
  auto it = upstream_.find(uri);
  return it != upstream_.end() && it->second != Upstream::none;
}

SubscriptionHub::Listen* SubscriptionHub::find_listen(const jsonrpc::Id& id, std::uint64_t* key) {
  auto it = listen_keys_.find(id);
  if (it == listen_keys_.end()) return nullptr;
  if (key) *key = it->second;
  return &listens_.at(it->second);
}

// ---- client → server -----------------------------------------------------------------------

SubscriptionHub::Actions SubscriptionHub::from_client(const jsonrpc::Message& m) {
  Actions out;
  if (m.is_request()) {
    const auto& method = m.method();
    if (method == "initialize") {
      initialize_id_ = m.id();
    } else if (method == kListen) {
      return open_listen(m);
    } else if (method == "resources/subscribe") {
      // The server answers the client's own request; its success makes the URI one the
      // session subscribed to (see from_server).
      if (const auto* uri = member(m.params(), "uri"); uri && uri->IsString())
        legacy_pending_[m.id()] = std::string(sv(*uri));
    } else if (method == "resources/unsubscribe") {
      const auto* uri = member(m.params(), "uri");
      if (!uri || !uri->IsString()) return out;
      const std::string u(sv(*uri));
      legacy_.erase(u);
      auto li = listen_interest_.find(u);
      if (li != listen_interest_.end() && li->second > 0) {
        // Listens still need the server-side subscription: the client's own ends here.
        out.consumed = true;
        out.to_client.push_back(jsonrpc::Message::result(m.id(), "{}"));
      } else {
        upstream_.erase(u);
      }
    }
    return out;
  }
  if (m.is_notification() && m.method() == "notifications/cancelled") {
    // 000 §Cancellation (stdio): notifications/cancelled naming the listen request ends it.
    const auto* rid = member(m.params(), "requestId");
    const auto id = rid ? id_of(*rid) : std::nullopt;
    std::uint64_t key = 0;
    if (id && find_listen(*id, &key)) {
      out.consumed = true;  // the server never saw the listen
      end_listen(key, out);
    }
  }
  return out;
}

SubscriptionHub::Actions SubscriptionHub::open_listen(const jsonrpc::Message& m) {
  Actions out;
  out.consumed = true;
  auto refuse = [&](int code, const std::string& why) {
    out.to_client.push_back(jsonrpc::Message::error(m.id(), code, why));
    return out;
  };
  if (find_listen(m.id()))
    return refuse(jsonrpc::code::invalid_request, "subscriptions/listen: request id " +
                                                      m.id().to_string() +
                                                      " already names an open subscription");
  if (listens_.size() >= limits_.max_listens)
    return refuse(jsonrpc::code::connection_closed,
                  "subscriptions/listen: this session already has " +
                      std::to_string(listens_.size()) +
                      " open subscriptions, the most the bridge keeps per session; cancel one "
                      "first");
  Filter want;
  if (const auto* n = member(m.params(), "notifications")) {
    if (!n->IsObject())
      return refuse(jsonrpc::code::invalid_params,
                    "subscriptions/listen: params.notifications must be an object");
    for (auto [name, flag] : {std::pair{"toolsListChanged", &want.tools},
                              std::pair{"promptsListChanged", &want.prompts},
                              std::pair{"resourcesListChanged", &want.resources}}) {
      if (const auto* v = member(n, name)) {
        if (!v->IsBool())
          return refuse(jsonrpc::code::invalid_params,
                        std::string("subscriptions/listen: params.notifications.") + name +
                            " must be a boolean");
        *flag = v->GetBool();
      }
    }
    if (const auto* v = member(n, "resourceSubscriptions")) {
      if (!v->IsArray())
        return refuse(jsonrpc::code::invalid_params,
                      "subscriptions/listen: params.notifications.resourceSubscriptions must "
                      "be an array of resource URIs");
      for (const auto& u : v->GetArray()) {
        if (!u.IsString())
          return refuse(jsonrpc::code::invalid_params,
                        "subscriptions/listen: params.notifications.resourceSubscriptions must "
                        "hold strings (resource URIs)");
        std::string uri(sv(u));
        if (std::find(want.uris.begin(), want.uris.end(), uri) == want.uris.end())
          want.uris.push_back(std::move(uri));
      }
      if (want.uris.size() > limits_.max_uris_per_listen)
        return refuse(jsonrpc::code::invalid_params,
                      "subscriptions/listen: " + std::to_string(want.uris.size()) +
                          " resource URIs in one subscription; the bridge takes at most " +
                          std::to_string(limits_.max_uris_per_listen));
    }
  }

  const std::uint64_t key = next_key_++;
  Listen& l = listens_[key];
  listen_keys_[m.id()] = key;
  l.id = m.id();
  l.requested = want;
  // Only what the server declared (000 §Acknowledgment: unsupported types are omitted).
  l.honoured.tools = want.tools && caps_.tools;
  l.honoured.prompts = want.prompts && caps_.prompts;
  l.honoured.resources = want.resources && caps_.resources;
  if (caps_.subscribe) {
    for (const auto& uri : want.uris) {
      ++listen_interest_[uri];
      auto& state = upstream_[uri];
      if (state == Upstream::subscribed) {
        honour(key, l, uri);
        continue;
      }
      if (state == Upstream::none) {
        state = Upstream::subscribing;
        out.subscribe.push_back(uri);
      }
      l.waiting.insert(uri);
    }
  }
  if (l.waiting.empty()) acknowledge(l, out);
  return out;
}

void SubscriptionHub::honour(std::uint64_t key, Listen& l, const std::string& uri) {
  l.uris.insert(uri);
  by_uri_[uri][key] = &l;
}

void SubscriptionHub::acknowledge(Listen& l, Actions& out) {
  l.acknowledged = true;
  // Honoured URIs in the order the client asked for them.
  l.honoured.uris.clear();
  for (const auto& uri : l.requested.uris)
    if (l.uris.count(uri)) l.honoured.uris.push_back(uri);
  std::string filter;
  auto add = [&](std::string_view name, const std::string& value) {
    filter += (filter.empty() ? "" : ",") + jsonrpc::quote(name) + ":" + value;
  };
  if (l.honoured.tools) add("toolsListChanged", "true");
  if (l.honoured.prompts) add("promptsListChanged", "true");
  if (l.honoured.resources) add("resourcesListChanged", "true");
  if (!l.honoured.uris.empty()) {
    std::string list;
    for (const auto& uri : l.honoured.uris)
      list += (list.empty() ? "" : ",") + jsonrpc::quote(uri);
    add("resourceSubscriptions", "[" + list + "]");
  }
  // 000 §Acknowledgment: the first message of the stream.
  out.to_client.push_back(jsonrpc::Message::notification(
      kAcknowledged, "{\"_meta\":{" + jsonrpc::quote(kSubscriptionIdKey) + ":" + l.id.to_json() +
                         "},\"notifications\":{" + filter + "}}"));
}

void SubscriptionHub::end_listen(std::uint64_t key, Actions& out) {
  auto it = listens_.find(key);
  if (it == listens_.end()) return;
  for (const auto& uri : it->second.uris) {
    auto by = by_uri_.find(uri);
    if (by == by_uri_.end()) continue;
    by->second.erase(key);
    if (by->second.empty()) by_uri_.erase(by);
  }
  Listen l = std::move(it->second);
  listens_.erase(it);
  listen_keys_.erase(l.id);
  if (!caps_.subscribe) return;
  for (const auto& uri : l.requested.uris)
    release(uri, out);
}

// One listen less is interested in `uri`: the last interest ends the server-side subscription.
void SubscriptionHub::release(const std::string& uri, Actions& out) {
  auto li = listen_interest_.find(uri);
  if (li == listen_interest_.end()) return;
  if (--li->second == 0) listen_interest_.erase(li);
  if (interest(uri) > 0) return;
  auto up = upstream_.find(uri);
  if (up == upstream_.end()) return;
  // A subscribe still in flight is undone when its outcome arrives (subscribed()).
  if (up->second == Upstream::subscribed) {
    upstream_.erase(up);
    out.unsubscribe.push_back(uri);
  }
}

SubscriptionHub::Actions SubscriptionHub::subscribed(const std::string& uri,
                                                     const std::optional<std::string>& error) {
  Actions out;
  auto up = upstream_.find(uri);
  if (!error) {
    if (interest(uri) == 0) {
      // Everyone who wanted it left meanwhile.
      if (up != upstream_.end()) upstream_.erase(up);
      out.unsubscribe.push_back(uri);
      return out;
    }
    upstream_[uri] = Upstream::subscribed;
  } else if (up != upstream_.end() && up->second == Upstream::subscribing) {
    upstream_.erase(up);  // a later listen may try again
  }
  for (auto& [key, l] : listens_) {
    if (!l.waiting.erase(uri)) continue;
    if (!error) honour(key, l, uri);
    if (l.waiting.empty() && !l.acknowledged) acknowledge(l, out);
  }
  return out;
}

// ---- server → client -----------------------------------------------------------------------

SubscriptionHub::Actions SubscriptionHub::from_server(const jsonrpc::Message& m) {
  Actions out;
  if (m.is_response()) {
    if (initialize_id_ && m.id() == *initialize_id_) {
      initialize_id_.reset();
      if (m.kind() == jsonrpc::Kind::result) {
        // From the text: a document built here would stay with the response, which the HTTP
        // session keeps for Last-Event-ID (about 0.8 KiB of every idle session, issue 34).
        const auto caps = raw_json::member(m.text(), {"result", "capabilities"});
        auto flag = [&](std::string_view cap, std::string_view name) {
          return caps && raw_json::member(*caps, {cap, name}) == "true";
        };
        caps_.tools = flag("tools", "listChanged");
        caps_.prompts = flag("prompts", "listChanged");
        caps_.resources = flag("resources", "listChanged");
        caps_.subscribe = flag("resources", "subscribe");
      }
    } else if (auto it = legacy_pending_.find(m.id()); it != legacy_pending_.end()) {
      if (m.kind() == jsonrpc::Kind::result) {
        legacy_.insert(it->second);
        upstream_[it->second] = Upstream::subscribed;
      }
      legacy_pending_.erase(it);
    }
    return out;
  }
  if (!m.is_notification()) return out;
  const auto& method = m.method();
  if (method == kUpdated || method == "notifications/tools/list_changed" ||
      method == "notifications/prompts/list_changed" ||
      method == "notifications/resources/list_changed") {
    out.consumed = true;
    fan_out(m, out);
  }
  return out;
}

void SubscriptionHub::fan_out(const jsonrpc::Message& m, Actions& out) {
  const auto& method = m.method();
  std::optional<std::string> uri;
  if (method == kUpdated) {
    const auto* u = member(m.params(), "uri");
    if (!u || !u->IsString()) return;  // malformed: nobody can have asked for it
    uri = std::string(sv(*u));
    // The capability topic is shared by all clients of the server: only a session whose
    // subscription covers this URI hears of it (design.md, routing rules), once however many
    // of its subscriptions do (SEP-1803: the URI may be a sub-resource of the subscribed one).
    for (auto candidate : events::covering(*uri)) {
      if (legacy_.count(std::string(candidate))) {
        out.to_client.push_back(m);
        break;
      }
    }
  } else {
    out.to_client.push_back(m);  // list changes concern every session of the server
  }
  std::optional<Tagger> tagger;
  auto tag_for = [&](const Listen& l) {
    if (!l.acknowledged) return;  // the acknowledgement comes first (000)
    if (!tagger) tagger.emplace(m);
    out.to_client.push_back(tagger->for_listen(l.id));
  };
  if (uri) {
    // The listens of every covering URI, each once, in opening order. Most updates hit one
    // URI's listens only: those are visited as they are, without merging.
    const std::map<std::uint64_t, Listen*>* only = nullptr;
    std::map<std::uint64_t, Listen*> merged;
    for (auto candidate : events::covering(*uri)) {
      auto by = by_uri_.find(std::string(candidate));
      if (by == by_uri_.end()) continue;
      if (!only && merged.empty()) {
        only = &by->second;
        continue;
      }
      if (only) {
        merged = *only;
        only = nullptr;
      }
      merged.insert(by->second.begin(), by->second.end());
    }
    for (const auto& [key, l] : only ? *only : merged)
      tag_for(*l);
    return;
  }
  const bool tools = method == "notifications/tools/list_changed";
  const bool prompts = method == "notifications/prompts/list_changed";
  for (const auto& [key, l] : listens_) {
    if (tools ? l.honoured.tools : prompts ? l.honoured.prompts : l.honoured.resources) tag_for(l);
  }
}

// ---- the end -------------------------------------------------------------------------------

std::vector<jsonrpc::Message> SubscriptionHub::close(bool graceful, const std::string& why) {
  std::vector<jsonrpc::Message> out;
  for (auto& [key, l] : listens_) {
    out.push_back(graceful ? jsonrpc::Message::result(l.id, "{}")
                           : jsonrpc::Message::error(l.id, jsonrpc::code::connection_closed,
                                                     "the subscription ended: " + why));
  }
  listens_.clear();
  by_uri_.clear();
  listen_keys_.clear();
  listen_interest_.clear();
  legacy_.clear();
  upstream_.clear();
  return out;
}

}  // namespace mcpmqtt::bridge

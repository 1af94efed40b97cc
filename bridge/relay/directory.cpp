#include "bridge/relay/directory.hpp"

#include <ctime>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "bridge/jsonrpc/jsonrpc.hpp"

namespace mcpmqtt::bridge {

namespace {

std::string iso8601(std::chrono::system_clock::time_point t) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

Directory::Change Directory::apply_presence(std::string_view server_id,
                                            std::string_view server_name, std::string_view payload,
                                            std::string* why, bool live) {
  const std::string id(server_id), name(server_name);
  if (payload.empty()) {
    std::vector<InstanceListener> last;
    {
      std::lock_guard lock(mu_);
      auto it = by_name_.find(name);
      if (it == by_name_.end() || it->second.erase(id) == 0) {
        if (why) *why = "offline for an instance that was not known";
        return Change::ignored;
      }
      --count_;
      if (it->second.empty()) {
        by_name_.erase(it);
        round_robin_.erase(name);
      }
      last = take_listeners(name, id);
    }
    for (auto& fn : last)
      fn(InstanceEvent::offline, nullptr);
    return Change::removed;
  }

  auto parsed = jsonrpc::Message::parse(std::string(payload));
  if (!parsed) {
    if (why) *why = "presence payload is not JSON-RPC: " + parsed.error().error.message;
    return Change::ignored;
  }
  const auto& msg = *parsed;
  if (!msg.is_notification() || msg.method() != "notifications/server/online") {
    if (why) *why = "presence payload is not a notifications/server/online notification";
    return Change::ignored;
  }
  ServerInstance inst;
  inst.server_id = id;
  inst.server_name = name;
  inst.online_since = std::chrono::system_clock::now();
  inst.presence.assign(payload);
  if (const auto* params = msg.params(); params && params->IsObject()) {
    if (auto d = params->FindMember("description");
        d != params->MemberEnd() && d->value.IsString()) {
      inst.description.assign(d->value.GetString(), d->value.GetStringLength());
    }
    if (auto m = params->FindMember("meta"); m != params->MemberEnd() && m->value.IsObject()) {
      inst.meta_json = jsonrpc::to_json(m->value);
    }
    if (auto n = params->FindMember("server_name");
        n != params->MemberEnd() && n->value.IsString()) {
      // The topic is authoritative: it is what clients will address.
      if (std::string_view(n->value.GetString(), n->value.GetStringLength()) != name && why) {
        *why = "params.server_name \"" + std::string(n->value.GetString()) +
               "\" differs from the topic's server-name; using the topic's";
      }
    }
  }

  std::vector<std::function<void()>> to_notify;
  std::vector<InstanceListener> again;
  Change change;
  {
    std::lock_guard lock(mu_);
    auto named = by_name_.find(name);
    auto existing =
        named == by_name_.end() ? decltype(named->second.begin()){} : named->second.find(id);
    if (named != by_name_.end() && existing != named->second.end()) {
      inst.online_since = existing->second.online_since;
      change = live && existing->second.presence == inst.presence ? Change::announced_again
                                                                  : Change::updated;
      existing->second = std::move(inst);
      if (change == Change::announced_again) {
        if (auto l = listeners_.find({name, id}); l != listeners_.end()) {
          for (const auto& [listen_id, fn] : l->second)
            again.push_back(fn);
        }
      }
    } else if (count_ >= max_instances_) {
      if (why)
        *why = "the directory holds its maximum of " + std::to_string(max_instances_) +
               " server instances; this one is ignored";
      return Change::ignored;
    } else {
      by_name_[name].emplace(id, std::move(inst));
      ++count_;
      change = Change::added;
    }
    for (auto it = watches_.begin(); it != watches_.end();) {
      if (it->second.server_name == name) {
        to_notify.push_back(std::move(it->second.fn));
        it = watches_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& fn : to_notify)
    fn();
  for (auto& fn : again)
    fn(InstanceEvent::announced_again, nullptr);
  return change;
}

void Directory::clear() {
  std::vector<InstanceListener> last;
  {
    std::lock_guard lock(mu_);
    by_name_.clear();
    round_robin_.clear();
    count_ = 0;
    for (auto& [key, listeners] : listeners_) {
      for (auto& [listen_id, fn] : listeners)
        last.push_back(std::move(fn));
    }
    listeners_.clear();
    listening_.clear();
  }
  for (auto& fn : last)
    fn(InstanceEvent::unobserved, nullptr);
}

std::optional<ServerInstance> Directory::pick(const std::string& server_name, Pick how) {
  std::lock_guard lock(mu_);
  auto it = by_name_.find(server_name);
  if (it == by_name_.end() || it->second.empty()) return std::nullopt;
  const auto& instances = it->second;
  std::size_t index = 0;
  if (how == Pick::random) {
    index = std::uniform_int_distribution<std::size_t>(0, instances.size() - 1)(rng_);
  } else {
    index = round_robin_[server_name]++ % instances.size();
  }
  auto chosen = instances.begin();
  std::advance(chosen, static_cast<std::ptrdiff_t>(index));
  return chosen->second;
}

std::vector<ServerInstance> Directory::instances(const std::string& server_name) const {
  std::lock_guard lock(mu_);
  std::vector<ServerInstance> out;
  if (auto it = by_name_.find(server_name); it != by_name_.end()) {
    for (const auto& [id, inst] : it->second)
      out.push_back(inst);
  }
  return out;
}

bool Directory::online(const std::string& server_name) const {
  std::lock_guard lock(mu_);
  auto it = by_name_.find(server_name);
  return it != by_name_.end() && !it->second.empty();
}

bool Directory::has_instance(const std::string& server_name, const std::string& server_id) const {
  std::lock_guard lock(mu_);
  auto it = by_name_.find(server_name);
  return it != by_name_.end() && it->second.count(server_id) != 0;
}

std::size_t Directory::instance_count() const {
  std::lock_guard lock(mu_);
  return count_;
}

void Directory::set_filters(std::vector<std::string> filters) {
  std::lock_guard lock(mu_);
  filters_ = std::move(filters);
}

std::vector<std::string> Directory::filters() const {
  std::lock_guard lock(mu_);
  return filters_;
}

bool Directory::set_rbac_json(std::string rbac_json) {
  // It comes from the broker's CONNACK and goes verbatim into the listing: only a JSON array.
  rapidjson::Document d;
  d.Parse(rbac_json.c_str(), rbac_json.size());
  if (d.HasParseError() || !d.IsArray()) return false;
  std::lock_guard lock(mu_);
  rbac_json_ = jsonrpc::to_json(d);
  return true;
}

std::string Directory::to_json(const std::function<bool(std::string_view)>& visible) const {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  std::lock_guard lock(mu_);
  w.StartObject();
  w.Key("filters");
  w.StartArray();
  for (const auto& f : filters_)
    w.String(f.c_str(), static_cast<rapidjson::SizeType>(f.size()));
  w.EndArray();
  w.Key("servers");
  w.StartArray();
  for (const auto& [name, instances] : by_name_) {
    if (visible && !visible(name)) continue;
    w.StartObject();
    w.Key("name");
    w.String(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
    w.Key("instances");
    w.StartArray();
    for (const auto& [id, inst] : instances) {
      w.StartObject();
      w.Key("server_id");
      w.String(id.c_str(), static_cast<rapidjson::SizeType>(id.size()));
      w.Key("description");
      w.String(inst.description.c_str(), static_cast<rapidjson::SizeType>(inst.description.size()));
      w.Key("meta");
      w.RawValue(inst.meta_json.c_str(), inst.meta_json.size(), rapidjson::kObjectType);
      w.Key("online_since");
      const auto since = iso8601(inst.online_since);
      w.String(since.c_str(), static_cast<rapidjson::SizeType>(since.size()));
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  if (!rbac_json_.empty()) {
    w.Key("rbac");
    w.RawValue(rbac_json_.c_str(), rbac_json_.size(), rapidjson::kArrayType);
  }
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

Directory::WatchId Directory::watch(const std::string& server_name, std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    auto it = by_name_.find(server_name);
    if (it == by_name_.end() || it->second.empty()) {
      const WatchId id = next_watch_++;
      watches_.emplace(id, Watch{server_name, std::move(fn)});
      return id;
    }
  }
  fn();
  return 0;
}

void Directory::unwatch(WatchId id) {
  std::lock_guard lock(mu_);
  watches_.erase(id);
}

Directory::ListenId Directory::listen(const std::string& server_name, const std::string& server_id,
                                      InstanceListener fn) {
  std::lock_guard lock(mu_);
  auto named = by_name_.find(server_name);
  if (named == by_name_.end() || named->second.count(server_id) == 0) return 0;
  const ListenId id = next_listen_++;
  auto it = listeners_.try_emplace({server_name, server_id}).first;
  it->second.emplace(id, std::move(fn));
  listening_.emplace(id, it);
  return id;
}

void Directory::unlisten(ListenId id) {
  std::lock_guard lock(mu_);
  auto l = listening_.find(id);
  if (l == listening_.end()) return;
  auto it = l->second;
  listening_.erase(l);
  it->second.erase(id);
  if (it->second.empty()) listeners_.erase(it);
}

std::vector<Directory::InstanceListener> Directory::take_listeners(const std::string& server_name,
                                                                   const std::string& server_id) {
  std::vector<InstanceListener> out;
  auto it = listeners_.find({server_name, server_id});
  if (it == listeners_.end()) return out;
  out.reserve(it->second.size());
  for (auto& [listen_id, fn] : it->second) {
    listening_.erase(listen_id);
    out.push_back(std::move(fn));
  }
  listeners_.erase(it);
  return out;
}

std::size_t Directory::apply_capability(std::string_view server_id, std::string_view server_name,
                                        const std::shared_ptr<const std::string>& payload) {
  std::vector<InstanceListener> to_notify;
  {
    std::lock_guard lock(mu_);
    auto it = listeners_.find({std::string(server_name), std::string(server_id)});
    if (it == listeners_.end()) return 0;
    to_notify.reserve(it->second.size());
    for (const auto& [listen_id, fn] : it->second)
      to_notify.push_back(fn);
  }
  for (auto& fn : to_notify)
    fn(InstanceEvent::capability, payload);
  return to_notify.size();
}

std::size_t Directory::listener_count() const {
  std::lock_guard lock(mu_);
  return listening_.size();
}

}  // namespace mcpmqtt::bridge

#include "mqtt/directory_observer.hpp"

#include "bridge/protocol/topics.hpp"
#include "common/log.hpp"

namespace mcpmqtt::mqtt {

std::shared_ptr<DirectoryObserver> DirectoryObserver::create(
    boost::asio::any_io_executor strand, Options options,
    std::shared_ptr<bridge::Directory> directory) {
  return std::shared_ptr<DirectoryObserver>(
      new DirectoryObserver(std::move(strand), std::move(options), std::move(directory)));
}

DirectoryObserver::DirectoryObserver(boost::asio::any_io_executor strand, Options options,
                                     std::shared_ptr<bridge::Directory> directory)
    : strand_(std::move(strand)),
      options_(std::move(options)),
      topics_(options_.broker.topic_prefix),
      directory_(std::move(directory)) {}

void DirectoryObserver::start() {
  ConnectionOptions o;
  o.broker = options_.broker;
  o.client_id = options_.client_id;
  o.role = Role::client;
  o.meta_json = options_.connect_meta_json;
  o.reconnect = true;
  std::weak_ptr<DirectoryObserver> weak = weak_from_this();
  BrokerConnection::Handlers h;
  h.on_message = [weak](const Incoming& in) {
    if (auto self = weak.lock()) self->on_message(in);
  };
  h.on_connected = [weak](const ConnackInfo& info, bool) {
    if (auto self = weak.lock()) self->on_connected(info);
  };
  h.on_connection_lost = [weak](const std::string& cause) {
    if (auto self = weak.lock()) {
      self->directory_->clear();
      if (self->on_broker)
        self->on_broker(false, "lost the connection to the broker" +
                                   (cause.empty() ? std::string() : ": " + cause));
    }
  };
  h.on_connect_failed = [weak](const std::string& why, bool retrying) {
    // A retry is logged by the connection with its delay: once per backoff step.
    if (!retrying) log::mqtt()->warn("[directory] {}; giving up", why);
    if (auto self = weak.lock(); self && self->on_broker) self->on_broker(false, why);
  };
  conn_ = BrokerConnection::create(strand_, std::move(o), std::move(h));
  directory_->set_filters(options_.filters);
  use_filters(options_.filters);
  conn_->connect();
}

void DirectoryObserver::use_filters(const std::vector<std::string>& filters) {
  if (filters == subscribed_) return;
  std::vector<std::string> old;
  for (const auto& f : subscribed_) {
    old.push_back(topics_.server_capability_filter(f));
    old.push_back(topics_.server_presence_filter(f));
  }
  if (!old.empty()) conn_->unsubscribe(std::move(old));
  subscribed_ = filters;
  // The capability filters come first, in the same call: the broker takes them before the
  // presence filters, so every instance the directory learns of has its capability topic heard
  // already, as 004 §Initialization wants before a session's initialize goes out.
  std::vector<BrokerConnection::Filter> wanted;
  for (const auto& f : subscribed_)
    wanted.push_back({topics_.server_capability_filter(f), false});
  for (const auto& f : subscribed_)
    wanted.push_back({topics_.server_presence_filter(f), false});
  conn_->subscribe(std::move(wanted));
}

void DirectoryObserver::on_connected(const ConnackInfo& info) {
  // Retained presence arrives again for every live instance; start from nothing so instances
  // that vanished while we were away are not kept.
  directory_->clear();
  // The roles are recorded before any (un)subscription goes out, so whoever sees the
  // filters change also sees the roles that came with them.
  if (info.rbac_json && !directory_->set_rbac_json(*info.rbac_json)) {
    log::mqtt()->warn("[directory] ignoring MCP-RBAC from the broker: not a JSON array");
  }
  if (info.server_name_filters) {
    // 004 §Terminology: filters suggested by the broker MUST be used.
    std::vector<std::string> valid;
    for (const auto& f : *info.server_name_filters) {
      const auto why = topics::check_server_name_filter(f);
      if (why.empty())
        valid.push_back(f);
      else
        log::mqtt()->warn("[directory] ignoring broker-suggested filter \"{}\": it {}", f, why);
    }
    if (!valid.empty() && valid != subscribed_) {
      log::mqtt()->info("[directory] using the broker's server-name filters");
      directory_->set_filters(valid);
      use_filters(valid);
    }
  }
  if (on_broker) on_broker(true, {});
}

void DirectoryObserver::on_message(const Incoming& in) {
  auto t = topics_.parse(in.topic);
  if (!t) return;
  if (t->kind == topics::Kind::server_capability) {
    // To the sessions with that instance; none: dropped.
    directory_->apply_capability(t->server_id, t->server_name, in.payload);
    return;
  }
  if (t->kind != topics::Kind::server_presence) return;
  std::string why;
  const auto change =
      directory_->apply_presence(t->server_id, t->server_name, *in.payload, &why, !in.retained);
  switch (change) {
    case bridge::Directory::Change::added:
      log::mqtt()->info("[directory] {} online (instance {})", t->server_name, t->server_id);
      break;
    case bridge::Directory::Change::removed:
      log::mqtt()->info("[directory] {} instance {} offline", t->server_name, t->server_id);
      break;
    case bridge::Directory::Change::announced_again:
      log::mqtt()->info("[directory] {} instance {} announced itself again", t->server_name,
                        t->server_id);
      break;
    case bridge::Directory::Change::updated:
      break;
    case bridge::Directory::Change::ignored:
      // Anyone allowed to publish presence can repeat a bad one: a line a second at most.
      if (std::size_t held_back = 0; !in.payload->empty() && ignored_log_.allow(held_back)) {
        if (held_back)
          log::mqtt()->warn(
              "[directory] {}: {} ({} more presence messages ignored in the last "
              "second)",
              in.topic, why, held_back);
        else
          log::mqtt()->warn("[directory] {}: {}", in.topic, why);
      }
      break;
  }
  if (!why.empty() && change != bridge::Directory::Change::ignored) {
    log::mqtt()->warn("[directory] {}: {}", in.topic, why);
  }
}

void DirectoryObserver::stop(std::chrono::milliseconds timeout, std::function<void()> done) {
  if (!conn_) {
    if (done) done();
    return;
  }
  conn_->disconnect(timeout, std::move(done));
}

}  // namespace mcpmqtt::mqtt

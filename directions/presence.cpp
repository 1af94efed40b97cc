#include "directions/presence.hpp"

#include "directions/egress.hpp"
#include "directions/options.hpp"
#include "mqtt/client_session.hpp"
#include "mqtt/directory_observer.hpp"

namespace mcpmqtt::directions {

std::shared_ptr<Presence> Presence::create(boost::asio::any_io_executor strand,
                                           const config::MqttConfig& mqtt,
                                           std::vector<std::string> filters,
                                           const std::string& description) {
  std::shared_ptr<Presence> p(new Presence());
  p->directory_ = std::make_shared<bridge::Directory>();
  mqtt::DirectoryObserver::Options o;
  o.broker = broker_options(mqtt);
  // 004 §MQTT Client ID: a fresh id for every connection of the bridge's.
  o.client_id = mqtt::fresh_client_id(mqtt.client_id_prefix + "-directory");
  o.filters = std::move(filters);
  o.connect_meta_json = connect_meta(description);
  p->observer_ = mqtt::DirectoryObserver::create(std::move(strand), o, p->directory_);
  return p;
}

Presence::~Presence() = default;

void Presence::on_broker(std::function<void(bool connected, const std::string& why)> fn) {
  observer_->on_broker = std::move(fn);
}

void Presence::start() {
  observer_->start();
}

void Presence::stop(std::chrono::milliseconds timeout, std::function<void()> done) {
  observer_->stop(timeout, std::move(done));
}

}  // namespace mcpmqtt::directions

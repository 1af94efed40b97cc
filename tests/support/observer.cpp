#include "tests/support/observer.hpp"

#include <random>
#include <stdexcept>

#include <mqtt/async_client.h>

namespace mcpmqtt::test {

std::optional<std::string> Received::property(const std::string& name) const {
  for (const auto& [k, v] : user_properties) {
    if (k == name) return v;
  }
  return std::nullopt;
}

std::string random_id(const std::string& prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string s = prefix + "-";
  for (int i = 0; i < 12; ++i)
    s.push_back(hex[rng() % 16]);
  return s;
}

Observer::Observer(const std::string& url, Options o)
    : client_id_(o.client_id.empty() ? random_id("observer") : o.client_id) {
  std::string uri = url;
  if (uri.rfind("mqtts://", 0) == 0)
    uri = "ssl://" + uri.substr(8);
  else if (uri.rfind("mqtt://", 0) == 0)
    uri = "tcp://" + uri.substr(7);
  client_ =
      std::make_unique<mqtt::async_client>(uri, client_id_, mqtt::create_options(MQTTVERSION_5));
  auto b = mqtt::connect_options_builder()
               .mqtt_version(MQTTVERSION_5)
               .clean_start(true)
               .properties({{mqtt::property::SESSION_EXPIRY_INTERVAL, 0}})
               .connect_timeout(std::chrono::seconds(5));
  if (!o.will_topic.empty()) {
    b.will(mqtt::message(o.will_topic, o.will_payload, 1, o.will_retained));
  }
  if (!o.username.empty()) b.user_name(o.username).password(o.password);
  if (!o.ca_file.empty()) {
    b.ssl(mqtt::ssl_options_builder().trust_store(o.ca_file).verify(true).finalize());
  }
  auto opts = b.finalize();
  client_->start_consuming();
  settle(client_->connect(opts));
}

void Observer::settle(const std::shared_ptr<::mqtt::token>& token,
                      std::optional<std::chrono::milliseconds> timeout) {
  if (timeout)
    token->wait_for(*timeout);
  else
    token->wait();
  settled_.push_back(token);
  if (settled_.size() > 32) settled_.pop_front();
}

Observer::~Observer() {
  try {
    disconnect();
  } catch (...) {
  }
}

void Observer::subscribe(const std::string& filter, bool no_local, int qos) {
  settle(client_->subscribe(filter, qos, mqtt::subscribe_options(no_local)));
}

void Observer::unsubscribe(const std::string& filter) {
  settle(client_->unsubscribe(filter));
}

void Observer::publish(const std::string& topic, const std::string& payload, bool retained, int qos,
                       const std::vector<std::pair<std::string, std::string>>& props) {
  mqtt::properties p;
  for (const auto& [k, v] : props)
    p.add({mqtt::property::USER_PROPERTY, k, v});
  auto msg = mqtt::message_ptr_builder()
                 .topic(topic)
                 .payload(payload)
                 .qos(qos)
                 .retained(retained)
                 .properties(p)
                 .finalize();
  settle(client_->publish(msg));
}

std::optional<Received> Observer::next(std::chrono::milliseconds timeout) {
  mqtt::const_message_ptr m;
  if (!client_->try_consume_message_for(&m, timeout) || !m) return std::nullopt;
  Received r;
  r.topic = m->get_topic();
  r.payload = m->to_string();
  r.retained = m->is_retained();
  r.qos = m->get_qos();
  const auto& props = m->get_properties();
  const auto n = props.count(mqtt::property::USER_PROPERTY);
  for (std::size_t i = 0; i < n; ++i) {
    auto kv = mqtt::get<mqtt::string_pair>(props, mqtt::property::USER_PROPERTY, i);
    r.user_properties.emplace_back(std::get<0>(kv), std::get<1>(kv));
  }
  return r;
}

std::optional<Received> Observer::wait_for(const std::function<bool(const Received&)>& pred,
                                           std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    auto r = next(left);
    if (!r) return std::nullopt;
    if (pred(*r)) return r;
  }
}

std::optional<Received> Observer::wait_on(const std::string& topic,
                                          std::chrono::milliseconds timeout) {
  return wait_for([&](const Received& r) { return r.topic == topic; }, timeout);
}

std::vector<Received> Observer::drain(std::chrono::milliseconds window) {
  std::vector<Received> out;
  const auto deadline = std::chrono::steady_clock::now() + window;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    auto r = next(left);
    if (!r) break;
    out.push_back(std::move(*r));
  }
  return out;
}

void Observer::disconnect() {
  if (client_ && client_->is_connected())
    settle(client_->disconnect(), std::chrono::milliseconds(5000));
}

bool Observer::connected() const {
  return client_ && client_->is_connected();
}

}  // namespace mcpmqtt::test

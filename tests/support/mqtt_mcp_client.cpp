#include "tests/support/mqtt_mcp_client.hpp"

#include <stdexcept>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace mcpmqtt::test {

namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds left(Clock::time_point deadline) {
  const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return d.count() < 0 ? std::chrono::milliseconds(0) : d;
}

const std::string kDisconnected = R"({"jsonrpc":"2.0","method":"notifications/disconnected"})";

}  // namespace

std::optional<std::string> json_at(const std::string& json, const std::string& path) {
  rapidjson::Document d;
  d.Parse(json.c_str(), json.size());
  if (d.HasParseError()) return std::nullopt;
  const rapidjson::Value* v = &d;
  std::size_t start = 0;
  while (start <= path.size() && !path.empty()) {
    const auto dot = path.find('.', start);
    const std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v->IsObject()) {
      auto it = v->FindMember(part.c_str());
      if (it == v->MemberEnd()) return std::nullopt;
      v = &it->value;
    } else if (v->IsArray()) {
      const auto i = static_cast<rapidjson::SizeType>(std::stoul(part));
      if (i >= v->Size()) return std::nullopt;
      v = &(*v)[i];
    } else {
      return std::nullopt;
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (v->IsString()) return std::string(v->GetString(), v->GetStringLength());
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v->Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

McpMqttClient::McpMqttClient(const std::string& broker_url, const std::string& server_name,
                             Options options, std::string client_id, std::chrono::milliseconds wait)
    : url_(broker_url),
      options_(std::move(options)),
      server_name_(server_name),
      client_id_(client_id.empty() ? random_id("mcp-client") : std::move(client_id)) {
  // Discovery: the first retained (or live) online presence of the server-name.
  {
    Observer::Options po;
    po.username = options_.username;
    po.password = options_.password;
    Observer probe(url_, po);
    probe.subscribe(options_.topic_prefix + "server/presence/+/" + server_name_, false,
                    options_.qos);
    auto p = probe.wait_for([](const Received& r) { return !r.payload.empty(); }, wait);
    if (!p) throw std::runtime_error("no instance of " + server_name_ + " announced itself");
    const std::string prefix = options_.topic_prefix + "server/presence/";
    const auto rest = p->topic.substr(prefix.size());
    server_id_ = rest.substr(0, rest.find('/'));
  }
  Observer::Options o;
  o.client_id = client_id_;
  o.will_topic = options_.topic_prefix + "client/presence/" + client_id_;
  o.will_payload = kDisconnected;
  o.username = options_.username;
  o.password = options_.password;
  mqtt_ = std::make_unique<Observer>(url_, o);
  // 004 §Initialization: subscribed before initialize.
  mqtt_->subscribe(rpc_topic(), /*no_local=*/true, options_.qos);
  mqtt_->subscribe(options_.topic_prefix + "server/capability/" + server_id_ + "/" + server_name_,
                   false, options_.qos);
}

std::string McpMqttClient::rpc_topic() const {
  return options_.topic_prefix + "rpc/" + client_id_ + "/" + server_id_ + "/" + server_name_;
}

void McpMqttClient::publish_raw(const std::string& topic, const std::string& payload) {
  mqtt_->publish(topic, payload, false, options_.qos,
                 {{"MCP-COMPONENT-TYPE", "mcp-client"}, {"MCP-MQTT-CLIENT-ID", client_id_}});
}

std::optional<std::string> McpMqttClient::initialize(const std::string& capabilities_json,
                                                     std::chrono::milliseconds timeout) {
  const int id = next_id_++;
  publish_raw(
      options_.topic_prefix + "server/" + server_id_ + "/" + server_name_,
      R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
          R"(,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":)" +
          capabilities_json + R"(,"clientInfo":{"name":"mcpmqtt-test-client","version":"1"}}})");
  auto r = response(id, timeout);
  if (r && !json_at(*r, "error")) notify("notifications/initialized");
  return r;
}

int McpMqttClient::send_request(const std::string& method, const std::string& params_json) {
  const int id = next_id_++;
  publish_raw(rpc_topic(), R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":")" +
                               method + R"(","params":)" + params_json + "}");
  return id;
}

std::optional<std::string> McpMqttClient::request(const std::string& method,
                                                  const std::string& params_json,
                                                  std::chrono::milliseconds timeout) {
  return response(send_request(method, params_json), timeout);
}

void McpMqttClient::notify(const std::string& method, const std::string& params_json) {
  std::string m = R"({"jsonrpc":"2.0","method":")" + method + "\"";
  if (!params_json.empty()) m += R"(,"params":)" + params_json;
  publish_raw(rpc_topic(), m + "}");
}

void McpMqttClient::respond(const std::string& id_json, const std::string& result_json) {
  publish_raw(rpc_topic(),
              R"({"jsonrpc":"2.0","id":)" + id_json + R"(,"result":)" + result_json + "}");
}

void McpMqttClient::pump(std::chrono::milliseconds timeout) {
  auto r = mqtt_->next(timeout);
  if (!r) return;
  const auto id = json_at(r->payload, "id");
  const bool response = id && (json_at(r->payload, "result") || json_at(r->payload, "error")) &&
                        !json_at(r->payload, "method");
  if (response)
    responses_.emplace_back(*id, r->payload);
  else
    others_.push_back({r->topic, r->payload});
}

std::optional<std::string> McpMqttClient::response(int id, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const std::string want = std::to_string(id);
  for (;;) {
    for (auto it = responses_.begin(); it != responses_.end(); ++it) {
      if (it->first == want) {
        auto payload = it->second;
        responses_.erase(it);
        return payload;
      }
    }
    if (left(deadline).count() == 0) return std::nullopt;
    pump(left(deadline));
  }
}

std::optional<McpMqttClient::Incoming> McpMqttClient::next(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (others_.empty()) {
    if (left(deadline).count() == 0) return std::nullopt;
    pump(left(deadline));
  }
  auto m = others_.front();
  others_.pop_front();
  return m;
}

std::optional<McpMqttClient::Incoming> McpMqttClient::next_containing(
    const std::string& needle, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    auto m = next(left(deadline));
    if (!m) return std::nullopt;
    if (m->payload.find(needle) != std::string::npos) return m;
  }
}

void McpMqttClient::disconnect() {
  publish_raw(options_.topic_prefix + "client/presence/" + client_id_, kDisconnected);
  mqtt_->disconnect();
}

}  // namespace mcpmqtt::test

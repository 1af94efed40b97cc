// MCP-RBAC at the ingress (004 §User Property): a scripted broker's CONNACK assigns the session a
// role (Mosquitto cannot send CONNACK user properties), the server's presence lists the roles,
// and the ingress refuses and filters accordingly. The test plays the MCP server by writing
// PUBLISH packets to the session's connection. The same scripted broker shows what the session's
// CONNECT carries for an OAuth principal (mqtt.session_credentials "token", MCP-META).
#include <catch2/catch.hpp>

#include "bridge/protocol/topics.hpp"
#include "tests/support/engine.hpp"
#include "tests/support/fake_broker.hpp"
#include "tests/support/ingress_driver.hpp"
#include "tests/support/mcp_messages.hpp"

namespace bridge = mcpmqtt::bridge;
namespace config = mcpmqtt::config;
namespace topics = mcpmqtt::topics;
using namespace mcpmqtt::test;
using namespace std::chrono_literals;

namespace {

const std::string kTruck = "fleet/truck";
const std::string kTruckId = "truck-srv-1";
// 004 §Service Registration's example roles.
const std::string kTruckRoles = R"({"rbac":{"roles":[
  {"name":"admin","allowed_methods":["notifications/initialized","ping","tools/list","tools/call",
     "resources/list","resources/read","resources/subscribe","resources/unsubscribe"],
   "allowed_tools":"all","allowed_resources":"all"},
  {"name":"user","allowed_methods":["notifications/initialized","ping","tools/list","tools/call",
     "resources/list","resources/read"],
   "allowed_tools":["get_vehicle_status","get_vehicle_location"],
   "allowed_resources":["file:///vehicle/telemetry.data"]}]}})";

// A QoS 0 PUBLISH from the broker to the client (MQTT 5.0 §3.3), as the server would send it.
std::string rbac_publish(const std::string& topic, const std::string& payload) {
  return wire::packet(0x30, wire::utf8(topic) + wire::varint(0) + payload);
}

std::optional<std::string> user_property(const UserProperties& props, const std::string& key) {
  for (const auto& [k, v] : props)
    if (k == key) return v;
  return std::nullopt;
}

// The ingress, a session to the truck, initialized: the test answers initialize as the server.
struct RbacSession {
  FakeBroker& broker;
  IngressDriver driver;
  std::unique_ptr<IngressDriver::Session> session;
  std::string rpc_topic;
  std::size_t seen = 0;  // publishes of the broker looked at

  RbacSession(FakeBroker& b, std::optional<bridge::Principal> principal,
              config::SessionCredentials mode = config::SessionCredentials::shared)
      : broker(b), driver([&] {
          auto m = mqtt_config(b.url());
          m.session_credentials = mode;
          return m;
        }()) {
    driver.online(kTruckId, kTruck, kTruckRoles);
    session = driver.open(kTruck, std::move(principal));
    session->send(initialize_body(1));
    auto init = published("\"method\":\"initialize\"");
    REQUIRE(init);
    CHECK(init->topic == topics::standard().server_control(kTruckId, kTruck));
    rpc_topic = topics::standard().rpc(init->client_id, kTruckId, kTruck);
    answer(R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":)"
           R"({"tools":{},"resources":{}},"serverInfo":{"name":"truck","version":"1"}}})");
    auto result = session->next();
    REQUIRE(result);
    CHECK(result->find(R"("serverInfo":{"name":"truck")") != std::string::npos);
    session->send(kInitialized);
    REQUIRE(published("notifications/initialized"));
  }

  // The next message the session published whose payload contains `needle`.
  std::optional<PublishPacket> published(const std::string& needle,
                                         std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      auto p = broker.publish(seen, std::chrono::duration_cast<std::chrono::milliseconds>(
                                        deadline - std::chrono::steady_clock::now()));
      if (!p) return std::nullopt;
      ++seen;
      if (p->payload.find(needle) != std::string::npos) return p;
    }
    return std::nullopt;
  }
  // The server says `payload` on the session's RPC topic.
  void answer(const std::string& payload) {
    REQUIRE(broker.inject(0, rbac_publish(rpc_topic, payload)));
  }
};

}  // namespace

TEST_CASE(
    "004 §User Property MCP-RBAC: the CONNACK's role is enforced - methods, tools and resources "
    "outside it refused with -32003 naming the role, lists filtered",
    "[ingress][rbac][engines]") {
  INFO("engine: " << engine_name(engine_under_test()));
  FakeBroker broker([](int, const ConnectPacket&) -> UserProperties {
    return {{"MCP-RBAC", R"([{"server_name":"fleet/truck","role_name":"user"}])"}};
  });
  RbacSession s(broker, std::nullopt);

  // A tool outside the role: refused at once, never published.
  s.session->send(tool_call(2, "unlock_doors"));
  auto tool = s.session->next(5s);
  REQUIRE(tool);
  CHECK(*tool ==
        R"({"jsonrpc":"2.0","id":2,"error":{"code":-32003,"message":"forbidden by MCP-RBAC: role )"
        R"(\"user\" on server \"fleet/truck\" does not allow the tool \"unlock_doors\" (allowed: )"
        R"x(tools get_vehicle_location, get_vehicle_status)","data":{"reason":"mcp-rbac",)x"
        R"("server_name":"fleet/truck","roles":["user"],"method":"tools/call",)"
        R"("tool":"unlock_doors"}}})");
  // A method outside the role, and a resource outside it.
  s.session->send(request_body(3, "prompts/list"));
  auto method = s.session->next(5s);
  REQUIRE(method);
  CHECK(method->find(R"("code":-32003)") != std::string::npos);
  CHECK(method->find(R"(does not allow the method \"prompts/list\")") != std::string::npos);
  s.session->send(request_body(4, "resources/read", R"({"uri":"file:///etc/shadow"})"));
  auto resource = s.session->next(5s);
  REQUIRE(resource);
  CHECK(resource->find(R"(does not allow the resource \"file:///etc/shadow\")") !=
        std::string::npos);
  s.session->send(
      request_body(5, "resources/subscribe", R"({"uri":"file:///vehicle/telemetry.data"})"));
  auto subscribe = s.session->next(5s);
  REQUIRE(subscribe);
  CHECK(subscribe->find(R"(the method \"resources/subscribe\")") != std::string::npos);

  // An allowed call goes to the server; tools/list comes back filtered. Nothing refused went.
  s.session->send(tool_call(6, "get_vehicle_status"));
  auto call = s.published("\"tools/call\"");
  REQUIRE(call);
  CHECK(call->payload.find("get_vehicle_status") != std::string::npos);
  s.session->send(request_body(7, "tools/list"));
  auto list = s.published("\"tools/list\"");
  REQUIRE(list);
  CHECK(list->topic == s.rpc_topic);
  s.answer(
      R"({"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get_vehicle_status","inputSchema":{"type":"object"}},)"
      R"({"name":"unlock_doors","inputSchema":{"type":"object"}},{"name":"get_vehicle_location","inputSchema":{"type":"object"}}]}})");
  auto tools = s.session->next();
  REQUIRE(tools);
  CHECK(
      *tools ==
      R"({"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get_vehicle_status","inputSchema":{"type":"object"}},)"
      R"({"name":"get_vehicle_location","inputSchema":{"type":"object"}}]}})");
  s.session->send(request_body(8, "resources/list"));
  REQUIRE(s.published("\"resources/list\""));
  s.answer(
      R"({"jsonrpc":"2.0","id":8,"result":{"resources":[{"uri":"file:///etc/shadow","name":"s"},)"
      R"({"uri":"file:///vehicle/telemetry.data","name":"t"}]}})");
  auto resources = s.session->next();
  REQUIRE(resources);
  CHECK(resources->find("file:///etc/shadow") == std::string::npos);
  CHECK(resources->find("file:///vehicle/telemetry.data") != std::string::npos);
  CHECK_FALSE(s.published("unlock_doors", 300ms));
}

TEST_CASE(
    "004 §User Property MCP-RBAC: a role the server's presence does not list refuses every "
    "request but initialize, and no MCP-RBAC refuses nothing",
    "[ingress][rbac][engines]") {
  INFO("engine: " << engine_name(engine_under_test()));
  SECTION("a role not listed") {
    FakeBroker broker([](int, const ConnectPacket&) -> UserProperties {
      return {{"MCP-RBAC", R"([{"server_name":"fleet/truck","role_name":"mechanic"}])"}};
    });
    RbacSession s(broker, std::nullopt);
    s.session->send(request_body(2, "ping"));
    auto ping = s.session->next(5s);
    REQUIRE(ping);
    CHECK(ping->find(R"("code":-32003)") != std::string::npos);
    CHECK(ping->find(R"(names role \"mechanic\" on \"fleet/truck\", which its presence does )"
                     R"(not list (it lists \"admin\", \"user\"))") != std::string::npos);
    CHECK_FALSE(s.published("\"ping\"", 300ms));
  }
  SECTION("no MCP-RBAC") {
    FakeBroker broker;
    RbacSession s(broker, std::nullopt);
    s.session->send(request_body(2, "prompts/list"));
    REQUIRE(s.published("\"prompts/list\""));
    s.answer(R"({"jsonrpc":"2.0","id":2,"result":{"prompts":[]}})");
    auto prompts = s.session->next();
    REQUIRE(prompts);
    CHECK(prompts->find(R"("result":{"prompts":[]})") != std::string::npos);
  }
}

TEST_CASE(
    "004 §User Property MCP-RBAC: requests pipelined behind initialize wait for the CONNACK's "
    "role and are then judged in order",
    "[ingress][rbac][engines]") {
  INFO("engine: " << engine_name(engine_under_test()));
  FakeBroker broker([](int, const ConnectPacket&) -> UserProperties {
    return {{"MCP-RBAC", R"([{"server_name":"fleet/truck","role_name":"user"}])"}};
  });
  IngressDriver driver(mqtt_config(broker.url()));
  driver.online(kTruckId, kTruck, kTruckRoles);
  auto session = driver.open(kTruck, std::nullopt);
  // All three before the broker has even answered CONNECT.
  session->send(initialize_body(1));
  session->send(tool_call(2, "unlock_doors"));
  session->send(tool_call(3, "get_vehicle_status"));
  auto refused = session->next();
  REQUIRE(refused);
  CHECK(refused->find(R"("id":2,"error":{"code":-32003)") != std::string::npos);
  // The allowed one reaches the broker after initialize (ClientSession holds it until the
  // initialize response, which this test never sends).
  auto init = broker.publish(0);
  REQUIRE(init);
  CHECK(init->payload.find("\"initialize\"") != std::string::npos);
}

TEST_CASE(
    "004 §User Property MCP-META and mqtt.session_credentials token: CONNECT carries the "
    "subject as user name, the token as password, and the principal but never the token in "
    "MCP-META",
    "[ingress][credentials][engines]") {
  INFO("engine: " << engine_name(engine_under_test()));
  FakeBroker broker;
  bridge::Principal alice;
  alice.key = "oauth:https://auth.example|alice";
  alice.issuer = "https://auth.example";
  alice.subject = "alice";
  alice.client_id = "desktop-app";
  alice.access_token = std::make_shared<const std::string>("eyJhbGciOi.secret-part.sig");
  RbacSession s(broker, alice, config::SessionCredentials::token);
  auto c = broker.connect(0);
  REQUIRE(c);
  CHECK(c->username == "alice");
  CHECK(c->password == "eyJhbGciOi.secret-part.sig");
  const auto meta = user_property(c->user_properties, "MCP-META");
  REQUIRE(meta);
  CHECK(meta->find(R"("implementation":"mcp-mqtt-bridge tests")") != std::string::npos);
  CHECK(meta->find(R"("principal":{"iss":"https://auth.example","sub":"alice",)"
                   R"("client_id":"desktop-app"})") != std::string::npos);
  CHECK(meta->find("secret-part") == std::string::npos);
  CHECK(user_property(c->user_properties, "MCP-COMPONENT-TYPE") == "mcp-client");
}

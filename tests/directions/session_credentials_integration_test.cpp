// The principal onto MQTT (mqtt.session_credentials): an ingress session's MQTT connection
// presents its caller's credentials, so a real Mosquitto's password file and ACL patterns (%u,
// %c) decide what the session may reach — even when the bridge's own check is bypassed: these
// tests call Ingress::attach directly with a principal whose filters allow every server.
#include <catch2/catch.hpp>
#include <rapidjson/document.h>

#include "bridge/protocol/topics.hpp"
#include "tests/support/engine.hpp"
#include "tests/support/ingress_driver.hpp"
#include "tests/support/mcp_messages.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/observer.hpp"

namespace bridge = mcpmqtt::bridge;
namespace config = mcpmqtt::config;
namespace topics = mcpmqtt::topics;
using namespace mcpmqtt::test;
using namespace std::chrono_literals;

namespace {

// Each MCP client may reach only servers named users/<its user name>/…, on topics of its own
// client id; the test's MCP server (user srv) and the bridge's configured user may use every MCP
// topic. Mosquitto refuses what no line grants.
const std::string kSessionAcl = R"(user srv
topic readwrite $mcp-server/#
topic readwrite $mcp-client/#
topic readwrite $mcp-rpc/#

user bridge
topic readwrite $mcp-server/#
topic readwrite $mcp-client/#
topic readwrite $mcp-rpc/#

pattern write $mcp-client/presence/%c
pattern read $mcp-server/presence/+/users/%u/#
pattern read $mcp-server/capability/+/users/%u/#
pattern write $mcp-server/+/users/%u/#
pattern readwrite $mcp-rpc/%c/+/users/%u/#
)";

Mosquitto::Options acl_broker() {
  Mosquitto::Options o;
  // alice's password is her access token (a JWT broker would verify it; Mosquitto compares it);
  // dave's is the bridge's configured one ("principal" mode).
  o.users = {
      {"srv", "srv-pw"}, {"bridge", "bridge-pw"}, {"alice", "tok-alice"}, {"dave", "bridge-pw"}};
  o.acl = kSessionAcl;
  return o;
}

// An OAuth principal whose filters allow every server: the bridge's own check would let it
// through anywhere.
bridge::Principal unrestricted(const std::string& sub, const std::string& token = {}) {
  bridge::Principal p;
  p.key = "oauth:https://auth.example|" + sub;
  p.issuer = "https://auth.example";
  p.subject = sub;
  p.unrestricted = true;
  if (!token.empty()) p.access_token = std::make_shared<const std::string>(token);
  return p;
}

// An MCP server played by a plain MQTT client with every MCP topic (user srv): it answers
// initialize on its control topic.
struct AclServer {
  std::string server_id;
  std::string name;
  Observer mqtt;
  AclServer(const std::string& url, std::string sid, std::string server_name)
      : server_id(std::move(sid)), name(std::move(server_name)), mqtt(url, [&] {
          auto o = Observer::Options::with_id(server_id);
          o.username = "srv";
          o.password = "srv-pw";
          return o;
        }()) {
    mqtt.subscribe(topics::standard().server_control(server_id, name));
  }
  // Answers the next initialize (within `timeout`) on the RPC topic of the client that sent it;
  // false when none came.
  bool answer_initialize(std::chrono::milliseconds timeout) {
    auto init = mqtt.wait_on(topics::standard().server_control(server_id, name), timeout);
    if (!init) return false;
    const auto cid = init->property("MCP-MQTT-CLIENT-ID");
    rapidjson::Document d;
    d.Parse(init->payload.c_str());
    if (!cid || d.HasParseError() || !d.HasMember("id")) return false;
    mqtt.publish(topics::standard().rpc(*cid, server_id, name),
                 R"({"jsonrpc":"2.0","id":)" + std::to_string(d["id"].GetInt()) +
                     R"(,"result":{"protocolVersion":"2025-11-25","capabilities":{},)"
                     R"("serverInfo":{"name":"acl-server","version":"1"}}})");
    return true;
  }
};

config::MqttConfig session_mqtt(const Mosquitto& broker, config::SessionCredentials mode) {
  auto m = mqtt_config(broker.url());
  m.username = "bridge";
  m.password = "bridge-pw";
  m.session_credentials = mode;
  return m;
}

}  // namespace

TEST_CASE(
    "004 §User Property mqtt.session_credentials token: with Mosquitto's password file and "
    "ACL, alice reaches her server but not bob's, and gets the broker's refusal at once",
    "[ingress][credentials][engines]") {
  INFO("engine: " << engine_name(engine_under_test()));
  Mosquitto broker(acl_broker());
  AclServer alices(broker.url(), random_id("srv-a"), "users/alice/tools");
  AclServer bobs(broker.url(), random_id("srv-b"), "users/bob/notes");
  IngressDriver driver(session_mqtt(broker, config::SessionCredentials::token));
  driver.online(alices.server_id, alices.name);
  driver.online(bobs.server_id, bobs.name);

  // Her own server: the broker took her user name and token, and the ACL lets her in.
  auto own = driver.open(alices.name, unrestricted("alice", "tok-alice"));
  own->send(initialize_body(1));
  REQUIRE(alices.answer_initialize(10s));
  auto answer = own->next();
  REQUIRE(answer);
  CHECK(answer->find(R"("serverInfo":{"name":"acl-server")") != std::string::npos);

  // Bob's server, as alice: the bridge's check is bypassed, the broker's ACL refuses.
  auto other = driver.open(bobs.name, unrestricted("alice", "tok-alice"));
  const auto started = std::chrono::steady_clock::now();
  other->send(initialize_body(1));
  auto refused = other->next();
  REQUIRE(refused);
  INFO(*refused);
  CHECK(std::chrono::steady_clock::now() - started < 5s);
  CHECK(refused->find(R"("id":1,"error")") != std::string::npos);
  // Mosquitto 2.0.11 grants the subscriptions and refuses the publication (its PUBACK); a broker
  // that refuses the subscription gets "the broker refused the subscription to $mcp-rpc/…".
  CHECK(refused->find("users/bob/notes") != std::string::npos);
  CHECK(refused->find("Not authorized (0x87)") != std::string::npos);
  // Nothing of hers reached bob's server.
  CHECK_FALSE(
      bobs.mqtt.wait_on(topics::standard().server_control(bobs.server_id, bobs.name), 500ms));

  // A wrong token: the broker refuses the connection, and the error says whose credentials.
  auto forged = driver.open(alices.name, unrestricted("alice", "not-her-token"));
  forged->send(initialize_body(1));
  auto bad = forged->next();
  REQUIRE(bad);
  INFO(*bad);
  CHECK(bad->find("Not authorized (0x87)") != std::string::npos);
  CHECK(bad->find(R"(user name \"alice\" (the OAuth subject) and the caller's access token)") !=
        std::string::npos);
  CHECK(bad->find("not-her-token") == std::string::npos);
}

TEST_CASE(
    "004 §User Property mqtt.session_credentials principal: the subject with the configured "
    "password is held to its own servers by the ACL, while shared credentials and callers "
    "without an OAuth principal connect as the configured user",
    "[ingress][credentials][engines]") {
  INFO("engine: " << engine_name(engine_under_test()));
  Mosquitto broker(acl_broker());
  AclServer bobs(broker.url(), random_id("srv-b"), "users/bob/notes");
  AclServer daves(broker.url(), random_id("srv-d"), "users/dave/tools");

  SECTION("principal: dave reaches his server, not bob's") {
    IngressDriver driver(session_mqtt(broker, config::SessionCredentials::principal));
    driver.online(bobs.server_id, bobs.name);
    driver.online(daves.server_id, daves.name);
    auto own = driver.open(daves.name, unrestricted("dave"));
    own->send(initialize_body(1));
    REQUIRE(daves.answer_initialize(10s));
    auto answer = own->next();
    REQUIRE(answer);
    CHECK(answer->find(R"("result")") != std::string::npos);

    auto other = driver.open(bobs.name, unrestricted("dave"));
    other->send(initialize_body(1));
    auto refused = other->next();
    REQUIRE(refused);
    INFO(*refused);
    CHECK(refused->find("users/bob/notes") != std::string::npos);
    CHECK(refused->find("Not authorized (0x87)") != std::string::npos);
  }
  SECTION("shared, and callers without an OAuth principal: the configured user's access") {
    for (const auto mode :
         {config::SessionCredentials::shared, config::SessionCredentials::principal}) {
      const bool shared = mode == config::SessionCredentials::shared;
      INFO("mode: " << (shared ? "shared, as dave" : "principal, anonymous"));
      IngressDriver driver(session_mqtt(broker, mode));
      driver.online(bobs.server_id, bobs.name);
      auto session = driver.open(bobs.name, shared ? std::optional(unrestricted("dave"))
                                                   : std::optional(bridge::Principal{}));
      session->send(initialize_body(1));
      REQUIRE(bobs.answer_initialize(10s));
      auto answer = session->next();
      REQUIRE(answer);
      CHECK(answer->find(R"("result")") != std::string::npos);
    }
  }
}

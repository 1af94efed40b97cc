// The daemon against a Mosquitto listener that requires TLS and a password (TLS and
// credentials from the configuration; the password from a file, never argv). The CA and the
// broker's certificate are made with the openssl CLI, in a temp dir (tests/support/pki.hpp).
#include <catch2/catch.hpp>

#include "tests/support/bridge_process.hpp"
#include "tests/support/engine.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/pki.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mcpmqtt::test;
using namespace std::chrono_literals;

namespace {

std::string config(const Mosquitto& broker, const std::string& ca, const std::string& pw_file) {
  return R"({"mqtt": {"url": ")" + broker.url() + R"(", "username": "bridge", "password_file": ")" +
         pw_file + R"(", "tls": {"ca_file": ")" + ca +
         R"("}}, "http": {"enabled": false}, "mcpServers": {"test/tls": {"command": ")" +
         MCPMQTT_TEST_SERVER + R"("}}})";
}

}  // namespace

TEST_CASE(
    "broker TLS: the daemon connects to a listener that requires TLS and a password, and "
    "refuses a broker whose certificate does not verify",
    "[mqtt][tls]") {
  Pki pki;
  Mosquitto::Options o;
  o.tls_ca_file = pki.ca;
  o.tls_cert_file = pki.cert;
  o.tls_key_file = pki.key;
  o.username = "bridge";
  o.password = "s3cret-pw";
  Mosquitto broker(o);
  REQUIRE(broker.url().rfind("mqtts://", 0) == 0);
  TempDir secrets;
  const std::string pw = secrets.write("pw", "s3cret-pw\n");

  SECTION("the right CA and password") {
    BridgeProcess bridge({}, config(broker, pki.ca, pw));
    CHECK(bridge.wait_for_log("[server test/tls] online"));
    CHECK(bridge.log().find("s3cret-pw") == std::string::npos);  // secrets are never logged
  }
  SECTION("a wrong password") {
    const std::string wrong = secrets.write("wrong", "guess\n");
    BridgeProcess bridge({}, config(broker, pki.ca, wrong));
    const bool refused = bridge.wait_for_log("check mqtt.username", 15s);
    INFO(bridge.log());
    CHECK(refused);
    CHECK(bridge.log().find("online") == std::string::npos);
  }
  SECTION("a certificate from another CA") {
    Pki other("another CA");
    BridgeProcess bridge({}, config(broker, other.ca, pw));
    // The failed handshake is logged, the server never comes online, and the daemon stays up,
    // retrying.
    const bool logged = bridge.wait_for_log(
        paho_under_test() ? "TLS"
                          : "cannot connect to " + broker.url() +
                                ": TLS handshake failed: certificate verify failed",
        15s);
    INFO(bridge.log());
    CHECK(logged);
    CHECK(bridge.log().find("[server test/tls] online") == std::string::npos);
    CHECK(bridge.process().running());
  }
}

// The daemon against a Mosquitto listener that requires TLS and a password (issue 3: TLS and
// credentials from the configuration; the password from a file, never argv). The CA and the
// broker's certificate are made here with the openssl CLI, in a temp dir; nothing is committed.
#include <catch2/catch.hpp>

#include "tests/support/bridge_process.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mcpmqtt::test;
using namespace std::chrono_literals;

namespace {

// A CA and a server certificate for 127.0.0.1 signed by it.
struct Pki {
  TempDir dir;
  std::string ca, cert, key;
  explicit Pki(const std::string& cn = "mcpmqtt test CA") {
    auto run = [&](std::vector<std::string> argv) {
      auto r = run_capture(argv);
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
    };
    const std::string d = dir.path();
    ca = d + "/ca.crt";
    cert = d + "/server.crt";
    key = d + "/server.key";
    run({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
         "/CN=" + cn, "-keyout", d + "/ca.key", "-out", ca});
    run({"openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout",
         key, "-out", d + "/server.csr"});
    const std::string ext = dir.write("ext.cnf", "subjectAltName=IP:127.0.0.1\n");
    run({"openssl", "x509", "-req", "-in", d + "/server.csr", "-CA", ca, "-CAkey", d + "/ca.key",
         "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", cert});
  }
};

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
    // Paho reports the failed handshake; the server never comes online.
    CHECK_FALSE(bridge.wait_for_log("[server test/tls] online", 5s));
    INFO(bridge.log());
    CHECK((bridge.log().find("SSL") != std::string::npos ||
           bridge.log().find("TLS") != std::string::npos ||
           bridge.log().find("certificate") != std::string::npos));
  }
}

#include "tests/support/pki.hpp"

#include <vector>

#include <catch2/catch.hpp>

#include "tests/support/process.hpp"

namespace mcpmqtt::test {

Pki::Pki(const std::string& cn, const std::string& san) {
  auto run = [](const std::vector<std::string>& argv) {
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
  // The common name is the SAN's host; clients check the SAN (RFC 6125).
  const std::string host = san.substr(san.find(':') + 1);
  run({"openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + host, "-keyout", key,
       "-out", d + "/server.csr"});
  const std::string ext = dir.write("ext.cnf", "subjectAltName=" + san + "\n");
  run({"openssl", "x509", "-req", "-in", d + "/server.csr", "-CA", ca, "-CAkey", d + "/ca.key",
       "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", cert});
}

}  // namespace mcpmqtt::test

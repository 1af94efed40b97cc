// A test CA and a broker certificate signed by it, made with the openssl CLI in a temporary
// directory (nothing is committed), for TLS listeners of the test Mosquitto.
//
// Not thread-safe; owned by one test.
#pragma once

#include <string>

#include "tests/support/temp_dir.hpp"

namespace mcpmqtt::test {

struct Pki {
  // `cn`: the CA's common name; `san`: the broker certificate's subjectAltName, such as
  // "IP:127.0.0.1" (what clients dial in tests) or "DNS:broker.example" (another host).
  explicit Pki(const std::string& cn = "mcpmqtt test CA", const std::string& san = "IP:127.0.0.1");

  TempDir dir;
  std::string ca;    // the CA certificate (PEM): what a client trusts
  std::string cert;  // the broker's certificate (PEM)
  std::string key;   // its private key (PEM)
};

}  // namespace mcpmqtt::test

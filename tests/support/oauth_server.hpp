// A real OAuth 2.1 authorization server for the OAuth tests: oidc-provider
// (tests/node/oauth-server.mjs, pinned in tests/node/package.json) on a loopback port, with the
// confidential clients svc:secret and svc2:secret2 for the client credentials grant, the scopes
// "mcp:all mcp:demo" and the account alice. `extra` adds the script's options (--ttl, --port,
// --format, ...).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/process.hpp"

namespace mcpmqtt::test {

struct AuthServer {
  std::unique_ptr<Process> proc;
  std::string issuer;  // http://127.0.0.1:PORT
  std::uint16_t port = 0;

  explicit AuthServer(std::vector<std::string> extra = {});

  // RFC 6749 §4.4 with RFC 8707's resource, as client `client` ("id:secret"): the response's
  // status and body.
  struct Reply {
    unsigned status = 0;
    std::string body;
  };
  Reply request_token(const std::string& resource, const std::string& scope,
                      const std::string& client = "svc:secret") const;
  // The same, required to succeed: the access token.
  std::string token(const std::string& resource, const std::string& scope,
                    const std::string& client = "svc:secret") const;
};

}  // namespace mcpmqtt::test

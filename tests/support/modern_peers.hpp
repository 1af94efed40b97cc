// The v2 MCP peers (protocol revision 2026-07-28) from C++ tests of the ingress: the scripted
// v2 client (tests/node/sdk2-client.mjs), the v2 fixture and test servers, and the 0.2.0-alpha.12
// conformance suite with its requirement sets. See tests/node/README.md. (A namespace of its own:
// the egress's tests may grow helpers of the same kind.)
#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tests/support/node_tools.hpp"

namespace mcpmqtt::test::modern_peers {

std::string sdk2_client_script();  // tests/node/sdk2-client.mjs
std::string sdk2_server_script();  // tests/node/sdk2-server.mjs
std::string fixture2_script();     // tests/fixtures/conformance-server2.mjs

// sdk2-client.mjs with `args` ({"--url", URL, "--version-mode", "pin"} or {"--command", CMD,
// ..., "--args", ...}) and a JSON script; waits for it to end.
NodeRun run_client(const std::vector<std::string>& args, const std::string& script_json,
                   std::chrono::milliseconds timeout = std::chrono::seconds(120));
// The argv of that run, for a test that starts the client itself (to act while it runs).
std::vector<std::string> client_argv(const std::vector<std::string>& args,
                                     const std::string& script_json);

// The v2 fixture over Streamable HTTP on a free loopback port (both eras; result A).
struct Fixture2HttpServer {
  std::unique_ptr<Process> proc;
  std::string url;
  Fixture2HttpServer();
};

// run-conformance.sh URL OUTDIR --requirements REV; the path of result.json, or nullopt.
std::optional<std::string> run_conformance(const std::string& url, const std::string& outdir,
                                           const std::string& requirements,
                                           std::string* log = nullptr);

// compare-conformance.sh A B [--strict], each line of its output a difference, sorted into the
// expected and the unexpected: `known` names whole scenarios ("name") or single checks
// ("name/check-id", then the scenario's pass/fail may differ as well).
struct Comparison {
  int exit_code = -1;
  std::vector<std::string> unexpected;  // differences outside `known`
  std::vector<std::string> known;       // differences of `known` scenarios
  std::string output;
};
Comparison compare_except(const std::string& a, const std::string& b, bool strict,
                          const std::set<std::string>& known);

}  // namespace mcpmqtt::test::modern_peers

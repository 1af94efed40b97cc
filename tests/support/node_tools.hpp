// The pinned MCP peers from npm, run from C++ tests: the official TypeScript SDK client
// (tests/node/sdk-client.mjs), the conformance suite runner and its comparison
// (tests/fixtures/), the conformance fixture server. See tests/node/README.md.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/process.hpp"

namespace mcpmqtt::test {

struct NodeRun {
  int exit_code = -1;
  std::vector<std::string> lines;  // stdout, one JSON object per line
  std::string err;
  // The first output line whose JSON has "type" == type (and "op" == op when given).
  std::optional<std::string> line(const std::string& type, const std::string& op = {}) const;
  // Every output line of a type.
  std::vector<std::string> all(const std::string& type) const;
};

// sdk-client.mjs with `args` (e.g. {"--url", URL} or {"--command", CMD, "--args", ...}) and a
// JSON script; waits for it to end.
NodeRun run_sdk_client(const std::vector<std::string>& args, const std::string& script_json,
                       std::chrono::milliseconds timeout = std::chrono::seconds(120));

// Runs every server scenario of the conformance suite against `url`; returns the path of the
// normalized result.json (written under `outdir`), or nullopt if the runner failed.
std::optional<std::string> run_conformance(const std::string& url, const std::string& outdir,
                                           std::string* log = nullptr);
// compare-conformance.sh: exit 0 when the two results are the same; output lists differences.
RunResult compare_conformance(const std::vector<std::string>& args);

// The conformance fixture server over Streamable HTTP on a free loopback port.
struct FixtureHttpServer {
  std::unique_ptr<Process> proc;
  std::string url;  // http://127.0.0.1:PORT/mcp
  FixtureHttpServer();
};

std::string fixture_script();  // tests/fixtures/conformance-server.mjs

// ---- MCP 2026-07-28 peers (v2 SDK, the 0.2.0-alpha.12 suite) ---------------------------------

std::string fixture2_script();     // tests/fixtures/conformance-server2.mjs (dual-era, v2 SDK)
std::string sdk2_server_script();  // tests/node/sdk2-server.mjs

// A Node MCP server over Streamable HTTP on a free loopback port: `script` started with
// `args`, which prints MCP_FIXTURE_URL=... once it listens.
struct NodeHttpServer {
  std::unique_ptr<Process> proc;
  std::string url;
  NodeHttpServer(const std::string& script, const std::vector<std::string>& args);
};

// run-conformance.sh URL OUTDIR --requirements REV (the suite pinned as conformance-next):
// the path of the normalized result.json, or nullopt if the runner failed.
std::optional<std::string> run_conformance_requirements(const std::string& url,
                                                        const std::string& outdir,
                                                        const std::string& requirements,
                                                        std::string* log = nullptr);

}  // namespace mcpmqtt::test

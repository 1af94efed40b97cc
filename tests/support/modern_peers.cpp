#include "tests/support/modern_peers.hpp"

#include <algorithm>
#include <map>
#include <sstream>
#include <stdexcept>

#include "tests/support/bridge_process.hpp"

namespace mcpmqtt::test::modern_peers {

namespace {

std::string source(const std::string& rel) {
  return std::string(MCPMQTT_SOURCE_DIR) + "/" + rel;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(line);
  return out;
}

}  // namespace

std::string sdk2_client_script() {
  return source("tests/node/sdk2-client.mjs");
}
std::string sdk2_server_script() {
  return source("tests/node/sdk2-server.mjs");
}
std::string fixture2_script() {
  return source("tests/fixtures/conformance-server2.mjs");
}

std::vector<std::string> client_argv(const std::vector<std::string>& args,
                                     const std::string& script_json) {
  std::vector<std::string> argv = {node_binary(), sdk2_client_script()};
  // --args must come last (everything after it is the command's arguments).
  auto it = std::find(args.begin(), args.end(), "--args");
  argv.insert(argv.end(), args.begin(), it);
  if (!script_json.empty()) {
    argv.push_back("--script-json");
    argv.push_back(script_json);
  }
  argv.insert(argv.end(), it, args.end());
  return argv;
}

NodeRun run_client(const std::vector<std::string>& args, const std::string& script_json,
                   std::chrono::milliseconds timeout) {
  auto r = run_capture(client_argv(args, script_json), timeout);
  NodeRun out;
  out.exit_code = r.exit_code;
  out.lines = lines_of(r.out);
  out.err = r.err;
  return out;
}

Fixture2HttpServer::Fixture2HttpServer() {
  proc =
      Process::start(Process::piped({node_binary(), fixture2_script(), "--http", "--port", "0"}));
  for (int i = 0; i < 50 && url.empty(); ++i) {
    auto l = proc->read_line(std::chrono::seconds(30));
    if (!l) break;
    const std::string key = "MCP_FIXTURE_URL=";
    if (l->rfind(key, 0) == 0) url = l->substr(key.size());
  }
  if (url.empty()) throw std::runtime_error("the v2 conformance fixture did not announce its URL");
}

std::optional<std::string> run_conformance(const std::string& url, const std::string& outdir,
                                           const std::string& requirements, std::string* log) {
  auto r = run_capture({source("tests/fixtures/run-conformance.sh"), url, outdir, "--requirements",
                        requirements, "--timeout", "60", "--deadline", "400"},
                       std::chrono::minutes(12));
  if (log) *log = r.out + r.err;
  if (r.exit_code != 0) return std::nullopt;
  return outdir + "/result.json";
}

Comparison compare_except(const std::string& a, const std::string& b, bool strict,
                          const std::set<std::string>& known) {
  std::vector<std::string> argv = {source("tests/fixtures/compare-conformance.sh"), a, b};
  if (strict) argv.push_back("--strict");
  auto r = run_capture(argv, std::chrono::seconds(60));
  Comparison c;
  c.exit_code = r.exit_code;
  c.output = r.out + r.err;
  // The differences of each scenario: "NAME: status A=… B=…", "NAME: check ID …".
  std::map<std::string, std::vector<std::string>> by_scenario;
  for (const auto& line : lines_of(r.out)) {
    const auto scenario = line.substr(0, line.find(':'));
    // The summary ("results differ: …") and notes are not differences of a scenario.
    if (scenario.find(' ') != std::string::npos || scenario == "note") continue;
    by_scenario[scenario].push_back(line);
  }
  for (const auto& [scenario, lines] : by_scenario) {
    // Known: the whole scenario, or each of its differing checks ("scenario/check-id"); then
    // the scenario's status may differ too.
    bool ok = known.count(scenario) != 0;
    if (!ok) {
      bool any_check = false;
      ok = true;
      for (const auto& line : lines) {
        const auto pos = line.find(": check ");
        if (pos == std::string::npos) continue;
        any_check = true;
        const auto rest = line.substr(pos + 8);
        const auto id = rest.substr(0, rest.find(' '));
        ok = ok && known.count(scenario + "/" + id) != 0;
      }
      ok = ok && any_check;
    }
    for (const auto& line : lines)
      (ok ? c.known : c.unexpected).push_back(line);
  }
  return c;
}

}  // namespace mcpmqtt::test::modern_peers

#include "tests/support/node_tools.hpp"

#include <stdexcept>

#include "tests/support/bridge_process.hpp"
#include "tests/support/mqtt_mcp_client.hpp"
#include "tests/support/temp_dir.hpp"

namespace mcpmqtt::test {

namespace {
std::string source(const std::string& rel) {
  return std::string(MCPMQTT_SOURCE_DIR) + "/" + rel;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < s.size()) {
    auto nl = s.find('\n', start);
    if (nl == std::string::npos) nl = s.size();
    if (nl > start) out.push_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}
}  // namespace

std::optional<std::string> NodeRun::line(const std::string& type, const std::string& op) const {
  for (const auto& l : lines) {
    if (json_at(l, "type") != type) continue;
    if (!op.empty() && json_at(l, "op") != op) continue;
    return l;
  }
  return std::nullopt;
}

std::vector<std::string> NodeRun::all(const std::string& type) const {
  std::vector<std::string> out;
  for (const auto& l : lines) {
    if (json_at(l, "type") == type) out.push_back(l);
  }
  return out;
}

std::string fixture_script() {
  return source("tests/fixtures/conformance-server.mjs");
}

NodeRun run_sdk_client(const std::vector<std::string>& args, const std::string& script_json,
                       std::chrono::milliseconds timeout) {
  std::vector<std::string> argv = {node_binary(), source("tests/node/sdk-client.mjs")};
  // --args must come last (everything after it is the command's arguments).
  auto it = std::find(args.begin(), args.end(), "--args");
  argv.insert(argv.end(), args.begin(), it);
  if (!script_json.empty()) {
    argv.push_back("--script-json");
    argv.push_back(script_json);
  }
  argv.insert(argv.end(), it, args.end());
  auto r = run_capture(argv, timeout);
  NodeRun out;
  out.exit_code = r.exit_code;
  out.lines = split_lines(r.out);
  out.err = r.err;
  return out;
}

std::optional<std::string> run_conformance(const std::string& url, const std::string& outdir,
                                           std::string* log) {
  auto r = run_capture({source("tests/fixtures/run-conformance.sh"), url, outdir},
                       std::chrono::minutes(12));
  if (log) *log = r.out + r.err;
  if (r.exit_code != 0) return std::nullopt;
  return outdir + "/result.json";
}

RunResult compare_conformance(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {source("tests/fixtures/compare-conformance.sh")};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_capture(argv, std::chrono::seconds(60));
}

FixtureHttpServer::FixtureHttpServer() {
  proc = Process::start(Process::piped({node_binary(), fixture_script(), "--http", "--port", "0"}));
  for (int i = 0; i < 50 && url.empty(); ++i) {
    auto l = proc->read_line(std::chrono::seconds(30));
    if (!l) break;
    const std::string key = "MCP_FIXTURE_URL=";
    if (l->rfind(key, 0) == 0) url = l->substr(key.size());
  }
  if (url.empty()) throw std::runtime_error("the conformance fixture did not announce its URL");
}

std::string fixture2_script() {
  return source("tests/fixtures/conformance-server2.mjs");
}

std::string sdk2_server_script() {
  return source("tests/node/sdk2-server.mjs");
}

NodeHttpServer::NodeHttpServer(const std::string& script, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {node_binary(), script};
  argv.insert(argv.end(), args.begin(), args.end());
  proc = Process::start(Process::piped(argv));
  for (int i = 0; i < 50 && url.empty(); ++i) {
    auto l = proc->read_line(std::chrono::seconds(30));
    if (!l) break;
    const std::string key = "MCP_FIXTURE_URL=";
    if (l->rfind(key, 0) == 0) url = l->substr(key.size());
  }
  if (url.empty()) throw std::runtime_error(script + " did not announce its URL");
}

std::optional<std::string> run_conformance_requirements(const std::string& url,
                                                        const std::string& outdir,
                                                        const std::string& requirements,
                                                        std::string* log) {
  auto r = run_capture({source("tests/fixtures/run-conformance.sh"), url, outdir, "--requirements",
                        requirements, "--timeout", "60", "--deadline", "400"},
                       std::chrono::minutes(12));
  if (log) *log = r.out + r.err;
  if (r.exit_code != 0) return std::nullopt;
  return outdir + "/result.json";
}

}  // namespace mcpmqtt::test

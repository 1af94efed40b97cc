#include "stdio/process_util.hpp"

#include <cstring>

#include <signal.h>
#include <sys/wait.h>

extern char** environ;

namespace mcpmqtt::stdio {

bool is_inherited_variable(std::string_view name) {
  static constexpr std::string_view kNames[] = {"HOME", "LOGNAME", "PATH", "SHELL",  "TERM",
                                                "USER", "LANG",    "TZ",   "TMPDIR", "LC_ALL"};
  for (const auto n : kNames) {
    if (name == n) return true;
  }
  return name.size() > 3 && name.substr(0, 3) == "LC_";
}

namespace {

bool valid_name(std::string_view name) {
  return !name.empty() && name.find('=') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

}  // namespace

std::vector<std::string> child_environment(const std::vector<std::string>& parent,
                                           const std::map<std::string, std::string>& overrides) {
  std::map<std::string, std::string> env;
  for (const auto& kv : parent) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string name = kv.substr(0, eq);
    if (is_inherited_variable(name)) env.insert_or_assign(std::move(name), kv.substr(eq + 1));
  }
  for (const auto& [name, value] : overrides) {
    if (valid_name(name)) env.insert_or_assign(name, value);
  }
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env)
    out.push_back(name + "=" + value);
  return out;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e)
    out.emplace_back(*e);
  return out;
}

std::optional<std::string> find_variable(const std::vector<std::string>& env,
                                         std::string_view name) {
  for (const auto& kv : env) {
    if (kv.size() > name.size() && kv[name.size()] == '=' && kv.compare(0, name.size(), name) == 0)
      return kv.substr(name.size() + 1);
  }
  return std::nullopt;
}

std::vector<std::string> exec_candidates(const std::string& command, std::string_view path) {
  std::vector<std::string> out;
  if (command.empty()) return out;
  if (command.find('/') != std::string::npos) {
    out.push_back(command);
    return out;
  }
  std::size_t start = 0;
  while (true) {
    const auto colon = path.find(':', start);
    const auto dir = path.substr(start, colon == std::string_view::npos ? colon : colon - start);
    if (dir.empty())
      out.push_back(command);  // an empty entry is the current directory
    else if (dir.back() == '/')
      out.push_back(std::string(dir) + command);
    else
      out.push_back(std::string(dir) + "/" + command);
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  return out;
}

std::string signal_name(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    std::string s = "killed by signal " + std::to_string(sig);
    if (const char* abbrev = ::sigabbrev_np(sig)) s += std::string(" (SIG") + abbrev + ")";
    if (WCOREDUMP(status)) s += ", core dumped";
    return s;
  }
  return "ended with wait status " + std::to_string(status);
}

}  // namespace mcpmqtt::stdio

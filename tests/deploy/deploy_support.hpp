// Helpers for the deployment tests: repository files, programs on PATH, a systemd unit read as
// sections of assignments.
#pragma once

#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <unistd.h>

#include "tests/support/prerequisite.hpp"
#include "tests/support/temp_dir.hpp"

namespace mcpmqtt::test::deploy {

inline const std::string kSourceDir = MCPMQTT_SOURCE_DIR;

inline std::string repo_file(const std::string& relative) {
  return read_file(kSourceDir + "/" + relative);
}

// The full path of `name` on $PATH, or nullopt.
inline std::optional<std::string> find_program(const std::string& name) {
  const char* path = ::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string full = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(full.c_str(), X_OK) == 0) return full;
  }
  return std::nullopt;
}

// A program a test needs is not on PATH: a failure under the test command, a warning elsewhere
// (tests/support/prerequisite.hpp).
inline void missing_tool(const std::string& what) {
  missing_prerequisite("missing " + what);
}

// `text` with the one occurrence of `from` replaced by `to`; empty when `from` does not occur
// exactly once (a test then fails on the empty text rather than testing the wrong thing).
inline std::string replace_once(const std::string& text, const std::string& from,
                                const std::string& to) {
  const auto at = text.find(from);
  if (at == std::string::npos || text.find(from, at + 1) != std::string::npos) return {};
  return text.substr(0, at) + to + text.substr(at + from.size());
}

// A systemd unit file: for each section, its assignments in order (a key may repeat).
using Unit = std::map<std::string, std::vector<std::pair<std::string, std::string>>>;

inline Unit parse_unit(const std::string& text) {
  Unit unit;
  std::string section;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#' || line[first] == ';') continue;
    if (line[first] == '[') {
      section = line.substr(first + 1, line.find(']') - first - 1);
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    unit[section].emplace_back(line.substr(first, eq - first), line.substr(eq + 1));
  }
  return unit;
}

// The last value of `key` in `section` (systemd: later assignments win), or nullopt.
inline std::optional<std::string> unit_value(const Unit& unit, const std::string& section,
                                             const std::string& key) {
  auto s = unit.find(section);
  if (s == unit.end()) return std::nullopt;
  std::optional<std::string> value;
  for (const auto& [k, v] : s->second) {
    if (k == key) value = v;
  }
  return value;
}

// Every value of `key` in `section`, in order (for keys that accumulate, such as Environment=).
inline std::vector<std::string> unit_values(const Unit& unit, const std::string& section,
                                            const std::string& key) {
  std::vector<std::string> values;
  if (auto s = unit.find(section); s != unit.end()) {
    for (const auto& [k, v] : s->second) {
      if (k == key) values.push_back(v);
    }
  }
  return values;
}

}  // namespace mcpmqtt::test::deploy

#include "tests/support/proc_stats.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>
#include <vector>

#include <unistd.h>

namespace mcpmqtt::test {

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The fields of /proc/<pid>/stat after the command name: [0] is the state (field 3).
std::vector<std::string> stat_fields(const std::string& stat) {
  std::vector<std::string> out;
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return out;
  std::istringstream in(stat.substr(close + 1));
  for (std::string f; in >> f;)
    out.push_back(f);
  return out;
}

}  // namespace

std::size_t open_fds(pid_t pid) {
  std::error_code ec;
  std::size_t n = 0;
  for (std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end;
       !ec && it != end; it.increment(ec))
    ++n;
  return n;
}

std::size_t rss_kib(pid_t pid) {
  std::istringstream in(slurp("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6));
  }
  return 0;
}

double cpu_seconds(pid_t pid) {
  const auto f = stat_fields(slurp("/proc/" + std::to_string(pid) + "/stat"));
  // utime and stime are fields 14 and 15 of stat(5): [11] and [12] here.
  if (f.size() < 13) return 0;
  return static_cast<double>(std::stoull(f[11]) + std::stoull(f[12])) /
         static_cast<double>(::sysconf(_SC_CLK_TCK));
}

Children children_count(pid_t pid) {
  Children c;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end;
       it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto f = stat_fields(slurp(it->path().string() + "/stat"));
    if (f.size() < 2 || std::stol(f[1]) != pid) continue;
    (f[0] == "Z" ? c.zombies : c.live)++;
  }
  return c;
}

std::size_t tcp_connections_to(pid_t pid, std::uint16_t port) {
  const std::string base = "/proc/" + std::to_string(pid);
  std::set<std::string> inodes;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(base + "/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code lec;
    const auto target = std::filesystem::read_symlink(it->path(), lec).string();
    if (!lec && target.rfind("socket:[", 0) == 0)
      inodes.insert(target.substr(8, target.size() - 9));
  }
  // net/tcp: "sl local rem st ... inode": rem is HEX_IP:HEX_PORT, st 01 is ESTABLISHED.
  char want[16];
  std::snprintf(want, sizeof want, ":%04X", port);
  std::size_t n = 0;
  std::istringstream in(slurp(base + "/net/tcp"));
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string sl, local, remote, st, queues, tr, retr, uid, timeout, inode;
    f >> sl >> local >> remote >> st >> queues >> tr >> retr >> uid >> timeout >> inode;
    if (st == "01" && remote == std::string("0100007F") + want && inodes.count(inode)) ++n;
  }
  return n;
}

std::string Footprint::describe() const {
  return std::to_string(fds) + " fds, " + std::to_string(children) + " children, " +
         std::to_string(zombies) + " zombies, " + std::to_string(mqtt_connections) +
         " MQTT connections, " + std::to_string(rss_kib) + " KiB RSS";
}

Footprint footprint(pid_t pid, std::uint16_t broker_port) {
  Footprint f;
  f.fds = open_fds(pid);
  const auto c = children_count(pid);
  f.children = c.live;
  f.zombies = c.zombies;
  f.mqtt_connections = tcp_connections_to(pid, broker_port);
  f.rss_kib = rss_kib(pid);
  return f;
}

}  // namespace mcpmqtt::test

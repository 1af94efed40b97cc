#include "stdio/process_memory.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <string>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

namespace mcpmqtt::stdio {

std::optional<ProcStat> parse_proc_stat(std::string_view line) {
  const auto close = line.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  // After "pid (comm)": field 3 is the state, 5 the process group, 24 the resident set in pages.
  std::string_view rest = line.substr(close + 1);
  ProcStat out;
  bool have_pgrp = false, have_rss = false;
  for (int field = 3; field <= 24; ++field) {
    const auto start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(start);
    const auto end = std::min(rest.find(' '), rest.size());
    const std::string_view value = rest.substr(0, end);
    if (field == 5) {
      long long pgrp = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), pgrp);
      if (ec != std::errc() || p != value.data() + value.size()) return std::nullopt;
      out.pgrp = static_cast<pid_t>(pgrp);
      have_pgrp = true;
    } else if (field == 24) {
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), out.rss_pages);
      if (ec != std::errc() || p != value.data() + value.size()) return std::nullopt;
      have_rss = true;
    }
    rest.remove_prefix(end);
  }
  if (!have_pgrp || !have_rss) return std::nullopt;
  return out;
}

std::uint64_t resident_bytes_of_groups(const std::vector<pid_t>& pgids) {
  if (pgids.empty()) return 0;
  DIR* proc = ::opendir("/proc");
  if (!proc) return 0;
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  std::uint64_t pages = 0;
  std::string path;
  char buf[1024];
  while (const dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;  // only processes
    path.assign("/proc/").append(e->d_name).append("/stat");
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // gone meanwhile
    ssize_t n;
    do {
      n = ::read(fd, buf, sizeof buf - 1);
    } while (n < 0 && errno == EINTR);
    ::close(fd);
    if (n <= 0) continue;
    auto st = parse_proc_stat(std::string_view(buf, static_cast<std::size_t>(n)));
    if (st && std::find(pgids.begin(), pgids.end(), st->pgrp) != pgids.end())
      pages += st->rss_pages;
  }
  ::closedir(proc);
  return pages * page;
}

}  // namespace mcpmqtt::stdio

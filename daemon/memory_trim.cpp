#include "daemon/memory_trim.hpp"

#include <fstream>
#include <string>

#include <malloc.h>

namespace mcpmqtt::daemon {

namespace {

std::size_t rss_kib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6));
  }
  return 0;
}

}  // namespace

TrimResult trim_heap() {
  TrimResult r;
  r.rss_before_kib = rss_kib();
  ::malloc_trim(0);
  r.rss_after_kib = rss_kib();
  return r;
}

}  // namespace mcpmqtt::daemon

#include "daemon/memory_trim.hpp"

#include <cstdlib>
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

std::optional<std::string> huge_page_advice(std::string_view thp_enabled, const char* tunables) {
  // The kernel's choice is the bracketed word.
  if (thp_enabled.find("[madvise]") == std::string_view::npos) return std::nullopt;
  // glibc 2.35+: 1 makes malloc ask for huge pages (madvise) for its heap, 2 uses hugetlbfs.
  const std::string_view t = tunables ? tunables : "";
  if (t.find("glibc.malloc.hugetlb=1") != std::string_view::npos ||
      t.find("glibc.malloc.hugetlb=2") != std::string_view::npos)
    return std::nullopt;
  return std::string(
      "the heap is on 4 KiB pages (transparent huge pages are given on request here, and "
      "GLIBC_TUNABLES does not ask): an ingress holding thousands of idle sessions spends two to "
      "three times the CPU on their keep-alives; set GLIBC_TUNABLES=glibc.malloc.hugetlb=1 in "
      "the daemon's environment, as the systemd unit and the container image do");
}

std::optional<std::string> huge_page_advice() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  return huge_page_advice(line, std::getenv("GLIBC_TUNABLES"));
}

TrimResult trim_heap() {
  TrimResult r;
  r.rss_before_kib = rss_kib();
  ::malloc_trim(0);
  r.rss_after_kib = rss_kib();
  return r;
}

}  // namespace mcpmqtt::daemon

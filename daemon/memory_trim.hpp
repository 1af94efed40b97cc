// When the daemon gives the heap's free memory back to the system. A burst of sessions (a
// thousand clients that come and go) leaves the allocator holding the pages they used: the
// memory is free but stays resident, and RSS reads as if the sessions were still there. After
// the session count has fallen well below its peak, the daemon asks glibc to return what is free
// (malloc_trim), so RSS follows the load down.
//
// Pure policy, no I/O. Not thread-safe (the daemon's strand).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace mcpmqtt::daemon {

class MemoryTrimPolicy {
 public:
  // Under load, at least `min_drop` sessions must have ended since the peak and the count be at
  // most half the peak before a trim is worth its cost; once the last session has ended, any
  // drop is (the daemon is idle, and a small heap trims in microseconds).
  explicit MemoryTrimPolicy(std::size_t min_drop = 64) : min_drop_(min_drop) {}

  // The number of sessions now; true when the heap should be trimmed now.
  bool observe(std::size_t sessions) {
    if (sessions > peak_) peak_ = sessions;
    const bool idle = sessions == 0 && peak_ > 0;
    if (!idle && (peak_ - sessions < min_drop_ || sessions > peak_ / 2)) return false;
    peak_ = sessions;
    return true;
  }

 private:
  std::size_t min_drop_;
  std::size_t peak_ = 0;
};

// Returns the allocator's free memory to the system; the resident set before and after, in KiB
// (0 when unknown).
struct TrimResult {
  std::size_t rss_before_kib = 0;
  std::size_t rss_after_kib = 0;
};
TrimResult trim_heap();

// Whether the heap sits on transparent huge pages, from the kernel's setting (the text of
// /sys/kernel/mm/transparent_hugepage/enabled, "always [madvise] never") and GLIBC_TUNABLES
// (null when unset): nullopt when it does (or the kernel has none to give), else a sentence for
// the log saying what to set. An ingress holding thousands of idle sessions touches each one's
// memory at every keep-alive; on 4 KiB pages that costs it two to three times the CPU
// (bench/README.md, "Idle sessions").
std::optional<std::string> huge_page_advice(std::string_view thp_enabled, const char* tunables);
// The same for this process.
std::optional<std::string> huge_page_advice();

}  // namespace mcpmqtt::daemon

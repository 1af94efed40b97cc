// When the daemon returns free heap memory to the system (daemon/memory_trim.hpp).
#include "daemon/memory_trim.hpp"

#include <catch2/catch.hpp>

using mcpmqtt::daemon::MemoryTrimPolicy;

TEST_CASE(
    "memory trim: under load only a large fall from the peak trims, and once idle any fall does, "
    "once",
    "[daemon]") {
  MemoryTrimPolicy p(64);
  CHECK_FALSE(p.observe(0));  // nothing ever ran
  CHECK_FALSE(p.observe(1000));
  CHECK_FALSE(p.observe(950));  // a small fall
  CHECK_FALSE(p.observe(501));  // more than half the peak left
  CHECK(p.observe(500));        // half of it ended: trim, and this is the new peak
  CHECK_FALSE(p.observe(500));
  CHECK_FALSE(p.observe(460));  // less than 64 ended since
  CHECK(p.observe(0));          // idle: trim
  CHECK_FALSE(p.observe(0));    // and not again while nothing happens
  CHECK_FALSE(p.observe(3));
  CHECK(p.observe(0));  // a few sessions came and went: idle again, trim
  // A peak below the minimum fall never trims under load.
  CHECK_FALSE(p.observe(40));
  CHECK_FALSE(p.observe(10));
  CHECK(p.observe(0));
}

TEST_CASE("memory trim: trimming reports the resident set before and after", "[daemon]") {
  const auto r = mcpmqtt::daemon::trim_heap();
  CHECK(r.rss_before_kib > 0);
  CHECK(r.rss_after_kib > 0);
}

TEST_CASE(
    "huge pages (issue 34): advice only where the kernel gives them on request and glibc does "
    "not ask",
    "[daemon]") {
  using mcpmqtt::daemon::huge_page_advice;
  const auto advice = huge_page_advice("always [madvise] never", nullptr);
  REQUIRE(advice);
  CHECK(advice->find("GLIBC_TUNABLES=glibc.malloc.hugetlb=1") != std::string::npos);
  CHECK(huge_page_advice("always [madvise] never", "glibc.malloc.arena_max=2"));
  CHECK_FALSE(huge_page_advice("always [madvise] never", "glibc.malloc.hugetlb=1"));
  CHECK_FALSE(huge_page_advice("always [madvise] never",
                               "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"));
  CHECK_FALSE(huge_page_advice("always [madvise] never", "glibc.malloc.hugetlb=2"));
  // Every allocation gets them anyway, or none can.
  CHECK_FALSE(huge_page_advice("[always] madvise never", nullptr));
  CHECK_FALSE(huge_page_advice("always madvise [never]", nullptr));
  CHECK_FALSE(huge_page_advice("", nullptr));
}

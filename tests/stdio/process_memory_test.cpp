// The memory bound's reading of /proc (stdio/process_memory.hpp): the stat line's fields, and
// the resident set of a real process group (this test's own).
#include "stdio/process_memory.hpp"

#include <catch2/catch.hpp>
#include <unistd.h>

using namespace mcpmqtt::stdio;

TEST_CASE(
    "process memory (proc(5) /proc/PID/stat): the process group and the resident set are read "
    "after the command name, which may hold spaces and parentheses",
    "[stdio][memory]") {
  const std::string line =
      "4242 (node (npx) x) S 4200 4242 4242 0 -1 4194560 2345 0 0 0 10 2 0 0 20 0 11 0 "
      "123456 1234567890 17539 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0";
  auto st = parse_proc_stat(line);
  REQUIRE(st);
  CHECK(st->pgrp == 4242);
  CHECK(st->rss_pages == 17539);
  CHECK_FALSE(parse_proc_stat("4242 node S 1 2"));               // no parenthesis
  CHECK_FALSE(parse_proc_stat("4242 (node) S 4200 x 4242"));     // a field that is no number
  CHECK_FALSE(parse_proc_stat("4242 (node) S 4200 4242 4242"));  // cut short
}

TEST_CASE(
    "process memory: the resident set of this test's own process group is counted, and a group "
    "that does not exist counts nothing",
    "[stdio][memory]") {
  const auto mine = resident_bytes_of_groups({::getpgrp()});
  CHECK(mine > (1u << 20));  // a test binary holds more than a MiB
  CHECK(resident_bytes_of_groups({}) == 0);
  // Process group ids are process ids; one past the kernel's largest is never in use.
  CHECK(resident_bytes_of_groups({4194305}) == 0);
}

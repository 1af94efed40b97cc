// Tests that need something of the machine (a program, IPv6 on loopback) and cannot run without
// it. Catch2 v2 has no "skipped": by default the test warns and passes, so that a developer
// without the tool can still run the rest; under the test command (scripts/test.sh sets
// MCPMQTT_REQUIRE_TOOLS=1 after installing everything) a missing prerequisite fails the test, so
// that nothing passes there without having run.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>

#include <catch2/catch.hpp>

namespace mcpmqtt::test {

inline bool prerequisites_required() {
  const char* v = std::getenv("MCPMQTT_REQUIRE_TOOLS");
  return v && *v && std::strcmp(v, "0") != 0;
}

// Reports that `what` is missing (with how to get it): a failure under the test command, a
// warning elsewhere. The caller returns from the test afterwards.
inline void missing_prerequisite(const std::string& what) {
  if (prerequisites_required()) {
    FAIL(what << " (MCPMQTT_REQUIRE_TOOLS is set: nothing may pass without running)");
  } else {
    WARN(what << ": this test did NOT run (set MCPMQTT_REQUIRE_TOOLS=1 to make that a failure)");
  }
}

}  // namespace mcpmqtt::test

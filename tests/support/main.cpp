// Catch2 entry point for every test executable.
#define CATCH_CONFIG_RUNNER
#include <csignal>
#include <cstdlib>

#include <catch2/catch.hpp>

#include "common/log.hpp"

int main(int argc, char* argv[]) {
  // Tests write to sockets and pipes whose peer may have gone; make that an error, not a kill.
  std::signal(SIGPIPE, SIG_IGN);
  // Loggers at debug so tests can capture what the code logs; the terminal shows warnings only,
  // unless MCPMQTT_TEST_LOG=debug (or another level) asks for more.
  mcpmqtt::log::set_level("debug");
  const char* level = std::getenv("MCPMQTT_TEST_LOG");
  mcpmqtt::log::set_stderr_level(level && *level ? level : "warn");
  return Catch::Session().run(argc, argv);
}

// Catch2 entry point for every test executable.
#define CATCH_CONFIG_RUNNER
#include <csignal>
#include <cstdlib>

#include <catch2/catch.hpp>

#include "bridge/log.hpp"

int main(int argc, char* argv[]) {
  // Tests write to sockets and pipes whose peer may have gone; make that an error, not a kill.
  std::signal(SIGPIPE, SIG_IGN);
  // Quiet by default; MCPMQTT_TEST_LOG=debug shows what the code under test logs.
  const char* level = std::getenv("MCPMQTT_TEST_LOG");
  mcpmqtt::log::set_level(level && *level ? level : "warn");
  return Catch::Session().run(argc, argv);
}

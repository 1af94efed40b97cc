// Catch2 entry point for every test executable.
#define CATCH_CONFIG_RUNNER
#include <csignal>

#include <catch2/catch.hpp>

int main(int argc, char* argv[]) {
  // Tests write to sockets and pipes whose peer may have gone; make that an error, not a kill.
  std::signal(SIGPIPE, SIG_IGN);
  return Catch::Session().run(argc, argv);
}

// mcp-mqtt-bridge: parse the command line, load the configuration, run.
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include <malloc.h>
#include <sys/resource.h>

#include "daemon/cli.hpp"
#include "daemon/run.hpp"

int main(int argc, char** argv) {
  using namespace mcpmqtt;
  // Buffers of 256 KiB and more (large tool results and resources, a megabyte or more each)
  // get mappings of their own, returned to the system when freed. glibc's default threshold
  // rises after the first such buffer is freed, and later ones then come from heaps that
  // different threads keep apart and rarely give back: with four 1 MiB results in flight
  // the peak varied from 3.6 to 4.6 times their size (ingress) from run to run; with this it is
  // 3.1 (ingress) and 2.2 (egress), at the same throughput and about 15 % more CPU per such
  // result (bench_compare, scenario 4). Smaller messages are unaffected.
  // MALLOC_MMAP_THRESHOLD_ in the environment still decides when set.
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) ::mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  // An HTTP ingress session holds two descriptors (the client's connection and its own MQTT
  // connection): use every descriptor the process was granted (systemd's LimitNOFILE, a
  // container's ulimit), not the soft limit of 1,024 that most shells start with.
  if (rlimit files{}; ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = daemon::parse_command_line(args);
  if (!parsed.command_line) {
    std::cerr << "mcp-mqtt-bridge: " << parsed.error << "\n";
    return daemon::kExitUsage;
  }
  return daemon::run(*parsed.command_line);
}

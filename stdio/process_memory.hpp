// The resident memory of child process groups, read from /proc: what a stdio server's children
// cost the machine, for the egress's memory bound (egress.max_memory_per_stdio_server_mb).
//
// Thread-safety: pure functions, except resident_bytes_of_groups(), which reads /proc.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <sys/types.h>

namespace mcpmqtt::stdio {

// What one /proc/PID/stat line says that the memory bound needs (proc(5)).
struct ProcStat {
  pid_t pgrp = 0;
  std::uint64_t rss_pages = 0;
};

// Parses a /proc/PID/stat line; the command name (field 2) may hold spaces and parentheses, so
// the fields are counted after its last ')'. nullopt when the line is not one.
std::optional<ProcStat> parse_proc_stat(std::string_view line);

// The resident set of every process whose process group is one of `pgids` (each child of the
// bridge leads a group of its own, which takes in what it starts: `npx` and the node it runs),
// in bytes. Processes that vanish while /proc is read are skipped.
std::uint64_t resident_bytes_of_groups(const std::vector<pid_t>& pgids);

}  // namespace mcpmqtt::stdio

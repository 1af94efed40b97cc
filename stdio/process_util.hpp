// Pure pieces of starting and ending child processes: the environment a child gets, the files
// tried for a command (execvp's PATH search), and wait statuses in words (no I/O).
//
// Thread-safety: pure functions, except current_environment(), which reads `environ`.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mcpmqtt::stdio {

// True for the variables a child inherits from the bridge's environment: those the MCP SDKs
// pass on to stdio servers (HOME, LOGNAME, PATH, SHELL, TERM, USER), plus the locale (LANG,
// LC_ALL, LC_*), TZ and TMPDIR so that text and temporary files work. Nothing else of the
// daemon's environment (credentials such as MCPMQTT_MQTT_PASSWORD above all) reaches a child.
bool is_inherited_variable(std::string_view name);

// The child's environment as "NAME=value" strings sorted by name: the inherited subset of
// `parent` ("NAME=value" strings), with `overrides` (the server entry's "env") on top. Names that
// cannot be environment variable names (empty, or containing '=' or a NUL byte) are left out.
std::vector<std::string> child_environment(const std::vector<std::string>& parent,
                                           const std::map<std::string, std::string>& overrides);

// The bridge's own environment as "NAME=value" strings.
std::vector<std::string> current_environment();

// The value of `name` in an environment of "NAME=value" strings; nullopt when absent.
std::optional<std::string> find_variable(const std::vector<std::string>& env,
                                         std::string_view name);

// The search path used when PATH is not set, as glibc's execvp uses.
inline constexpr std::string_view kDefaultPath = "/bin:/usr/bin";

// The files execvp would try for `command`, in order: the command itself when it contains a
// '/', else each PATH directory joined with it (an empty directory entry means the current
// directory). Empty when `command` is empty.
std::vector<std::string> exec_candidates(const std::string& command, std::string_view path);

// "SIGKILL" for 9; "signal 64" when the number has no name.
std::string signal_name(int sig);

// A waitpid() status in words: "exited with status 3", "killed by signal 9 (SIGKILL)",
// "killed by signal 11 (SIGSEGV), core dumped".
std::string describe_wait_status(int status);

}  // namespace mcpmqtt::stdio

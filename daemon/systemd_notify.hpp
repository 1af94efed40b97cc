// The systemd notification protocol (sd_notify(3)) spoken directly over $NOTIFY_SOCKET, without
// libsystemd: readiness, reloading, stopping, a status line and watchdog keep-alives for a
// Type=notify unit. Depends on nothing of the daemon but the logger.
//
// Thread-safe: every member may be called from any thread. Never throws. When NOTIFY_SOCKET is
// unset (not started by systemd) every call does nothing. The first failure (a bad
// NOTIFY_SOCKET, a socket that cannot be created, a datagram that cannot be sent) is logged as a
// warning on the "daemon" logger; later failures are not, so a watchdog timer cannot flood the
// journal.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <sys/types.h>

namespace mcpmqtt::daemon {

// The parts of the protocol that do no I/O, exposed for tests.
namespace sd_notify {

// Environment lookups go through this (same shape as std::getenv), so tests can supply their own.
using GetEnv = const char* (*)(const char*);

// Where $NOTIFY_SOCKET points: an absolute filesystem path, or an abstract socket name (written
// with a leading '@', which stands for the leading NUL byte of the kernel's abstract namespace).
struct Address {
  std::string name;  // the path, or the abstract name without the '@'
  bool abstract = false;
};

// Parses a $NOTIFY_SOCKET value. nullopt, with `why` set, for an empty value, a relative path, a
// name too long for sockaddr_un, or a form this implementation does not speak (vsock:).
std::optional<Address> parse_address(std::string_view value, std::string& why);

// Longest STATUS= text sent; longer text is cut at a UTF-8 character boundary. systemd reads
// notification datagrams into a buffer of PIPE_BUF (4096) bytes and drops larger ones whole.
inline constexpr std::size_t kMaxStatusBytes = 1024;

// The datagrams, as newline-separated assignments (no trailing newline). A non-empty `status` adds
// STATUS=, with line breaks and NUL bytes turned into spaces (one status line, one assignment).
std::string ready_message(std::string_view status = {});
std::string stopping_message(std::string_view status = {});
// MONOTONIC_USEC is CLOCK_MONOTONIC at the time of the reload request: systemd 253+ requires it
// with RELOADING=1 for Type=notify-reload; older versions ignore it.
std::string reloading_message(std::uint64_t monotonic_usec, std::string_view status = {});
std::string status_message(std::string_view status);
std::string watchdog_message();

// How often to send WATCHDOG=1: half of $WATCHDOG_USEC (sd_watchdog_enabled(3) recommends that),
// or nullopt when the watchdog is not enabled for process `self` — WATCHDOG_USEC unset, zero or
// not a number, or WATCHDOG_PID set to another process.
std::optional<std::chrono::microseconds> watchdog_interval(const char* watchdog_usec,
                                                           const char* watchdog_pid, pid_t self);

}  // namespace sd_notify

// Sends notifications to the service manager that started this process.
class SystemdNotifier {
 public:
  // Reads $NOTIFY_SOCKET now (through `getenv_fn`, std::getenv when null). $WATCHDOG_USEC and
  // $WATCHDOG_PID are read by watchdog_interval().
  explicit SystemdNotifier(sd_notify::GetEnv getenv_fn = nullptr);
  ~SystemdNotifier();
  SystemdNotifier(const SystemdNotifier&) = delete;
  SystemdNotifier& operator=(const SystemdNotifier&) = delete;

  // True when $NOTIFY_SOCKET names a socket this class can send to.
  bool enabled() const { return address_.has_value(); }

  // Each returns true when the datagram was handed to the kernel, false when not enabled or on
  // an error. The daemon may ignore the result: a failure is logged once by the notifier.
  //
  // READY=1 (plus STATUS= when given): start-up finished, or a reload finished.
  bool ready(std::string_view status = {});
  // RELOADING=1 with MONOTONIC_USEC=now (plus STATUS=); follow with ready() when done.
  bool reloading(std::string_view status = {});
  // STOPPING=1 (plus STATUS=): shutdown has begun.
  bool stopping(std::string_view status = {});
  // STATUS=text: shown by `systemctl status`.
  bool status(std::string_view text);
  // WATCHDOG=1: the keep-alive, to be sent every watchdog_interval().
  bool watchdog();
  // Sends `message` as it is (newline-separated assignments).
  bool notify(std::string_view message);

  // Half of the unit's WatchdogSec= when the watchdog applies to this process; nullopt otherwise.
  std::optional<std::chrono::microseconds> watchdog_interval() const;

 private:
  void warn_once(const std::string& what);

  sd_notify::GetEnv getenv_;
  std::optional<sd_notify::Address> address_;
  std::mutex mu_;  // guards fd_ and warned_
  int fd_ = -1;
  bool warned_ = false;
};

}  // namespace mcpmqtt::daemon

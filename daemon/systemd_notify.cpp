#include "daemon/systemd_notify.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/errno_text.hpp"
#include "common/log.hpp"

namespace mcpmqtt::daemon {

namespace sd_notify {

namespace {

constexpr std::size_t kSunPathSize = sizeof(sockaddr_un{}.sun_path);

// One line of text: line breaks would start a new assignment and NUL bytes would end the
// datagram early for systemd's parser.
std::string one_line(std::string_view text) {
  std::size_t n = text.size();
  if (n > kMaxStatusBytes) {
    n = kMaxStatusBytes;
    // Do not cut a UTF-8 sequence in half: back up over continuation bytes (10xxxxxx).
    while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80)
      --n;
  }
  std::string out(text.substr(0, n));
  for (char& c : out) {
    if (c == '\n' || c == '\r' || c == '\0') c = ' ';
  }
  return out;
}

std::string with_status(std::string message, std::string_view status) {
  if (!status.empty()) message += "\nSTATUS=" + one_line(status);
  return message;
}

// A decimal number without sign or spaces that fits in 64 bits.
std::optional<std::uint64_t> parse_decimal(const char* text) {
  if (!text || !*text) return std::nullopt;
  std::uint64_t value = 0;
  for (const char* p = text; *p; ++p) {
    if (*p < '0' || *p > '9') return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(*p - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

}  // namespace

std::optional<Address> parse_address(std::string_view value, std::string& why) {
  if (value.empty()) {
    why = "is empty";
    return std::nullopt;
  }
  Address a;
  if (value.front() == '@') {
    a.abstract = true;
    a.name = std::string(value.substr(1));
    // The abstract name follows the leading NUL in sun_path.
    if (a.name.empty() || a.name.size() + 1 > kSunPathSize) {
      why = "is not an abstract socket name of 1 to " + std::to_string(kSunPathSize - 1) +
            " bytes after '@'";
      return std::nullopt;
    }
    return a;
  }
  if (value.front() == '/') {
    a.name = std::string(value);
    // A path needs its terminating NUL inside sun_path.
    if (a.name.size() + 1 > kSunPathSize || a.name.find('\0') != std::string::npos) {
      why = "is a path longer than " + std::to_string(kSunPathSize - 1) + " bytes";
      return std::nullopt;
    }
    return a;
  }
  if (value.starts_with("vsock:")) {
    why = "is an AF_VSOCK address, which this build does not support";
    return std::nullopt;
  }
  why = "is neither an absolute path nor an abstract name starting with '@'";
  return std::nullopt;
}

std::string ready_message(std::string_view status) {
  return with_status("READY=1", status);
}

std::string stopping_message(std::string_view status) {
  return with_status("STOPPING=1", status);
}

std::string reloading_message(std::uint64_t monotonic_usec, std::string_view status) {
  return with_status("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(monotonic_usec), status);
}

std::string status_message(std::string_view status) {
  return "STATUS=" + one_line(status);
}

std::string watchdog_message() {
  return "WATCHDOG=1";
}

std::optional<std::chrono::microseconds> watchdog_interval(const char* watchdog_usec,
                                                           const char* watchdog_pid, pid_t self) {
  const auto usec = parse_decimal(watchdog_usec);
  if (!usec || *usec == 0) return std::nullopt;
  // WATCHDOG_PID is set when the manager means one process of the unit (the main one); a child
  // that inherited the environment must not send keep-alives for it.
  if (watchdog_pid && *watchdog_pid) {
    const auto pid = parse_decimal(watchdog_pid);
    if (!pid || *pid != static_cast<std::uint64_t>(self)) return std::nullopt;
  }
  // Microseconds as a 64-bit count; a value too large for the duration type is clamped.
  constexpr auto kMax = static_cast<std::uint64_t>(std::chrono::microseconds::max().count());
  const std::uint64_t half = *usec / 2 > kMax ? kMax : *usec / 2;
  return std::chrono::microseconds(half == 0 ? 1 : static_cast<std::int64_t>(half));
}

}  // namespace sd_notify

SystemdNotifier::SystemdNotifier(sd_notify::GetEnv getenv_fn)
    : getenv_(getenv_fn ? getenv_fn
                        : [](const char* name) -> const char* { return std::getenv(name); }) {
  const char* value = getenv_("NOTIFY_SOCKET");
  if (!value) return;  // not started by a service manager that wants notifications
  std::string why;
  address_ = sd_notify::parse_address(value, why);
  if (!address_) warn_once("NOTIFY_SOCKET " + why + "; systemd notifications are off");
}

SystemdNotifier::~SystemdNotifier() {
  if (fd_ >= 0) ::close(fd_);
}

bool SystemdNotifier::ready(std::string_view status) {
  return notify(sd_notify::ready_message(status));
}

bool SystemdNotifier::reloading(std::string_view status) {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const auto usec = static_cast<std::uint64_t>(ts.tv_sec) * 1000000u +
                    static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
  return notify(sd_notify::reloading_message(usec, status));
}

bool SystemdNotifier::stopping(std::string_view status) {
  return notify(sd_notify::stopping_message(status));
}

bool SystemdNotifier::status(std::string_view text) {
  return notify(sd_notify::status_message(text));
}

bool SystemdNotifier::watchdog() {
  return notify(sd_notify::watchdog_message());
}

std::optional<std::chrono::microseconds> SystemdNotifier::watchdog_interval() const {
  if (!address_) return std::nullopt;  // nobody to send keep-alives to
  return sd_notify::watchdog_interval(getenv_("WATCHDOG_USEC"), getenv_("WATCHDOG_PID"),
                                      ::getpid());
}

bool SystemdNotifier::notify(std::string_view message) {
  if (!address_) return false;
  std::lock_guard lock(mu_);
  if (fd_ < 0) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
      warn_once(std::string("cannot create a socket for systemd notifications: ") +
                errno_text(errno));
      return false;
    }
    // A manager that does not read its socket must not stall the event loop for long: a full
    // receive queue blocks sendto for at most this long, then the notification is dropped.
    timeval timeout{};
    timeout.tv_sec = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  }
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  socklen_t len = 0;
  if (address_->abstract) {
    // sun_path[0] stays NUL; the name's length is part of the address, no terminator.
    std::memcpy(sa.sun_path + 1, address_->name.data(), address_->name.size());
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + address_->name.size());
  } else {
    std::memcpy(sa.sun_path, address_->name.data(), address_->name.size());
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address_->name.size() + 1);
  }
  ssize_t sent = -1;
  do {
    sent = ::sendto(fd_, message.data(), message.size(), MSG_NOSIGNAL,
                    reinterpret_cast<const sockaddr*>(&sa), len);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) {
    const std::string where = (address_->abstract ? "@" : "") + address_->name;
    warn_once("cannot send a notification to systemd at NOTIFY_SOCKET=" + where + ": " +
              errno_text(errno));
    return false;
  }
  return true;
}

void SystemdNotifier::warn_once(const std::string& what) {
  if (warned_) return;
  warned_ = true;
  log::daemon()->warn("{} (further systemd notification errors are not logged)", what);
}

}  // namespace mcpmqtt::daemon

// A stand-in for systemd's notification socket: an AF_UNIX datagram socket, bound in a temporary
// directory or under a random abstract name, that receives what a process sends to
// $NOTIFY_SOCKET, together with the sender's pid as the kernel reports it (SCM_CREDENTIALS, which
// systemd uses for NotifyAccess=main).
//
// Not thread-safe: one test thread reads it.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <sys/types.h>

#include "tests/support/temp_dir.hpp"

namespace mcpmqtt::test {

class NotifySocket {
 public:
  enum class Kind { path, abstract };

  // Binds the socket; throws std::runtime_error when it cannot.
  explicit NotifySocket(Kind kind = Kind::path);
  // Binds the socket at `path` (which must not exist yet; the caller removes it afterwards).
  explicit NotifySocket(const std::string& path);
  ~NotifySocket();
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  // The value to put in $NOTIFY_SOCKET: the path, or '@' and the abstract name.
  const std::string& address() const { return address_; }

  struct Datagram {
    std::string text;
    pid_t sender_pid = 0;
    // The assignments of the datagram, "KEY=value" split at the first '='.
    std::map<std::string, std::string> fields() const;
  };
  // The next datagram, or nullopt when none arrives before the timeout.
  std::optional<Datagram> receive(std::chrono::milliseconds timeout);
  // Receives until a datagram has the assignment `key`=`value` (e.g. "READY", "1"), dropping
  // the others; nullopt when none arrives before the timeout.
  std::optional<Datagram> wait_for(const std::string& key, const std::string& value,
                                   std::chrono::milliseconds timeout);

 private:
  std::unique_ptr<TempDir> dir_;  // only for Kind::path
  void bind_address(bool abstract, const std::string& name);

  std::string address_;
  int fd_ = -1;
};

}  // namespace mcpmqtt::test

// A child process speaking newline-delimited JSON-RPC on its stdin and stdout (002 §stdio) as
// a Channel: the upstream end of a stdio egress session, one child per MQTT client session.
//
// The child is started without a shell, with a minimal environment, in its own process group,
// with no descriptor of the bridge but its three pipes. Its stdout is read line by line with a
// size limit and parsed; lines that are not JSON-RPC are logged as protocol violations and
// dropped. Its stderr goes to the log line by line. Its stdin is written one message per line,
// one write in flight, with a bounded queue behind it.
//
// Ending: close() closes the child's stdin (after the queued messages); a child still running
// `terminate_after` later gets SIGTERM, and `kill_after` after that SIGKILL, both sent to its
// whole process group. When the child exits, whatever is left of its process group is
// SIGKILLed before the child is reaped, so no grandchild outlives it. A child that exits by
// itself is reported as Kind::exited with its status, after every message it wrote has been
// delivered. Dropping the last reference to a ChildChannel closes it; the termination then
// continues in the background. Nothing is ever left as a zombie: exits are watched with a
// pidfd (or, where pidfd_open is missing, a waitpid(WNOHANG) timer) and every child is reaped
// by its own channel. Owners that must know when all children are gone use a ChildRegistry.
//
// The bridge must ignore SIGPIPE (the daemon does): writing to a dead child's stdin is then an
// error, not the end of the bridge.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <sys/types.h>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/relay/channel.hpp"
#include "common/error.hpp"
#include "common/expected.hpp"

namespace mcpmqtt::stdio {

class ChildChannel;
namespace detail {
class ChildProcess;
}

// How the end of a child is noticed.
enum class ExitWatch {
  automatic,  // a pidfd where the kernel has pidfd_open (Linux ≥ 5.3), else polling
  polling,    // waitpid(WNOHANG) every 100 ms
};

struct ChildSpec {
  std::string name;  // the server-name, for logs and messages ("demo/everything")
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;           // merged over the inherited minimal environment
  std::string cwd;                                  // empty: the bridge's working directory
  std::chrono::milliseconds terminate_after{2000};  // stdin closed → SIGTERM
  std::chrono::milliseconds kill_after{3000};       // SIGTERM → SIGKILL
  // After the child exits, how long to wait for the rest of its output (a grandchild that left
  // the process group may keep the pipes open); after its stdout closes, how long to wait for
  // it to exit before the channel closes with an error.
  std::chrono::milliseconds drain_after{1000};
  std::string log_prefix;  // prepended to every log line, e.g. the MQTT session's prefix
  jsonrpc::Limits limits;  // per message read from the child's stdout
  std::size_t max_queued_bytes = 8 * 1024 * 1024;  // toward the child's stdin, in flight included
  std::size_t max_queued_messages = 16384;         // the same queue, in messages
  ExitWatch exit_watch = ExitWatch::automatic;
};

// Counts the children started and not yet reaped, for the daemon's metrics ("children alive")
// and its shutdown. Thread-safe.
class ChildRegistry {
 public:
  ChildRegistry() = default;
  ChildRegistry(const ChildRegistry&) = delete;
  ChildRegistry& operator=(const ChildRegistry&) = delete;

  // Children started through this registry and not yet reaped.
  std::size_t alive() const;
  // Closes every child's channel as if the child had gone: each owner gets on_close with
  // Kind::shutdown and `detail`, and each child is terminated (stdin, SIGTERM, SIGKILL). Work
  // is posted to each channel's strand; returns at once.
  void shutdown_all(const std::string& detail);
  // The children of one server (ChildSpec::name) not yet reaped, and the resident memory of
  // their process groups (read from /proc: a few ms with hundreds of processes on the machine).
  struct Usage {
    std::size_t children = 0;
    std::uint64_t resident_bytes = 0;
  };
  Usage usage(const std::string& name) const;
  // Blocks until no child is alive or the timeout passes; true when none is. Not for use on a
  // thread that runs the io_context the children are on.
  bool wait_until_none(std::chrono::milliseconds timeout) const;
  // Calls `fn` once when no child is alive: at once (on this thread) if none is, else on the
  // thread that reaps the last one.
  void on_none(std::function<void()> fn);

 private:
  friend class detail::ChildProcess;
  friend class ChildChannel;
  void add(const std::shared_ptr<detail::ChildProcess>& child, pid_t pid, std::string name);
  void remove(const detail::ChildProcess* child);

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  struct Live {
    std::weak_ptr<detail::ChildProcess> child;
    pid_t pid = 0;  // also its process group
    std::string name;
  };
  std::map<const detail::ChildProcess*, Live> live_;
  std::vector<std::function<void()>> on_none_;
};

// One strand; not thread-safe. Every call on the strand given to create().
class ChildChannel final : public bridge::Channel {
 public:
  // Starts the child. Fails, without leaving any process behind, with spawn()'s kind of failure
  // and a sentence for people that names the server, the command and what went wrong, e.g.
  // `cannot start server "demo/x" (command "npx"): "npx" was not found in PATH (/usr/bin:/bin); …`.
  static Expected<std::shared_ptr<ChildChannel>, Error> create(
      boost::asio::any_io_executor strand, ChildSpec spec,
      std::shared_ptr<ChildRegistry> registry = nullptr);

  // Closes the channel if still open (as close() with Kind::shutdown): the child is
  // terminated in the background.
  ~ChildChannel() override;

  void start(Receiver receiver) override;
  void send(jsonrpc::Message message) override;
  void close(const bridge::CloseReason& why) override;
  std::string describe() const override;  // "[child demo/x pid 4242]"

  pid_t pid() const;

 private:
  explicit ChildChannel(std::shared_ptr<detail::ChildProcess> impl) : impl_(std::move(impl)) {}

  std::shared_ptr<detail::ChildProcess> impl_;
};

}  // namespace mcpmqtt::stdio

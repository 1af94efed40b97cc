#include "stdio/child_channel.hpp"

#include <array>
#include <cerrno>
#include <csignal>
#include <deque>
#include <optional>
#include <string_view>
#include <utility>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/metrics.hpp"
#include "stdio/child_lifecycle.hpp"
#include "stdio/line_codec.hpp"
#include "stdio/line_splitter.hpp"
#include "stdio/process_memory.hpp"
#include "stdio/process_util.hpp"
#include "stdio/spawn.hpp"

namespace mcpmqtt::stdio {

namespace asio = boost::asio;
using bridge::CloseReason;
using Kind = CloseReason::Kind;
using boost::system::error_code;

// ---- ChildRegistry ------------------------------------------------------------------------------

std::size_t ChildRegistry::alive() const {
  std::lock_guard lock(mu_);
  return live_.size();
}

bool ChildRegistry::wait_until_none(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return live_.empty(); });
}

void ChildRegistry::on_none(std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    if (!live_.empty()) {
      on_none_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

ChildRegistry::Usage ChildRegistry::usage(const std::string& name) const {
  std::vector<pid_t> groups;
  {
    std::lock_guard lock(mu_);
    for (const auto& [ptr, live] : live_) {
      if (live.name == name) groups.push_back(live.pid);
    }
  }
  return {groups.size(), resident_bytes_of_groups(groups)};
}

void ChildRegistry::add(const std::shared_ptr<detail::ChildProcess>& child, pid_t pid,
                        std::string name) {
  std::lock_guard lock(mu_);
  live_.emplace(child.get(), Live{child, pid, std::move(name)});
}

void ChildRegistry::remove(const detail::ChildProcess* child) {
  std::vector<std::function<void()>> fns;
  {
    std::lock_guard lock(mu_);
    if (live_.erase(child) == 0) return;
    if (live_.empty()) fns.swap(on_none_);
  }
  cv_.notify_all();
  for (auto& fn : fns)
    fn();
}

// ---- the child process --------------------------------------------------------------------------

namespace detail {

namespace {

constexpr std::size_t kStdoutChunk = 64 * 1024;
constexpr std::size_t kStderrChunk = 16 * 1024;
constexpr std::size_t kStderrMaxLine = 64 * 1024;  // longer stderr lines are cut in the log
constexpr std::size_t kStderrLogBytes = 1000;
constexpr std::size_t kViolationLogBytes = 200;
constexpr auto kPollInterval = std::chrono::milliseconds(100);

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace

// The process behind a ChildChannel. It outlives its ChildChannel until the child is reaped:
// every pending operation holds it. One strand; not thread-safe.
class ChildProcess : public std::enable_shared_from_this<ChildProcess> {
 public:
  ChildProcess(asio::any_io_executor ex, ChildSpec spec, pid_t pid,
               std::shared_ptr<ChildRegistry> registry)
      : ex_(std::move(ex)),
        spec_(std::move(spec)),
        registry_(std::move(registry)),
        pid_(pid),
        label_("[child " + spec_.name + " pid " + std::to_string(pid) + "]"),
        log_(log::stdio()),
        stdin_(ex_),
        stdout_(ex_),
        stderr_(ex_),
        poll_timer_(ex_),
        term_timer_(ex_),
        drain_timer_(ex_),
        grace_timer_(ex_),
        out_lines_(spec_.limits.max_bytes),
        err_lines_(kStderrMaxLine, kStderrLogBytes),
        out_buf_(new char[kStdoutChunk]),
        err_buf_(new char[kStderrChunk]) {}

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Only when the io_context is destroyed with this child still running: no zombie, no orphan.
  ~ChildProcess() {
    if (life_.reaped()) return;
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    if (registry_) registry_->remove(this);
  }

  // Takes the child's pipes; on failure the descriptors stay with `p` and the child is ended
  // by the destructor.
  std::optional<Error> attach(SpawnedProcess& p) {
    error_code ec;
    for (auto [d, fd] : {std::pair{&stdin_, &p.stdin_fd}, std::pair{&stdout_, &p.stdout_fd},
                         std::pair{&stderr_, &p.stderr_fd}}) {
      d->assign(fd->get(), ec);
      if (ec) {
        // epoll_ctl's errno (ENOMEM, ENOSPC: out of watches for now).
        return Error(ec.category() == boost::system::system_category() ? errc_from_errno(ec.value())
                                                                       : Errc::failed,
                     "cannot watch the child's pipes: " + ec.message());
      }
      fd->release();
    }
    return std::nullopt;
  }

  const asio::any_io_executor& executor() const { return ex_; }
  const std::string& label() const { return label_; }
  pid_t pid() const { return pid_; }
  const std::string& name() const { return spec_.name; }

  // Right after construction: watch for the exit and read stderr from the first moment, so
  // that neither waits for start().
  void begin() {
    log_->info("{}{} started: command \"{}\" with {} argument(s){}", spec_.log_prefix, label_,
               spec_.command, spec_.args.size(),
               spec_.cwd.empty() ? std::string() : " in \"" + spec_.cwd + "\"");
    if (spec_.exit_watch == ExitWatch::automatic) {
      error_code ec;
      const int fd = open_pidfd(pid_);
      if (fd < 0) ec.assign(errno, boost::system::generic_category());
      if (fd >= 0) {
        pidfd_.emplace(ex_);
        pidfd_->assign(fd, ec);
        if (ec) {
          ::close(fd);
          pidfd_.reset();
        }
      }
      if (ec) {
        log_->debug("{}{} no pidfd ({}); polling for the exit", spec_.log_prefix, label_,
                    ec.message());
      }
    }
    watch_exit();
    do_read_stderr();
  }

  void start(bridge::Channel::Receiver receiver) {
    if (owner_ != Owner::unstarted) return;
    owner_ = Owner::receiving;
    receiver_ = std::move(receiver);
    if (!stdout_reading_) do_read_stdout();
    evaluate();
  }

  void send(jsonrpc::Message message) {
    if (owner_ == Owner::closed || life_.finished())
      return;  // Channel contract: ignored after close
    if (!life_.stdin_open()) {
      // The child is gone or stopped reading; the close that follows tells the owner.
      log_->debug("{}{} not writing a {} to a child whose stdin is closed", spec_.log_prefix,
                  label_, jsonrpc::to_string(message.kind()));
      return;
    }
    const std::size_t bytes = message.size() + 1;
    if (const std::string detail =
            queue_full("the child's stdin", "the server is not reading its input",
                       {spec_.max_queued_bytes, spec_.max_queued_messages}, queued_bytes_,
                       queue_.size(), bytes);
        !detail.empty()) {
      lose_stdin();
      report(Kind::error, detail);
      begin_termination();
      evaluate();
      return;
    }
    static auto& bytes_out = metrics::bytes_counter("stdio", "out");
    bytes_out.inc(bytes);
    queue_.push_back(std::move(message));
    queued_bytes_ += bytes;
    if (!writing_) do_write();
  }

  // The owner's close: no on_close; the child is ended in the background.
  void close(const CloseReason& why) {
    if (life_.finished()) return;
    if (owner_ != Owner::closed) {
      owner_ = Owner::closed;
      receiver_ = {};
      log_->debug("{}{} closing: {}", spec_.log_prefix, label_,
                  why.detail.empty() ? bridge::to_string(why.kind) : why.detail);
    }
    end_child();
  }

  // ChildRegistry::shutdown_all: like a close of the child's own, so the owner is told.
  void shutdown(const std::string& detail) {
    if (life_.finished()) return;
    if (owner_ != Owner::closed) report(Kind::shutdown, detail);
    end_child();
  }

 private:
  // ---- exit ---------------------------------------------------------------------------------

  void watch_exit() {
    if (life_.reaped()) return;
    if (pidfd_) {
      pidfd_->async_wait(asio::posix::descriptor_base::wait_read,
                         [self = shared_from_this()](const error_code& ec) {
                           if (ec == asio::error::operation_aborted) return;
                           if (ec) self->pidfd_.reset();  // fall back to polling
                           self->check_exit();
                           self->watch_exit();
                         });
      return;
    }
    poll_timer_.expires_after(kPollInterval);
    poll_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (ec) return;
      self->check_exit();
      self->watch_exit();
    });
  }

  void check_exit() {
    if (life_.reaped()) return;
    siginfo_t info{};
    int r;
    do {
      r = ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
    } while (r < 0 && errno == EINTR);
    if (r < 0) {
      // ECHILD: someone else reaped it (SIGCHLD ignored, or a stray waitpid(-1)).
      log_->warn("{}{} cannot wait for the child: {}", spec_.log_prefix, label_,
                 error_code(errno, boost::system::generic_category()).message());
      on_reaped(std::nullopt);
      return;
    }
    if (info.si_pid == 0) return;  // still running
    // The child is a zombie now, so its pid (the process group id) cannot be reused yet:
    // SIGKILL what is left of its group, so that no grandchild outlives it.
    ::kill(-pid_, SIGKILL);
    int status = 0;
    pid_t w;
    do {
      w = ::waitpid(pid_, &status, 0);
    } while (w < 0 && errno == EINTR);
    on_reaped(w == pid_ ? std::optional<int>(status) : std::nullopt);
  }

  void on_reaped(std::optional<int> status) {
    close_stdin(ChildState::reaped);
    status_ = status;
    if (registry_) registry_->remove(this);
    error_code ignored;
    if (pidfd_) pidfd_->close(ignored);
    poll_timer_.cancel();
    term_timer_.cancel();
    log_->info("{}{} {}", spec_.log_prefix, label_, exit_text());
    evaluate();
  }

  std::string exit_text() const {
    if (!status_) return "ended (its exit status is unknown: it was reaped elsewhere)";
    return describe_wait_status(*status_);
  }

  // ---- ending -------------------------------------------------------------------------------

  void end_child() {
    // Keep draining stdout so that a child writing while it ends never blocks on a full pipe.
    if (!stdout_reading_) do_read_stdout();
    begin_termination();
    evaluate();
  }

  // 002 §stdio: the client ends the server by closing its stdin, then terminating it.
  void begin_termination() {
    const ChildState now = life_.state();
    if (now != ChildState::running && now != ChildState::stdin_lost) return;
    if (now == ChildState::running && (writing_ || !queue_.empty()))
      to(ChildState::flushing);
    else
      close_stdin(ChildState::stdin_closed);
    term_timer_.expires_after(spec_.terminate_after);
    term_timer_.async_wait(
        [self = shared_from_this()](const error_code& ec) { self->on_term_timer(ec); });
  }

  void on_term_timer(const error_code& ec) {
    if (ec || life_.reaped()) return;
    if (life_.state() == ChildState::flushing || life_.state() == ChildState::stdin_closed) {
      log_->info(
          "{}{} still running {} ms after its stdin was closed: sending SIGTERM to its "
          "process group",
          spec_.log_prefix, label_, spec_.terminate_after.count());
      if (life_.state() == ChildState::flushing) close_stdin(ChildState::stdin_closed);
      signal_group(SIGTERM);
      to(ChildState::term_sent);
      term_timer_.expires_after(spec_.kill_after);
      term_timer_.async_wait(
          [self = shared_from_this()](const error_code& e) { self->on_term_timer(e); });
      return;
    }
    if (life_.state() == ChildState::term_sent) {
      log_->warn("{}{} still running {} ms after SIGTERM: sending SIGKILL to its process group",
                 spec_.log_prefix, label_, spec_.kill_after.count());
      signal_group(SIGKILL);
      to(ChildState::kill_sent);
    }
  }

  void signal_group(int sig) {
    if (life_.reaped()) return;
    ::kill(-pid_, sig);
    ::kill(pid_, sig);  // in case the child left its process group
  }

  // Decides what the state calls for: report the close to the owner, wait for the rest of the
  // output, or release everything.
  void evaluate() {
    if (life_.finished()) return;
    const bool drained = (stdout_done_ && stderr_done_) || drain_ == Wait::expired;
    if (owner_ == Owner::receiving) {
      if (life_.reaped()) {
        // Everything the child wrote is delivered before its exit is reported.
        if (!drained) return arm_drain();
        report(Kind::exited, "child " + exit_text());
      } else if (!pending_error_.empty()) {
        // Its stdout closed, or its stdin broke, while it runs: usually it is exiting; give it
        // a moment so that the exit status can be reported instead.
        if (grace_ != Wait::expired) return arm_grace();
        report(Kind::error, pending_error_);
        begin_termination();
      }
    }
    if (owner_ == Owner::closed && life_.reaped()) {
      if (!drained) return arm_drain();
      finish();
    }
  }

  void arm_drain() {
    if (drain_ != Wait::unarmed) return;
    drain_ = Wait::armed;
    drain_timer_.expires_after(spec_.drain_after);
    drain_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (ec) return;
      self->drain_ = Wait::expired;
      self->log_->debug(
          "{}{} output still open {} ms after the exit (held by a process outside "
          "its group?); closing it",
          self->spec_.log_prefix, self->label_, self->spec_.drain_after.count());
      self->evaluate();
    });
  }

  void arm_grace() {
    if (grace_ != Wait::unarmed) return;
    grace_ = Wait::armed;
    grace_timer_.expires_after(spec_.drain_after);
    grace_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (ec) return;
      self->grace_ = Wait::expired;
      self->evaluate();
    });
  }

  void report(Kind kind, const std::string& detail) {
    owner_ = Owner::closed;
    auto receiver = std::move(receiver_);
    receiver_ = {};
    if (kind != Kind::exited) log_->warn("{}{} closing: {}", spec_.log_prefix, label_, detail);
    if (receiver.on_close) receiver.on_close(CloseReason{kind, detail});
  }

  void finish() {
    if (!to(ChildState::finished)) return;
    error_code ignored;
    poll_timer_.cancel();
    term_timer_.cancel();
    drain_timer_.cancel();
    grace_timer_.cancel();
    stdin_.close(ignored);
    stdout_.close(ignored);
    stderr_.close(ignored);
    if (pidfd_) pidfd_->close(ignored);
    queue_.clear();
    queued_bytes_ = 0;
  }

  // ---- stdin --------------------------------------------------------------------------------

  void do_write() {
    writing_ = true;
    // The handler holds the message, so its bytes outlive a close of the queue mid-write.
    jsonrpc::Message m = queue_.front();
    const auto text = m.text();
    const std::array<asio::const_buffer, 2> buffers{asio::buffer(text.data(), text.size()),
                                                    asio::buffer("\n", 1)};
    asio::async_write(
        stdin_, buffers,
        [self = shared_from_this(), m](const error_code& ec, std::size_t) { self->on_write(ec); });
  }

  void on_write(const error_code& ec) {
    writing_ = false;
    if (!life_.stdin_open()) return;  // closed on purpose; the queue is gone
    if (ec) return on_stdin_failed(ec);
    queued_bytes_ -= queue_.front().size() + 1;
    queue_.pop_front();
    if (!queue_.empty())
      do_write();
    else if (life_.state() == ChildState::flushing)
      close_stdin(ChildState::stdin_closed);
  }

  void on_stdin_failed(const error_code& ec) {
    log_->debug("{}{} writing to its stdin failed: {}", spec_.log_prefix, label_, ec.message());
    lose_stdin();
    if (owner_ == Owner::closed || !pending_error_.empty()) return;
    pending_error_ = "cannot write to the child's stdin (" + ec.message() +
                     "): it closed its input but is still running";
    evaluate();
  }

  // The one transition function: moves the lifecycle to `next`; a refused transition is a bug
  // of this class, logged and otherwise ignored.
  bool to(ChildState next) {
    const ChildState from = life_.state();
    if (life_.advance(next)) return true;
    log_->error("{}{} internal error: no transition from {} to {}", spec_.log_prefix, label_,
                to_string(from), to_string(next));
    return false;
  }

  // Closes the child's stdin now (if still open), dropping what is queued for it, on the way to
  // `next`.
  void close_stdin(ChildState next) {
    if (life_.stdin_open()) {
      error_code ignored;
      stdin_.close(ignored);
      queue_.clear();
      queued_bytes_ = 0;
    }
    to(next);
  }

  // The child stopped reading its stdin, or must not be written to any more: stdin closes now,
  // whether or not the ending has begun.
  void lose_stdin() {
    if (life_.state() == ChildState::running)
      close_stdin(ChildState::stdin_lost);
    else if (life_.state() == ChildState::flushing)
      close_stdin(ChildState::stdin_closed);
  }

  // ---- stdout -------------------------------------------------------------------------------

  void do_read_stdout() {
    stdout_reading_ = true;
    stdout_.async_read_some(asio::buffer(out_buf_.get(), kStdoutChunk),
                            [self = shared_from_this()](const error_code& ec, std::size_t n) {
                              self->on_read_stdout(ec, n);
                            });
  }

  void on_read_stdout(const error_code& ec, std::size_t n) {
    if (life_.finished()) return;
    if (n > 0) {
      static auto& bytes_in = metrics::bytes_counter("stdio", "in");
      bytes_in.inc(n);
      out_lines_.feed(std::string_view(out_buf_.get(), n),
                      [this](LineSplitter::Line&& line) { on_stdout_line(std::move(line)); });
      if (life_.finished()) return;
      check_runaway_line();
    }
    if (!ec && n > 0) {
      // What the lines started (a response on its way to the broker) goes first; the next
      // read, whose first attempt mostly finds nothing (EAGAIN), follows on the next turn
      // (issue 34). stdout_reading_ stays set: nothing else starts a read meanwhile.
      asio::post(ex_, [self = shared_from_this()] {
        if (!self->life_.finished()) self->do_read_stdout();
      });
      return;
    }
    if (!ec) return do_read_stdout();
    if (ec == asio::error::operation_aborted) return;
    if (auto last = out_lines_.finish()) on_stdout_line(std::move(*last));
    stdout_done_ = true;
    if (ec != asio::error::eof) {
      log_->warn("{}{} reading its stdout failed: {}", spec_.log_prefix, label_, ec.message());
    }
    if (!life_.reaped() && owner_ != Owner::closed && pending_error_.empty())
      pending_error_ = "the child closed its stdout but is still running";
    evaluate();
  }

  // A line past the limit is dropped when it ends and the session goes on; one that runs on
  // past twice the limit is a child flooding its stdout (or never writing the newline). Nothing
  // it answers can arrive behind that line, so the child is ended now and the owner answers what
  // is pending, instead of every request waiting for its timeout while the flood is read.
  void check_runaway_line() {
    if (owner_ == Owner::closed || out_lines_.unfinished_size() <= 2 * spec_.limits.max_bytes)
      return;
    const std::string detail =
        "protocol violation: a stdout line ran past " + std::to_string(2 * spec_.limits.max_bytes) +
        " bytes without a newline (the limit is " + std::to_string(spec_.limits.max_bytes) +
        " bytes); the server floods its output";
    lose_stdin();
    report(Kind::error, detail);
    begin_termination();
    evaluate();
  }

  void on_stdout_line(LineSplitter::Line&& line) {
    if (owner_ == Owner::closed) {
      log_->debug("{}{} discarding {} bytes of stdout written while closing", spec_.log_prefix,
                  label_, line.size);
      return;
    }
    // 002 §stdio: the server must not write anything to stdout that is not an MCP message.
    if (line.too_long) {
      log_->warn(
          "{}{} protocol violation: a stdout line of {} bytes exceeds the limit of {} "
          "bytes; dropped: {}",
          spec_.log_prefix, label_, line.size, spec_.limits.max_bytes,
          excerpt(line.text, kViolationLogBytes, line.size));
      return;
    }
    if (is_blank(line.text)) return;
    auto parsed = parse_line(std::move(line.text), spec_.limits);
    for (const auto& r : parsed.rejected) {
      log_->warn("{}{} protocol violation: a stdout line is not JSON-RPC ({}); dropped: {}",
                 spec_.log_prefix, label_, r.failure.error.message,
                 excerpt(parsed.line, kViolationLogBytes));
    }
    for (auto& m : parsed.messages) {
      if (owner_ == Owner::closed || !receiver_.on_message) break;  // it may close the channel
      receiver_.on_message(std::move(m));
    }
  }

  // ---- stderr -------------------------------------------------------------------------------

  void do_read_stderr() {
    stderr_.async_read_some(asio::buffer(err_buf_.get(), kStderrChunk),
                            [self = shared_from_this()](const error_code& ec, std::size_t n) {
                              self->on_read_stderr(ec, n);
                            });
  }

  void on_read_stderr(const error_code& ec, std::size_t n) {
    if (life_.finished()) return;
    if (n > 0) {
      err_lines_.feed(std::string_view(err_buf_.get(), n),
                      [this](LineSplitter::Line&& line) { log_stderr(line); });
    }
    if (!ec) return do_read_stderr();
    if (ec == asio::error::operation_aborted) return;
    if (auto last = err_lines_.finish()) log_stderr(*last);
    stderr_done_ = true;
    evaluate();
  }

  // 002 §stdio: stderr is the server's log.
  void log_stderr(const LineSplitter::Line& line) {
    if (line.size == 0) return;
    log_->info("{}{} stderr: {}", spec_.log_prefix, label_,
               excerpt(line.text, kStderrLogBytes, line.size));
  }

  asio::any_io_executor ex_;
  ChildSpec spec_;
  std::shared_ptr<ChildRegistry> registry_;
  pid_t pid_;
  std::string label_;
  std::shared_ptr<spdlog::logger> log_;

  asio::posix::stream_descriptor stdin_, stdout_, stderr_;
  std::optional<asio::posix::stream_descriptor> pidfd_;
  asio::steady_timer poll_timer_, term_timer_, drain_timer_, grace_timer_;
  LineSplitter out_lines_, err_lines_;
  std::unique_ptr<char[]> out_buf_, err_buf_;

  bridge::Channel::Receiver receiver_;
  std::deque<jsonrpc::Message> queue_;
  std::size_t queued_bytes_ = 0;
  std::string pending_error_;  // why to close if the child does not exit soon
  std::optional<int> status_;

  // The owner's side: not started yet, receiving, or closed (it was told, or closed the
  // channel itself: no more deliveries).
  enum class Owner { unstarted, receiving, closed };
  // A timer that runs at most once: not armed yet, running, or expired.
  enum class Wait { unarmed, armed, expired };

  ChildLifecycle life_;
  Owner owner_ = Owner::unstarted;
  Wait drain_ = Wait::unarmed;  // after the exit: the rest of the output
  Wait grace_ = Wait::unarmed;  // after a broken pipe: the exit, so that its status is reported
  // What is in flight on the pipes.
  bool writing_ = false;
  bool stdout_reading_ = false;
  bool stdout_done_ = false;
  bool stderr_done_ = false;
};

}  // namespace detail

// ---- ChildChannel -------------------------------------------------------------------------------

Expected<std::shared_ptr<ChildChannel>, Error> ChildChannel::create(
    asio::any_io_executor strand, ChildSpec spec, std::shared_ptr<ChildRegistry> registry) {
  SpawnRequest request;
  request.command = spec.command;
  request.args = spec.args;
  request.env = child_environment(current_environment(), spec.env);
  request.cwd = spec.cwd;
  const std::string name = spec.name, command = spec.command, prefix = spec.log_prefix;
  const auto failed = [&](Error e) {
    e.message = "cannot start server \"" + name + "\" (command \"" + command + "\"): " + e.message;
    log::stdio()->error("{}{}", prefix, e.message);
    return unexpected(std::move(e));
  };
  auto spawned = spawn(request);
  if (!spawned) return failed(std::move(spawned.error()));
  auto impl = std::make_shared<detail::ChildProcess>(std::move(strand), std::move(spec),
                                                     spawned->pid, registry);
  if (auto e = impl->attach(*spawned))
    return failed(std::move(*e));  // the child is killed and reaped with `impl`
  if (registry) registry->add(impl, impl->pid(), name);
  impl->begin();
  return std::shared_ptr<ChildChannel>(new ChildChannel(std::move(impl)));
}

ChildChannel::~ChildChannel() {
  const auto ex = impl_->executor();
  asio::dispatch(ex, [impl = std::move(impl_)] {
    impl->close(CloseReason{Kind::shutdown, "the channel was released"});
  });
}

void ChildChannel::start(Receiver receiver) {
  impl_->start(std::move(receiver));
}

void ChildChannel::send(jsonrpc::Message message) {
  impl_->send(std::move(message));
}

void ChildChannel::close(const CloseReason& why) {
  impl_->close(why);
}

std::string ChildChannel::describe() const {
  return impl_->label();
}

pid_t ChildChannel::pid() const {
  return impl_->pid();
}

void ChildRegistry::shutdown_all(const std::string& detail) {
  std::vector<std::shared_ptr<detail::ChildProcess>> children;
  {
    std::lock_guard lock(mu_);
    for (const auto& [ptr, live] : live_) {
      if (auto child = live.child.lock()) children.push_back(std::move(child));
    }
  }
  for (auto& child : children) {
    const auto ex = child->executor();
    asio::post(ex, [child = std::move(child), detail] { child->shutdown(detail); });
  }
}

}  // namespace mcpmqtt::stdio

#include "stdio/spawn.hpp"

#include <cerrno>
#include <csignal>
#include <system_error>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/errno_text.hpp"
#include "common/error.hpp"
#include "stdio/process_util.hpp"

namespace mcpmqtt::stdio {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

namespace {

// What the child tells the parent through the report pipe when it cannot exec.
struct ChildFailure {
  enum Stage : int { setup = 1, chdir = 2, exec = 3 };
  int stage = setup;
  int err = 0;
  int candidate = 0;  // which of the exec candidates err belongs to
};

// Pipe ends are kept above 0, 1 and 2 so that dup2 onto those in the child never clobbers
// another pipe end (possible when the bridge runs with a standard descriptor closed).
int above_stdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return moved;
}

bool make_pipe(UniqueFd& read_end, UniqueFd& write_end) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return false;
  read_end.reset(above_stdio(p[0]));
  write_end.reset(above_stdio(p[1]));
  return read_end && write_end;
}

// Closes descriptors first..last (inclusive); async-signal-safe.
void close_range_compat(unsigned first, unsigned last, unsigned max_fd) {
  if (first > last) return;
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, first, last, 0) == 0) return;
#endif
  for (unsigned fd = first; fd <= last && fd < max_fd; ++fd)
    ::close(static_cast<int>(fd));
}

[[noreturn]] void fail_in_child(int report_fd, ChildFailure f) {
  // Nothing to do if this write fails: the parent then sees a success and an exit status 127.
  [[maybe_unused]] const auto n = ::write(report_fd, &f, sizeof f);
  ::_exit(127);
}

std::string describe_failure(const SpawnRequest& r, const std::vector<std::string>& candidates,
                             std::string_view path, const ChildFailure& f) {
  switch (f.stage) {
    case ChildFailure::chdir:
      return "cannot change to the working directory \"" + r.cwd + "\": " + errno_text(f.err);
    case ChildFailure::exec: {
      const bool searched = r.command.find('/') == std::string::npos;
      if (f.err == ENOENT) {
        // execve says ENOENT also for an existing script whose interpreter is missing.
        for (const auto& c : candidates) {
          if (::access(c.c_str(), F_OK) == 0) {
            return "\"" + c +
                   "\" exists but cannot be run: its interpreter (the \"#!\" line or the ELF "
                   "loader) was not found";
          }
        }
        if (searched) {
          return "\"" + r.command + "\" was not found in PATH (" + std::string(path) +
                 "); give its full path or set PATH in the server's \"env\"";
        }
        return "\"" + r.command + "\": " + errno_text(ENOENT);
      }
      const std::string& file =
          f.candidate >= 0 && static_cast<std::size_t>(f.candidate) < candidates.size()
              ? candidates[static_cast<std::size_t>(f.candidate)]
              : r.command;
      if (f.err == ENOEXEC) {
        return "\"" + file +
               "\" is not an executable format (a script needs a \"#!\" line; commands are "
               "never run through a shell)";
      }
      if (f.err == EACCES) return "\"" + file + "\": permission denied (is it executable?)";
      return "\"" + file + "\": " + errno_text(f.err);
    }
    default:
      return "setting up the child process failed: " + errno_text(f.err);
  }
}

}  // namespace

Expected<SpawnedProcess, Error> spawn(const SpawnRequest& request) {
  // Everything the child needs is prepared here: after fork only async-signal-safe calls.
  const std::string path = find_variable(request.env, "PATH").value_or(std::string(kDefaultPath));
  const std::vector<std::string> candidates = exec_candidates(request.command, path);
  if (candidates.empty()) return unexpected(Error(Errc::invalid_argument, "the command is empty"));

  std::vector<std::string> argv_strings;
  argv_strings.reserve(request.args.size() + 1);
  argv_strings.push_back(request.command);
  argv_strings.insert(argv_strings.end(), request.args.begin(), request.args.end());
  std::vector<char*> argv, envp;
  for (auto& s : argv_strings)
    argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  for (const auto& s : request.env)
    envp.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);
  std::vector<const char*> files;
  for (const auto& c : candidates)
    files.push_back(c.c_str());
  const char* cwd = request.cwd.empty() ? nullptr : request.cwd.c_str();

  rlimit nofile{};
  unsigned max_fd = 65536;
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY)
    max_fd = static_cast<unsigned>(std::min<rlim_t>(nofile.rlim_cur, 1u << 20));

  UniqueFd in_r, in_w, out_r, out_w, err_r, err_w, report_r, report_w;
  if (!make_pipe(in_r, in_w) || !make_pipe(out_r, out_w) || !make_pipe(err_r, err_w) ||
      !make_pipe(report_r, report_w)) {
    const int err = errno;
    return unexpected(Error(errc_from_errno(err), "cannot create pipes: " + errno_text(err)));
  }

  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    return unexpected(Error(errc_from_errno(err), "cannot create a process: " + errno_text(err)));
  }
  if (pid == 0) {
    const int report = report_w.get();
    // Own process group, so that termination reaches everything the server starts.
    ::setpgid(0, 0);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigemptyset(&dfl.sa_mask);
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);
    }
    if (::dup2(in_r.get(), 0) < 0 || ::dup2(out_w.get(), 1) < 0 || ::dup2(err_w.get(), 2) < 0)
      fail_in_child(report, {ChildFailure::setup, errno, 0});
    if (cwd && ::chdir(cwd) != 0) fail_in_child(report, {ChildFailure::chdir, errno, 0});
    // No descriptor of the bridge (sockets, other children's pipes) leaks into the server.
    const auto keep = static_cast<unsigned>(report);
    close_range_compat(3, keep - 1, max_fd);
    close_range_compat(keep + 1, ~0u, max_fd);
    // execvp's search rules, but with the child's PATH, and never falling back to a shell.
    int err = ENOENT, err_at = 0;
    bool denied = false;
    for (std::size_t i = 0; i < files.size(); ++i) {
      ::execve(files[i], argv.data(), envp.data());
      const int e = errno;
      if (e == EACCES) {
        if (!denied) err_at = static_cast<int>(i);
        denied = true;
      } else if (e != ENOENT && e != ENOTDIR) {
        fail_in_child(report, {ChildFailure::exec, e, static_cast<int>(i)});
      }
    }
    if (denied) err = EACCES;
    fail_in_child(report, {ChildFailure::exec, err, err_at});
  }

  in_r.reset();
  out_w.reset();
  err_w.reset();
  report_w.reset();
  // Also set from this side, so the group exists before anyone signals it (EACCES once the
  // child has exec'd is harmless: it set the group itself).
  ::setpgid(pid, pid);

  ChildFailure failure;
  std::size_t got = 0;
  while (got < sizeof failure) {
    const auto n =
        ::read(report_r.get(), reinterpret_cast<char*>(&failure) + got, sizeof failure - got);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  if (got == 0) {
    SpawnedProcess p;
    p.pid = pid;
    p.stdin_fd = std::move(in_w);
    p.stdout_fd = std::move(out_r);
    p.stderr_fd = std::move(err_r);
    return p;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got < sizeof failure)
    return unexpected(Error(Errc::failed, "the child process failed to start"));
  // A script whose interpreter is missing reads ENOENT, like a missing command: both are
  // not_found, and stay so until someone installs it.
  return unexpected(
      Error(errc_from_errno(failure.err), describe_failure(request, candidates, path, failure)));
}

}  // namespace mcpmqtt::stdio

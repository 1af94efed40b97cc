#include "tests/support/process.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/temp_dir.hpp"

extern char** environ;

namespace mcpmqtt::test {

namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

}  // namespace

std::unique_ptr<Process> Process::start(Options o) {
  if (o.argv.empty()) throw std::runtime_error("Process::start: empty argv");
  // Everything the child needs is prepared before fork: only async-signal-safe calls after it.
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : o.env)
    env[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env)
    env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings)
    envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& s : o.argv)
    argv.push_back(s.data());
  argv.push_back(nullptr);

  int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (o.pipe_stdin && ::pipe2(in_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  if (o.pipe_stdout && ::pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  // Reports exec failure to the parent.
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  int out_file = -1, err_file = -1;
  if (!o.stdout_file.empty()) {
    out_file = ::open(o.stdout_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  if (!o.stderr_file.empty()) {
    err_file = ::open(o.stderr_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // A test that dies (an abort, a sanitizer's halt_on_error) takes its processes with it: an
    // orphaned broker or bridge would hold the test's output open and keep CTest waiting for
    // the timeout. (Tests start processes from their main thread, which lives as long as they
    // do: the signal follows the thread that forked.)
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::setpgid(0, 0);
    if (in_pipe[0] >= 0) ::dup2(in_pipe[0], 0);
    if (out_pipe[1] >= 0)
      ::dup2(out_pipe[1], 1);
    else if (out_file >= 0)
      ::dup2(out_file, 1);
    if (err_file >= 0) ::dup2(err_file, 2);
    // Only stdin, stdout and stderr pass to the child: a descriptor of the test's (a client's
    // socket, say) inherited by a broker started mid-test would keep that connection open after
    // the test closed it.
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) {
      int e = errno;
      (void)!::write(err_pipe[1], &e, sizeof e);
      ::_exit(127);
    }
    ::execvpe(argv[0], argv.data(), envp.data());
    int e = errno;
    (void)!::write(err_pipe[1], &e, sizeof e);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, so there is no race with signal_group()
  if (in_pipe[0] >= 0) ::close(in_pipe[0]);
  if (out_pipe[1] >= 0) ::close(out_pipe[1]);
  if (out_file >= 0) ::close(out_file);
  if (err_file >= 0) ::close(err_file);
  ::close(err_pipe[1]);
  int exec_errno = 0;
  const auto n = ::read(err_pipe[0], &exec_errno, sizeof exec_errno);
  ::close(err_pipe[0]);
  if (n == sizeof exec_errno) {
    ::waitpid(pid, nullptr, 0);
    if (in_pipe[1] >= 0) ::close(in_pipe[1]);
    if (out_pipe[0] >= 0) ::close(out_pipe[0]);
    throw std::runtime_error("cannot start " + o.argv[0] + ": " + std::strerror(exec_errno));
  }
  auto p = std::unique_ptr<Process>(new Process());
  p->pid_ = pid;
  p->stdin_fd_ = in_pipe[1];
  p->stdout_fd_ = out_pipe[0];
  return p;
}

Process::~Process() {
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  if (!status_) {
    ::kill(-pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  } else {
    ::kill(-pid_, SIGKILL);  // leftovers in the group (grandchildren)
  }
}

bool Process::running() {
  if (status_) return false;
  int st = 0;
  const pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = st;
    return false;
  }
  return true;
}

void Process::signal(int sig) {
  if (running()) ::kill(pid_, sig);
}

void Process::signal_group(int sig) {
  ::kill(-pid_, sig);
}

std::optional<int> Process::wait_for(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (!running()) return status_;
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::optional<int> Process::exit_code() const {
  if (!status_) return std::nullopt;
  if (WIFEXITED(*status_)) return WEXITSTATUS(*status_);
  if (WIFSIGNALED(*status_)) return -WTERMSIG(*status_);
  return std::nullopt;
}

void Process::write_stdin(const std::string& data) {
  std::size_t off = 0;
  while (off < data.size()) {
    const auto n = ::write(stdin_fd_, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("write to child stdin failed: ") + std::strerror(errno));
    }
    off += static_cast<std::size_t>(n);
  }
}

void Process::close_stdin() {
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  stdin_fd_ = -1;
}

std::optional<std::string> Process::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto nl = stdout_buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = stdout_buf_.substr(0, nl);
      stdout_buf_.erase(0, nl + 1);
      return line;
    }
    if (stdout_fd_ < 0) return std::nullopt;
    pollfd pfd{stdout_fd_, POLLIN, 0};
    const int r = ::poll(&pfd, 1, remaining_ms(deadline));
    if (r <= 0) return std::nullopt;
    char buf[65536];
    const auto n = ::read(stdout_fd_, buf, sizeof buf);
    if (n <= 0) {
      ::close(stdout_fd_);
      stdout_fd_ = -1;
      continue;
    }
    stdout_buf_.append(buf, static_cast<std::size_t>(n));
  }
}

std::string Process::read_all(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (stdout_fd_ >= 0) {
    pollfd pfd{stdout_fd_, POLLIN, 0};
    if (::poll(&pfd, 1, remaining_ms(deadline)) <= 0) break;
    char buf[65536];
    const auto n = ::read(stdout_fd_, buf, sizeof buf);
    if (n <= 0) {
      ::close(stdout_fd_);
      stdout_fd_ = -1;
      break;
    }
    stdout_buf_.append(buf, static_cast<std::size_t>(n));
  }
  return std::exchange(stdout_buf_, {});
}

RunResult run_capture(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                      const std::map<std::string, std::string>& env) {
  TempDir dir;
  Process::Options o;
  o.argv = argv;
  o.env = env;
  o.stdout_file = dir.path() + "/out";
  o.stderr_file = dir.path() + "/err";
  auto p = Process::start(o);
  RunResult r;
  if (!p->wait_for(timeout)) {
    p->signal_group(SIGKILL);
    p->wait_for(std::chrono::seconds(5));
    r.exit_code = -1000;
  } else {
    r.exit_code = *p->exit_code();
  }
  r.out = read_file(o.stdout_file);
  r.err = read_file(o.stderr_file);
  return r;
}

bool pid_alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  // A zombie still answers kill(0); read its state from /proc.
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return !(close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z');
}

}  // namespace mcpmqtt::test

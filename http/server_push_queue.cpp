#include "http/server_push_queue.hpp"

#include <array>
#include <cerrno>

#include <sys/socket.h>
#include <sys/uio.h>

#include "common/metrics.hpp"
#include "http/server_sse.hpp"

namespace mcpmqtt::http {

PushQueue::State PushQueue::next(State state, Event event) {
  using S = State;
  using E = Event;
  if (event == E::close) return S::closed;
  switch (state) {
    case S::held:
      if (event == E::lend) return S::lent;
      if (event == E::last_queued) return S::ending;
      return S::held;
    case S::lent:
      if (event == E::take_back || event == E::send_stalled) return S::held;
      if (event == E::last_queued) return S::ending;
      if (event == E::last_framed) return S::terminated;
      return S::lent;
    case S::ending:
    case S::terminated:
    case S::closed:
      return state;
  }
  return state;
}

PushQueue::Taken PushQueue::take(std::string& out, int lend_fd, bool writer_ending) {
  std::lock_guard lock(mu_);
  state_ = next(state_, Event::take_back);
  fd_ = -1;
  Taken taken;
  taken.lent_write_at = lent_write_at_;
  taken.ending = state_ == State::ending || state_ == State::terminated;
  taken.terminated = state_ == State::terminated;
  taken.closed = state_ == State::closed;
  if (!unsent_.empty()) {
    out.swap(unsent_);
    taken.framed = true;
    return taken;
  }
  out.swap(bytes_);
  items_ = 0;
  if (out.empty() && lend_fd >= 0 && !writer_ending && state_ == State::held) {
    fd_ = lend_fd;
    state_ = next(state_, Event::lend);
    taken.lent = true;
  }
  return taken;
}

void PushQueue::close(bool release_buffers) {
  std::lock_guard lock(mu_);
  state_ = next(state_, Event::close);
  fd_ = -1;  // taken back: the writer's shutdown or close may follow
  if (release_buffers) {
    items_ = 0;
    std::string().swap(bytes_);
    std::string().swap(unsent_);
  }
}

void PushQueue::add_if_idle(std::string_view text) {
  std::lock_guard lock(mu_);
  if (bytes_.empty() && unsent_.empty()) bytes_ += text;
}

std::chrono::steady_clock::time_point PushQueue::lent_write_at() {
  std::lock_guard lock(mu_);
  return lent_write_at_;
}

PushQueue::State PushQueue::state() {
  std::lock_guard lock(mu_);
  return state_;
}

bool PushQueue::send_lent(bool last) {
  static auto& bytes_out = metrics::bytes_counter("http", "out");
  char head[24];
  const std::size_t head_len = chunk_head(head, bytes_.size());
  static constexpr char kCrlfEnd[] = "\r\n0\r\n\r\n";  // the chunk's CRLF, then the last chunk
  const std::size_t tail_len = last ? 7 : 2;
  std::array<iovec, 3> iov{iovec{head, head_len}, iovec{bytes_.data(), bytes_.size()},
                           iovec{const_cast<char*>(kCrlfEnd), tail_len}};
  msghdr msg{};
  msg.msg_iov = iov.data();
  msg.msg_iovlen = iov.size();
  const std::size_t total = head_len + bytes_.size() + tail_len;
  ssize_t sent;
  do {
    sent = ::sendmsg(fd_, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent > 0) {
    bytes_out.inc(bytes_.size());
    lent_write_at_ = std::chrono::steady_clock::now();
  }
  if (sent == static_cast<ssize_t>(total)) {
    bytes_.clear();
    if (last) state_ = next(state_, Event::last_framed);
    return true;
  }
  fd_ = -1;
  if (sent > 0) {
    // unsent_ is empty: the writer takes it before it lends the socket again.
    keep_chunk_tail(bytes_, head, head_len, static_cast<std::size_t>(sent));
    if (last) bytes_.append("0\r\n\r\n", 5);
    unsent_.swap(bytes_);
    state_ = next(state_, last ? Event::last_framed : Event::send_stalled);
  } else {
    state_ = next(state_, Event::send_stalled);
  }
  return false;
}

}  // namespace mcpmqtt::http
